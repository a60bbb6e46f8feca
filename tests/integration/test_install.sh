#!/usr/bin/env bash
# `meson install` works and installs what a user needs: headers under
# include/drl/, a versioned shared library (soname libdrl.so.1) exporting
# only drl_* symbols, and a pkg-config file with which the README's C
# example compiles, links and runs.
# Usage: test_install.sh BUILD_ROOT SOURCE_ROOT
set -euo pipefail
# shellcheck source=../../scripts/python.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/python.sh"
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

meson install -C "$build" --no-rebuild --destdir "$tmp/root" --quiet >/dev/null
option() {
	meson introspect "$build" --buildoptions | "$PYTHON3" -c '
import json, sys
v = [o["value"] for o in json.load(sys.stdin) if o["name"] == sys.argv[1]][0]
print(",".join(v) if isinstance(v, list) else v)' "$1"
}
prefix=$(option prefix)
# A sanitized library needs a sanitized program (ASan must come first).
sanitize=$(option b_sanitize)
sanflags=()
[ "$sanitize" = none ] || sanflags=(-fsanitize="$sanitize")
root=$tmp/root$prefix

[ -f "$root/include/drl/drl.h" ] || fail "drl.h not installed"
[ -f "$root/include/drl/backend.h" ] || fail "backend.h not installed"
[ -f "$root/include/drl/sys/backend.h" ] || fail "sys/backend.h not installed"
for f in store_contract.c store_contract.h hot_key.c hot_key.h testutil.h; do
	[ -f "$root/share/libdrl/store_contract/$f" ] || fail "store_contract/$f not installed"
done
so=$(find "$root" -name 'libdrl.so.*.*.*' | head -n 1)
[ -n "$so" ] || fail "no versioned libdrl.so.X.Y.Z installed"
readelf -d "$so" | grep -q 'SONAME.*\[libdrl\.so\.1\]' || fail "soname is not libdrl.so.1"
pc=$(find "$root" -name libdrl.pc | head -n 1)
[ -n "$pc" ] || fail "no libdrl.pc installed"

# Only the public API is exported: every defined dynamic symbol is drl_*.
bad=$(nm -D --defined-only "$so" | awk '$2 ~ /[TDBR]/ {print $3}' | grep -v '^drl_' || true)
[ -z "$bad" ] || fail "symbols exported beyond drl_*: $bad"
nm -D --defined-only "$so" | grep -q ' T drl_allow$' || fail "drl_allow not exported"
nm -D --defined-only "$so" | grep -q ' T drl__' && fail "internal drl__ symbols exported"

# The README's example, built with pkg-config against the installed tree.
awk '/^```c$/ {on=1; next} /^```$/ {on=0} on' "$src/README.md" >"$tmp/example.c"
[ -s "$tmp/example.c" ] || fail "no C example in README.md"
pcdir=$(dirname "$pc")
flags=$(PKG_CONFIG_PATH=$pcdir pkg-config --define-variable=prefix="$root" --cflags --libs libdrl)
# shellcheck disable=SC2086 # flags is a word list
cc -std=c11 -Wall -Werror "${sanflags[@]}" -o "$tmp/example" "$tmp/example.c" $flags
out=$(LD_LIBRARY_PATH=$(dirname "$so") "$tmp/example")
[ "$out" = "allowed, 19 left" ] || fail "README example printed: $out"

# The installed conformance suite builds outside the tree, against the
# installed headers and library only, where libdrl.pc says it is, as
# docs/stores.md builds it (-std=c11 -pedantic, nothing defined), and
# passes on memory:// (the way a third-party store runs it).
suite=$(PKG_CONFIG_PATH=$pcdir pkg-config --define-variable=prefix="$root" \
	--variable=store_contract_dir libdrl)
[ "$suite" = "$root/share/libdrl/store_contract" ] ||
	fail "libdrl.pc: store_contract_dir is '$suite'"
cat >"$tmp/runner.c" <<'EOF'
#include "store_contract.h"

static int open_memory(void *arg, drl_backend **out, drl_error *err)
{
	(void)arg;
	return drl_backend_open_with(out, "memory://", NULL, 0, err);
}

int main(void)
{
	store_contract_target t = {.name = "installed memory",
				   .open = open_memory,
				   .threads_rounds = 1};
	return store_contract_run(&t) == 0 ? 0 : 1;
}
EOF
cmocka=$(pkg-config --cflags --libs cmocka) || fail "no cmocka.pc"
# shellcheck disable=SC2086 # flags and cmocka are word lists
cc -std=c11 -pedantic -Wall -Werror "${sanflags[@]}" -I"$suite" -o "$tmp/runner" "$tmp/runner.c" \
	"$suite/store_contract.c" "$suite/hot_key.c" $flags $cmocka -lpthread ||
	fail "the installed conformance suite does not build"
LD_LIBRARY_PATH=$(dirname "$so") CMOCKA_MESSAGE_OUTPUT=stdout "$tmp/runner" >"$tmp/runner.out" 2>&1 ||
	{ cat "$tmp/runner.out"; fail "the installed conformance suite fails on memory://"; }
checks=$(grep -c '^\[       OK \]' "$tmp/runner.out")
nginx_note=
if [ -f "$build/nginx/ngx_http_drl_module.so" ]; then
	moduledir=$(option nginx_moduledir)
	[ -n "$moduledir" ] || moduledir=$(option libdir)/nginx/modules
	case $moduledir in
	/*) mod=$tmp/root$moduledir/ngx_http_drl_module.so ;;
	*) mod=$root/$moduledir/ngx_http_drl_module.so ;;
	esac
	[ -f "$mod" ] || fail "the nginx module is not installed in $moduledir"
	nginx_note="; nginx module in $moduledir"
	# a sanitized module needs the sanitizer runtimes preloaded
	# (tests/integration/test_nginx.sh does that); the plain one is loaded
	# here
	if [ "$sanitize" = none ] && command -v nginx >/dev/null; then
		mkdir -p "$tmp/ngx"
		cat >"$tmp/ngx/nginx.conf" <<EOF
load_module $mod;
pid $tmp/ngx/nginx.pid;
error_log $tmp/ngx/error.log;
events { }
http { drl_zone \$binary_remote_addr zone=z spec=fixed_window:1/1s; }
EOF
		LD_LIBRARY_PATH=$(dirname "$so") nginx -t -p "$tmp/ngx" \
			-c "$tmp/ngx/nginx.conf" >"$tmp/ngx/out" 2>&1 ||
			{ cat "$tmp/ngx/out"; fail "nginx does not load the installed module"; }
		nginx_note="$nginx_note, loaded by $(nginx -v 2>&1 | sed 's/.*: //')"
	fi
fi
echo "ok: installed headers, $(basename "$so"), libdrl.pc; README example: $out; installed conformance suite: $checks checks passed on memory://$nginx_note"
