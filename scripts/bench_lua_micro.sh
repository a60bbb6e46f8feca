#!/usr/bin/env bash
# What the pieces of a script cost Redis's one thread: the measurements
# behind docs/performance.md ("What was changed, and what each change is
# worth"), on a redis-server started here on a free loopback port.
#
#   bash scripts/bench_lua_micro.sh [BUILDDIR] [ROUNDS]
#
# Each line: exec µs per call from INFO commandstats (a script's usec
# includes the commands it calls) after `redis-benchmark -c 16 -P 16 -r
# 10000 -n 300000`, the smallest of ROUNDS runs (default 5) and all of
# them. BUILDDIR is unused but for the common argument order.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/bench_redis.sh
bench_redis_setup 0 "${1:-build}" 0 1
rounds=${2:-5}

declare -A res
# name, then redis-benchmark's command (scripts given as "lua:SOURCE")
run() {
	local name=$1 cmd=$2
	shift 2
	if [ "${cmd#lua:}" != "$cmd" ]; then
		set -- evalsha "$(cli SCRIPT LOAD "${cmd#lua:}")" "$@"
	elif [ "$cmd" = fcall ]; then
		set -- fcall "$@"
	else
		set -- "$cmd" "$@"
	fi
	cli CONFIG RESETSTAT >/dev/null
	redis-benchmark -p "$port" -c 16 -P 16 -r 10000 -n 300000 "$@" >/dev/null 2>&1
	res[$name]+="$(cli INFO commandstats | tr -d '\r' | awk -F'[:=,]' '
		/^cmdstat_(evalsha|fcall):/ {s = $5; n = $3}
		/^cmdstat_/ && !/config|info/ {t += $5; if ($3 > m) m = $3}
		END {if (n) printf "%.2f", s / n; else printf "%.2f", t / m}') "
}

A9="1795000000000000 1 0 1000000 60000000 1000000 0 0 1000000"
long=$(printf '%*s' 63 '' | tr ' ' 'p')
cli FUNCTION LOAD REPLACE "#!lua name=drlmicro
redis.register_function{function_name='one', callback=function() return 1 end, flags={'no-writes'}}" >/dev/null
# Counters under c0: .. c8: and hashes of 10 fields under h: for every value of
# redis-benchmark's __rand_int__ with -r 10000 (12 digits).
awk 'BEGIN {
	for (i = 0; i < 10000; i++) {
		for (j = 0; j < 9; j++) {
			key = sprintf("c%d:%012d", j, i)
			printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\n7\r\n", length(key), key
		}
		key = sprintf("h:%012d", i)
		printf "*22\r\n$4\r\nHSET\r\n$%d\r\n%s\r\n", length(key), key
		for (f = 1; f <= 10; f++)
			printf "$%d\r\n%d\r\n$1\r\n7\r\n", length(f ""), f
	}
}' | cli --pipe >/dev/null
for ((k = 0; k < rounds; k++)); do
	run "script returning 1, 1 arg" "lua:return 1" 1 k:__rand_int__ 1
	run "script returning 1, 9 args" "lua:return 1" 1 k:__rand_int__ $A9
	run "FCALL returning 1, 9 args" fcall one 1 k:__rand_int__ $A9
	run "9 tonumber()" "lua:local t = tonumber
local a, b, c, d, e, f, g, h, i = t(ARGV[1]), t(ARGV[2]), t(ARGV[3]), t(ARGV[4]), t(ARGV[5]), t(ARGV[6]), t(ARGV[7]), t(ARGV[8]), t(ARGV[9])
return 1" 1 k:__rand_int__ $A9
	run "9 ARGV[i] + 0" "lua:local A = ARGV
local a, b, c, d, e, f, g, h, i = A[1] + 0, A[2] + 0, A[3] + 0, A[4] + 0, A[5] + 0, A[6] + 0, A[7] + 0, A[8] + 0, A[9] + 0
return 1" 1 k:__rand_int__ $A9
	run "returning a table of 5" "lua:return {1, 2, 3, 4, 5}" 1 k:__rand_int__ $A9
	run "3 local functions" "lua:local function a() end
