#!/bin/sh
# bench_floor_ab.sh: two builds' bench_floor (A, then B, alternating
# PAIRS times), each run REPS rounds-against-floor measurements after its
# own d = 1e6 set-up; prints, per pair, each build's round and floor in
# CPU time (this thread's, median of its REPS) and A's round / B's, then
# the medians with their min-max over the pairs, and the load (uptime) at
# the start and the end. A and B: bench_floor binaries, e.g. a clone of
# main before a change and this tree after it.
#
#   sh bench/bench_floor_ab.sh OLD/build/bench/bench_floor \
#       build/bench/bench_floor      (PAIRS=4 REPS=2 by default)
set -eu
A=$1
B=$2
PAIRS=${PAIRS:-4}
REPS=${REPS:-2}
tmp=$(mktemp -d /tmp/bench-floor-ab.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# "round R floor F wall_round W wall_floor V" from one run's table.
one() {
    REPS=$REPS PAIRS=1 "$1" "$tmp/out.md" >/dev/null 2>&1
    awk '/^In CPU time:/ { f = $5; r = $9 }
         /^Medians:/ { for (i = 1; i <= NF; i++) {
                           if ($i == "floor" && wf == "") wf = $(i + 1);
                           if ($i == "round" && wr == "") wr = $(i + 1) } }
         END { printf "%s %s %s %s\n", r, f, wr, wf }' "$tmp/out.md"
}

echo "start: $(uptime)"
echo "| pair | A: CPU round, ms | A: CPU floor, ms | B: CPU round, ms | B: CPU floor, ms | A / B (CPU round) | B: CPU round / floor | A: wall round / floor | B: wall round / floor |"
echo "|---|---|---|---|---|---|---|---|---|"
: >"$tmp/pairs"
for p in $(seq 1 "$PAIRS"); do
    set -- $(one "$A")
    ar=$1 af=$2 awr=$3 awf=$4
    set -- $(one "$B")
    br=$1 bf=$2 bwr=$3 bwf=$4
    awk -v p="$p" -v ar="$ar" -v af="$af" -v br="$br" -v bf="$bf" \
        -v awr="$awr" -v awf="$awf" -v bwr="$bwr" -v bwf="$bwf" 'BEGIN {
        printf "| %d | %.1f | %.1f | %.1f | %.1f | %.2fx | %.2fx | %.2fx | %.2fx |\n",
               p, ar, af, br, bf, ar / br, br / bf, awr / awf, bwr / bwf }'
    echo "$ar $af $br $bf" >>"$tmp/pairs"
done
echo "end: $(uptime)"
# Medians and min-max over the pairs: A / B, B's and A's round / floor.
for col in ab b a; do
    awk -v col="$col" '{
        v = col == "ab" ? $1 / $3 : col == "b" ? $3 / $4 : $1 / $2
        print v }' "$tmp/pairs" | sort -g | awk -v col="$col" '
        { v[NR] = $1 }
        END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
              if (col == "ab") name = "A / B, CPU round"
              else if (col == "b") name = "B: CPU round / floor"
              else name = "A: CPU round / floor"
              printf "%s: %.2fx (%.2f-%.2f)\n", name, m, v[1], v[NR] }'
done
