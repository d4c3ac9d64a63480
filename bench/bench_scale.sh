#!/bin/sh
# Scale: n workers on P processes against the in-process run, in one run.
#
#   ECOPT=build/ecopt sh bench/bench_scale.sh [OUT.md]
#
# 1. a9a, 20 workers, ECLK topk k = 1: loop time per round in process, at
#    the default procs (a light round: min(n, CPUs - 1); the run's own
#    setup line says which P it took), on 1, 2 and 20 processes (one per
#    worker, as before procs), REPS interleaved repetitions, medians.
# 2. A generated file (ecopt gen) of 100k rows, d = 1e6, 20 nonzeros a
#    row, ECLK topk k = 1000, 20 workers: per-round time in process and
#    on 2 and 20 processes, the job's peak memory in a v1 memory cgroup
#    (shared pages once) beside the estimate ecopt run prints, and the
#    round's floor as bench_floor counts it: one memcpy of (workers + 1)
#    x d doubles (docs/benchmarks.md, "Time per round"; each
#    worker reads and writes its error memory once, the model is read and
#    written once), timed here, best of 3. P* of the generated problem is
#    solved once, in process, and given to every run as a hint.
set -eu
ECOPT=${ECOPT:-build/ecopt}
OUT=${1:-bench/results/scale.md}
REPS=${REPS:-3}
DATA=$(cd "${ECOPT_DATA_DIR:-../shared/datasets}" && pwd)
export ECOPT_DATA_DIR=$DATA
tmp=$(mktemp -d)
. "$(dirname "$0")/cgroup_peak.sh"
trap 'rm -rf "$tmp"; rmdir "$peak_cg" 2>/dev/null || true' EXIT

median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# loop seconds of the last row (the seconds column) / rounds; procs
# "default" gives no --procs and keeps the P the run took in $tmp/P
per_round() {   # spec backend procs
    if [ "$3" = default ]; then set -- "$1" --backend "$2"; else set -- "$1" --backend "$2" --procs "$3"; fi
    "$ECOPT" run "$@" --format csv 2>"$tmp/setup" |
        awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == "seconds") s = i; next}
                 {r = $1; t = $s} END {printf "%.3f\n", t / r * 1e6}'
    sed -n 's/.*workers on \([0-9]*\) process.*/\1/p' "$tmp/setup" >"$tmp/P"
}

cat >"$tmp/a9a.json" <<EOF
{"dataset": "a9a", "workers": 20, "algorithm": "eclk", "compressor": {"type": "topk", "k": 1},
 "max_rounds": 4000, "eval_every": 4000, "target": 0}
EOF
: >"$tmp/a9a.in"; : >"$tmp/a9a.pd"; : >"$tmp/a9a.p1"; : >"$tmp/a9a.p2"; : >"$tmp/a9a.p20"
i=0
while [ $i -lt "$REPS" ]; do
    per_round "$tmp/a9a.json" inproc 1 >>"$tmp/a9a.in"
    per_round "$tmp/a9a.json" process default >>"$tmp/a9a.pd"
    a_P=$(cat "$tmp/P")
    per_round "$tmp/a9a.json" process 1 >>"$tmp/a9a.p1"
    per_round "$tmp/a9a.json" process 2 >>"$tmp/a9a.p2"
    per_round "$tmp/a9a.json" process 20 >>"$tmp/a9a.p20"
    i=$((i + 1))
done
a_in=$(median <"$tmp/a9a.in"); a_pd=$(median <"$tmp/a9a.pd"); a_p1=$(median <"$tmp/a9a.p1"); a_p2=$(median <"$tmp/a9a.p2"); a_p20=$(median <"$tmp/a9a.p20")

"$ECOPT" gen --rows 100000 --features 1000000 --nnz 20 --seed 1 -o "$tmp/big" >/dev/null
cat >"$tmp/big.json" <<EOF
{"dataset": "$tmp/big", "workers": 20, "algorithm": "eclk", "compressor": {"type": "topk", "k": 1000},
 "lambda1": 1e-6, "max_rounds": 30, "eval_every": 30, "target": 0}
