#!/bin/sh
# The service under load, against baselines in the same run:
# 1. wrk on GET /v1/jobs/{id} and GET /v1/jobs/{id}/metrics?after= while
#    two jobs run, against nginx serving the same JSON bodies as static
#    files, alternating (WRK_RUNS runs each);
# 2. metric ingestion: the server's CPU per metric row of a job that
#    reports every round, against a plain SQLite insert of the same rows
#    (bench/bench_ingest.c: one prepared statement, one transaction per
#    batch, WAL), alternating (INGEST_PAIRS pairs of INGEST_ROUNDS rounds);
# 3. one job's wall time under the service against `ecopt run` of the
#    same spec (BENCH_PAIRS pairs of BENCH_ROUNDS rounds: 5 of 200000,
#    about 13 minutes; BENCH_PAIRS=0 leaves it out).
# Each figure is a ratio from alternating runs, with its spread (min-max
# over the runs) and the machine's load (1-minute average) during them.
# BEFORE=OTHER/build/ecopt adds to part 1 a second server, that binary,
# with two jobs of its own: each wrk run then has exactly two jobs
# computing, the measured server's (nginx: ECOPT's), the other server's
# stopped (SIGSTOP to their process groups) until its turn; and part 1
# is measured again once every job has ended (no job running).
# INGEST_PAIRS=0 leaves part 2 out.
# Needs wrk, nginx and GNU time (apt-get install wrk nginx-light time)
# and build/bench/bench_ingest (make bench builds it). Writes a dated
# section at the top of bench/results/service.md, keeping the sections
# of earlier runs below it.
set -eu
cd "$(dirname "$0")/.."
. bench/nginx_conf.sh
ECOPT=${ECOPT:-$PWD/build/ecopt}
INGEST=${INGEST:-$(dirname "$ECOPT")/bench/bench_ingest}
DATA=${ECOPT_DATA_DIR:-$PWD/../shared/datasets}
OUT=${1:-bench/results/service.md}
command -v wrk >/dev/null && command -v nginx >/dev/null && [ -x /usr/bin/time ] || {
    echo "bench_service: needs wrk, nginx and GNU time (apt-get install wrk nginx-light time)" >&2
    exit 1
}
[ "${INGEST_PAIRS:-5}" -eq 0 ] || [ -x "$INGEST" ] || { echo "bench_service: no $INGEST (make bench builds it)" >&2; exit 1; }
tmp=$(mktemp -d)
load() { cut -d' ' -f1 /proc/loadavg; }
# "min-max" of a column of numbers on stdin.
spread() { sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%s-%s", lo, hi}'; }
# The median of a column of numbers on stdin.
med() { sort -g | awk '{v[NR] = $1} END {
        if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
BEFORE=${BEFORE:-}
BEFORE_IS=${BEFORE_IS:-$BEFORE}   # how the text names it
srv_pid= ngx_pid= old_pid= e_groups= b_groups=
trap 'kill -CONT $e_groups $b_groups 2>/dev/null || true
      kill $srv_pid $old_pid $ngx_pid 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT

serve() {     # binary db -> a server started; its pid in $spid, port in $sport
    "$1" serve --listen 127.0.0.1:0 --db "$2" --data-dir "$DATA" --auth off \
        --quiet --max-running 3 > "$2.out" 2>/dev/null &
    spid=$!
    while ! grep -q listening "$2.out" 2>/dev/null; do sleep 0.05; done
    sport=$(sed -n 's/.*127.0.0.1:\([0-9]*\).*/\1/p' "$2.out")
}
serve "$ECOPT" "$tmp/e.db"
srv_pid=$spid url=http://127.0.0.1:$sport
submit_to() { # url spec -> the new job's id
    curl -s -X POST "$1/v1/jobs" -H 'Content-Type: application/json' -d "$2" |
        sed -n 's/^{"id":"\([^"]*\)".*/\1/p'
}
submit() { submit_to "$url" "$1"; }
# Two long jobs keep the scheduler writing while we measure: ec-sgd never
# reaches a zero gap (eclk's default may, and end early).
bg='{"dataset": "a9a", "workers": 2, "algorithm": "ec-sgd", "compressor": {"type": "topk", "k": 5}, "max_rounds": 5000000, "target": 0, "eval_every": 10}'
# Measure them running: both past their start (data, constants, P*).
wait_started() {   # url job job
    n=0
    while ! { curl -s "$1/v1/jobs/$2" | grep -q '"progress":{"round":[1-9]' &&
              curl -s "$1/v1/jobs/$3" | grep -q '"progress":{"round":[1-9]'; }; do
        n=$((n + 1))
        [ $n -lt 600 ] || { echo "bench_service: the jobs did not start" >&2; exit 1; }
        sleep 0.1
    done
}
# The process groups of a server's jobs: each coordinator, a child of the
# server, leads its own ("-PID" for kill).
groups_of() { pgrep -P "$1" | sed 's/^/-/' | tr '\n' ' '; }
j1=$(submit "$bg")
j2=$(submit "$bg")
wait_started "$url" "$j1" "$j2"
e_groups=$(groups_of "$srv_pid")
if [ -n "$BEFORE" ]; then
    # The other server's jobs start while ECOPT's are stopped, so that
    # neither pair is ever measured beside four jobs.
    kill -STOP $e_groups
    serve "$BEFORE" "$tmp/b.db"
    old_pid=$spid old_url=http://127.0.0.1:$sport
    b1=$(submit_to "$old_url" "$bg")
    b2=$(submit_to "$old_url" "$bg")
    wait_started "$old_url" "$b1" "$b2"
    b_groups=$(groups_of "$old_pid")
    kill -STOP $b_groups
    kill -CONT $e_groups
fi

# nginx serves the same bodies, fetched now, as static files.
mkdir -p "$tmp/www/v1/jobs/$j1" "$tmp/ngx"
curl -s "$url/v1/jobs/$j1" > "$tmp/www/job.json"
curl -s "$url/v1/jobs/$j1/metrics?after=0&limit=100" > "$tmp/www/metrics.json"
nport=$(free_port)
nginx_conf "$tmp/ngx" 2 "$nport" "$tmp/www"
nginx -c "$tmp/ngx/nginx.conf" -p "$tmp/ngx" &
ngx_pid=$!
sleep 0.5

# Whose jobs compute: ECOPT's (e) or BEFORE's (b), the other's stopped.
jobs_of() {
    [ -n "$e_groups" ] && [ -n "$b_groups" ] || return 0
    if [ "$1" = b ]; then kill -STOP $e_groups; kill -CONT $b_groups
    else kill -STOP $b_groups; kill -CONT $e_groups; fi
}
run_wrk() {   # url -> "requests/s p99_ms"
    wrk -t2 -c32 -d5s --latency "$1" 2>/dev/null | awk '
        /Requests\/sec/ {rps=$2}
        /^ +99%/ {v=$2; if (v ~ /us$/) {sub(/us$/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v*=1000}; p99=v}
        END {printf "%s %s\n", rps, p99}'
}
# The machine's speed drifts while the jobs run (the first run of either
# server is often the slowest), so each pair of targets is measured
# WRK_RUNS times, alternating which goes first, and each figure is the
# median of its runs; the ratios (ecopt over nginx) are taken run by run.
WRK_RUNS=${WRK_RUNS:-5}
wrk_pair() {   # ecopt_url nginx_url file [before_url] -> lines "e_rps e_p99 n_rps n_p99 load [b_rps b_p99]"
    : > "$3"
    i=0
    while [ $i -lt "$WRK_RUNS" ]; do
        l=$(load)
        if [ -n "${4:-}" ]; then
            # Three targets, each first in turn: e n b, n b e, b e n.
            case $((i % 3)) in
            0) jobs_of e; e=$(run_wrk "$1"); n=$(run_wrk "$2"); jobs_of b; b=$(run_wrk "$4") ;;
            1) jobs_of e; n=$(run_wrk "$2"); jobs_of b; b=$(run_wrk "$4"); jobs_of e; e=$(run_wrk "$1") ;;
            2) jobs_of b; b=$(run_wrk "$4"); jobs_of e; e=$(run_wrk "$1"); n=$(run_wrk "$2") ;;
            esac
            echo "$e $n $l $b" >> "$3"
        else
            if [ $((i % 2)) -eq 0 ]; then e=$(run_wrk "$1"); n=$(run_wrk "$2")
            else n=$(run_wrk "$2"); e=$(run_wrk "$1"); fi
            echo "$e $n $l" >> "$3"
        fi
        i=$((i + 1))
    done
    jobs_of e
}
ab_row() {     # route file -> a table row: ECOPT against BEFORE (columns 6 and 7)
    f=$2
    echo "| $1 | $(printf %.0f "$(cut -d' ' -f1 "$f" | med)") | $(printf %.0f "$(cut -d' ' -f6 "$f" | med)") |" \
         "$(printf %.2f "$(awk '{print $1 / $6}' "$f" | med)") ($(awk '{printf "%.2f\n", $1 / $6}' "$f" | spread)) |" \
         "$(printf %.2f "$(cut -d' ' -f2 "$f" | med)") | $(cut -d' ' -f2 "$f" | spread) |" \
         "$(printf %.2f "$(cut -d' ' -f7 "$f" | med)") | $(cut -d' ' -f7 "$f" | spread) |" \
         "$(printf %.2f "$(awk '{print $2 / $7}' "$f" | med)") ($(awk '{printf "%.2f\n", $2 / $7}' "$f" | spread)) | $(cut -d' ' -f5 "$f" | spread) |"
}
wrk_row() {    # route file -> a table row: medians, ratios with spread, load
    f=$2
    rps=$(awk '{print $1 / $3}' "$f" | med) rps_s=$(awk '{printf "%.2f\n", $1 / $3}' "$f" | spread)
    p99=$(awk '{print $2 / $4}' "$f" | med) p99_s=$(awk '{printf "%.2f\n", $2 / $4}' "$f" | spread)
    echo "| $1 | $(printf %.0f "$(cut -d' ' -f1 "$f" | med)") | $(printf %.0f "$(cut -d' ' -f3 "$f" | med)") |" \
         "$(printf %.2f "$rps") ($rps_s) | $(printf %.2f "$(cut -d' ' -f2 "$f" | med)") |" \
         "$(cut -d' ' -f2 "$f" | spread) | $(printf %.2f "$(cut -d' ' -f4 "$f" | med)") |" \
         "$(cut -d' ' -f4 "$f" | spread) | $(printf %.2f "$p99") ($p99_s) | $(cut -d' ' -f5 "$f" | spread) |"
}
# BEFORE's server answers for its own job, of the same shape.
old_job= old_met=
if [ -n "$BEFORE" ]; then
    old_job=$old_url/v1/jobs/$b1 old_met="$old_url/v1/jobs/$b1/metrics?after=0&limit=100"
