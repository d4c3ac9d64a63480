# Sourced by the benches that measure a job's peak memory
# (bench_scale.sh, bench_shared_model.sh); needs $tmp, a scratch directory.
#   peak COMMAND...   prints the peak bytes of COMMAND's processes, shared
#                     pages counted once (cgroup v1 memory.max_usage_in_bytes),
#                     or "n/a" where the memory controller is not writable;
#                     COMMAND's output goes to $tmp/peak.out.
# Exit status 5 of COMMAND is not a failure: the budget ran out, as target 0
# has it (docs/cli.md).
peak_cg=/sys/fs/cgroup/memory/ecopt-bench-$$
peak() {
    if [ ! -w /sys/fs/cgroup/memory ] || ! mkdir "$peak_cg" 2>/dev/null; then
        "$@" >"$tmp/peak.out" 2>&1 || [ $? -eq 5 ]; echo n/a; return
    fi
    sh -c 'echo $$ > "$0/cgroup.procs"; shift; exec "$@"' "$peak_cg" x "$@" \
        >"$tmp/peak.out" 2>&1 || [ $? -eq 5 ]
    cat "$peak_cg/memory.max_usage_in_bytes"
    rmdir "$peak_cg"
}
