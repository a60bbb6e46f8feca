#!/bin/sh
# Stands in for a test whose library was not found when the build was
# configured: a skip (exit 77), or under CI=true a failure
# (scripts/deps.sh installs it). Usage: missing_dep.sh TEST PACKAGE
if [ "${CI:-}" = true ]; then
	echo "FAIL: $1 not built: $2 was not found (run scripts/deps.sh)" >&2
	exit 1
fi
echo "SKIP: $1 not built: $2 was not found"
exit 77