EOF
# the P* hint: one in-process run of one round reports the problem
# (api/report-format.md), and the hint names the file it is for
sh "$(dirname "$0")/pstar_hint.sh" "$ECOPT" "$tmp/big.json" "$tmp/big" "$tmp/hint.json"
row() {   # backend procs label
    if [ "$2" = default ]; then set -- "$1" "" "$3"; else set -- "$1" "--procs $2" "$3"; fi
    # shellcheck disable=SC2086 # $2 is empty or two words
    b=$(peak "$ECOPT" run "$tmp/big.json" --backend "$1" $2 --pstar-hint "$tmp/hint.json" \
        --format csv -o "$tmp/rows.csv")
    us=$(awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == "seconds") s = i; next}
                  {r = $1; t = $s} END {printf "%.0f", t / r * 1e6}' "$tmp/rows.csv")
    est=$(sed -n 's/^memory *estimate \([0-9]*\) MiB.*/\1/p' "$tmp/peak.out")
    if [ "$b" = n/a ]; then mib=n/a; else mib=$(awk -v b="$b" 'BEGIN {printf "%.0f", b / 1048576}'); fi
    P=$(sed -n 's/.*workers on \([0-9]*\) process.*/\1/p' "$tmp/peak.out")
    echo "$3${P:+ (P = $P)}|$us|$mib|$est"
}
big_in=$(row inproc 1 "in process")
big_pd=$(row process default "default procs")
big_p1=$(row process 1 "1 process")
big_p2=$(row process 2 "2 processes")
big_p20=$(row process 20 "20 processes")

# the floor of a round as bench_floor counts it: one memcpy of
# (workers + 1) x d doubles into a buffer written beforehand (a slice
# assignment of a bytearray is a memcpy), best of 3
floor_bytes=$(awk 'BEGIN {printf "%.0f", (20 + 1) * 1e6 * 8}')
floor_us=$(python3 -c 'import sys, time
n = int(sys.argv[1]); b = bytearray(n); c = bytearray(n); c[:] = b; best = 1e9
for _ in range(3):
    t = time.perf_counter(); c[:] = b; best = min(best, time.perf_counter() - t)
print("%.0f" % (best * 1e6))' "$floor_bytes")

{
    echo "# Scale: n workers on P processes ($(date -u +%Y-%m-%d), $(nproc) CPUs)"
    echo
    echo "\`sh bench/bench_scale.sh\`; medians of $REPS interleaved runs; loop time per round."
    echo
    echo "## a9a, 20 workers, ECLK topk k = 1, 4000 rounds"
    echo
    echo "| backend | us per round | ratio to in process |"
    echo "|---|---|---|"
    echo "| in process | $a_in | 1 |"
    awk -v a="$a_in" -v b="$a_pd" -v p="$a_P" 'BEGIN {printf "| default procs (P = %s: a light round) | %s | %.2fx |\n", p, b, b / a}'
    awk -v a="$a_in" -v b="$a_p1" 'BEGIN {printf "| 1 process (--procs 1) | %s | %.2fx |\n", b, b / a}'
    awk -v a="$a_in" -v b="$a_p2" 'BEGIN {printf "| 2 processes (--procs 2) | %s | %.2fx |\n", b, b / a}'
    awk -v a="$a_in" -v b="$a_p20" 'BEGIN {printf "| 20 processes (one per worker) | %s | %.2fx |\n", b, b / a}'
    echo
    echo "## generated, 100k rows, d = 1e6, 20 nnz a row, ECLK topk k = 1000, 20 workers, 30 rounds"
    echo
    echo "| backend | us per round | peak memory of the job (cgroup), MiB | estimate, MiB |"
    echo "|---|---|---|---|"
    for r in "$big_in" "$big_pd" "$big_p1" "$big_p2" "$big_p20"; do
        echo "$r" | awk -F'|' '{printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4}'
    done
    echo
    echo "Floor of one round, as bench_floor counts it (docs/benchmarks.md, \"Time per round\"): one memcpy of"
    echo "(20 + 1) x d doubles = $(awk -v b="$floor_bytes" 'BEGIN {printf "%.0f", b / 1048576}') MiB, best of 3, measured in this run: $floor_us us."
    echo "Rounds against it: in process $(awk -v a="$(echo "$big_in" | cut -d'|' -f2)" -v f="$floor_us" 'BEGIN {printf "%.2fx", a / f}'),"
    echo "2 processes $(awk -v a="$(echo "$big_p2" | cut -d'|' -f2)" -v f="$floor_us" 'BEGIN {printf "%.2fx", a / f}'). P* was solved once and given to the runs as a hint."
} >"$OUT"
cat "$OUT"
