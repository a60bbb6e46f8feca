#!/usr/bin/env bash
# The container image's build steps (deploy/Dockerfile runs this in its
# build stage): install the build packages, build drld and libdrl in
# release mode, install them under OUT (OUT/usr/local/...).
#
# usage: image_build.sh SRC OUT
# With DRLD_NO_APT=1 the packages are not installed (already there).
set -euo pipefail

src=${1:?usage: image_build.sh SRC OUT}
out=${2:?usage: image_build.sh SRC OUT}

if [ "${DRLD_NO_APT:-}" != 1 ]; then
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
		meson ninja-build pkg-config gcc g++ libssl-dev libsodium-dev \
		libxxhash-dev libhiredis-dev libmemcached-dev libmicrohttpd-dev \
		libjansson-dev libgrpc++-dev protobuf-compiler \
		protobuf-compiler-grpc libprotobuf-dev libyaml-dev
fi
build=$(mktemp -d)
meson setup "$build" "$src" --buildtype=release --prefix=/usr/local \
	-Dgrpc=enabled -Ddrld=enabled -Dredis=enabled -Dmemcached=enabled \
	-Dtests=false -Dbenchmarks=false
ninja -C "$build"
meson install -C "$build" --destdir "$out" --quiet
rm -rf "$build"
