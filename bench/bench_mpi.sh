#!/bin/sh
# MPI against the process backend at the same P, on this host, in one run:
# the two backends alternate (process, mpi, process, mpi, ...), REPS pairs
# a case, and each pair gives a ratio (mpi / process) of the loop time per
# round (the last row's seconds column over its rounds: mpirun's start-up
# is not in it). Cases: a9a, 20 workers, ECLK topk k = 1, 4000 rounds, at
# P = 1 and 2; a generated file (ecopt gen) of 20k rows, d = 1e5, 20
# nonzeros a row, ECLK topk k = 100, 20 workers, 300 rounds, at P = 1 and
# 2 (its P* solved once beforehand and given to every run as a hint).
# Then the CPU of whole MPI jobs: the summary's usage line against
# /usr/bin/time's user + system of the `ecopt run` that ran mpirun.
#
#   ECOPT=build/ecopt sh bench/bench_mpi.sh [OUT.md]
#
# Needs build/ecopt-mpi beside $ECOPT, mpirun, and as root
# ECOPT_MPIRUN_ARGS="--oversubscribe --allow-run-as-root". The load
# average is printed with each table.
set -eu
ECOPT=${ECOPT:-build/ecopt}
OUT=${1:-bench/results/mpi.md}
REPS=${REPS:-5}
DATA=$(cd "${ECOPT_DATA_DIR:-../shared/datasets}" && pwd)
export ECOPT_DATA_DIR=$DATA
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

per_round() {   # spec backend procs
    "$ECOPT" run "$1" --backend "$2" --procs "$3" --pstar-hint "$tmp/hint.json" \
        --format csv 2>/dev/null |
        awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == "seconds") s = i; next}
                 {r = $1; t = $s} END {printf "%.3f\n", t / r * 1e6}'
}

median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
spread() { sort -g | awk '{v[NR] = $1} END {printf "%.2fx (%.2f-%.2f)", v[int((NR + 1) / 2)], v[1], v[NR]}'; }

cat >"$tmp/a9a.json" <<EOJ
{"dataset": "a9a", "workers": 20, "algorithm": "eclk", "compressor": {"type": "topk", "k": 1},
 "max_rounds": 4000, "eval_every": 4000, "target": 0}
EOJ
"$ECOPT" gen --rows 20000 --features 100000 --nnz 20 --seed 1 -o "$tmp/gen" >/dev/null
cat >"$tmp/gen.json" <<EOJ
{"dataset": "$tmp/gen", "workers": 20, "algorithm": "eclk", "compressor": {"type": "topk", "k": 100},
 "lambda1": 1e-6, "max_rounds": 300, "eval_every": 300, "target": 0}
EOJ
# P* of the generated problem solved once, in process, and given to every
# run as a hint (as the service does: docs/api.md, "P* and storage"),
# so that the runs do not each repeat the solve
sh "$(dirname "$0")/pstar_hint.sh" "$ECOPT" "$tmp/gen.json" "$tmp/gen" "$tmp/hint.json"

{
    echo "# MPI against the process backend ($(date -u +%Y-%m-%d), $(nproc) CPUs)"
    echo
    echo "\`sh bench/bench_mpi.sh\`: the backends alternate, $REPS pairs a case; loop time"
    echo "per round (mpirun's start-up is not in it); ratio mpi / process of each pair,"
    echo "median (min-max). Open MPI $(mpirun --version 2>/dev/null | sed -n 's/.*Open MPI) //p')."
    echo
    echo "| case | P | load at start, end | process, us a round | mpi, us a round | mpi / process |"
    echo "|---|---|---|---|---|---|"
} >"$OUT"
for case in a9a gen; do
    for P in 1 2; do
        : >"$tmp/p"; : >"$tmp/m"; : >"$tmp/r"
        load0=$(cut -d' ' -f1 /proc/loadavg)
        i=0
        while [ $i -lt "$REPS" ]; do
            p=$(per_round "$tmp/$case.json" process "$P")
            m=$(per_round "$tmp/$case.json" mpi "$P")
            echo "$p" >>"$tmp/p"; echo "$m" >>"$tmp/m"
            echo "$m $p" | awk '{print $1 / $2}' >>"$tmp/r"
            i=$((i + 1))
        done
        load1=$(cut -d' ' -f1 /proc/loadavg)
        name=$([ "$case" = a9a ] && echo "a9a, ECLK top-1, 4000 rounds" || echo "generated d = 1e5, ECLK top-100, 300 rounds")
        echo "| $name | $P | $load0, $load1 | $(median <"$tmp/p") | $(median <"$tmp/m") | $(spread <"$tmp/r") |" | tee -a "$OUT"
    done
done

{
    echo
    echo "## CPU of a whole MPI job"
    echo
    echo "The summary's \`usage\` (rank 0 and what each worker rank reported at its"
    echo "end) against /usr/bin/time's user + system of \`ecopt run --backend mpi\`"
    echo "(which also counts mpirun itself and the ranks' start and MPI_Finalize)."
    echo
    echo "| case | P | usage, CPU s | /usr/bin/time, CPU s | usage / time |"
    echo "|---|---|---|---|---|"
} >>"$OUT"
for case in a9a gen; do
    for P in 1 2; do
        /usr/bin/time -f "TIME %U %S" "$ECOPT" run "$tmp/$case.json" --backend mpi --procs "$P" \
            --pstar-hint "$tmp/hint.json" \
            -o /dev/null >"$tmp/err" 2>&1 || true
        u=$(sed -n 's/^usage *\([0-9.]*\) CPU s.*/\1/p' "$tmp/err")
        t=$(awk '/^TIME/ {printf "%.2f", $2 + $3}' "$tmp/err")
        echo "| $case | $P | $u | $t | $(awk -v u="$u" -v t="$t" 'BEGIN {printf "%.2f", u / t}') |" | tee -a "$OUT"
    done
done
