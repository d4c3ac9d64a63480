#!/bin/sh
# What acceleration buys (bench/results/ablation.md): rounds and uplink bits
# to relative gap 1e-6 of ECLK against Qian et al.'s EC-LSVRG (ECLK without
# the momentum: docs/algorithms.md, "EC-LSVRG (Qian et al.)") with the same
# compressor and the same step multiplier, and of uncompressed L-Katyusha,
# on each dataset and seed. Rounds are a pure function of the job, so the
# machine's load changes the wall time only.
#
#   ECOPT_DATA_DIR=... sh bench/bench_ablation.sh > rows.txt
#
# DATASETS (a9a mushrooms), SEEDS (1 2 3), MULTS (1), MAX_ROUNDS (100000)
# and PAR (2 runs at a time) may be set. Prints one line per run:
#   dataset algorithm multiplier compressor seed outcome rounds bits_up
#   paper_bits_up rel_gap
set -eu
ECOPT=${ECOPT:-build/ecopt}
DATASETS=${DATASETS:-a9a mushrooms}
SEEDS=${SEEDS:-1 2 3}
MULTS=${MULTS:-1}
MAX_ROUNDS=${MAX_ROUNDS:-100000}
PAR=${PAR:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One run: its spec, then the summary's figures on one line.
cat >"$tmp/one.sh" <<'EOF'
#!/bin/sh
o=$("$ECOPT" run "$6" -b inproc 2>&1) || true
outcome=$(echo "$o" | awk '$1 == "outcome" { print $2 }')
rounds=$(echo "$o" | awk '$1 == "rounds" { print $2 }')
bits=$(echo "$o" | awk '$1 == "bits" && $2 == "up" { print $3; exit }')
paper=$(echo "$o" | sed -n 's/.*(paper bits \([0-9.e+]*\)).*/\1/p' | head -1)
gap=$(echo "$o" | awk '$1 == "rel" && $2 == "gap" { print $3; exit }')
echo "$1 $2 $3 $4 $5 $outcome $rounds $bits $paper $gap"
EOF

n=0
for ds in $DATASETS; do
    for mult in $MULTS; do
        for seed in $SEEDS; do
            for spec in "eclk topk" "ec-lsvrg-qian topk" "eclk randk" \
                        "ec-lsvrg-qian randk" "lkatyusha none"; do
                set -- $spec
                case $2 in
                topk) comp='{"type": "topk", "k": 1}' ;;
                randk) comp='{"type": "randk", "k_frac": 0.05}' ;;
                none) comp='{"type": "none"}' ;;
                esac
                n=$((n + 1))
                f="$tmp/job$n.json"
                printf '{"dataset": "%s", "lambda2_rel": 1e-3, "workers": 20, ' "$ds" >"$f"
                printf '"algorithm": "%s", "compressor": %s, ' "$1" "$comp" >>"$f"
                printf '"step_multiplier": %s, "max_rounds": %s, ' "$mult" "$MAX_ROUNDS" >>"$f"
                printf '"target": 1e-6, "eval_every": 10, "seed": %s}\n' "$seed" >>"$f"
                echo "$ds $1 $mult $2 $seed $f"
            done
        done
    done
done >"$tmp/jobs"
ECOPT=$ECOPT xargs -P "$PAR" -L 1 sh "$tmp/one.sh" <"$tmp/jobs"
