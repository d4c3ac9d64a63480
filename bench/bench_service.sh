#!/bin/sh
# The service under load, against nginx in the same run: wrk on
# GET /v1/jobs/{id} and GET /v1/jobs/{id}/metrics?after= while two jobs
# run, and nginx serving the same JSON bodies as static files; then one
# job's wall time under the service against `ecopt run` of the same spec.
# Needs wrk and nginx (apt-get install wrk nginx-light); writes
# bench/results/service.md.
set -eu
cd "$(dirname "$0")/.."
ECOPT=${ECOPT:-$PWD/build/ecopt}
DATA=${ECOPT_DATA_DIR:-$PWD/../shared/datasets}
OUT=${1:-bench/results/service.md}
command -v wrk >/dev/null && command -v nginx >/dev/null || {
    echo "bench_service: needs wrk and nginx (apt-get install wrk nginx-light)" >&2
    exit 1
}
tmp=$(mktemp -d)
trap 'kill $srv_pid $ngx_pid 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT

"$ECOPT" serve --listen 127.0.0.1:0 --db "$tmp/e.db" --data-dir "$DATA" --auth off \
    --quiet --max-running 3 > "$tmp/serve.out" 2>/dev/null &
srv_pid=$!
while ! grep -q listening "$tmp/serve.out" 2>/dev/null; do sleep 0.05; done
port=$(sed -n 's/.*127.0.0.1:\([0-9]*\).*/\1/p' "$tmp/serve.out")
url=http://127.0.0.1:$port
submit() {
    curl -s -X POST "$url/v1/jobs" -H 'Content-Type: application/json' -d "$1" |
        sed -n 's/^{"id":"\([^"]*\)".*/\1/p'
}
# Two long jobs keep the scheduler writing while we measure.
bg='{"dataset": "a9a", "workers": 2, "max_rounds": 5000000, "target": 0, "eval_every": 10}'
j1=$(submit "$bg")
j2=$(submit "$bg")
sleep 2

# nginx serves the same bodies, fetched now, as static files.
mkdir -p "$tmp/www/v1/jobs/$j1" "$tmp/ngx"
curl -s "$url/v1/jobs/$j1" > "$tmp/www/job.json"
curl -s "$url/v1/jobs/$j1/metrics?after=0&limit=100" > "$tmp/www/metrics.json"
cat > "$tmp/ngx/nginx.conf" <<NGX
worker_processes 2;
pid $tmp/ngx/nginx.pid;
error_log $tmp/ngx/error.log;
daemon off;
events { worker_connections 1024; }
http {
    access_log off;
    default_type application/json;
    client_body_temp_path $tmp/ngx;
    proxy_temp_path $tmp/ngx;
    fastcgi_temp_path $tmp/ngx;
    uwsgi_temp_path $tmp/ngx;
    scgi_temp_path $tmp/ngx;
    server { listen 127.0.0.1:0; root $tmp/www; }
}
NGX
# nginx cannot report a port 0 binding, so pick a free port ourselves.
nport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sed -i "s/listen 127.0.0.1:0/listen 127.0.0.1:$nport/" "$tmp/ngx/nginx.conf"
nginx -c "$tmp/ngx/nginx.conf" -p "$tmp/ngx" &
ngx_pid=$!
sleep 0.5

run_wrk() {   # url -> "requests/s p99_ms"
    wrk -t2 -c32 -d5s --latency "$1" 2>/dev/null | awk '
        /Requests\/sec/ {rps=$2}
        /^ +99%/ {v=$2; if (v ~ /us$/) {sub(/us$/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v*=1000}; p99=v}
        END {printf "%s %s\n", rps, p99}'
}
set -- $(run_wrk "$url/v1/jobs/$j1");                      e_job_rps=$1 e_job_p99=$2
set -- $(run_wrk "http://127.0.0.1:$nport/job.json");       n_job_rps=$1 n_job_p99=$2
set -- $(run_wrk "$url/v1/jobs/$j1/metrics?after=0&limit=100"); e_met_rps=$1 e_met_p99=$2
set -- $(run_wrk "http://127.0.0.1:$nport/metrics.json");   n_met_rps=$1 n_met_p99=$2
curl -s -X POST "$url/v1/jobs/$j1/cancel" >/dev/null
curl -s -X POST "$url/v1/jobs/$j2/cancel" >/dev/null
sleep 1

# Overhead: the same job with eval_every 1 under the service and alone.
# ec-sgd never reaches a zero gap, so the job runs all of its rounds.
spec='{"dataset": "a1a", "workers": 4, "algorithm": "ec-sgd", "compressor": {"type": "topk", "k": 5}, "max_rounds": 200000, "target": 0, "eval_every": 1, "lambda2_rel": 1e-3, "backend": "process"}'
echo "$spec" > "$tmp/spec.json"
t0=$(date +%s.%N)
"$ECOPT" run "$tmp/spec.json" --quiet --data-dir "$DATA" > /dev/null
t_run=$(echo "$(date +%s.%N) - $t0" | bc)
t0=$(date +%s.%N)
j3=$(submit "$spec")
curl -s -N "$url/v1/jobs/$j3/events" > /dev/null
t_srv=$(echo "$(date +%s.%N) - $t0" | bc)
rows=$(curl -s "$url/v1/jobs/$j3" | sed -n 's/.*"round":\([0-9]*\),"rel_gap".*/\1/p')

ratio() { echo "scale=2; $1 / $2" | bc; }
{
    echo "# The service under load, beside nginx"
    echo
    echo "wrk -t2 -c32 -d5s on loopback while two a9a jobs run (2 workers each),"
    echo "2-core machine; nginx serves the same JSON bodies as static files."
    echo "Command: \`make bench\` (bench/bench_service.sh)."
    echo
    echo "| route | ecopt req/s | nginx req/s | ratio | ecopt p99 ms | nginx p99 ms |"
    echo "|---|---|---|---|---|---|"
    echo "| GET /v1/jobs/{id} | $e_job_rps | $n_job_rps | $(ratio "$e_job_rps" "$n_job_rps") | $e_job_p99 | $n_job_p99 |"
    echo "| GET /v1/jobs/{id}/metrics?after=0&limit=100 | $e_met_rps | $n_met_rps | $(ratio "$e_met_rps" "$n_met_rps") | $e_met_p99 | $n_met_p99 |"
    echo
    echo "One job, a1a, ec-sgd, 4 workers, topk k = 5, 200000 rounds with eval_every = 1"
    echo "(200001 metric rows): \`ecopt run\` alone $(printf %.2f "$t_run") s, through the service"
    echo "(submit to the end of its event stream, rows stored: last round $rows)"
    echo "$(printf %.2f "$t_srv") s: ratio $(ratio "$t_srv" "$t_run")."
} | tee "$OUT"
