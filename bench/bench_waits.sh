#!/bin/sh
# Waits that adapt: the process backend at its default procs against the
# in-process run of the same job, for a baseline binary (A) and this one
# (B), quiet as the machine is and with BUSY busy loops beside it, in one
# run, the runs of a repetition back to back (A, B, in process, then B at
# each procs count of ALSO).
#
#   BASE=/path/to/old/ecopt ECOPT=build/ecopt sh bench/bench_waits.sh [OUT.md]
#
# ALSO (default "2") lists other procs counts this build (B) runs in each
# repetition too, so that the table says whether the default is the
# slowest choice; ALSO= runs none. OUT (default $TMPDIR/bench_waits.md)
# is written anew (the results file is kept by hand): paste its tables
# into a dated section of bench/results/waits.md.
#
# a9a, 20 workers, ECLK topk k = 1, ROUNDS rounds (default 4000; a light round: the
# default procs is one CPU fewer than the machine's). Loop time per round
# from the last row's seconds column; medians and min-max of REPS ratios
# (procs / in process, each binary against the in-process run of the same
# repetition). The load average is printed with each table.
set -eu
ECOPT=${ECOPT:-build/ecopt}
BASE=${BASE:?BASE=path of the baseline ecopt}
OUT=${1:-${TMPDIR:-/tmp}/bench_waits.md}
REPS=${REPS:-5}
BUSY=${BUSY:-2}
ALSO=${ALSO-2}
ROUNDS=${ROUNDS:-4000}
DATA=$(cd "${ECOPT_DATA_DIR:-../shared/datasets}" && pwd)
export ECOPT_DATA_DIR=$DATA
tmp=$(mktemp -d)
busy_pids=
trap 'for p in $busy_pids; do kill $p 2>/dev/null; done; rm -rf "$tmp"' EXIT

cat >"$tmp/job.json" <<EOJ
{"dataset": "a9a", "workers": 20, "algorithm": "eclk", "compressor": {"type": "topk", "k": 1},
 "max_rounds": $ROUNDS, "eval_every": $ROUNDS, "target": 0}
EOJ

per_round() {   # binary backend [ecopt run's options]
    bin=$1 backend=$2
    shift 2
    "$bin" run "$tmp/job.json" --backend "$backend" "$@" --format csv 2>/dev/null |
        awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == "seconds") s = i; next}
                 {r = $1; t = $s} END {printf "%.3f\n", t / r * 1e6}'
}

stats() {      # file: median (min-max)
    sort -g "$1" | awk '{v[NR] = $1} END {printf "%.2fx (%.2f-%.2f)", v[int((NR + 1) / 2)], v[1], v[NR]}'
}

table() {      # title
    : >"$tmp/ra"; : >"$tmp/rb"; : >"$tmp/ta"; : >"$tmp/tb"; : >"$tmp/ti"
    for p in $ALSO; do : >"$tmp/r$p"; : >"$tmp/t$p"; done
    load0=$(cut -d' ' -f1 /proc/loadavg)
    i=0
    while [ $i -lt "$REPS" ]; do
        a=$(per_round "$BASE" process)
        b=$(per_round "$ECOPT" process)
        c=$(per_round "$ECOPT" inproc)
        echo "$a" >>"$tmp/ta"; echo "$b" >>"$tmp/tb"; echo "$c" >>"$tmp/ti"
        for p in $ALSO; do
            o=$(per_round "$ECOPT" process --procs "$p")
            echo "$o" >>"$tmp/t$p"
            echo "$o $c" | awk '{print $1 / $2}' >>"$tmp/r$p"
        done
        echo "$a $c" | awk '{print $1 / $2}' >>"$tmp/ra"
        echo "$b $c" | awk '{print $1 / $2}' >>"$tmp/rb"
        i=$((i + 1))
    done
    load1=$(cut -d' ' -f1 /proc/loadavg)
    {
        echo "### $1 (load average $load0 at the start, $load1 at the end)"
        echo
        echo "| binary | us per round (median) | procs / in process, median (min-max of $REPS) |"
        echo "|---|---|---|"
        echo "| in process | $(sort -g "$tmp/ti" | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}') | 1 |"
        echo "| A: baseline, default procs | $(sort -g "$tmp/ta" | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}') | $(stats "$tmp/ra") |"
        echo "| B: this build, default procs | $(sort -g "$tmp/tb" | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}') | $(stats "$tmp/rb") |"
        for p in $ALSO; do
            echo "| B at procs $p | $(sort -g "$tmp/t$p" | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}') | $(stats "$tmp/r$p") |"
        done
        echo
    } | tee -a "$OUT"
}

{
    echo "# Waits: the process backend's default procs against in process ($(date -u +%Y-%m-%d), $(nproc) CPUs)"
    echo
    echo "\`sh bench/bench_waits.sh\`: a9a, 20 workers, ECLK topk k = 1, $ROUNDS rounds."
    echo
} >"$OUT"
table "the machine as it is"
i=0
while [ $i -lt "$BUSY" ]; do
    sh -c 'while :; do :; done' &
    busy_pids="$busy_pids $!"
    i=$((i + 1))
done
table "with $BUSY busy loops beside it"
