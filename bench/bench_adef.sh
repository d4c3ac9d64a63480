#!/bin/sh
# ADEF beside ECLK and L-Katyusha (bench/results/adef.md): rounds, uplink
# bits and gradient evaluations to relative gap 1e-6 (or the gap reached
# within the budget), top-k at 5%, lambda2_rel 1e-3, 20 workers, on each
# dataset and seed. ADEF and ECLK run with the default minibatch of one
# row and with full local gradients (batch "full"); L-Katyusha with one
# row. Rounds are a pure function of the job, so the machine's load
# changes the wall time only.
#
#   ECOPT_DATA_DIR=... sh bench/bench_adef.sh > rows.txt
#
# DATASETS (a9a mushrooms), SEEDS (1 2 3), MAX_ROUNDS (20000), MULT (1,
# ADEF's step multiplier) and PAR (1 run at a time) may be set. Prints
# one line per run:
#   dataset algorithm batch seed outcome rounds bits_up grad_evals rel_gap
set -eu
ECOPT=${ECOPT:-build/ecopt}
DATASETS=${DATASETS:-a9a mushrooms}
SEEDS=${SEEDS:-1 2 3}
MAX_ROUNDS=${MAX_ROUNDS:-20000}
MULT=${MULT:-1}
PAR=${PAR:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One run: its spec, then the summary's figures on one line.
cat >"$tmp/one.sh" <<'EOS'
#!/bin/sh
o=$("$ECOPT" run "$5" -b inproc 2>&1) || true
outcome=$(echo "$o" | awk '$1 == "outcome" { print $2 }')
rounds=$(echo "$o" | awk '$1 == "rounds" { print $2 }')
bits=$(echo "$o" | awk '$1 == "bits" && $2 == "up" { print $3; exit }')
grads=$(echo "$o" | awk '$1 == "oracle" { print $2; exit }')
gap=$(echo "$o" | awk '$1 == "rel" && $2 == "gap" { print $3; exit }')
echo "$1 $2 $3 $4 $outcome $rounds $bits $grads $gap"
EOS

n=0
for ds in $DATASETS; do
    for seed in $SEEDS; do
        for spec in "adef full" "adef 1" "eclk full" "eclk 1" "lkatyusha 1"; do
            set -- $spec
            comp='{"type": "topk", "k_frac": 0.05}'
            mult=1
            [ "$1" = lkatyusha ] && comp='{"type": "none"}'
            [ "$1" = adef ] && mult=$MULT
            batch=$2
            [ "$batch" = full ] && batch='"full"'
            n=$((n + 1))
            f="$tmp/job$n.json"
            printf '{"dataset": "%s", "lambda2_rel": 1e-3, "workers": 20, ' "$ds" >"$f"
            printf '"algorithm": "%s", "compressor": %s, "batch": %s, ' "$1" "$comp" "$batch" >>"$f"
            printf '"step_multiplier": %s, "max_rounds": %s, ' "$mult" "$MAX_ROUNDS" >>"$f"
            printf '"target": 1e-6, "eval_every": 10, "seed": %s}\n' "$seed" >>"$f"
            echo "$ds $1 $2 $seed $f"
        done
    done
done >"$tmp/jobs"
ECOPT=$ECOPT xargs -P "$PAR" -L 1 sh "$tmp/one.sh" <"$tmp/jobs"
