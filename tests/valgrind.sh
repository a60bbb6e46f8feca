#!/usr/bin/env bash
# Run one test program under valgrind memcheck: the exe_wrapper of the
# 'valgrind' test setup (tests/meson.build), and what test_cli.sh runs drl
# through when DRL_VALGRIND is set. Exit 99 when valgrind found an invalid
# read or write, a use of uninitialised memory or a definite/indirect leak
# (99, not 1: drl exits 1 for "denied"; meson shows 99 as ERROR).
#
# A shell test (*.sh) runs as it is: checking bash would say nothing about
# libdrl; test_cli.sh wraps each drl it runs itself.
#
# usage: valgrind.sh PROGRAM [ARGS...]
case "$1" in
*.sh) exec "$@" ;;
esac
exec valgrind --quiet --error-exitcode=99 --leak-check=full \
	--errors-for-leak-kinds=definite,indirect \
	--show-leak-kinds=definite,indirect "$@"