fi
wrk_pair "$url/v1/jobs/$j1" "http://127.0.0.1:$nport/job.json" "$tmp/wrk_job" $old_job
wrk_pair "$url/v1/jobs/$j1/metrics?after=0&limit=100" "http://127.0.0.1:$nport/metrics.json" "$tmp/wrk_met" $old_met
kill -CONT $e_groups $b_groups 2>/dev/null || true
curl -s -X POST "$url/v1/jobs/$j1/cancel" >/dev/null
curl -s -X POST "$url/v1/jobs/$j2/cancel" >/dev/null
wait_state() {   # job state_regex [seconds between looks] [url] -> once the job is in such a state
    while ! curl -s "${4:-$url}/v1/jobs/$1" | grep -Eq "\"state\":\"($2)\""; do sleep "${3:-0.2}"; done
}
wait_state "$j1" 'cancelled|succeeded|failed'
wait_state "$j2" 'cancelled|succeeded|failed'
if [ -n "$BEFORE" ]; then
    curl -s -X POST "$old_url/v1/jobs/$b1/cancel" >/dev/null
    curl -s -X POST "$old_url/v1/jobs/$b2/cancel" >/dev/null
    wait_state "$b1" 'cancelled|succeeded|failed' 0.2 "$old_url"
    wait_state "$b2" 'cancelled|succeeded|failed' 0.2 "$old_url"
    e_groups= b_groups=
    # The same with no job running: each server and nginx alone.
    curl -s "$url/v1/jobs/$j1" > "$tmp/www/job.json"
    wrk_pair "$url/v1/jobs/$j1" "http://127.0.0.1:$nport/job.json" "$tmp/wrk_idle" "$old_job"
    kill "$old_pid" 2>/dev/null || true
