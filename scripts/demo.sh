#!/usr/bin/env bash
# Install what is missing, build, and show the drl CLI deciding requests on
# the in-process memory store. Idempotent; run as root on Debian 12.
#
# The memory store lives as long as one process, so each example asks for
# several decisions in one run (--repeat). Exit status 1 means "the last
# request was denied": expected here, not a failure of the script.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/deps.sh
if [ ! -f build/meson-private/coredata.dat ]; then
	meson setup build
fi
ninja -C build

drl=build/tools/drl

# Print and run one drl command; exit status 0 (allowed) and 1 (denied)
# are decisions, anything else stops the demo.
show() {
	local rc=0
	echo
	echo "\$ drl $*"
	"$drl" "$@" || rc=$?
	case $rc in
	0) echo "(exit 0: the last request was allowed)" ;;
	1) echo "(exit 1: the last request was denied)" ;;
	*) echo "drl failed with exit status $rc" >&2; exit "$rc" ;;
	esac
}

echo "== 5 requests per second, bursts up to 5: the 6th request is denied"
show check --limit token_bucket:5/1s --repeat 8 user42

echo
echo "== the same at a fixed time (ms since the epoch), as JSON"
show check --limit token_bucket:5/1s,burst=2 --now-ms 1700000000000 \
	--repeat 3 --json user42

echo
echo "== a policy: 3 per second and 100 per day, checked together"
show check --limit "fixed_window:3/1s;fixed_window:100/1d" \
	--now-ms 1700000000000 --repeat 4 user42

echo
echo "== a policy from repeated --limit options; requests of cost 2"
show check --limit sliding_window:3/1s --limit gcra:100/1d \
	--cost 2 --now-ms 1700000000000 --repeat 2 user42

echo
echo "== a cost above the capacity can never be allowed"
show check --limit sliding_log:5/1m --cost 6 --json user42

echo
echo "== a typo in a spec is an error (exit 2) naming the bad part"
echo "\$ drl check --limit token_bukket:5/1s user42"
"$drl" check --limit token_bukket:5/1s user42 2>&1 || echo "(exit $?)"
