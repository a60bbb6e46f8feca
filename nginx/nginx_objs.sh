#!/usr/bin/env bash
# The three files nginx's configure generates that a dynamic module is
# compiled with (ngx_auto_config.h, ngx_auto_headers.h and the module's
# ngx_modules list), made for the nginx whose sources nginx-dev installs,
# with the flags that nginx was built with (its conf_flags: the module's
# signature must match the binary's, or load_module refuses it).
#
# usage: nginx_objs.sh NGINX_SRC MODULE_DIR OUT_DIR
# NGINX_SRC: /usr/share/nginx/src (Debian's nginx-dev); MODULE_DIR: this
# folder (its `config`); OUT_DIR: where the three files go. configure runs
# in OUT_DIR/configure.tmp (its log there: configure.log), never in the
# source trees.
set -euo pipefail

src=${1:?usage: nginx_objs.sh NGINX_SRC MODULE_DIR OUT_DIR}
mod=${2:?usage: nginx_objs.sh NGINX_SRC MODULE_DIR OUT_DIR}
out=${3:?usage: nginx_objs.sh NGINX_SRC MODULE_DIR OUT_DIR}
mod=$(cd "$mod" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$out/configure.tmp

rm -rf "$work"
mkdir -p "$work"
# configure reads auto/ and src/ relative to where it runs: links to the
# installed tree, so only objs/ is written (here)
ln -s "$src/auto" "$work/auto"
ln -s "$src/src" "$work/src"
ln -s "$src/configure" "$work/configure"

flags=(--with-compat)
if [ -f "$src/conf_flags" ]; then
	# Debian's nginx-dev: NGX_CONF_FLAGS=( ... ), the binary's own
	# shellcheck disable=SC1091
	. "$src/conf_flags"
	flags=("${NGX_CONF_FLAGS[@]}")
fi
if ! (cd "$work" && ./configure "${flags[@]}" --add-dynamic-module="$mod") \
	>"$out/configure.log" 2>&1; then
	echo "nginx_objs.sh: nginx's configure failed; its log:" >&2
	tail -n 30 "$out/configure.log" >&2
	exit 1
fi
cp "$work/objs/ngx_auto_config.h" "$work/objs/ngx_auto_headers.h" \
	"$work/objs/ngx_http_drl_module_modules.c" "$out/"
rm -rf "$work"
