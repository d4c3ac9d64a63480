#!/bin/sh
# The shared model: worker processes that read the coordinator's model
# from shared memory (after) against processes that each decode STEP into
# a replica of their own (before: a binary built from a commit before the
# shared model), in one run, alternating.
#
#   BEFORE=../base/build/ecopt ECOPT=build/ecopt [KEEP=DIR] sh bench/bench_shared_model.sh [OUT.md]
# appends a dated section to OUT (bench/results/scale.md); BEFORE_IS and
# AFTER_IS say in its text what the two binaries are (by default the
# replicas against the shared model).
#
# 1. A generated file (ecopt gen) of 100k rows, d = 1e6, 20 nonzeros a
#    row, ECLK topk k = 1000, 20 workers, 10 rounds (the init exchange's
#    dense gradients make the peak): the job's peak memory in a v1 memory
#    cgroup (shared pages once) at P = 2 and P = 20, before and after, and
#    the ratio P20/P2 of each.
# 2. The same at d = 1e5 (100k rows, 20 nonzeros, topk k = 100), 100
#    rounds: loop time per round at P = 2 and P = 20, before and after
#    alternating, REPS pairs; the ratio after/before of each pair, its
#    median and min-max.
# P* of each generated problem is solved once, in process, and given to
# every run as a hint (bench/pstar_hint.sh); with KEEP=DIR the problems and
# their hints are kept in DIR and taken from there by the next run (the
# d = 1e6 solve takes minutes). The load (uptime) is read at the start and
# the end.
set -eu
ECOPT=${ECOPT:-build/ecopt}
BEFORE=${BEFORE:?BEFORE: the binary to compare against}
OUT=${1:-bench/results/scale.md}
REPS=${REPS:-3}
# What the two binaries are, for the section's first lines.
BEFORE_IS=${BEFORE_IS:-each worker process decodes STEP into a replica of the model}
AFTER_IS=${AFTER_IS:-the processes read the coordinator's model, shared read-only}
tmp=$(mktemp -d)
. "$(dirname "$0")/cgroup_peak.sh"
trap 'rm -rf "$tmp"; rmdir "$peak_cg" 2>/dev/null || true' EXIT
load_start=$(uptime | sed 's/.*load average: //')
started=$(date -u +%H:%M)

# us per round of a csv's last row (its seconds column / its round)
per_round() {
    awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == "seconds") s = i; next}
             {r = $1; t = $s} END {printf "%.0f", t / r * 1e6}' "$1"
}

data=${KEEP:-$tmp}
problem() {   # name d k rounds
    if [ ! -f "$data/$1.hint" ]; then
        "$ECOPT" gen --rows 100000 --features "$2" --nnz 20 --seed 1 -o "$data/$1" >/dev/null
        cat >"$data/$1.json" <<EOF
{"dataset": "$data/$1", "workers": 20, "algorithm": "eclk", "compressor": {"type": "topk", "k": $3},
 "lambda1": 1e-6, "max_rounds": $4, "eval_every": $4, "target": 0}
EOF
        sh "$(dirname "$0")/pstar_hint.sh" "$ECOPT" "$data/$1.json" "$data/$1" "$data/$1.hint"
    fi
}

run() {   # bin name procs: prints peak MiB|us per round
    b=$(peak "$1" run "$data/$2.json" --backend process --procs "$3" --pstar-hint "$data/$2.hint" \
        --format csv -o "$tmp/rows.csv")
    if [ "$b" = n/a ]; then mib=n/a; else mib=$(awk -v b="$b" 'BEGIN {printf "%.0f", b / 1048576}'); fi
    echo "$mib|$(per_round "$tmp/rows.csv")"
}

# 1. memory at d = 1e6
problem big 1000000 1000 10
m_b2=$(run "$BEFORE" big 2); m_a2=$(run "$ECOPT" big 2)
m_a20=$(run "$ECOPT" big 20); m_b20=$(run "$BEFORE" big 20)
grep -q "a copy in each worker" "$tmp/peak.out" && echo "warning: the after runs copied the model" >&2

# 2. time per round at d = 1e5, alternating
problem mid 100000 100 100
: >"$tmp/t2"; : >"$tmp/t20"
i=0
while [ $i -lt "$REPS" ]; do
    for P in 2 20; do
        if [ $((i % 2)) -eq 0 ]; then
            b=$(run "$BEFORE" mid $P | cut -d'|' -f2); a=$(run "$ECOPT" mid $P | cut -d'|' -f2)
        else
            a=$(run "$ECOPT" mid $P | cut -d'|' -f2); b=$(run "$BEFORE" mid $P | cut -d'|' -f2)
        fi
        echo "$b $a" >>"$tmp/t$P"
    done
    i=$((i + 1))
done
load_end=$(uptime | sed 's/.*load average: //')

# before and after medians, and the ratio after/before: median, min-max
summary() {
    awk '{b[NR] = $1; a[NR] = $2; r[NR] = $2 / $1}
         function med(v, n,   i, j, t) {for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
             if (v[j] < v[i]) {t = v[i]; v[i] = v[j]; v[j] = t}; return v[int((n + 1) / 2)]}
         END {mn = r[1]; mx = r[1]; for (i = 2; i <= NR; i++) {if (r[i] < mn) mn = r[i]; if (r[i] > mx) mx = r[i]}
              printf "%.0f | %.0f | %.2f (%.2f-%.2f)", med(b, NR), med(a, NR), med(r, NR), mn, mx}' "$1"
}

{
    echo "## The shared model ($(date -u +%Y-%m-%d) $started-$(date -u +%H:%M) UTC, $(nproc) CPUs)"
    echo
    echo "\`sh bench/bench_shared_model.sh\`: before, $BEFORE_IS;"
    echo "after, $AFTER_IS. Load (1, 5, 15 min) at the start $load_start, at the end $load_end."
    echo
    echo "Generated, 100k rows, d = 1e6, 20 nnz a row, ECLK topk k = 1000, 20 workers, 10 rounds;"
    echo "peak memory of the job (cgroup v1, shared pages once), one run each:"
    echo
    echo "| | P = 2, MiB | P = 20, MiB | P20/P2 |"
    echo "|---|---|---|---|"
    for x in "before|$m_b2|$m_b20" "after|$m_a2|$m_a20"; do
        echo "$x" | awk -F'|' '{printf "| %s | %s | %s | %.2fx |\n", $1, $2, $4, $4 / $2}'
    done
    echo
    echo "Time per round of those runs, us: before $(echo "$m_b2" | cut -d'|' -f2) (P = 2),"
    echo "$(echo "$m_b20" | cut -d'|' -f2) (P = 20); after $(echo "$m_a2" | cut -d'|' -f2) (P = 2), $(echo "$m_a20" | cut -d'|' -f2) (P = 20)."
    echo
    echo "Generated, 100k rows, d = 1e5, 20 nnz a row, ECLK topk k = 100, 20 workers, 100 rounds;"
    echo "loop time per round, $REPS pairs alternating (medians; the ratio after/before of each pair, min-max):"
    echo
    echo "| P | before, us | after, us | after/before |"
    echo "|---|---|---|---|"
    echo "| 2 | $(summary "$tmp/t2") |"
    echo "| 20 | $(summary "$tmp/t20") |"
} >"$tmp/section.md"
if [ -f "$OUT" ]; then { echo; cat "$tmp/section.md"; } >>"$OUT"; else cp "$tmp/section.md" "$OUT"; fi
cat "$tmp/section.md"
