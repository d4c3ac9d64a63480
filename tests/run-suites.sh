#!/bin/sh
# Runs each test program given, keeps going past failures, and ends with
# one line of totals; exits non-zero if any suite failed.
passed=0
failed=0
for t in "$@"; do
    echo "== $t"
    if "$t"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAILED: $t" >&2
    fi
done
echo "suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
