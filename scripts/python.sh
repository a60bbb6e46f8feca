# Sourced by the test and benchmark scripts: $PYTHON3, the python3 that
# runs their helper snippets (standard library only). Debian's
# /usr/bin/python3 when there is one (meson, from Debian, needs it): the
# python3 first on PATH may be a pyenv shim, a shell script that costs
# about half a second of CPU per start (20 starts: 23 s against 1.9 s for
# /usr/bin/python3, this 2-core machine with one core busy, 2026-11-24),
# and the test scripts start hundreds (test_drld.sh parses each reply).
# shellcheck shell=bash
if [ -z "${PYTHON3:-}" ]; then
	if [ -x /usr/bin/python3 ]; then
		PYTHON3=/usr/bin/python3
	else
		PYTHON3=python3
	fi
fi
