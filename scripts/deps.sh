#!/usr/bin/env bash
# Install what libdrl needs to build and test, on Debian 12 (run as root).
#
# Idempotent: asks dpkg which packages are missing and only then runs
# apt-get update + install for those; when nothing is missing it touches
# nothing (and needs no root). It starts no service: the tests start their
# own redis-server / memcached on free ports and never use a system one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packages=(
	meson ninja-build pkg-config gcc g++   # build
	libcmocka-dev                          # unit tests
	libssl-dev                             # libcrypto (key hashing), libssl (rediss://)
	libsodium-dev                          # keyed hash (near cache)
	libxxhash-dev                          # memory store hash (header-only)
	libhiredis-dev redis-server redis-tools           # redis store
	redis-sentinel                         # tests: redis-sentinel:// failover
	libmemcached-dev libmemcached-tools memcached     # memcached store
	valgrind clang                         # checks
	libclang-rt-14-dev                     # libFuzzer (scripts/fuzz.sh)
	python3                                # tests/integration/test_cli.sh reads JSON
	gnuplot-nox                            # drl simulate --plot
	libmicrohttpd-dev libjansson-dev       # drld (HTTP server, JSON)
	curl wrk                               # drld tests, bench_drld.sh
	openssl                                # test certificates: test_envoy.sh, test_redis_tls
	nghttp2-client                         # h2load: scripts/bench_envoy.sh
	libgrpc++-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev \
	libyaml-dev                            # drld's Envoy gRPC service
	python3-grpcio python3-grpc-tools      # its tests (/usr/bin/python3)
	python3-fusepy                         # test_drld.sh: a stalled mount
	python3-yaml                           # test_deploy.sh: deploy/*.yaml
	libuv1-dev libevent-dev                # the async API's loop adapters' tests
	libsqlite3-dev                         # examples/store_sqlite (its tests)
	nginx nginx-dev                        # nginx/: the module, its tests
)
# Each binding lists its own packages, one a line ('#' comments), in
# python/deps.txt and node/deps.txt.
for list in python/deps.txt node/deps.txt; do
	[ -f "$list" ] || continue
	while read -r p _; do
		case "$p" in '' | '#'*) continue ;; esac
		packages+=("$p")
	done <"$list"
done

# Whether dpkg has package $1 fully installed.
installed() {
	[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = \
		"install ok installed" ]
}

missing=()
for p in "${packages[@]}"; do
	installed "$p" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all ${#packages[@]} packages present"
	exit 0
fi

echo "deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: must run as root to install: ${missing[*]}" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update </dev/null
apt-get install -y --no-install-recommends "${missing[@]}" </dev/null

for p in "${missing[@]}"; do
	if ! installed "$p"; then
		echo "deps: $p is still not installed" >&2
		exit 1
	fi
done
echo "deps: done"
