#!/usr/bin/env bash
# A/B of server-side scripts as redis-benchmark sends them, in turn, on one
# redis-server started here on a free loopback port: exec µs per call from
# INFO commandstats after `redis-benchmark -c 16 -P 16 -r 10000 -n 200000`,
# the median of ROUNDS rounds, the scripts of a round in turn.
#
#   bash scripts/bench_twin_ab.sh ROUNDS SCRIPT.lua...
#
# A file FILE.lua with a FILE.lua.args beside it gets the arguments in that
# (NOW for the time); else a file whose name contains "rlf" gets rate-limiter-flexible's arguments
# (1 60); any other the twins' seven (now, cost 1, limit 10000,
# period 1 min, ...), the time fixed for the run (so a
# sliding_log twin merges into its newest entry: one SETRANGE, as an
# append costs). Every key is written once before the rounds. E.g. the
# sliding_log twin at two commits, beside rate-limiter-flexible's script
# (from its npm package, as bench_server_cost.sh reads it):
#   for c in A B; do git show $c:algorithms/lua_head.lua \
#     $c:algorithms/sliding_log.lua >/tmp/sl_$c.lua; done
#   bash scripts/bench_twin_ab.sh 7 /tmp/rlf.lua /tmp/sl_A.lua /tmp/sl_B.lua
# BENCH_MEASURE=instructions counts instead (scripts/callgrind_redis.sh:
# the server under callgrind, 5,000 calls a round): "exec" instructions
# per call, which hardly move with the machine's other load, where the
# µs of a shared 2-core machine move 2-3x.
set -eu
. "$(dirname "${BASH_SOURCE[0]}")/ports.sh"
rounds=$1
shift
measure=${BENCH_MEASURE:-time} wrap="" n=200000
if [ "$measure" = instructions ]; then
	. "$(dirname "${BASH_SOURCE[0]}")/callgrind_redis.sh"
	wrap=$cg_wrap n=5000
fi
port=$(free_port)
$wrap redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
	>/dev/null 2>&1 &
rpid=$!
trap 'stop_pids $rpid; rm -rf "${cgdir:-}"' EXIT
wait_port "$port"
cli() { redis-cli -p "$port" "$@"; }
now=$(date +%s%6N)
declare -A sha res
key() { printf 'k%s{__rand_int__}' "$(basename "$1" .lua)"; }
# FILE.args, when there is one, holds FILE's arguments ("NOW": the time)
args() {
	if [ -f "$1.args" ]; then
		sed "s/NOW/$now/g" "$1.args"
		return
	fi
	case $1 in *rlf*) echo "1 60" ;; *) echo "$now 1 10000 60000000 0 1 0" ;; esac
}
bench() {
	# shellcheck disable=SC2046
	redis-benchmark -p "$port" -c 16 -P 16 -r 10000 -n "$2" evalsha \
		"${sha[$1]}" 1 "$(key "$1")" $(args "$1") >/dev/null 2>&1
}
for f in "$@"; do
	sha[$f]=$(cli SCRIPT LOAD "$(cat "$f")")
	bench "$f" $((n / 2))
done
for ((r = 0; r < rounds; r++)); do
	for f in "$@"; do
		if [ "$measure" = instructions ]; then
			cg_zero
			bench "$f" $n
			got=$(cg_per_decision $n)
			res[$f]+="${got% *} "
			continue
		fi
		cli CONFIG RESETSTAT >/dev/null
		bench "$f" $n
		res[$f]+="$(cli INFO commandstats | tr -d '\r' |
			sed -n 's/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\).*/\1/p') "
	done
done
echo "redis-server $(redis-server --version | awk '{print $3}'), $(nproc) CPUs, $rounds rounds: median (all), exec $( [ "$measure" = instructions ] && echo instructions || echo µs) per call"
for f in "$@"; do
	m=$(tr ' ' '\n' <<<"${res[$f]}" | grep . | sort -g |
		awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
	printf '%-30s %6s  (%s)\n' "$(basename "$f")" "$m" "${res[$f]% }"
done
