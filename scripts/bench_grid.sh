#!/usr/bin/env bash
# Reproduce the tables of docs/performance.md (sections Redis, Memcached):
# start a private redis-server (no persistence) and memcached on free
# loopback ports, print the machine, run the `drl bench` grid with the
# servers' ceilings in the same run, stop both servers (by PID).
#
# usage: scripts/bench_grid.sh PATH/TO/drl [more drl bench options...]
#   e.g. scripts/bench_grid.sh build/tools/drl --json > grid.json
# Options given after the path are appended (a later --duration or
# --rounds wins over the defaults below; --json switches the output).
set -euo pipefail

drl=${1:?usage: scripts/bench_grid.sh PATH/TO/drl [drl bench options...]}
shift
# shellcheck source=scripts/ports.sh
. "$(dirname "${BASH_SOURCE[0]}")/ports.sh"

work_dir # $work, pids: stopped and removed at exit (scripts/ports.sh)
bench_servers bench_grid # rport, mport

{
	echo "# nproc: $(nproc)"
	echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- |
		sed 's/^ //')"
	echo "# kernel: $(uname -r)"
	echo "# $(redis-server --version)"
	echo "# $(memcached -V)"
	echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >&2

"$drl" bench \
	--store "memory://,redis://127.0.0.1:$rport?tx=lua&pool=64,redis://127.0.0.1:$rport?tx=watch&pool=64,memcached://127.0.0.1:$mport?pool=64" \
	--limit "fixed_window:1000000/1m;sliding_window:1000000/1m" \
	--limit "token_bucket:1000000/1m;gcra:1000000/1m;sliding_log:1000/1s" \
	--keys 1,100000 --concurrency 1,16,64 --duration 1.2 --rounds 3 \
	--ceiling "$@"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
