#!/bin/sh
# Installs what ecopt needs to run (not to build): the Dockerfile's runtime
# stage uses this list, so it stays next to the build list.
set -eu
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
    libjansson4 libmicrohttpd12 libsqlite3-0 libcurl4 libnettle8 zlib1g curl ca-certificates \
    >/dev/null
rm -rf /var/lib/apt/lists/*
