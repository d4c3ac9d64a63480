#!/bin/sh
# EF21-P, the broadcast compressed with primal error feedback, beside the
# uncompressed broadcast (bench/results/ef21p.md): gd against EF21-P + GD
# and ec-gd-diana (top-k 5% up) against EF21-P + DIANA, with top-k at 5%
# and at 1% down, at the theory step (the method's own times alpha_down)
# and at the method's own step (step_multiplier 1/alpha_down = d/k);
# lambda2_rel 1e-3, 20 workers, rounds and bits to relative gap 1e-6 (or
# the gap reached within the budget). gd and top-k are deterministic, so
# gd runs one seed; ec-gd-diana's rand-k shifts draw, so it runs SEEDS at
# the own step and the first seed at the theory step. Rounds are a pure
# function of the job: the machine's load changes the wall time only.
#
#   ECOPT_DATA_DIR=... sh bench/bench_ef21p.sh > rows.txt
#
# DATASETS (a9a mushrooms), SEEDS (1 2 3), MAX_ROUNDS (20000) may be set.
# Prints one line per run:
#   dataset algorithm down k_down mult seed outcome rounds bits_up
#   bits_down total rel_gap
# bits_up is per worker, bits_down the broadcast (every worker receives
# it), total = bits_up + bits_down, what one worker's link carries.
set -eu
ECOPT=${ECOPT:-build/ecopt}
DATASETS=${DATASETS:-a9a mushrooms}
SEEDS=${SEEDS:-1 2 3}
MAX_ROUNDS=${MAX_ROUNDS:-20000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The features of a dataset: the largest index of its file.
features() {
    awk '{ for (i = 2; i <= NF; i++) { split($i, a, ":"); if (a[1] + 0 > d) d = a[1] + 0 } }
         END { print d }' "$ECOPT_DATA_DIR/$1"
}

one() {   # dataset algorithm down k mult seed
    f="$tmp/job.json"
    printf '{"dataset": "%s", "lambda2_rel": 1e-3, "workers": 20, "algorithm": "%s", ' "$1" "$2" >"$f"
    [ "$2" = ec-gd-diana ] && printf '"compressor": {"type": "topk", "k_frac": 0.05}, ' >>"$f"
    [ "$3" != none ] && printf '"compressor_down": {"type": "%s", "k": %s}, ' "$3" "$4" >>"$f"
    printf '"step_multiplier": %s, "max_rounds": %s, "target": 1e-6, ' "$5" "$MAX_ROUNDS" >>"$f"
    printf '"eval_every": 10, "seed": %s}\n' "$6" >>"$f"
    o=$(nice "$ECOPT" run "$f" -b inproc 2>&1) || true
    outcome=$(echo "$o" | awk '$1 == "outcome" { print $2 }')
    rounds=$(echo "$o" | awk '$1 == "rounds" { print $2 }')
    up=$(echo "$o" | awk '$1 == "bits" && $2 == "up" { print $3; exit }')
    down=$(echo "$o" | awk '$1 == "bits" && $2 == "up" { print $NF; exit }')
    gap=$(echo "$o" | awk '$1 == "rel" && $2 == "gap" { print $3; exit }')
    total=$(awk -v u="$up" -v d="$down" 'BEGIN { printf "%.4g", u + d }')
    echo "$1 $2 $3 $4 $5 $6 $outcome $rounds $up $down $total $gap"
}

for ds in $DATASETS; do
    d=$(features "$ds")
    for algo in gd ec-gd-diana; do
        seeds=1
        [ "$algo" = ec-gd-diana ] && seeds=$SEEDS
        for seed in $seeds; do
            one "$ds" "$algo" none 0 1 "$seed"
        done
        for frac in 0.05 0.01; do
            k=$(awk -v d="$d" -v f="$frac" 'BEGIN { k = d * f; if (k > int(k)) k = int(k) + 1; print k }')
            own=$(awk -v d="$d" -v k="$k" 'BEGIN { printf "%.17g", d / k }')
            for seed in $seeds; do
                one "$ds" "$algo" topk "$k" "$own" "$seed"
            done
            one "$ds" "$algo" topk "$k" 1 1
        done
    done
done
