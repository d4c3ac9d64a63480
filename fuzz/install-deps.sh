#!/bin/sh
# Installs what the fuzz targets build with (clang and its libFuzzer
# runtime, Debian 12) and valgrind for `make valgrind-check`, if missing:
# as root it installs them, otherwise it prints the apt-get line.
set -eu
exec sh "$(dirname "$0")/../docker/install-deps.sh" clang libclang-rt-14-dev valgrind
