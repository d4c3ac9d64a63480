#!/bin/sh
# ecopt beside the field's public numpy reference code (Gorbunov et al.,
# github.com/eduardgorbunov/ef_sigma_k), on the reference's own problem:
# EC-SGD-DIANA on mushrooms (its first 8120 rows, 20 workers of 406),
# top-5 for the messages and rand-5 for the shifts, lambda2 1e-4. The
# reference times its own loop (res['time'], evaluations excluded by
# save_info_period); ecopt's figure is the seconds column (its loop). The
# two alternate REPS times; medians of the time per round.
#
#   REF_DIR=/path/to/ef_sigma_k ECOPT=build/ecopt sh bench/bench_reference.sh [OUT.md]
#
# BEFORE=path/to/an/older/ecopt adds that binary in process to each rep,
# alternating which of the two goes first, and a table of the pairs: the
# reference over each and after over before, medians with min-max, and
# the load at the start and the end.
#
# The reference code is not part of ecopt and is never committed: point
# REF_DIR at a checkout of it (numpy, scipy and scikit-learn from Debian:
# python3-numpy python3-scipy python3-sklearn). Without REF_DIR it says so
# and does nothing.
set -eu
ECOPT=${ECOPT:-build/ecopt}
OUT=${1:-bench/results/reference.md}
REPS=${REPS:-3}
PY=${PYTHON:-/usr/bin/python3}
DATA=$(cd "${ECOPT_DATA_DIR:-../shared/datasets}" && pwd)
export ECOPT_DATA_DIR=$DATA
if [ -z "${REF_DIR:-}" ] || [ ! -f "$REF_DIR/distrib_algs.py" ]; then
    echo "bench_reference: set REF_DIR to a checkout of ef_sigma_k" >&2
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/dump"
cat >"$tmp/ref.py" <<EOF
import sys, numpy as np
from sklearn.datasets import load_svmlight_file
sys.path.insert(0, "$REF_DIR")
from distrib_algs import ec_diana_sgd
from functions import topk, randk
A, y = load_svmlight_file("$DATA/mushrooms")
A, y = A[:8120], y[:8120]
y = np.where(y == y.max(), 1.0, -1.0)
m = A.shape[0] // 20
split = [np.arange(i * m, (i + 1) * m) for i in range(20)]
r = ec_diana_sgd("mush", np.zeros(A.shape[1]), A, y, 0.1, topk, [5, "top5"], randk, [5, "rand5"],
                 1.0 / 22, split, l2=1e-4, S=2, save_info_period=100000)
print("%.3f" % (r["time"][-1] / r["iters"][-1] * 1e6))
EOF
cat >"$tmp/job.json" <<EOF
{"dataset": "mushrooms", "workers": 20, "algorithm": "ec-sgd-diana",
 "compressor": {"type": "topk", "k": 5}, "lambda2": 1e-4,
 "max_rounds": 4000, "eval_every": 4000, "target": 0}
EOF
per_round() {   # backend procs ("default": none given) [binary]
    bin=${3:-$ECOPT}
    if [ "$2" = default ]; then set -- "$1"; else set -- "$1" --procs "$2"; fi
    "$bin" run "$tmp/job.json" --backend "$@" --format csv 2>/dev/null |
        awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == "seconds") s = i; next}
                 {r = $1; t = $s} END {printf "%.3f\n", t / r * 1e6}'
}
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
spread() { sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.4g-%.4g", lo, hi}'; }
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
i=0
while [ $i -lt "$REPS" ]; do
    # numpy at its best: without the OpenBLAS core-type override some
    # machines here set (it only slows a current numpy down).
    (cd "$tmp" && env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$PY" ref.py) >>"$tmp/ref"
    if [ -n "${BEFORE:-}" ] && [ $((i % 2)) -eq 0 ]; then
        b=$(per_round inproc 1 "$BEFORE"); a=$(per_round inproc 1)
    elif [ -n "${BEFORE:-}" ]; then
        a=$(per_round inproc 1); b=$(per_round inproc 1 "$BEFORE")
    else
        a=$(per_round inproc 1); b=
    fi
    echo "$a" >>"$tmp/in"
    [ -z "$b" ] || echo "$(tail -1 "$tmp/ref") $b $a" >>"$tmp/pairs"
    per_round process default >>"$tmp/pd"
    per_round process 1 >>"$tmp/p1"
    per_round process 2 >>"$tmp/p2"
    per_round process 20 >>"$tmp/p20"
    i=$((i + 1))
done
ref=$(median <"$tmp/ref"); in=$(median <"$tmp/in"); pd=$(median <"$tmp/pd"); p1=$(median <"$tmp/p1")
p2=$(median <"$tmp/p2"); p20=$(median <"$tmp/p20")
{
    echo "# ecopt beside the numpy reference code ($(date -u +%Y-%m-%d), $(nproc) CPUs)"
    echo
    echo "EC-SGD-DIANA, mushrooms (8120 rows), 20 workers, top-5 messages, rand-5 shifts;"
    echo "\`sh bench/bench_reference.sh\`, medians of $REPS alternating runs, loop time per round."
    echo
    echo "| run | us per round | reference / this |"
    echo "|---|---|---|"
    echo "| reference (numpy, workers simulated in one process) | $ref | 1 |"
    for r in "ecopt, in process|$in" "ecopt, worker processes at the default procs|$pd" \
             "ecopt, 1 worker process (--procs 1)|$p1" \
             "ecopt, 2 worker processes (--procs 2)|$p2" "ecopt, 20 worker processes|$p20"; do
        awk -F'|' -v ref="$ref" '{printf "| %s | %s | %.1fx |\n", $1, $2, ref / $2}' <<EOT
$r
EOT
    done
    if [ -n "${BEFORE:-}" ]; then
        echo
        echo "In process beside \`$BEFORE\` (before), alternating, $REPS pairs, each"
        echo "with the reference run just before it; load $load_start at the start,"
        echo "$(cut -d' ' -f1-3 /proc/loadavg) at the end."
        echo
        echo "| pairs | median | min-max |"
        echo "|---|---|---|"
        for col in "reference / before|\$1 / \$2" "reference / after|\$1 / \$3" \
                   "after / before (time)|\$3 / \$2"; do
            name=${col%%|*}; expr=${col#*|}
            awk "{printf \"%.4f\\n\", $expr}" "$tmp/pairs" >"$tmp/col"
            echo "| $name | $(median <"$tmp/col") | $(spread <"$tmp/col") |"
        done
    fi
} >"$OUT"
cat "$OUT"
