#!/bin/sh
# npm's install step for the libdrl package (docs/node.md, "Install").
# Nothing is downloaded (no node-gyp: it would fetch Node's headers). In
# order:
# 1. LIBDRL_NODE_ADDON is set, or drl.node is here (`meson install` puts
#    it beside index.js): nothing to build.
# 2. This folder is in libdrl's repository (`npm install
#    /path/to/libdrl/node`): meson builds the addon in ../build-npm (no
#    tests, no other bindings or services) and build/drl.node links to it.
# 3. Otherwise (a tarball from `npm pack`): cc builds src/*.c against an
#    installed libdrl (pkg-config libdrl; `meson install` of the
#    repository) and node's Node-API headers (or the copy in third_party/napi/).
set -eu
cd "$(dirname "$0")"
if [ -n "${LIBDRL_NODE_ADDON:-}" ] || [ -f drl.node ]; then
	exit 0
fi
mkdir -p build
if [ -f ../meson.build ] && [ -f ../include/drl/drl.h ]; then
	b=../build-npm
	[ -f "$b/build.ninja" ] || meson setup "$b" .. -Dtests=false \
		-Dbenchmarks=false -Ddrld=disabled -Dgrpc=disabled \
		-Dnginx=disabled -Dpython=disabled -Dnode=enabled
	ninja -C "$b" node/drl.node
	# A link, not a copy: node loads the real path, whose $ORIGIN rpath
	# finds the build's libdrl.so.
	ln -sf ../../build-npm/node/drl.node build/drl.node
	exit 0
fi
pkg-config --exists libdrl || {
	echo "libdrl: no installed libdrl (pkg-config libdrl) to build against:" \
		"install libdrl (meson install), or set LIBDRL_NODE_ADDON" >&2
	exit 1
}
inc=$(node -p 'require("path").resolve(process.execPath, "../../include/node")')
[ -f "$inc/node_api.h" ] || inc=third_party/napi
# shellcheck disable=SC2046
${CC:-cc} -std=c11 -O2 -fPIC -shared -fvisibility=hidden -D_GNU_SOURCE \
	-DNAPI_VERSION=8 -I"$inc" $(pkg-config --cflags libdrl) \
	$(pkg-config --cflags libuv 2>/dev/null || true) \
	-o build/drl.node src/*.c $(pkg-config --libs libdrl)