fi
kill "$ngx_pid" 2>/dev/null || true

# Ingestion: a job in process (its workers simulated in the coordinator,
# so the server's CPU is the only CPU of ours besides it) reporting every
# round, nothing else running, no client but this script's look at the
# job every second (each a new connection: about 0.4 ms of the server's
# CPU, bench_oneoff.sh; at every 0.2 s they were a quarter of the CPU
# counted here). The server's CPU over the job, per row, against bench_ingest's
# CPU per row inserting the job's own rows as stored, in batches as large
# as the server's: it stores each job's rows every FLUSH_SECONDS (0.25 s,
# service/core/scheduler.c) or at MAX_BATCH (2048) rows, whichever comes
# first, so its batches hold min(2048, 0.25 s of rows).
INGEST_PAIRS=${INGEST_PAIRS:-5}
INGEST_ROUNDS=${INGEST_ROUNDS:-200000}
ispec="{\"dataset\": \"a1a\", \"workers\": 4, \"algorithm\": \"ec-sgd\", \"compressor\": {\"type\": \"topk\", \"k\": 5}, \"max_rounds\": $INGEST_ROUNDS, \"target\": 0, \"eval_every\": 1, \"lambda2_rel\": 1e-3, \"backend\": \"inproc\"}"
ticks=$(getconf CLK_TCK)
srv_cpu() { awk -v t="$ticks" '{printf "%.2f\n", ($14 + $15) / t}' "/proc/$srv_pid/stat"; }
ingest_served() {   # -> "us_per_row rows seconds batch load job_id"
    l=$(load)
    c0=$(srv_cpu)
    ij=$(submit "$ispec")
    wait_state "$ij" succeeded 1
    c1=$(srv_cpu)
    curl -s "$url/v1/jobs/$ij" > "$tmp/ijob.json"
    secs=$(grep -o '"seconds":[0-9.e+-]*' "$tmp/ijob.json" | tail -1 | cut -d: -f2)
    rows=$((INGEST_ROUNDS + 1))
    awk -v c="$(echo "$c1 - $c0" | bc)" -v n=$rows -v s="$secs" -v l="$l" -v j="$ij" 'BEGIN {
        b = n * 0.25 / s; if (b > 2048) b = 2048; if (b < 1) b = 1
        printf "%.3f %d %.2f %d %s %s\n", c * 1e6 / n, n, s, b, l, j}'
}
ingest_plain() {    # job batch -> "us_per_row load"
    l=$(load)
    rm -f "$tmp/plain.db" "$tmp/plain.db-wal" "$tmp/plain.db-shm"
    set -- $("$INGEST" "$tmp/e.db" "$1" "$2" "$tmp/plain.db")
    echo "$4 $l"
}
: > "$tmp/ingest"
i=0
while [ $i -lt "$INGEST_PAIRS" ]; do
    # The plain insert takes the rows of the job of the same pair, or of
    # the pair before when it goes first.
    if [ $((i % 2)) -eq 0 ]; then
        s=$(ingest_served); set -- $s; p=$(ingest_plain "$6" "$4")
    else
        p=$(ingest_plain "$ij" "$batch"); s=$(ingest_served)
    fi
    set -- $s
    batch=$4 ij=$6
    echo "$1 $2 $3 $4 $5 $p" >> "$tmp/ingest"
    echo "ingest pair $((i + 1)): served $s, plain $p" >&2
    i=$((i + 1))
