#!/bin/sh
# The server's CPU per job submission (POST /v1/jobs, then the job's
# start) when the token already holds ROWS metric rows, two binaries
# side by side (BEFORE, a build from before a change, and ECOPT): the
# rows go into one ended job of the database (written directly, before
# either server opens it; each server opens its own copy, migrating it
# if it must); then N submissions of a one-round job, one at a time, and
# the server's utime + stime over them (/proc, 10 ms ticks). PAIRS pairs
# alternating which binary goes first; ratios (ECOPT over BEFORE) with
# min-max, and the load.
#   BEFORE=OTHER/build/ecopt ROWS=2000000 sh bench/bench_submit.sh
set -eu
cd "$(dirname "$0")/.."
ECOPT=${ECOPT:-$PWD/build/ecopt}
BEFORE=${BEFORE:?BEFORE: the binary to compare against}
DATA=${ECOPT_DATA_DIR:-$PWD/../shared/datasets}
ROWS=${ROWS:-2000000}
PAIRS=${PAIRS:-3}
N=${N:-20}
tmp=$(mktemp -d)
spid=
trap 'kill $spid 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
ticks=$(getconf CLK_TCK)
. bench/ab_pairs.sh
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
job='{"dataset": "heart_scale", "workers": 2, "algorithm": "gd", "max_rounds": 1}'

serve() {   # binary db
    "$1" serve --listen 127.0.0.1:0 --db "$2" --data-dir "$DATA" --auth off --quiet \
        --quota-metric-rows $((ROWS * 2)) > "$tmp/serve.out" 2>/dev/null &
    spid=$!
    while ! grep -q listening "$tmp/serve.out" 2>/dev/null; do sleep 0.05; done
    url=http://127.0.0.1:$(sed -n 's/.*127.0.0.1:\([0-9]*\).*/\1/p' "$tmp/serve.out")/v1/jobs
}
submit() { curl -s -X POST "$url" -H 'Content-Type: application/json' -d "$job" |
           sed -n 's/^{"id":"\([^"]*\)".*/\1/p'; }
wait_end() { while ! curl -s "$url/$1" | grep -q '"state":"succeeded"'; do sleep 0.05; done; }

# The database: one job run by BEFORE, then ROWS rows given to it.
serve "$BEFORE" "$tmp/base.db"
wait_end "$(submit)"
kill $spid; wait $spid 2>/dev/null || true; spid=
python3 - "$tmp/base.db" "$ROWS" <<'EOP'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("DELETE FROM metrics")
db.execute("WITH RECURSIVE r(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM r WHERE k < ?)"
           " INSERT INTO metrics (job_seq, round, doc) SELECT (SELECT min(seq) FROM jobs), k,"
           " '{\"round\":' || k || '}' FROM r", (int(sys.argv[2]) - 1,))
db.commit()
EOP

one() {   # binary -> us of server CPU per submission
    rm -f "$tmp/e.db" "$tmp/e.db-wal" "$tmp/e.db-shm"
    cp "$tmp/base.db" "$tmp/e.db"
    serve "$1" "$tmp/e.db"
    wait_end "$(submit)"            # warm: caches, the migration if any
    c0=$(cpu $spid)
    i=0; while [ $i -lt "$N" ]; do wait_end "$(submit)"; i=$((i + 1)); done
    c1=$(cpu $spid)
    kill $spid; wait $spid 2>/dev/null || true; spid=
    awk -v c=$((c1 - c0)) -v n="$N" -v t="$ticks" 'BEGIN {printf "%.0f\n", c / t * 1e6 / n}'
}

ab_pairs one "$tmp/pairs" "$BEFORE" "$ECOPT"
echo "| pair | before: us a submission | after: us a submission | ratio |"
echo "|---|---|---|---|"
awk '{printf "| %d | %s | %s | %.3f |\n", NR, $1, $2, $2 / $1}' "$tmp/pairs"
echo "| median | $(cut -d' ' -f1 "$tmp/pairs" | med) | $(cut -d' ' -f2 "$tmp/pairs" | med) | **$(awk '{printf "%.3f\n", $2 / $1}' "$tmp/pairs" | med)** ($(awk '{printf "%.3f\n", $2 / $1}' "$tmp/pairs" | spread)) |"
echo
echo "The token holds $ROWS metric rows; $PAIRS pairs of $N submissions. Load (1, 5, 15 minutes): $load_start at the start, $load_end at the end."
