#!/bin/sh
# A job's set-up (L_f by Lanczos, then P*) by two versions of the engine:
# A, a git revision (origin/main, the landed main, by default), against B, the working tree.
# Builds A's engine from `git archive` in a temporary directory, links
# bench/bench_setup.c (its `setup` mode) against each engine, and runs the
# two alternately, A then B, REPS times on each FILE. Prints a table of
# medians in CPU seconds (CLOCK_PROCESS_CPUTIME_ID) with A / B and its
# min-max over the pairs, and the load at start and end.
#
#   sh bench/bench_setup_ab.sh [-a REV] [-r REPS] FILE... >> bench/results/setup.md
set -eu

rev=origin/main
reps=3
while [ $# -gt 0 ]; do
    case "$1" in
    -a) rev=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    *) break ;;
    esac
done
[ $# -ge 1 ] || { echo "usage: bench_setup_ab.sh [-a REV] [-r REPS] FILE..." >&2; exit 2; }
case "$reps" in ''|*[!0-9]*) echo "bench_setup_ab.sh: -r wants a count (got '$reps')" >&2; exit 2 ;; esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/a"
git archive "$rev" | tar -x -C "$tmp/a"
make -s -C "$tmp/a" -j2 build/libecopt_engine.a >&2
make -s -j2 build/libecopt_engine.a >&2
for v in a b; do
    lib=$tmp/a/build/libecopt_engine.a
    [ $v = b ] && lib=build/libecopt_engine.a
    cc -std=c11 -O2 -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L -Iengine/include \
        -o "$tmp/bench_$v" bench/bench_setup.c "$lib" -lz -lm
done

echo "A = $rev ($(git rev-parse --short "$rev")), B = the working tree" \
     "($(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ', modified'))," \
     "$reps pairs, $(date -u +%F), load at start $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| data | A: L_f s | B: L_f s | A / B (min-max) | A: P* s | B: P* s | A / B (min-max) | A: both | B: both | A / B (min-max) | Lanczos steps A, B | products A, B | lambda_max (B - A) / A | P* (B - A) / A |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for f in "$@"; do
    : > "$tmp/runs"
    i=0
    while [ $i -lt "$reps" ]; do
        a=$("$tmp/bench_a" "$f" 1 setup)
        b=$("$tmp/bench_b" "$f" 1 setup)
        echo "$a $b" >> "$tmp/runs"
        i=$((i + 1))
    done
    # Each line: A's seven numbers then B's (bench_setup.c, bench_one_setup).
    awk -v name="$(basename "$f")" '
        function med(v, n,   i, j, t) {
            for (i = 2; i <= n; i++)
                for (j = i; j > 1 && v[j - 1] > v[j]; j--) {
                    t = v[j]; v[j] = v[j - 1]; v[j - 1] = t
                }
            return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        }
        function span(v, n,   i, lo, hi) {
            lo = hi = v[1]
            for (i = 2; i <= n; i++) { if (v[i] < lo) lo = v[i]; if (v[i] > hi) hi = v[i] }
            return sprintf("%.2f-%.2f", lo, hi)
        }
        {
            n++
            la[n] = $1; lb[n] = $8; pa[n] = $3; pb[n] = $10
            ta[n] = $1 + $3; tb[n] = $8 + $10
            rl[n] = $1 / $8; rp[n] = $3 / $10; rt[n] = ta[n] / tb[n]
            sa = $2; sb = $9; ka = $5; kb = $12
            dl = ($13 - $6) / $6; dp = ($14 - $7) / $7
        }
        END {
            printf "| %s | %.2f | %.2f | %.2fx (%s) | %.2f | %.2f | %.2fx (%s) | %.2f | %.2f | %.2fx (%s) | %d, %d | %d, %d | %+.1e | %+.1e |\n",
                name, med(la, n), med(lb, n), med(rl, n), span(rl, n),
                med(pa, n), med(pb, n), med(rp, n), span(rp, n),
                med(ta, n), med(tb, n), med(rt, n), span(rt, n),
                sa, sb, ka, kb, dl, dp
        }' "$tmp/runs"
done
echo
echo "load at end $(cut -d' ' -f1-3 /proc/loadavg)"
