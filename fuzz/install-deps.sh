#!/bin/sh
# Installs what the fuzz targets build with (clang and its libFuzzer
# runtime, Debian 12) and valgrind for `make valgrind-check`, if missing.
# As root it installs them; otherwise it prints the apt-get line.
set -eu

PKGS="clang libclang-rt-14-dev valgrind"

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
        missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
    echo "fuzzing and valgrind-check need these Debian packages; as root run:" >&2
    echo "  apt-get update && apt-get install -y$missing" >&2
    exit 1
fi
echo "installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
