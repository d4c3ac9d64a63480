#!/bin/sh
# The tail of GET /v1/jobs/{id} at 32 connections, by where the load
# generator runs and how many HTTP threads the server has, beside nginx
# serving the same bytes with as many workers.
#
#   ECOPT=build/ecopt REPS=3 sh bench/bench_p99.sh [OUT.md]
#
# Two placements of wrk (32 connections, 5 s a run, no job running):
#   shared  wrk -t2 on every CPU, beside the server (bench_service.sh's);
#   apart   wrk -t1 on CPU 0 alone, the server (and nginx) on the others.
# Servers: ecopt with no --threads (the default: one a CPU it may run on,
# at most 4; the table gives what it chose) and --threads 1, 2 and 4, nginx with 1 and 2
# worker processes. In each repetition every server runs once in each
# placement, the order of the servers turned by one each time; medians
# and min-max of REPS. OUT (default $TMPDIR/bench_p99.md) is written anew:
# paste it into a dated section of bench/results/service.md. Needs wrk,
# nginx and taskset, and at least 2 CPUs.
set -eu
ECOPT=${ECOPT:-build/ecopt}
OUT=${1:-${TMPDIR:-/tmp}/bench_p99.md}
REPS=${REPS:-3}
DATA=$(cd "${ECOPT_DATA_DIR:-../shared/datasets}" && pwd)
cpus=$(nproc)
command -v wrk >/dev/null && command -v nginx >/dev/null && command -v taskset >/dev/null || {
    echo "bench_p99: needs wrk, nginx and taskset (apt-get install wrk nginx-light util-linux)" >&2
    exit 1
}
[ "$cpus" -ge 2 ] || { echo "bench_p99: needs 2 CPUs or more" >&2; exit 1; }
rest=1-$((cpus - 1))
tmp=$(mktemp -d)
spid= npid=
trap 'kill $spid $npid 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT

. "$(dirname "$0")/nginx_conf.sh"

# One job, run to its end, gives the body both servers answer with.
"$ECOPT" serve --listen 127.0.0.1:0 --db "$tmp/e.db" --data-dir "$DATA" --auth off \
    --quiet >"$tmp/e.out" 2>/dev/null &
spid=$!
while ! grep -q listening "$tmp/e.out" 2>/dev/null; do sleep 0.05; done
url=http://127.0.0.1:$(sed -n 's/.*127.0.0.1:\([0-9]*\).*/\1/p' "$tmp/e.out")
id=$(curl -s -X POST "$url/v1/jobs" -H 'Content-Type: application/json' \
     -d '{"dataset": "a9a", "workers": 2, "algorithm": "ec-sgd", "compressor": {"type": "topk", "k": 5}, "max_rounds": 200, "target": 0, "eval_every": 10}' |
     sed -n 's/^{"id":"\([^"]*\)".*/\1/p')
n=0
until curl -s "$url/v1/jobs/$id" | grep -q '"finished_at":[0-9]'; do
    n=$((n + 1)); [ $n -lt 600 ] || { echo "bench_p99: the job did not end" >&2; exit 1; }
    sleep 0.1
done
mkdir -p "$tmp/www" "$tmp/ngx"
curl -s "$url/v1/jobs/$id" >"$tmp/www/job.json"
kill $spid; wait $spid 2>/dev/null || true; spid=
nport=$(free_port)

start() {     # server placement: spid or npid set, $target the URL
    cpuset=$([ "$2" = apart ] && echo "$rest" || echo "0-$((cpus - 1))")
    case $1 in
    ecopt-*)
        rm -f "$tmp/s.out"
        place=$2 picked=
        # ecopt-default: no --threads, the server picks.
        if [ "$1" = ecopt-default ]; then picked=1; set --; else set -- --threads "${1#ecopt-}"; fi
        taskset -c "$cpuset" "$ECOPT" serve --listen 127.0.0.1:0 --db "$tmp/e.db" \
            --data-dir "$DATA" --auth off --quiet "$@" >"$tmp/s.out" 2>/dev/null &
        spid=$!
        while ! grep -q listening "$tmp/s.out" 2>/dev/null; do sleep 0.05; done
        # The threads it chose, from its start line.
        [ -z "$picked" ] || sed -n 's/.* \([0-9]*\) HTTP thread.*/\1/p' "$tmp/s.out" >"$tmp/default.$place"
        target=http://127.0.0.1:$(sed -n 's/.*127.0.0.1:\([0-9]*\).*/\1/p' "$tmp/s.out")/v1/jobs/$id ;;
    nginx-*)
        nginx_conf "$tmp/ngx" "${1#nginx-}" "$nport" "$tmp/www"
        taskset -c "$cpuset" nginx -c "$tmp/ngx/nginx.conf" -p "$tmp/ngx" &
        npid=$!
        sleep 0.5
        target=http://127.0.0.1:$nport/job.json ;;
    esac
}
stop() { kill $spid $npid 2>/dev/null || true; wait $spid $npid 2>/dev/null || true; spid= npid=; }
run_wrk() {   # placement url -> "requests/s p99_ms load"
    if [ "$1" = apart ]; then set -- taskset -c 0 wrk -t1 -c32 -d5s --latency "$2"
    else set -- wrk -t2 -c32 -d5s --latency "$2"; fi
    load=$(cut -d' ' -f1 /proc/loadavg)
    "$@" 2>/dev/null | awk -v load="$load" '
        /Requests\/sec/ {r = $2}
        /^ +99%/ {p = $2; if (p ~ /us$/) p = p / 1000; else if (p ~ /ms$/) p = p + 0; else if (p ~ /s$/) p = p * 1000}
        END {printf "%s %.3f %s\n", r, p, load}'
}

servers="ecopt-default ecopt-1 ecopt-2 ecopt-4 nginx-1 nginx-2"
i=0
while [ $i -lt "$REPS" ]; do
    # Turn the order by one each repetition.
    order=$(echo $servers | tr ' ' '\n' | awk -v k=$i '{a[NR] = $0} END {for (j = 0; j < NR; j++) print a[(j + k) % NR + 1]}')
    for s in $order; do
        for place in shared apart; do
            start "$s" "$place"
            echo "$(run_wrk "$place" "$target")" >>"$tmp/$s.$place"
            stop
        done
    done
    i=$((i + 1))
done

med() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
range() { sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%s-%s", lo, hi}'; }
{
    echo "GET /v1/jobs/{id} (a finished job, $(wc -c <"$tmp/www/job.json") bytes), 32 connections, no job running;"
    echo "$REPS runs of 5 s per cell; medians and min-max; load is the 1-minute"
    echo "load average at the start of each run. shared: wrk -t2 on every CPU with the server;"
    echo "apart: wrk -t1 on CPU 0, the server on CPUs $rest. $cpus CPUs."
    echo
    echo "| server | wrk | req/s | p99 ms | its range | load |"
    echo "|---|---|---|---|---|---|"
    for s in $servers; do
        for place in shared apart; do
            f=$tmp/$s.$place
            case $s in ecopt-default) name="ecopt, the default threads ($(cat "$tmp/default.$place"))" ;; ecopt-*) name="ecopt --threads ${s#ecopt-}" ;;
                       nginx-1) name="nginx, 1 worker" ;; *) name="nginx, ${s#nginx-} workers" ;; esac
            echo "| $name | $place | $(cut -d' ' -f1 "$f" | med) | $(cut -d' ' -f2 "$f" | med) | $(cut -d' ' -f2 "$f" | range) | $(cut -d' ' -f3 "$f" | range) |"
        done
    done
} >"$OUT"
cat "$OUT"
