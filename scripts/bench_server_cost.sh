#!/usr/bin/env bash
# What one decision costs the Redis server, per algorithm and strategy,
# beside the peers' scripts, in one run against one redis-server started
# here on a free loopback port (docs/performance.md, "What a decision
# costs the server").
#
#   bash scripts/bench_server_cost.sh [BUILDDIR] [SECONDS] [ROUNDS]
#
# Every cell: CONFIG RESETSTAT, then 10,000 distinct keys, 16 callers,
# limits never reached (every decision an allowed write), then INFO
# commandstats and INFO cpu. "exec us" is command execution time per
# decision: the scripts' usec when scripts ran (a script's usec includes
# the commands it calls), else the sum over the commands sent; "cpu us"
# is redis-server's user+sys CPU per decision (parsing, networking and
# replies included). libdrl cells run `drl bench` (one process, 16
# threads), which reports both figures itself; the peers' scripts go through `redis-benchmark -c 16 -P 16 -r
# 10000`, as their clients pipeline them:
#   rlf        rate-limiter-flexible's RateLimiterRedis script (Node.js),
#              read at run time from the npm package installed into a
#              temporary folder (skipped when npm cannot fetch it);
#   redis_rate go-redis/redis_rate's GCRA script (bench/peers/);
#   envoy      Envoy's rate limit service: INCRBY + EXPIRE, pipelined,
#              no script (each command measured alone, summed).
# Each figure is the median of ROUNDS rounds (default 3), the cells of a
# round in turn. Prints a Markdown table; the ratios compare medians of
# the same run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/ports.sh

build=${1:-build}
secs=${2:-2}
rounds=${3:-3}
drl="$build/tools/drl"
[ -x "$drl" ] || { echo "no $drl: build first (meson setup $build && ninja -C $build)" >&2; exit 2; }

tmp=$(mktemp -d)
port=$(free_port)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
	--dir "$tmp" >"$tmp/redis.log" 2>&1 &
rpid=$!
trap 'stop_pids $rpid; rm -rf "$tmp"' EXIT
wait_port "$port" || { echo "redis-server did not start" >&2; exit 3; }
cli() { redis-cli -p "$port" "$@"; }

# The peer's script from the npm package, when npm can fetch it.
rlf=""
if command -v npm >/dev/null &&
	(cd "$tmp" && npm install --silent --no-audit --no-fund \
		rate-limiter-flexible >/dev/null 2>&1); then
	rlf=$("$PYTHON3" - "$tmp/node_modules/rate-limiter-flexible/lib/RateLimiterRedis.js" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
m = re.search(r"incrTtlLuaScript\s*=\s*`(.*?)`", src, re.S)
print(m.group(1).replace("\\\n", "\n") if m else "")
PY
)
fi

# The stats since the last CONFIG RESETSTAT: "exec_usec calls_by_cmd cpu".
stats() {
	{ cli INFO commandstats; cli INFO cpu; } | tr -d '\r'
}

# exec us and cpu us per decision from stats text $1, cpu before $2,
# decisions $3.
per_decision() {
	"$PYTHON3" - "$2" "$3" <<PY
import re, sys
text = """$1"""
cpu0, n = float(sys.argv[1]), float(sys.argv[2])
usec, scripts = {}, 0.0
skip = re.compile(r"^(info|config|ping|auth|hello|select|client|script|command|function)")
for cmd, calls, us in re.findall(r"cmdstat_([^:]+):calls=(\d+),usec=(\d+)", text):
    if skip.match(cmd):
        continue
    usec[cmd] = float(us)
    if cmd in ("evalsha", "eval", "fcall", "fcall_ro"):
        scripts += float(us)
exec_us = scripts if scripts else sum(usec.values())
cpu = sum(float(x) for x in re.findall(r"used_cpu_(?:sys|user):([0-9.]+)", text))
print("%.2f %.2f" % (exec_us / n, (cpu - cpu0) * 1e6 / n))
PY
}

cpu_now() {
	cli INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/{s+=$2} END{printf "%f", s}'
}

specs=(
	"fixed_window:1000000/1m"
	"sliding_window:1000000/1m"
	"subwindow:1000000/1m,subwindows=10"
	"token_bucket:1000000/1m"
	"gcra:1000000/1m"
	"sliding_log:10000/1m"
)
txs=(auto lua watch)

