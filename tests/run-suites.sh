#!/bin/sh
# Runs each test program given, keeps going past failures, and ends with
# one line of totals: suites passed, skipped (exit 77: the suite could not
# run here) and failed, and the parts of passed suites that were skipped,
# with every SKIP line repeated (docs/testing.md, "Skips"). Exits non-zero
# if any suite failed; a skip fails only where an ECOPT_REQUIRE_* variable
# makes the suite itself fail.
passed=0
skipped=0
failed=0
parts=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/run-suites.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
: > "$tmp/skips"
for t in "$@"; do
    echo "== $t"
    { "$t"; echo $? > "$tmp/rc"; } 2>&1 | tee "$tmp/out"
    rc=$(cat "$tmp/rc")
    grep '^SKIP ' "$tmp/out" >> "$tmp/skips"
    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1))
        parts=$((parts + $(grep -c '^SKIP ' "$tmp/out")))
    elif [ "$rc" -eq 77 ]; then
        skipped=$((skipped + 1))
    else
        failed=$((failed + 1))
        echo "FAILED: $t" >&2
    fi
done
if [ -s "$tmp/skips" ]; then
    echo "skips:"
    sed 's/^/  /' "$tmp/skips"
fi
echo "suites: $passed passed, $skipped skipped, $failed failed" \
     "($parts parts of passed suites skipped)"
[ "$failed" -eq 0 ]
