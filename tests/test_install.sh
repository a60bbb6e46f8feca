#!/usr/bin/env bash
# `meson install` works and installs what a user needs: headers under
# include/drl/, a versioned shared library (soname libdrl.so.1) exporting
# only drl_* symbols, and a pkg-config file with which the README's C
# example compiles, links and runs.
# Usage: test_install.sh BUILD_ROOT SOURCE_ROOT
set -euo pipefail
# shellcheck source=../scripts/python.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/python.sh"
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
echo "ok: installed headers, $(basename "$so"), libdrl.pc; README example: $out"
