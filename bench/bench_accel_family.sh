#!/bin/sh
# The accelerated family side by side (bench/results/accel-family.md):
# rounds, gradient evaluations and uplink bits to relative gap 1e-6 of
# ECLK, ADIANA (docs/algorithms.md, "ADIANA"), EControl (docs/algorithms.md,
# "EControl") and uncompressed L-Katyusha, each at its default (theory)
# parameters, with rand-k and top-k at 5% of the coordinates (ADIANA
# sends rand-k's unbiased form and takes no top-k), on each dataset and
# seed. Rounds are a pure function of the job, so the machine's load
# changes the wall time only.
#
#   ECOPT_DATA_DIR=... sh bench/bench_accel_family.sh > rows.txt
#
# DATASETS (a9a mushrooms), SEEDS (1 2 3), MAX_ROUNDS (100000) and PAR
# (1 run at a time) may be set. Prints one line per run:
#   dataset algorithm compressor seed outcome rounds grad_evals bits_up
#   paper_bits_up rel_gap
set -eu
ECOPT=${ECOPT:-build/ecopt}
DATASETS=${DATASETS:-a9a mushrooms}
SEEDS=${SEEDS:-1 2 3}
MAX_ROUNDS=${MAX_ROUNDS:-100000}
PAR=${PAR:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One run: its spec, then the summary's figures on one line.
cat >"$tmp/one.sh" <<'ONE'
#!/bin/sh
o=$("$ECOPT" run "$5" -b inproc 2>&1) || true
outcome=$(echo "$o" | awk '$1 == "outcome" { print $2 }')
rounds=$(echo "$o" | awk '$1 == "rounds" { print $2 }')
grads=$(echo "$o" | awk '$1 == "oracle" { print $2; exit }')
bits=$(echo "$o" | awk '$1 == "bits" && $2 == "up" { print $3; exit }')
paper=$(echo "$o" | sed -n 's/.*(paper bits \([0-9.e+]*\)).*/\1/p' | head -1)
gap=$(echo "$o" | awk '$1 == "rel" && $2 == "gap" { print $3; exit }')
echo "$1 $2 $3 $4 $outcome $rounds $grads $bits $paper $gap"
ONE

n=0
for ds in $DATASETS; do
    for seed in $SEEDS; do
        for spec in "eclk topk" "eclk randk" "adiana randk" "econtrol topk" \
                    "econtrol randk" "lkatyusha none"; do
            set -- $spec
            case $2 in
            topk) comp='{"type": "topk", "k_frac": 0.05}' ;;
            randk) comp='{"type": "randk", "k_frac": 0.05}' ;;
            none) comp='{"type": "none"}' ;;
            esac
            # EControl with a minibatch stalls at its noise floor: its
            # whole shard's gradient, as ADIANA takes.
            batch=""
            [ "$1" = econtrol ] && batch='"batch": "full", '
            n=$((n + 1))
            f="$tmp/job$n.json"
            printf '{"dataset": "%s", "lambda2_rel": 1e-3, "workers": 20, ' "$ds" >"$f"
            printf '"algorithm": "%s", "compressor": %s, %s' "$1" "$comp" "$batch" >>"$f"
            printf '"max_rounds": %s, ' "$MAX_ROUNDS" >>"$f"
            printf '"target": 1e-6, "eval_every": 10, "seed": %s}\n' "$seed" >>"$f"
            echo "$ds $1 $2 $seed $f"
        done
    done
done >"$tmp/jobs"
ECOPT=$ECOPT xargs -P "$PAR" -L 1 sh "$tmp/one.sh" <"$tmp/jobs"