declare -A ex cp
# One libdrl cell: spec $1, tx $2 (drl bench measures the server itself:
# server_exec_us and server_cpu_us, by the same rule as per_decision).
libdrl_cell() {
	local spec=$1 tx=$2 r
	r=$("$drl" bench --json --store "redis://127.0.0.1:$port?tx=$tx&pool=16" \
		--limit "$spec" --keys 10000 --concurrency 16 \
		--duration "$secs" 2>/dev/null |
		"$PYTHON3" -c 'import json, sys
c = json.load(sys.stdin)[0]
print("%.2f %.2f" % (c["server_exec_us"], c["server_cpu_us"]))')
	ex["$spec|$tx"]+="${r% *} "
	cp["$spec|$tx"]+="${r#* } "
}

# One peer cell: name $1, then redis-benchmark's command.
peer_cell() {
	local name=$1 c0 r
	shift
	cli CONFIG RESETSTAT >/dev/null
	c0=$(cpu_now)
	redis-benchmark -p "$port" -c 16 -P 16 -r 10000 -n 200000 "$@" >/dev/null 2>&1
	r=$(per_decision "$(stats)" "$c0" 200000)
	ex["$name"]+="${r% *} "
	cp["$name"]+="${r#* } "
}

rr_sha=$(cli SCRIPT LOAD "$(cat bench/peers/redis_rate_allown.lua)")
for ((k = 0; k < rounds; k++)); do
	for spec in "${specs[@]}"; do
		for tx in "${txs[@]}"; do
			libdrl_cell "$spec" "$tx"
		done
	done
	if [ -n "$rlf" ]; then
		sha=$(cli SCRIPT LOAD "$rlf")
		peer_cell rlf evalsha "$sha" 1 "rlf:__rand_int__" 1 60
	fi
	rr_sha=$(cli SCRIPT LOAD "$(cat bench/peers/redis_rate_allown.lua)")
	peer_cell redis_rate evalsha "$rr_sha" 1 "rr:__rand_int__" 1000000 1000000 60 1
	peer_cell envoy_incrby incrby "env:__rand_int__" 1
	peer_cell envoy_expire expire "env:__rand_int__" 60
done

median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END{print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }

rlf_m=$([ -n "$rlf" ] && median "${ex[rlf]}" || echo "")
rr_m=$(median "${ex[redis_rate]}")
env_m=$(awk -v a="$(median "${ex[envoy_incrby]}")" -v b="$(median "${ex[envoy_expire]}")" 'BEGIN{printf "%.2f", a+b}')
env_c=$(awk -v a="$(median "${cp[envoy_incrby]}")" -v b="$(median "${cp[envoy_expire]}")" 'BEGIN{printf "%.2f", a+b}')
ratio() { [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}' || echo "n/a"; }

echo "redis-server $(redis-server --version | awk '{print $3}'), $(nproc) CPUs, ${secs}s x $rounds rounds, medians"
echo
echo "| what runs on the server for one decision | exec µs | CPU µs | ÷ rlf | ÷ redis_rate |"
echo "|---|--:|--:|--:|--:|"
for spec in "${specs[@]}"; do
	for tx in "${txs[@]}"; do
		e=$(median "${ex[$spec|$tx]}")
		c=$(median "${cp[$spec|$tx]}")
		echo "| libdrl \`$spec\` tx=$tx | $e | $c | $(ratio "$e" "$rlf_m") | $(ratio "$e" "$rr_m") |"
	done
done
[ -n "$rlf" ] && echo "| rate-limiter-flexible's script (EVALSHA) | $rlf_m | $(median "${cp[rlf]}") | 1.00 | $(ratio "$rlf_m" "$rr_m") |"
echo "| go-redis/redis_rate's GCRA script (EVALSHA) | $rr_m | $(median "${cp[redis_rate]}") | $(ratio "$rr_m" "$rlf_m") | 1.00 |"
echo "| Envoy's INCRBY + EXPIRE (pipelined) | $env_m | $env_c | $(ratio "$env_m" "$rlf_m") | $(ratio "$env_m" "$rr_m") |"
