#!/bin/sh
# A job's whole CPU (user + sys, /usr/bin/time) with its set-up cold
# against the same job given a hint (bench/pstar_hint.sh) that carries
# P* and lambda_max for its file, as the service gives a job whose data
# version it has seen: one round of ECLK, 20 workers in process, on a
# generated file of ROWS rows x FEATURES columns, 20 nonzeros a row
# (reading the file included). PAIRS pairs alternating which goes first;
# the ratio hint / cold with min-max, and the load.
#   sh bench/bench_setup_cached.sh      (defaults: 1e6 rows x 1e5 columns)
set -eu
cd "$(dirname "$0")/.."
ECOPT=${ECOPT:-$PWD/build/ecopt}
ROWS=${ROWS:-1000000}
FEATURES=${FEATURES:-100000}
PAIRS=${PAIRS:-3}
[ -x /usr/bin/time ] || { echo "bench_setup_cached: needs GNU time (apt-get install time)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. bench/ab_pairs.sh
"$ECOPT" gen --rows "$ROWS" --features "$FEATURES" --nnz 20 -o "$tmp/gen" >/dev/null
export ECOPT_DATA_DIR=$tmp
echo '{"dataset": "gen", "workers": 20, "algorithm": "eclk", "compressor": {"type": "topk", "k": 1000}, "max_rounds": 1, "target": 0}' > "$tmp/job.json"
sh bench/pstar_hint.sh "$ECOPT" "$tmp/job.json" "$tmp/gen" "$tmp/hint.json"
grep -q lambda_max "$tmp/hint.json" || { echo "bench_setup_cached: the hint has no lambda_max" >&2; exit 1; }

one() {   # "cold" or "hint" -> CPU seconds of the whole job
    if [ "$1" = hint ]; then set -- --pstar-hint "$tmp/hint.json"; else set --; fi
    /usr/bin/time -f "%U %S" -o "$tmp/t" "$ECOPT" run "$tmp/job.json" --backend inproc --quiet \
        "$@" >/dev/null </dev/null || [ $? -eq 5 ]
    tail -n 1 "$tmp/t" | awk '{printf "%.2f\n", $1 + $2}'   # time says "Command exited ..." first
}
ab_pairs one "$tmp/pairs" cold hint
echo "| pair | cold: CPU s | hint: CPU s | hint / cold |"
echo "|---|---|---|---|"
awk '{printf "| %d | %s | %s | %.3f |\n", NR, $1, $2, $2 / $1}' "$tmp/pairs"
echo "| median | $(cut -d' ' -f1 "$tmp/pairs" | med) | $(cut -d' ' -f2 "$tmp/pairs" | med) | **$(awk '{printf "%.3f\n", $2 / $1}' "$tmp/pairs" | med)** ($(awk '{printf "%.3f\n", $2 / $1}' "$tmp/pairs" | spread)) |"
echo
echo "$ROWS rows x $FEATURES columns, 20 nonzeros a row; $PAIRS pairs. Load (1, 5, 15 minutes): $load_start at the start, $load_end at the end."
