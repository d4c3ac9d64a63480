# Sourced by the benches that set two binaries side by side
# (bench_oneoff.sh, bench_submit.sh).
#   med, spread          the median and "min-max" of a column on stdin
#   ab_pairs FN FILE A B PAIRS pairs of "$(FN A) $(FN B)" into FILE, one
#                        line a pair, alternating which goes first; the 1,
#                        5 and 15 minute loads at the start and the end in
#                        $load_start and $load_end
med() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
spread() { sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%s-%s", lo, hi}'; }
ab_pairs() {
    load_start=$(cut -d' ' -f1-3 /proc/loadavg)
    : > "$2"
    ab_p=0
    while [ $ab_p -lt "$PAIRS" ]; do
        if [ $((ab_p % 2)) -eq 0 ]; then ab_b=$("$1" "$3"); ab_a=$("$1" "$4")
        else ab_a=$("$1" "$4"); ab_b=$("$1" "$3"); fi
        echo "$ab_b $ab_a" >> "$2"
        echo "pair $((ab_p + 1)): before $ab_b, after $ab_a" >&2
        ab_p=$((ab_p + 1))
    done
    load_end=$(cut -d' ' -f1-3 /proc/loadavg)
}
