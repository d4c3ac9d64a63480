#!/bin/sh
# What compression buys in seconds on a limited link. Two "hosts" (network
# namespaces joined by a veth, tools/mpi-netns.sh) with a tbf rate limit on
# both ends of the veth; the coordinator (rank 0) on one, the n workers on
# the other, so every frame crosses the link. For each rate and each d
# (data from `ecopt gen`), the wall time of the run to relative gap 1e-6 of
# ECLK (topk), uncompressed L-Katyusha and EC-GD-DIANA (topk), each run
# capped so the benchmark ends; a run that does not get there says so.
#
#   sudo sh bench/bench_link.sh [OUT.md]      (make bench-link)
#
# Environment: ECOPT (the binary; build/ecopt), RATES ("100mbit 1gbit"),
# DIMS ("100000 1000000"), ROWS (20000), NNZ (20), WORKERS (4), CAP (run
# seconds a run gets at least, 60), SETUP (seconds allowed for the setup, 90).
set -eu
cd "$(dirname "$0")/.."

out=${1:-bench/results/link.md}
ecopt=${ECOPT:-build/ecopt}
rates=${RATES:-100mbit 1gbit}
dims=${DIMS:-100000 1000000}
rows=${ROWS:-20000}
nnz=${NNZ:-20}
workers=${WORKERS:-4}
cap=${CAP:-60}
setup=${SETUP:-90}
target=1e-6

