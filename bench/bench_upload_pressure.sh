#!/bin/sh
# Six uploads at once of one gzip file of long decimal lines (MiB of them
# decompressed: $MB, default 2048), two from each of three tokens, against
# `ecopt serve` at its defaults: how long /livez takes to answer meanwhile,
# and the memory of the server and of its validator processes.
#
#   sh bench/bench_upload_pressure.sh [ECOPT_BINARY]    (default build/ecopt)
#
# Prints one line: the gzip's size, the wall time of the six, /livez's
# median and worst answer time (each polled with a 60 s timeout every
# 0.2 s), the server's resident memory at start and at most, and the most
# resident memory its children (the validators) held together.
set -eu
BIN=${1:-build/ecopt}
MB=${MB:-2048}
DIR=$(mktemp -d /tmp/ecopt-upload-pressure-XXXXXX)
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$DIR"' EXIT
mkdir "$DIR/data"
printf 'alice:alice-secret-0123456789\nbob:bob-secret-0123456789abc\ncarol:carol-secret-0123456789ab\n' \
    >"$DIR/tokens"

LINE="+1"
i=1
while [ $i -le 25 ]; do
    LINE="$LINE $i:0.123456789012345678901234567890123456789012345678901234567"
    i=$((i + 1))
done
# Whole lines only: a line cut short would make every upload a 422.
yes "$LINE" | head -n $((MB * 1048576 / (${#LINE} + 1))) | gzip -9 >"$DIR/big.gz"
GZ=$(stat -c %s "$DIR/big.gz")

"$BIN" serve --listen 127.0.0.1:0 --db "$DIR/ecopt.db" --data-dir "$DIR/data" \
    --tokens-file "$DIR/tokens" --quiet >"$DIR/out" 2>"$DIR/log" &
SERVER=$!
for _ in $(seq 100); do
    grep -q listening "$DIR/out" 2>/dev/null && break
    sleep 0.1
done
PORT=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$DIR/out")
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
children_rss() {
    t=0
    for c in $(cat /proc/"$SERVER"/task/*/children 2>/dev/null); do
        r=$(rss "$c")
        t=$((t + ${r:-0}))
    done
    echo $t
}
RSS0=$(rss $SERVER)
START=$(date +%s.%N)
PIDS=
for k in 0 1 2 3 4 5; do
    case $((k % 3)) in
    0) tok=alice-secret-0123456789 ;;
    1) tok=bob-secret-0123456789abc ;;
    *) tok=carol-secret-0123456789ab ;;
    esac
    curl -s -o "$DIR/reply$k" -w '%{http_code}\n' -H "Authorization: Bearer $tok" \
        -H 'Expect:' --data-binary @"$DIR/big.gz" -m 3600 \
        "http://127.0.0.1:$PORT/v1/datasets?name=big$k" >"$DIR/status$k" &
    PIDS="$PIDS $!"
done
RSS_MAX=$RSS0
KIDS_MAX=0
: >"$DIR/livez"
# Bounded: at most 18000 polls (an hour).
for _ in $(seq 18000); do
    running=0
    for p in $PIDS; do kill -0 "$p" 2>/dev/null && running=$((running + 1)); done
    [ "$running" -eq 0 ] && break
    t=$(curl -s -o /dev/null -w '%{time_total}' -m 60 "http://127.0.0.1:$PORT/livez" || echo 60)
    echo "$t" >>"$DIR/livez"
    r=$(rss $SERVER); [ "${r:-0}" -gt "$RSS_MAX" ] && RSS_MAX=$r
    k=$(children_rss); [ "$k" -gt "$KIDS_MAX" ] && KIDS_MAX=$k
    sleep 0.2
done
END=$(date +%s.%N)
STATUSES=$(cat "$DIR"/status? | tr '\n' ' ')
sort -n "$DIR/livez" | awk -v gz="$GZ" -v mb="$MB" -v s="$START" -v e="$END" \
    -v r0="$RSS0" -v rm="$RSS_MAX" -v km="$KIDS_MAX" -v st="$STATUSES" '
    { t[NR] = $1 }
    END {
        printf "six uploads of a %.1f MB gzip (%d MiB of long decimal lines): %.0f s, " \
               "statuses %s; /livez median %.3f s, worst %.3f s (%d polls); " \
               "server RSS %.0f -> max %.0f MB; validators RSS together max %.0f MB\n",
               gz / 1e6, mb, e - s, st, t[int((NR + 1) / 2)], t[NR], NR, r0 / 1024,
               rm / 1024, km / 1024
    }'
