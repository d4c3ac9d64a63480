#!/bin/sh
# Runs one libFuzzer target for a bounded time and prints one line of its
# final figures. Usage: fuzz/run.sh BUILD_DIR TARGET SECONDS [REPORT]
#   BUILD_DIR/fuzz_TARGET is the binary; fuzz/corpus/TARGET the seeds (read
#   only: new inputs go to BUILD_DIR/corpus/TARGET); a crash is saved in
#   BUILD_DIR/crashes/TARGET/ and fails the run. With REPORT, a markdown
#   table row is appended to that file.
set -eu

dir=$1 target=$2 seconds=$3 report=${4:-}
bin=$dir/fuzz_$target
work=$dir/corpus/$target
crashes=$dir/crashes/$target
log=$dir/logs/$target.log
mkdir -p "$work" "$crashes" "$dir/logs"

# A dictionary of the format's words, where there is one.
dict=
[ -f "fuzz/$target.dict" ] && dict="-dict=fuzz/$target.dict"

start=$(date +%s)
status=0
# -timeout: an input slower than 10 s is a hang; -rss_limit_mb: a leak or
# an unbounded allocation is a failure too. Other libFuzzer flags can be
# given in FUZZ_FLAGS.
# shellcheck disable=SC2086
"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$crashes/" $dict ${FUZZ_FLAGS:-} \
    "$work" "fuzz/corpus/$target" >"$log" 2>&1 || status=$?
elapsed=$(( $(date +%s) - start ))

# The last status line ("#N DONE cov: C ft: F corp: U/S ...") and the
# final stats block.
last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -n 1)
cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
corp=$(echo "$last" | sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p')
ncrash=$(find "$crashes" -type f | wc -l)

line="| $target | ${elapsed} s | ${execs:-?} | ${rate:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | ${rss:-?} MB | $ncrash |"
echo "$line"
[ -n "$report" ] && echo "$line" >>"$report"
if [ "$status" -ne 0 ] || [ "$ncrash" -ne 0 ]; then
    echo "fuzz_$target failed (exit $status); see $log and $crashes/" >&2
    grep -E 'ERROR|SUMMARY|runtime error|abort|==[0-9]+==' "$log" | head -n 20 >&2 || true
    exit 1
fi