die() { echo "bench_link: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (ip netns, tc)"
for t in ip tc mpirun unshare; do
    command -v $t >/dev/null 2>&1 || die "$t not found (apt-get install iproute2 openmpi-bin)"
done
[ -x "$ecopt-mpi" ] || die "$ecopt-mpi not built (needs mpicc)"
ecopt=$(cd "$(dirname "$ecopt")" && pwd)/$(basename "$ecopt")

started=$(date +%s)
tag=ecbl$(($$ % 10000000))
net=10.$((200 + $$ % 50)).$(($$ % 256))
dir=$(mktemp -d /tmp/ecopt-bench-link-XXXXXX)
cleanup() {
    sh tools/mpi-netns.sh down "$tag"
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

sh tools/mpi-netns.sh up "$tag" "$net" "$dir"
# rank 0 alone on the first host, the workers on the second
printf '%s.1 slots=1\n%s.2 slots=%d\n' "$net" "$net" "$workers" > "$dir/hosts"
ECOPT_MPIRUN_ARGS="$(sed 's/--map-by node//' "$dir/mpirun-args") --mca mpi_yield_when_idle 1"
export ECOPT_MPIRUN_ARGS

# The data, and its P* solved once (in process) and handed to every run
# as a hint (api/report-format.md), so that the runs' setup is short and
# the cap is the link's.
for d in $dims; do
    "$ecopt" gen --rows "$rows" --features "$d" --nnz "$nnz" --seed 1 -o "$dir/d$d.svm"
    printf '{"dataset": "%s", "workers": %d, "lambda2_rel": 0.1, "algorithm": "gd", "max_rounds": 1}\n' \
        "$dir/d$d.svm" "$workers" > "$dir/solve.json"
    # exit 5: its one round is the budget, spent (docs/cli.md)
    "$ecopt" run "$dir/solve.json" --backend inproc --quiet --report-fd 3 \
        3>"$dir/start$d.jsonl" >/dev/null </dev/null || [ $? -eq 5 ]
    python3 - "$dir/start$d.jsonl" "$dir/d$d.svm" "$dir/hint$d.json" <<'EOF'
import json, os, sys
pb = json.loads(open(sys.argv[1]).readline())["problem"]
st = os.stat(sys.argv[2])
json.dump({"file": {"dev": st.st_dev, "ino": st.st_ino, "size": st.st_size,
                    "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns},
           "loss": pb["loss"],
           "entries": [{"lambda1": pb["lambda1"], "lambda2": pb["lambda2"],
                        "p_star": pb["P_star"], "bound": pb["P_star_bound"],
                        "method": pb["solver"]["method"]}]}, open(sys.argv[3], "w"))
EOF
done

# name, job fields (k = d/10 for the compressed methods; full batches, so
# that the rounds are few and the bits per round are what differs)
methods() {
    k=$(($1 / 10))
    m=$((rows / workers))
    echo "ECLK topk k=d/10, p=0.1|\"algorithm\": \"eclk\", \"batch\": $m, \"p\": 0.1, \"compressor\": {\"type\": \"topk\", \"k\": $k}"
    echo "L-Katyusha (none)|\"algorithm\": \"lkatyusha\", \"batch\": $m, \"compressor\": {\"type\": \"none\"}"
    echo "EC-GD-DIANA topk k=d/10|\"algorithm\": \"ec-gd-diana\", \"compressor\": {\"type\": \"topk\", \"k\": $k}"
}

shape() {
    tc -n "$tag$1" qdisc replace dev "${tag}v$1" root tbf rate "$2" burst "$3" latency 50ms
}

{
    echo "# What compression buys in seconds on a limited link"
    echo
    echo "bench/bench_link.sh, $(date -u +%Y-%m-%d): two network namespaces joined by"
    echo "a veth with a tbf rate limit on both ends; Open MPI across them, the"
    echo "coordinator on one, $workers workers on the other, on the default procs"
    echo "(min(workers, CPUs) processes): every frame crosses the link. Data: \`ecopt gen --rows $rows --features d --nnz $nnz --seed 1\`,"
    echo "logistic, lambda2_rel 0.1, contiguous shards. Time: the run's seconds at the"
    echo "first evaluation (every 10 rounds) with relative gap <= $target, from the"
    echo "start of the run (the data load and P*, solved once beforehand and given as"
    echo "a hint, excluded; so is the rest of the setup, about 50 s at d = 1e6, mostly"
    echo "the problem constants computed in every rank); each job has max_seconds"
    echo "$cap + $setup, so the run gets about $cap s or more: one that does not get there"
    echo "says so, with its stop reason. Bytes:"
    echo "frames that crossed the link, per worker, up + down."
    echo "$(nproc) cores, $(uname -r)."
    echo
    echo "| link | d | method | rounds | seconds to $target | MB per worker (up + down) | link MB/s (both ways) |"
    echo "|---|---|---|---|---|---|---|"
} > "$out.tmp"

for rate in $rates; do
    case $rate in
    *gbit) burst=2mb ;;
    *) burst=256kb ;;
    esac
    shape a "$rate" "$burst"
    shape b "$rate" "$burst"
    for d in $dims; do
        methods "$d" | while IFS='|' read -r name fields; do
            job=$dir/job.json
            printf '{"dataset": "%s", "workers": %d, "lambda2_rel": 0.1, "target": %s,
  "max_rounds": 1000000, "eval_every": 10, "max_seconds": %d, %s}\n' \
                "$dir/d$d.svm" "$workers" "$target" "$((cap + setup))" "$fields" > "$job"
            # max_seconds counts the setup too (the data, the problem's
            # constants in every rank: about 50 s at d = 1e6 here), which
            # is not the link's: the run gets what is left
            ip netns exec "${tag}a" "$ecopt" run "$job" --backend mpi \
                --hostfile "$dir/hosts" --pstar-hint "$dir/hint$d.json" \
                --format csv -o "$dir/rows.csv" \
                </dev/null >"$dir/log" 2>&1 || true
            line=$(awk -F, -v t="$target" -v cap="$cap" -v n="$workers" '
                NR == 1 { next }
                { r = $1; s = $9; g = $7; mb = ($10 + $11) / 1e6 }
                g + 0 <= t + 0 && !done { done = 1; R = r; S = s; G = g; M = mb }
                END {
                    if (!done) { R = r; S = s; G = g; M = mb }
                    rate = S > 0 ? M * n / S : 0
                    if (done)
                        printf "%s | %.2f | %.1f | %.1f\n", R, S, M, rate
                    else
                        printf "%s | not reached in %.0f s (rel gap %.2g) | %.1f | %.1f\n", R, S, G, M, rate
                }' "$dir/rows.csv" 2>/dev/null || echo "- | failed | - | -")
            [ -s "$dir/rows.csv" ] || { line="- | failed: $(tail -1 "$dir/log") | - | -"; }
            # why a run stopped short of the target, in its own words
            case $line in
            *"not reached"*)
                why=$(sed -n 's/^stop  *//p; s/^ecopt run: //p' "$dir/log" | tail -1 | cut -c1-120)
                [ -n "$why" ] && line="${line%%(rel gap*}($why; rel gap${line#*(rel gap}"
                ;;
            esac
            echo "| $rate | $d | $name | $line |" | tee -a "$out.tmp"
            rm -f "$dir/rows.csv"
        done
    done
done

ended=$(date +%s)
{
    echo
    echo "Benchmark wall time: $((ended - started)) s."
} >> "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