done
# Columns of $tmp/ingest: 1 served us/row, 2 rows, 3 job seconds, 4 batch,
# 5 load, 6 plain us/row, 7 load.

# Overhead: the same job with eval_every 1 under the service and alone.
# ec-sgd never reaches a zero gap, so the job runs all of its rounds. The
# two are run in PAIRS interleaved pairs (the order alternating). Besides
# the wall time from start to end, the job's own time for its rounds
# ("wall time" of `ecopt run`, the last row's seconds under the service)
# leaves out starting and ending. CPU seconds are read from /proc: the
# server's own, and the job's (its reaped processes) on either side.
#
# On a virtual machine most of the run-to-run spread is steal: time the
# hypervisor gave our CPUs to other guests (/proc/stat, all CPUs). The
# job's wall time grows in proportion to it, so each run records its
# steal, and the comparison is made at zero steal: a least-squares fit
# of wall = a_side + b * steal with one slope b for both sides, and the
# ratio a_served / a_alone.
PAIRS=${BENCH_PAIRS:-5}
ROUNDS=${BENCH_ROUNDS:-200000}
spec="{\"dataset\": \"a1a\", \"workers\": 4, \"algorithm\": \"ec-sgd\", \"compressor\": {\"type\": \"topk\", \"k\": 5}, \"max_rounds\": $ROUNDS, \"target\": 0, \"eval_every\": 1, \"lambda2_rel\": 1e-3, \"backend\": \"process\"}"
echo "$spec" > "$tmp/spec.json"
cpu_of() {   # pid -> "own children" CPU seconds
    awk -v t="$ticks" '{printf "%.2f %.2f\n", ($14 + $15) / t, ($16 + $17) / t}' "/proc/$1/stat"
}
steal() {    # -> steal ticks so far, all CPUs
    awk '$1 == "cpu" {print $9}' /proc/stat
}
stolen() {   # ticks at the start -> steal seconds since
    echo "scale=2; ($(steal) - $1) / $ticks" | bc
}
alone() {    # -> "wall loop cpu steal" of `ecopt run`
    st0=$(steal)
    /usr/bin/time -f "%e %U %S" -o "$tmp/time" \
        "$ECOPT" run "$tmp/spec.json" --quiet --data-dir "$DATA" > "$tmp/alone.out" ||
        [ $? -eq 5 ]            # target 0: the budget runs out (docs/cli.md)
    st=$(stolen "$st0")
    loop=$(sed -n 's/^wall time *\([0-9.]*\) s$/\1/p' "$tmp/alone.out")
    awk -v l="$loop" -v st="$st" '{printf "%.2f %.2f %.2f %.2f\n", $1, l, $2 + $3, st}' "$tmp/time"
}
served() {   # -> "wall loop job_cpu server_cpu rows steal" through the service
    set -- $(cpu_of "$srv_pid")
    own0=$1 kids0=$2
    st0=$(steal)
    t0=$(date +%s.%N)
    j=$(submit "$spec")
    curl -s -N "$url/v1/jobs/$j/events" > /dev/null
    t=$(echo "$(date +%s.%N) - $t0" | bc)
    st=$(stolen "$st0")
    while ! curl -s "$url/v1/jobs/$j" | grep -q '"state":"succeeded"'; do sleep 0.1; done
    set -- $(cpu_of "$srv_pid")
    curl -s "$url/v1/jobs/$j" > "$tmp/job.json"
    last=$(sed -n 's/.*"round":\([0-9]*\),"rel_gap".*/\1/p' "$tmp/job.json")
    loop=$(grep -o '"seconds":[0-9.e+-]*' "$tmp/job.json" | tail -1 | cut -d: -f2)
    echo "$(printf %.2f "$t") $(printf %.2f "$loop") $(printf %.2f "$(echo "$2 - $kids0" | bc)")" \
         "$(printf %.2f "$(echo "$1 - $own0" | bc)") $last $(printf %.2f "$st")"
}
# Columns of $tmp/pairs: alone 1 wall, 2 loop, 3 cpu, 4 steal; served
# 5 wall, 6 loop, 7 job cpu, 8 server cpu, 9 rows, 10 steal.
if [ "$PAIRS" -gt 0 ]; then
    : > "$tmp/pairs"
    i=0
    while [ $i -lt "$PAIRS" ]; do
        if [ $((i % 2)) -eq 0 ]; then a=$(alone); s=$(served); else s=$(served); a=$(alone); fi
        echo "$a $s" >> "$tmp/pairs"
        echo "pair $((i + 1)): alone $a, served $s" >&2
        i=$((i + 1))
    done
    median() {   # column -> median of that column of the pairs
        cut -d' ' -f"$1" "$tmp/pairs" | sort -g | awk '{v[NR] = $1} END {
            if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'
    }
    t_run=$(median 1) l_run=$(median 2) c_run=$(median 3) s_run=$(median 4)
    t_srv=$(median 5) l_srv=$(median 6) c_job=$(median 7) c_srv=$(median 8) s_srv=$(median 10)
    rows=$(cut -d' ' -f9 "$tmp/pairs" | sort -g | head -1)
    # Per pair: served over alone, wall and rounds; their medians.
    awk '{printf "%.3f %.3f\n", $5 / $1, $6 / $2}' "$tmp/pairs" > "$tmp/ratios"
    mid() { cut -d' ' -f"$1" "$tmp/ratios" | sort -g | awk '{v[NR] = $1} END {
            if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
    r_wall=$(mid 1) r_loop=$(mid 2)
    least() { cut -d' ' -f"$1" "$tmp/pairs" | sort -g | head -1; }
    # Wall time at zero steal: one slope for both sides, fitted on deviations
    # from each side's means; then each side's intercept, and the standard
    # error of their difference from the residuals (2n - 3 degrees of
    # freedom). Prints "a_alone a_served b ratio se", se that of the ratio
    # (over a_alone), or "- - - - -" when the steals do not vary.
    fit=$(awk '{xa[NR] = $4; ya[NR] = $1; xs[NR] = $10; ys[NR] = $5
            mxa += $4; mya += $1; mxs += $10; mys += $5}
        END {
            n = NR; mxa /= n; mya /= n; mxs /= n; mys /= n
            for (i = 1; i <= n; i++) {
                sxy += (xa[i] - mxa) * (ya[i] - mya) + (xs[i] - mxs) * (ys[i] - mys)
                sxx += (xa[i] - mxa) ^ 2 + (xs[i] - mxs) ^ 2
            }
            if (sxx == 0 || n < 2) { print "- - - - -"; exit }
            b = sxy / sxx; a0 = mya - b * mxa; a1 = mys - b * mxs
            for (i = 1; i <= n; i++)
                rss += (ya[i] - a0 - b * xa[i]) ^ 2 + (ys[i] - a1 - b * xs[i]) ^ 2
            v = rss / (2 * n - 3) * (2 / n + (mxs - mxa) ^ 2 / sxx)
            printf "%.2f %.2f %.3f %.3f %.3f\n", a0, a1, b, a1 / a0, sqrt(v) / a0
        }' "$tmp/pairs")
    set -- $fit
    f_alone=$1 f_srv=$2 f_slope=$3 f_ratio=$4 f_se=$5
fi

ratio() { echo "scale=2; $1 / $2" | bc; }
section() {
    echo "## $(date -u '+%Y-%m-%d %H:%M') UTC, $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo
    if [ -n "$BEFORE" ]; then
        echo "Command: \`BEFORE=OTHER/build/ecopt sh bench/bench_service.sh\`$([ "$PAIRS" -gt 0 ] || echo ", BENCH_PAIRS=0")$([ "$INGEST_PAIRS" -gt 0 ] || echo ", INGEST_PAIRS=0"), OTHER $BEFORE_IS."
    else
        echo "Command: \`make bench\` (bench/bench_service.sh$([ "$PAIRS" -gt 0 ] || echo ", BENCH_PAIRS=0")$([ "$INGEST_PAIRS" -gt 0 ] || echo ", INGEST_PAIRS=0"))."
    fi
    echo "$(nproc)-core machine; load is the 1-minute load average at the start"
    echo "of each run, min-max over the runs."
    echo
    echo "wrk -t2 -c32 -d5s on loopback while two a9a jobs run (2 workers each);"
    echo "nginx serves the same JSON bodies as static files. $WRK_RUNS runs of"
    echo "each, alternating which goes first; medians, and the ratios (ecopt over"
    echo "nginx) run by run: median (min-max)."
    echo
    echo "| route | ecopt req/s | nginx req/s | req/s ratio | ecopt p99 ms | its range | nginx p99 ms | its range | p99 ratio | load |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    wrk_row "GET /v1/jobs/{id}" "$tmp/wrk_job"
    wrk_row "GET /v1/jobs/{id}/metrics?after=0&limit=100" "$tmp/wrk_met"
    if [ -n "$BEFORE" ]; then
        echo
        echo "The same runs, this binary against BEFORE ($BEFORE_IS), each beside"
        echo "two jobs of its own (the other server's stopped; nginx beside this"
        echo "binary's); medians, and the ratios (this over before) run by run:"
        echo "median (min-max)."
        echo
        echo "| route | req/s | before req/s | req/s ratio | p99 ms | its range | before p99 ms | its range | p99 ratio | load |"
        echo "|---|---|---|---|---|---|---|---|---|---|"
        ab_row "GET /v1/jobs/{id}" "$tmp/wrk_job"
        ab_row "GET /v1/jobs/{id}/metrics?after=0&limit=100" "$tmp/wrk_met"
        echo
        echo "No job running (every job ended), the same three, $WRK_RUNS runs:"
        echo
        echo "| route | req/s | nginx req/s | req/s ratio | p99 ms | its range | nginx p99 ms | its range | p99 ratio | load |"
        echo "|---|---|---|---|---|---|---|---|---|---|"
        wrk_row "GET /v1/jobs/{id}" "$tmp/wrk_idle"
        echo
        echo "| route | req/s | before req/s | req/s ratio | p99 ms | its range | before p99 ms | its range | p99 ratio | load |"
        echo "|---|---|---|---|---|---|---|---|---|---|"
        ab_row "GET /v1/jobs/{id}" "$tmp/wrk_idle"
    fi
    [ "$INGEST_PAIRS" -gt 0 ] || return 0
    echo
    echo "Metric ingestion: a1a, ec-sgd in process, 4 workers, topk k = 5,"
    echo "$INGEST_ROUNDS rounds with eval_every = 1 ($((INGEST_ROUNDS + 1)) rows), the server's"
    echo "CPU per row over the job (reading the report pipe, checking each record,"
    echo "storing it; /proc, in ${ticks}ths of a second) against"
    echo "bench_ingest inserting the same rows, as stored, in batches of the"
    echo "server's size, $INGEST_PAIRS pairs alternating which goes first:"
    echo
    echo "| pair | served us/row | job s | batch | load | plain us/row | load | ratio |"
    echo "|---|---|---|---|---|---|---|---|"
    awk '{printf "| %d | %s | %s | %s | %s | %s | %s | %.2f |\n", NR, $1, $3, $4, $5, $6, $7, $1 / $6}' "$tmp/ingest"
    echo "| median | $(printf %.2f "$(cut -d' ' -f1 "$tmp/ingest" | med)") | $(printf %.2f "$(cut -d' ' -f3 "$tmp/ingest" | med)") | $(printf %.0f "$(cut -d' ' -f4 "$tmp/ingest" | med)") | $(cut -d' ' -f5,7 "$tmp/ingest" | tr ' ' '\n' | spread) | $(printf %.2f "$(cut -d' ' -f6 "$tmp/ingest" | med)") | | **$(printf %.2f "$(awk '{print $1 / $6}' "$tmp/ingest" | med)")** ($(awk '{printf "%.2f\n", $1 / $6}' "$tmp/ingest" | spread)) |"
    [ "$PAIRS" -gt 0 ] || return 0
    echo
    echo "One job, a1a, ec-sgd, 4 workers, topk k = 5, $ROUNDS rounds with eval_every = 1"
    echo "($((ROUNDS + 1)) metric rows), alone under \`ecopt run\` and through the service"
    echo "(submit to the end of its event stream), in $PAIRS interleaved pairs:"
    echo
    echo "| pair | alone s | its rounds s | CPU s | steal s | served s | its rounds s | job CPU s | server CPU s | steal s | wall ratio | rounds ratio |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
    paste -d' ' "$tmp/pairs" "$tmp/ratios" | awk '{printf "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f |\n", NR, $1, $2, $3, $4, $5, $6, $7, $8, $10, $11, $12}'
    echo "| median | $t_run | $l_run | $c_run | $s_run | $t_srv | $l_srv | $c_job | $c_srv | $s_srv | $r_wall | $r_loop |"
    echo
    echo "Median of the pairs' ratios: wall $r_wall, rounds $r_loop. Fastest of each"
    echo "side: alone $(least 1) s, served $(least 5) s (ratio $(ratio "$(least 5)" "$(least 1)"))."
    echo "Steal is the time the hypervisor gave this machine's CPUs to others"
    echo "during the run (all CPUs). Wall time at zero steal, fitted with one"
    echo "slope for both sides ($f_slope s of wall per s of steal): alone $f_alone s,"
    echo "served $f_srv s, ratio **$f_ratio** (standard error $f_se)."
    echo "Every pair stored every row (lowest last round: $rows). The server's own"
    echo "CPU is $(echo "scale=1; $c_srv * 1000000 / ($ROUNDS + 1)" | bc) us per row (median), $(echo "scale=1; 100 * $c_srv / $c_job" | bc)% of the job's CPU."
}
section > "$tmp/section"
cat "$tmp/section"
# The new section first, then the file's earlier sections as they were.
{
    echo "# The service under load, beside its baselines"
    echo
    echo "Newest run first; each section was written by bench/bench_service.sh."
    echo
    cat "$tmp/section"
    if [ -f "$OUT" ]; then echo; sed -n '/^## /,$p' "$OUT"; fi
} > "$tmp/out"
mv "$tmp/out" "$OUT"
