#!/bin/sh
# What the browser test needs on Debian 12: chromium, and node with npm
# when node is missing; then playwright-core from package-lock.json. Run
# as root (CI is); otherwise prints the command to run.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
pkgs=""
[ -x /usr/bin/chromium ] || pkgs="chromium"
command -v node >/dev/null 2>&1 || pkgs="$pkgs nodejs"
command -v npm >/dev/null 2>&1 || pkgs="$pkgs npm"
if [ -n "$pkgs" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "as root: apt-get install -y --no-install-recommends$pkgs" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs
fi
if [ ! -d "$here/node_modules/playwright-core" ]; then
    (cd "$here" && npm ci --no-audit --no-fund)
fi
