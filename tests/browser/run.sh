#!/bin/sh
# Runs the dashboard's browser test (dashboard.test.mjs): installs
# playwright-core from package-lock.json when node_modules is missing, and
# skips with a message when node or chromium is not installed, unless
# ECOPT_REQUIRE_BROWSER=1 (CI), when that is a failure.
# tests/browser/install-deps.sh installs both.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
chromium=${ECOPT_CHROMIUM:-/usr/bin/chromium}
missing=""
command -v node >/dev/null 2>&1 || missing="node"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
[ -x "$chromium" ] || missing="$missing chromium ($chromium)"
if [ -n "$missing" ]; then
    if [ "${ECOPT_REQUIRE_BROWSER:-0}" = 1 ]; then
        echo "browser-check: missing$missing; run sh tests/browser/install-deps.sh" >&2
        exit 1
    fi
    echo "browser-check: SKIPPED, missing$missing (sh tests/browser/install-deps.sh" \
         "installs them; ECOPT_REQUIRE_BROWSER=1 makes this a failure)"
    exit 0
fi
if [ ! -d "$here/node_modules/playwright-core" ]; then
    (cd "$here" && npm ci --no-audit --no-fund)
fi
exec node "$here/dashboard.test.mjs"
