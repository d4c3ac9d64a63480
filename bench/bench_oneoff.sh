#!/bin/sh
# The server's CPU per GET of a job's document, two binaries side by side
# (BEFORE, a build from before a change, and ECOPT): a one-off request
# (a new connection each, as `curl URL` makes) and a request on a
# keep-alive connection (one curl fetching many URLs). PAIRS pairs,
# alternating which binary goes first; per pair N one-off and 20N
# keep-alive requests, the server's utime + stime from /proc (10 ms
# ticks) over them. Prints the table and the ratios (ECOPT over BEFORE):
# median (min-max) over the pairs, and the load at the start and end.
#   BEFORE=OTHER/build/ecopt sh bench/bench_oneoff.sh
set -eu
cd "$(dirname "$0")/.."
ECOPT=${ECOPT:-$PWD/build/ecopt}
BEFORE=${BEFORE:?BEFORE: the binary to compare against}
DATA=${ECOPT_DATA_DIR:-$PWD/../shared/datasets}
PAIRS=${PAIRS:-5}
N=${N:-400}
tmp=$(mktemp -d)
trap 'kill $spid 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
spid=
ticks=$(getconf CLK_TCK)
. bench/ab_pairs.sh
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }

one() {   # binary -> "us_oneoff us_keepalive"
    rm -rf "$tmp/db"; mkdir "$tmp/db"
    "$1" serve --listen 127.0.0.1:0 --db "$tmp/db/e.db" --data-dir "$DATA" --auth off \
        --quiet > "$tmp/serve.out" 2>/dev/null &
    spid=$!
    while ! grep -q listening "$tmp/serve.out" 2>/dev/null; do sleep 0.05; done
    port=$(sed -n 's/.*127.0.0.1:\([0-9]*\).*/\1/p' "$tmp/serve.out")
    url=http://127.0.0.1:$port/v1/jobs
    id=$(curl -s -X POST "$url" -H 'Content-Type: application/json' \
        -d '{"dataset": "a1a", "workers": 2, "algorithm": "ec-sgd", "compressor": {"type": "topk", "k": 5}, "max_rounds": 100}' |
        sed -n 's/^{"id":"\([^"]*\)".*/\1/p')
    while ! curl -s "$url/$id" | grep -q '"state":"succeeded"'; do sleep 0.1; done
    c0=$(cpu $spid)
    i=0; while [ $i -lt "$N" ]; do curl -s "$url/$id" >/dev/null; i=$((i + 1)); done
    c1=$(cpu $spid)
    i=0; : > "$tmp/urls"
    while [ $i -lt $((20 * N)) ]; do echo "url = \"$url/$id\"" >> "$tmp/urls"; echo "output = /dev/null" >> "$tmp/urls"; i=$((i + 1)); done
    c2=$(cpu $spid)
    curl -s -K "$tmp/urls"
    c3=$(cpu $spid)
    kill $spid; wait $spid 2>/dev/null || true; spid=
    awk -v a=$((c1 - c0)) -v b=$((c3 - c2)) -v n="$N" -v t="$ticks" \
        'BEGIN {printf "%.0f %.0f\n", a / t * 1e6 / n, b / t * 1e6 / (20 * n)}'
}

ab_pairs one "$tmp/pairs" "$BEFORE" "$ECOPT"
echo "| pair | before: one-off us | before: keep-alive us | after: one-off us | after: keep-alive us | one-off ratio | keep-alive ratio |"
echo "|---|---|---|---|---|---|---|"
awk '{printf "| %d | %s | %s | %s | %s | %.2f | %.2f |\n", NR, $1, $2, $3, $4, $3 / $1, $4 / $2}' "$tmp/pairs"
echo "| median | $(cut -d' ' -f1 "$tmp/pairs" | med) | $(cut -d' ' -f2 "$tmp/pairs" | med) | $(cut -d' ' -f3 "$tmp/pairs" | med) | $(cut -d' ' -f4 "$tmp/pairs" | med) | **$(awk '{printf "%.2f\n", $3 / $1}' "$tmp/pairs" | med)** ($(awk '{printf "%.2f\n", $3 / $1}' "$tmp/pairs" | spread)) | **$(awk '{printf "%.2f\n", $4 / $2}' "$tmp/pairs" | med)** ($(awk '{printf "%.2f\n", $4 / $2}' "$tmp/pairs" | spread)) |"
echo
echo "Load (1, 5, 15 minutes): $load_start at the start, $load_end at the end; $PAIRS pairs of $N one-off and $((20 * N)) keep-alive requests."
