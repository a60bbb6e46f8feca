#!/bin/sh
# The node_memcheck test: memcheck.test.js in one node process, under
# valgrind memcheck in the 'valgrind' test setup (DRL_VALGRIND=1, set by
# that setup: tests/meson.build), plainly otherwise. valgrind.sh, the
# setup's wrapper, runs a *.sh test as it is, so this script picks the
# options: tests/fixtures/valgrind.sh's, with node's V8 JIT off (--jitless: V8's
# generated code is what memcheck cannot follow quickly) and
# memcheck.supp for what is not this addon's (glibc's and node's own).
# Exit 99 when valgrind found an error, as valgrind.sh.
#   memcheck.sh NODE
node=${1:-node}
dir=$(dirname "$0")
if [ "${DRL_VALGRIND:-}" = 1 ]; then
	exec valgrind --quiet --error-exitcode=99 --leak-check=full \
		--errors-for-leak-kinds=definite,indirect \
		--show-leak-kinds=definite,indirect \
		--suppressions="$dir/memcheck.supp" \
		"$node" --jitless "$dir/memcheck.test.js"
fi
exec "$node" "$dir/memcheck.test.js"
