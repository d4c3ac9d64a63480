#!/bin/sh
# Installs the Debian packages ecopt builds, tests and runs with (curl: the
# tests run the README's curl walk-through). The Makefile, CI and the
# Dockerfile all use this one list.
# As root it installs what is missing; otherwise it prints the apt-get line.
# Given package names, it does the same for those instead (fuzz/ uses it).
# iproute2 (ip netns) serves test_mpi_hosts and bench_link.sh.
# python3-jsonschema, python3-yaml and prometheus (for promtool) serve
# test_contract, which checks the server against api/openapi.yaml;
# python3-numpy the independent reference of `make reference-check`.
set -eu

PKGS="build-essential pkg-config zlib1g-dev libjansson-dev check libsubunit-dev
      libopenmpi-dev openmpi-bin libmicrohttpd-dev libsqlite3-dev
      libcurl4-openssl-dev nettle-dev iproute2
      python3-jsonschema python3-yaml python3-numpy prometheus curl"
[ $# -gt 0 ] && PKGS="$*"

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
        missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
    echo "ecopt needs these Debian packages; as root run:" >&2
    echo "  apt-get update && apt-get install -y$missing" >&2
    exit 1
fi
echo "installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
