#!/usr/bin/env bash
# drld under wrk: requests/s and latency of POST /v1/check on memory:// and
# on Redis tx=lua, beside the library's own rate (drl bench, same spec,
# keys and store) in the same run. A benchmark, not a test: it asserts no
# speed; docs/performance.md ("drld") has a table it made.
#
#   scripts/bench_drld.sh [BUILDDIR] [SECONDS] [ROUNDS] [THREADS...]
#
# BUILDDIR (default build) holds drld/drld and tools/drl. A cell is a store
# and a number of drld HTTP threads (THREADS, default 2 8); each round runs
# every cell for SECONDS (default 5), cells interleaved; the report is the
# median over ROUNDS (default 3) of requests/s and of each percentile.
# Starts its own redis-server (persistence off) on a free loopback port,
# and drld on free loopback ports; stops them by PID when done. All traffic
# is on 127.0.0.1.
#
# Workload: wrk, 2 threads and 32 connections (keep-alive), each request
# {"key": "userN", "limit": "token_bucket:100/1s"} with N cycling over
# 10,000 keys (an ad-hoc limit; every key stays under its limit, so every
# decision is an allowed write). A drld thread makes one decision at a
# time (a Redis round trip blocks it), so the library beside it runs as
# many callers (drl bench --concurrency) as drld has threads. This machine
# has 2 cores, shared by wrk, drld and redis-server.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
# shellcheck source=scripts/ports.sh
. scripts/ports.sh
# shellcheck source=scripts/wrk.sh
. scripts/wrk.sh

bench_args 5 3 "$@"
shift $(($# < 3 ? $# : 3))
threads=("$@")
[ ${#threads[@]} -gt 0 ] || threads=(2 8)
drld=${DRLD:-$build/drld/drld} # DRLD: another drld to measure (A/B)
drl=$build/tools/drl
spec='token_bucket:100/1s'
keys=10000
conns=32

need_built bench_drld "ninja -C $build first" "$drld" "$drl"
need_tools bench_drld wrk

work_dir # $work, pids (scripts/ports.sh)

cat >"$work/check.lua" <<EOF
-- One /v1/check body per request, the key cycling over $keys keys.
local n = 0
request = function()
  n = n + 1
  local body = string.format('{"key":"user%d","limit":"$spec"}',
                             n % $keys)
  return wrk.format("POST", "/v1/check",
                    {["Content-Type"] = "application/json"}, body)
end
EOF

bench_redis bench_drld # redis_port (scripts/ports.sh)
# Redis twice: with the shared, pipelined connection (pipelines=1, the
# default) and with a connection per call (pipelines=0, as before 0.3).
stores=("memory://" "redis://127.0.0.1:$redis_port?tx=lua&pool=64&pipelines=0"
	"redis://127.0.0.1:$redis_port?tx=lua&pool=64&pipelines=1")
names=("memory" "redis_pipelines0" "redis")

# Start drld on store $1 with $2 threads (its PID kept for cleanup), its
# port appended to ports: not in a $(...) subshell, which would lose the
# PID.
ports=()
start_drld() {
	local log=$work/drld-${#ports[@]}.log port
	"$drld" --listen 127.0.0.1:0 --store "$1" --threads "$2" \
		--max-connections 256 >"$log" 2>&1 &
	pids+=($!)
	for _ in $(seq 50); do
		port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log")
		if [ -n "$port" ]; then
			ports+=("$port")
			return 0
		fi
		sleep 0.1
	done
	echo "bench_drld: drld did not start: $(cat "$log")" >&2
	return 1
}

# The cells: "STORE_INDEX THREADS", one drld each.
cells=()
for i in "${!stores[@]}"; do
	for t in "${threads[@]}"; do
		cells+=("$i $t")
		start_drld "${stores[$i]}" "$t" || exit 1
	done
done

# Results: one line per cell and round, "WHAT-STORE-THREADS RPS P50 P99".
results=$work/results
: >"$results"
for r in $(seq "$rounds"); do
	for c in "${!cells[@]}"; do
		read -r i t <<<"${cells[$c]}"
		name=${names[$i]}
		out=$(wrk -t2 -c"$conns" -d"${seconds}s" --latency \
			-s "$work/check.lua" "http://127.0.0.1:${ports[$c]}" 2>&1)
		wrk_numbers "bench_drld: drld on $name" "$out"
		echo "drld-$name-$t $rps $p50 $p99" >>"$results"
		echo "round $r drld $name --threads $t: $rps req/s p50 ${p50}us p99 ${p99}us" >&2
		lib=$("$drl" bench --store "${stores[$i]}" --limit "$spec" \
			--keys "$keys" --concurrency "$t" --duration "$seconds" \
			--exact-limit 0 --json 2>/dev/null)
		read -r lrps lp50 lp99 <<<"$("$PYTHON3" -c '
import json, sys
c = json.load(sys.stdin)[0]
assert c["errors"] == 0, c["first_error"]
print(c["decisions_per_s"], c["latency_us"]["p50"], c["latency_us"]["p99"])' \
			<<<"$lib")" || {
			echo "bench_drld: drl bench on $name failed: $lib" >&2
			exit 1
		}
		echo "library-$name-$t $lrps $lp50 $lp99" >>"$results"
		echo "round $r library $name C=$t: $lrps dec/s p50 ${lp50}us p99 ${lp99}us" >&2
	done
done

"$PYTHON3" scripts/bench_cells.py drld "$results"
