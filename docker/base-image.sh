#!/bin/sh
# Makes the local image debian:bookworm with debootstrap from a Debian
# package mirror, for a machine that reaches the mirror but no image
# registry; does nothing when an image of that name is already present.
#   sh docker/base-image.sh [TAG]     (as root; needs debootstrap)
# ECOPT_DEBIAN_MIRROR names the mirror (default http://deb.debian.org/debian).
set -eu
tag=${1:-debian:bookworm}
mirror=${ECOPT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
docker=${DOCKER:-docker}

if $docker image inspect "$tag" >/dev/null 2>&1; then
    echo "base image $tag: present"
    exit 0
fi
root=$(mktemp -d /tmp/ecopt-base-XXXXXX)
trap 'rm -rf "$root"' EXIT INT TERM
echo "base image $tag: debootstrap bookworm from $mirror"
start=$(date +%s)
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 || {
    tail -20 "$root.log" >&2
    rm -f "$root.log"
    echo "debootstrap failed" >&2
    exit 1
}
rm -f "$root.log"
# What only the bootstrap needed: the downloaded packages and lists.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
    "$root"/var/log/bootstrap.log
tar -C "$root" -c . | $docker import \
    -c 'CMD ["/bin/bash"]' -c 'ENV LANG=C.UTF-8' \
    -m "debootstrap --variant=minbase bookworm $mirror" - "$tag" >/dev/null
echo "base image $tag: made in $(($(date +%s) - start)) s," \
    "$($docker image inspect -f '{{.Size}}' "$tag") bytes"