local function b() end
local function c() end
return 1" 1 k:__rand_int__ $A9
	run "GET + SET PX of 25 bytes, short key" "lua:redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], 'G12345678123456781234567x', 'PX', 60000)
return 1" 1 s:__rand_int__ $A9
	run "GET + SET PX of 25 bytes, 77-byte key" "lua:redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], 'G12345678123456781234567x', 'PX', 60000)
return 1" 1 "l$long{__rand_int__}" $A9
	run "GET" get g:__rand_int__
	run "MGET of 9 missing keys" mget a:__rand_int__ b:__rand_int__ c:__rand_int__ \
		d:__rand_int__ e:__rand_int__ f:__rand_int__ g:__rand_int__ \
		h:__rand_int__ i:__rand_int__
	run "MGET of 9 counters" mget c0:__rand_int__ c1:__rand_int__ c2:__rand_int__ \
		c3:__rand_int__ c4:__rand_int__ c5:__rand_int__ c6:__rand_int__ \
		c7:__rand_int__ c8:__rand_int__
	# The layout subwindow could have instead (one hash per user key, a
	# field per sub-window): its reads and writes on 10 fields
	run "HMGET of 9 fields of a hash of 10" hmget h:__rand_int__ 1 2 3 4 5 6 7 8 9
	run "INCRBY a counter" incrby c0:__rand_int__ 1
	run "HINCRBY a hash of 10" hincrby h:__rand_int__ 10 1
	run "HDEL a missing field" hdel h:__rand_int__ 0
	run "PEXPIRE" pexpire i:__rand_int__ 61000
	run "PEXPIRE NX" pexpire i:__rand_int__ 61000 NX
	# sliding_log's write in place: a second write command in a script
	# (PEXPIRE after SETRANGE) against asking PTTL first (read-only)
	run "GETRANGE + SETRANGE" "lua:redis.call('GETRANGE', KEYS[1], -49, -1)
redis.call('SETRANGE', KEYS[1], 0, 'G1234567812345678123456781234567812345678x')
return 1" 1 r:__rand_int__ $A9
	run "GETRANGE + SETRANGE + PEXPIRE" "lua:redis.call('GETRANGE', KEYS[1], -49, -1)
redis.call('SETRANGE', KEYS[1], 0, 'G1234567812345678123456781234567812345678x')
redis.call('PEXPIRE', KEYS[1], 61000)
return 1" 1 r:__rand_int__ $A9
	run "GETRANGE + SETRANGE + PTTL" "lua:redis.call('GETRANGE', KEYS[1], -49, -1)
redis.call('SETRANGE', KEYS[1], 0, 'G1234567812345678123456781234567812345678x')
if redis.call('PTTL', KEYS[1]) < 0 then return 0 end
return 1" 1 r:__rand_int__ $A9
done

echo "redis-server $(redis-server --version | awk '{print $3}'), $(nproc) CPUs, $rounds rounds: smallest (all)"
for name in "script returning 1, 1 arg" "script returning 1, 9 args" \
	"FCALL returning 1, 9 args" "9 tonumber()" "9 ARGV[i] + 0" \
	"returning a table of 5" "3 local functions" \
	"GET + SET PX of 25 bytes, short key" \
	"GET + SET PX of 25 bytes, 77-byte key" "GET" "MGET of 9 missing keys" \
	"MGET of 9 counters" "HMGET of 9 fields of a hash of 10" \
	"INCRBY a counter" "HINCRBY a hash of 10" "HDEL a missing field" \
	"PEXPIRE" "PEXPIRE NX" "GETRANGE + SETRANGE" \
	"GETRANGE + SETRANGE + PEXPIRE" "GETRANGE + SETRANGE + PTTL"; do
	min=$(tr ' ' '\n' <<<"${res[$name]}" | grep . | sort -g | head -1)
	printf '%-40s %6s µs  (%s)\n' "$name" "$min" "${res[$name]% }"
done
