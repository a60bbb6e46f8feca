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
# threads), which reports both figures itself ("library" columns). The
# ratios compare like with like: what libdrl sends for one decision sent
# by `redis-benchmark -c 16 -P 16 -r 10000` (its script with the library's
# own key and arguments, as drl bench --ceiling sends it, but with the
# explicit time the library sends by default; tx=auto's counter commands:
# each alone, summed, the trim at the rate it runs), as the peers' are
# sent:
#   rlf        rate-limiter-flexible's RateLimiterRedis script (Node.js),
#              read at run time from the npm package installed into a
#              temporary folder (skipped when npm cannot fetch it);
#   redis_rate go-redis/redis_rate's GCRA script (bench/peers/);
#   envoy      Envoy's rate limit service: INCRBY + EXPIRE, pipelined,
#              no script (each command measured alone, summed).
# The peers' keys are as long as the keys libdrl writes in this run (its
# prefix, the limit's tag and the user key: ~70 bytes here, measured after
# the first cell): a key's length costs the server too (hashing, copies),
# so the peers are measured with keys of the same length as ours.
# memcached, the other store with a server, is measured too when it is
# installed (timed runs only): a memcached started here on a free
# loopback port, a `drl bench` cell per algorithm (10,000 keys, 16
# callers, as above) and memcached's own CPU per decision (`stats`:
# rusage_user + rusage_system, all its threads). memcached times no
# command, so it has no exec figure; its CPU column compares with the
# library's CPU column of the Redis cells. BENCH_MEMCACHED=0 leaves it out.
# The Redis module (BUILDDIR/redis_module/drl_redis.so, loaded into the
# server when it is built): `module` cells send DRL.DECIDE with keys of
# the library's length by redis-benchmark, as the peers' scripts are
# sent (its exec is DRL.DECIDE's own usec, which includes the commands
# it calls), and `tx=module` cells of the library beside tx=auto, lua and
# watch, whose redis-benchmark column sends the library's own DRL.TWIN
# (read once per spec with MONITOR around a one-decision `drl bench`,
# its user key randomised, the library's explicit time); BENCH_MODULE=0
# leaves them out. The ratios: ÷ rlf, ÷ redis_rate and ÷ envoy (Envoy's
# INCRBY + EXPIRE, the issue 43 floor).
# BENCH_SPECS="spec ..." and BENCH_TXS="auto lua watch" pick cells (default: all).
# Each figure is the median of ROUNDS rounds (default 3), the cells of a
# round in turn. Prints a Markdown table; the ratios compare medians of
# the same run.
#
# BENCH_MEASURE=instructions counts instead of timing: redis-server runs
# under valgrind --tool=callgrind, and each figure is instructions per
# decision ("exec": inclusive in processCommand(), the command's lookup
# and execution with a script's commands, what commandstats times; "all":
# every instruction of the server: reading, parsing, replying, the event
# loop), between callgrind_control --zero and --dump around the cell. A
# time per command on a shared 2-core machine moves 2-3x with its
# neighbours; an instruction count hardly moves, so these ratios hold on
# any box (instructions are not time: a cache miss costs hundreds of
# cycles, so the timed figures stay the reference for µs). One round is
# enough; the library cells run `drl bench` for 1 s of a slowed server.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
measure=${BENCH_MEASURE:-time}
if [ "$measure" = instructions ]; then
	. scripts/callgrind_redis.sh
	export BENCH_REDIS_WRAP="$cg_wrap"
fi
. scripts/bench_redis.sh
module_so="${1:-build}/redis_module/drl_redis.so"
[ "${BENCH_MODULE:-1}" != 0 ] && [ -f "$module_so" ] || module_so=""
[ -n "$module_so" ] &&
	export BENCH_REDIS_ARGS="${BENCH_REDIS_ARGS:-} --loadmodule $(realpath "$module_so")"
bench_redis_setup 2 "$@"
if [ "$measure" = instructions ]; then
	trap 'stop_pids $rpid; rm -rf "$tmp" "$cgdir"' EXIT
fi

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
    if cmd in ("evalsha", "eval", "fcall", "fcall_ro", "drl.decide", "drl.twin"):
        scripts += float(us)
exec_us = scripts if scripts else sum(usec.values())
cpu = sum(float(x) for x in re.findall(r"used_cpu_(?:sys|user):([0-9.]+)", text))
print("%.2f %.2f" % (exec_us / n, (cpu - cpu0) * 1e6 / n))
PY
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
# with the module loaded, tx=module cells too (the library sending
# DRL.TWIN; its figures are DRL.TWIN's usec, which include its commands)
[ -n "$module_so" ] && txs+=(module)
# BENCH_SPECS / BENCH_TXS (space-separated) measure only those cells.
[ -n "${BENCH_SPECS:-}" ] && read -r -a specs <<<"$BENCH_SPECS"
[ -n "${BENCH_TXS:-}" ] && read -r -a txs <<<"$BENCH_TXS"

declare -A ex cp rb
# per counter spec: the other counters a tx=auto decision reads (the
# fields of its hash: HMGET), and how many fields its trim names (W,
# algorithms/subwindow.c: n + 1 + 3 ceil(1 s / sub-window))
declare -A neighbours=(
	["fixed_window:1000000/1m"]=0
	["sliding_window:1000000/1m"]=1
	["subwindow:1000000/1m,subwindows=10"]=9
)
declare -A trimmed=(
	["fixed_window:1000000/1m"]=5
	["sliding_window:1000000/1m"]=5
	["subwindow:1000000/1m,subwindows=10"]=14
)
# and its sub-window, in seconds
declare -A subsecs=(
	["fixed_window:1000000/1m"]=60
	["sliding_window:1000000/1m"]=60
	["subwindow:1000000/1m,subwindows=10"]=6
)
# One libdrl cell: spec $1, tx $2. `drl bench` measures the server itself
# (server_exec_us, server_cpu_us: the library as the client); with
# --ceiling also the bare script the library sends, by redis-benchmark -c
# 16 -P 16 with the library's own key and arguments (ceiling_pipelined),
# the way the peers' scripts are sent: that figure, `rb`, is the one the
# ratios compare. The counters of tx=auto send no script: their `rb` is
# the sum of their commands, each sent alone by redis-benchmark.
libdrl_cell() {
	local spec=$1 tx=$2 r ceil=--ceiling
	# watch sends no script; module sends DRL.TWIN (its own cells below)
	case $tx in watch | module) ceil= ;; esac
	[ "$measure" = instructions ] && cg_zero
	r=$("$drl" bench --json $ceil --store "redis://127.0.0.1:$port?tx=$tx&pool=16" \
		--limit "$spec" --keys 10000 --concurrency 16 \
		--duration "$secs" 2>/dev/null |
		"$PYTHON3" -c 'import json, sys
c = json.load(sys.stdin)[0]
p = c.get("ceiling_pipelined") or {}
cmd = p.get("command", "").split()
args = cmd[cmd.index("EVALSHA") + 1:] if "EVALSHA" in cmd else []
print("%.2f %.2f %d %s" % (c["server_exec_us"] or 0, c["server_cpu_us"] or 0,
                           c["decisions"], " ".join(args) or "-"))')
	read -r e c n args <<<"$r"
	if [ "$measure" = instructions ]; then
		# the library's own traffic; a ceiling's runs of the bare
		# script would be counted too: a second run without it
		if [ -n "$ceil" ]; then
			cg_zero
			n=$("$drl" bench --json --store "redis://127.0.0.1:$port?tx=$tx&pool=16" \
				--limit "$spec" --keys 10000 --concurrency 16 \
				--duration "$secs" 2>/dev/null |
				"$PYTHON3" -c 'import json, sys; print(json.load(sys.stdin)[0]["decisions"])')
		fi
		r=$(cg_per_decision "$n")
		e=${r% *}
		c=${r#* }
	fi
	ex["$spec|$tx"]+="$e "
	cp["$spec|$tx"]+="$c "
	b=-
	if [ "$tx" = auto ] && [ -n "${neighbours[$spec]:-}" ]; then
		# trims per decision: 10,000 keys, each once per sub-window,
		# over the decisions of a sub-window at the cell's rate (under
		# callgrind the server is slowed 50x: a nominal 25,000/s)
		local f rate
		rate=$(awk -v n="$n" -v s="$secs" 'BEGIN{print n / s}')
		[ "$measure" = instructions ] && rate=25000
		f=$(awk -v r="$rate" -v w="${subsecs[$spec]}" \
			'BEGIN{f = 10000 / (r * w); print (f > 1 ? 1 : f)}')
		b=$(plain_cost "${neighbours[$spec]}" "${trimmed[$spec]}" "$f")
	elif [ "$args" != - ] && [ -n "$args" ]; then
		b=$(script_cost "$spec" $args)
	fi
	[ "$tx" = module ] && b=$(twin_cost "$spec")
	[ "$b" != - ] && rb["$spec|$tx"]+="$b "
	return 0
}

# The DRL.TWIN the library sends under tx=module for spec $1, as
# redis-benchmark arguments after the time: "key twin cost arg...", its
# user key (the {hash tag}) redis-benchmark's random one. Read once per
# spec by MONITOR around a one-decision `drl bench` (not around a timed
# cell: MONITOR costs the server).
declare -A twin_cmd
twin_capture() {
	local spec=$1 mon="$tmp/monitor" mpid i
	[ -n "${twin_cmd[$spec]:-}" ] && return 0
	: >"$mon"
	redis-cli -p "$port" MONITOR >"$mon" 2>/dev/null &
	mpid=$!
	for ((i = 0; i < 100; i++)); do
		[ -s "$mon" ] && break
		sleep 0.05
	done
	"$drl" bench --store "redis://127.0.0.1:$port?tx=module" --limit "$spec" \
		--keys 1 --concurrency 1 --duration 0.05 >/dev/null 2>&1 || true
	for ((i = 0; i < 100; i++)); do
		grep -q '"DRL.TWIN"' "$mon" && break
		sleep 0.05
	done
	stop_pids $mpid || true # its status is SIGTERM's
	twin_cmd[$spec]=$(grep -m1 '"DRL.TWIN"' "$mon" | "$PYTHON3" -c '
import re, sys
a = re.findall(r"\"((?:[^\"\\]|\\.)*)\"", sys.stdin.read())
if len(a) > 5:
    key = re.sub(r"\{[^}]*\}", "{__rand_int__}", a[1], count=1)
    print(" ".join([key, a[2]] + a[4:]))')
}

# What the library's DRL.TWIN for one decision of spec $1 costs, sent by
# redis-benchmark (as script_cost sends the library's script), with the
# time the library sends, fixed for the run.
twin_cost() {
	local spec=$1 r
	[ -n "${twin_cmd[$spec]:-}" ] || { echo -; return; }
	set -- ${twin_cmd[$spec]}
	local key=$1 twin=$2
	shift 2
	r=$(peer_once drl.twin "$key" "$twin" "$(date +%s%6N)" "$@") && echo "${r% *}"
}

# What the library's script for one decision costs, sent by
# redis-benchmark: the EVALSHA drl bench --ceiling sent (the library's
# script, key and arguments), with the time the library sends by default
# (clock=client: an explicit time, fixed for the run) instead of the
# ceiling's -1 (the script reads TIME, ~0.9 µs more). sliding_log too: at
# one fixed time its entries merge into one, which costs its twin what an
# appended entry costs (one SETRANGE either way; its state 'S' makes a
# decision's cost independent of the log's length); the library column
# appends at the real time.
script_cost() {
	local spec=$1 r
	shift
	local sha=$1 nk=$2 key=$3
	shift 3
	# now, not before: the ceiling just wrote these keys at Redis's TIME,
	# and a time behind that would take the twins' clock-skew path
	set -- "$(date +%s%6N)" "${@:2}"
	r=$(peer_once evalsha "$sha" "$nk" "$key" "$@") && echo "${r% *}"
}

# What tx=auto's commands for one counter decision cost, each sent by
# redis-benchmark -c 16 -P 16 (keys as long as the library's): HINCRBY of
# the current sub-window's field, an HMGET of $1 other fields when $1 > 0
# (of hashes that hold them: populate_hashes), and, for a fraction $3 of
# the decisions, the trim of the first decision of a sub-window on a key
# (HDEL of $2 fields, PEXPIRE). $3 is the steady state of the library
# cell's rate: 10,000 keys each trimmed once per sub-window, over the
# decisions the cell made in a sub-window's time (capped at 1).
plain_cost() {
	local n=$1 w=$2 f=$3 total=0 r args=() trim=0
	r=$(peer_once hincrby "$(pk h:)" 1010 1) && total=$(awk -v a="$total" -v b="${r% *}" 'BEGIN{print a+b}')
	if [ "$n" -gt 0 ]; then
		for ((j = 1; j <= n; j++)); do args+=("$((1000 + j))"); done
		r=$(peer_once hmget "$(pk h:)" "${args[@]}") && total=$(awk -v a="$total" -v b="${r% *}" 'BEGIN{print a+b}')
	fi
	args=()
	for ((j = 1; j <= w; j++)); do args+=("$((900 + j))"); done
	r=$(peer_once hdel "$(pk h:)" "${args[@]}") && trim=${r% *}
	r=$(peer_once pexpire "$(pk h:)" 61000) && trim=$(awk -v a="$trim" -v b="${r% *}" 'BEGIN{print a+b}')
	printf '%.2f' "$(awk -v a="$total" -v t="$trim" -v f="$f" 'BEGIN{print a + f * t}')"
}

# redis-benchmark's command once: "exec cpu" per request (instructions:
# "exec all").
peer_once() {
	local c0
	if [ "$measure" = instructions ]; then
		cg_zero
		redis-benchmark -p "$port" -c 16 -P 16 -r 10000 -n 5000 "$@" >/dev/null 2>&1
		cg_per_decision 5000
		return
	fi
	cli CONFIG RESETSTAT >/dev/null
	c0=$(cpu_now)
	redis-benchmark -p "$port" -c 16 -P 16 -r 10000 -n 200000 "$@" >/dev/null 2>&1
	per_decision "$(stats)" "$c0" 200000
}

# One peer cell: name $1, then redis-benchmark's command.
peer_cell() {
	local name=$1 r
	shift
	r=$(peer_once "$@")
	ex["$name"]+="${r% *} "
	cp["$name"]+="${r#* } "
}

# The length of the keys libdrl writes: one short cell, then the median.
libdrl_cell "gcra:1000000/1m" auto
keylen_now() {
	cli --scan 2>/dev/null | awk 'NR <= 201 {print length($0)}' |
		sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'
}
keylen=$(keylen_now)
# A server slowed by callgrind can outlive those states (a TTL of about a
# second): then the key of one decision of a counter, which lives a minute.
if [ -z "$keylen" ]; then
	"$drl" bench --store "redis://127.0.0.1:$port?tx=auto" \
		--limit "fixed_window:1000000/1m" --keys 1 --concurrency 1 \
		--duration 0.05 >/dev/null 2>&1 || true
	keylen=$(keylen_now)
fi
[ -n "$keylen" ] && [ "$keylen" -gt 14 ] || keylen=14
unset 'ex[gcra:1000000/1m|auto]' 'cp[gcra:1000000/1m|auto]' 'rb[gcra:1000000/1m|auto]'
# redis-benchmark writes __rand_int__ as 12 digits: pad before "{...}".
pad=$(printf '%*s' $((keylen - 14)) '' | tr ' ' 'p')
pk() { echo "$1${pad:${#1}}{__rand_int__}"; }

# A hash of 11 counters (fields 1000 to 1010) under each key plain_cost
# reads: the 10,000 values redis-benchmark's -r 10000 puts for
# __rand_int__ (12 digits), as the library's hashes hold the current
# sub-window and the ones before it.
populate_hashes() {
	local k
	k=$(pk "h:")
	awk -v pre="${k%%\{*}" 'BEGIN {
		for (i = 0; i < 10000; i++) {
			key = sprintf("%s{%012d}", pre, i)
			printf "*24\r\n$4\r\nHSET\r\n$%d\r\n%s\r\n", length(key), key
			for (f = 1000; f <= 1010; f++)
				printf "$4\r\n%d\r\n$1\r\n7\r\n", f
		}
	}' | cli --pipe >/dev/null
}
populate_hashes

# memcached: started here (see the header), its CPU from its `stats`.
mc_port=""
if [ "$measure" = time ] && [ "${BENCH_MEMCACHED:-1}" != 0 ] &&
	command -v memcached >/dev/null; then
	mc_port=$(free_port)
	start_memcached "$mc_port" "$tmp"
	mpid=$!
	trap 'stop_pids $rpid $mpid; rm -rf "$tmp"' EXIT
	wait_port "$mc_port" || { echo "memcached did not start" >&2; exit 3; }
fi

# The seconds of CPU memcached has used (user + system), from `stats` on
# a connection of the shell's own (bash's /dev/tcp).
mc_cpu() {
	local line s=0
	exec 5<>"/dev/tcp/127.0.0.1/$mc_port"
	printf 'stats\r\n' >&5
	while IFS= read -r line <&5; do
		line=${line%$'\r'}
		case $line in
		"STAT rusage_user "* | "STAT rusage_system "*)
			s=$(awk -v a="$s" -v b="${line##* }" 'BEGIN{printf "%.6f", a + b}') ;;
		END) break ;;
		esac
	done
	exec 5<&-
	echo "$s"
}

declare -A mc
# One memcached cell: spec $1; memcached's CPU µs per decision into mc.
mc_cell() {
	local spec=$1 c0 c1 n
	c0=$(mc_cpu)
	n=$("$drl" bench --json --store "memcached://127.0.0.1:$mc_port?pool=16" \
		--limit "$spec" --keys 10000 --concurrency 16 \
		--duration "$secs" 2>/dev/null |
		"$PYTHON3" -c 'import json, sys; print(json.load(sys.stdin)[0]["decisions"])')
	c1=$(mc_cpu)
	mc["$spec"]+="$(awk -v a="$c0" -v b="$c1" -v n="$n" 'BEGIN{printf "%.2f", (b - a) * 1e6 / n}') "
}

# the DRL.TWIN of each spec, when tx=module is measured
for tx in "${txs[@]}"; do
	[ "$tx" = module ] || continue
	for spec in "${specs[@]}"; do twin_capture "$spec"; done
done

for ((k = 0; k < rounds; k++)); do
	for spec in "${specs[@]}"; do
		for tx in "${txs[@]}"; do
			libdrl_cell "$spec" "$tx"
		done
		if [ -n "$mc_port" ]; then mc_cell "$spec"; fi
	done
	if [ -n "$rlf" ]; then
		sha=$(cli SCRIPT LOAD "$rlf")
		peer_cell rlf evalsha "$sha" 1 "$(pk rlf:)" 1 60
	fi
	rr_sha=$(cli SCRIPT LOAD "$(cat bench/peers/redis_rate_allown.lua)")
	peer_cell redis_rate evalsha "$rr_sha" 1 "$(pk rr:)" 1000000 1000000 60 1
	peer_cell envoy_incrby incrby "$(pk env:)" 1
	peer_cell envoy_expire expire "$(pk env:)" 60
	if [ -n "$module_so" ]; then
		i=0
		for spec in "${specs[@]}"; do
			# a key prefix per spec; the time the library sends
			# (clock=client), fixed
			peer_cell "module|$spec" drl.decide "$(pk "m$i:")" \
				"$spec" "$(date +%s%6N)" 1
			i=$((i + 1))
		done
	fi
done


rlf_m=$([ -n "$rlf" ] && median "${ex[rlf]}" || echo "")
rr_m=$(median "${ex[redis_rate]}")
env_m=$(awk -v a="$(median "${ex[envoy_incrby]}")" -v b="$(median "${ex[envoy_expire]}")" 'BEGIN{printf "%.2f", a+b}')
env_c=$(awk -v a="$(median "${cp[envoy_incrby]}")" -v b="$(median "${cp[envoy_expire]}")" 'BEGIN{printf "%.2f", a+b}')
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}' || echo "—"; }

echo "redis-server $(redis-server --version | awk '{print $3}'), $(nproc) CPUs, ${secs}s x $rounds rounds, medians; keys of $keylen bytes; measured: $measure"
echo
if [ "$measure" = instructions ]; then
	echo "| what runs on the server for one decision | exec instructions, library | all instructions, library | exec instructions, redis-benchmark | ÷ rlf | ÷ redis_rate | ÷ envoy |"
else
	echo "| what runs on the server for one decision | exec µs, library | CPU µs, library | exec µs, redis-benchmark | ÷ rlf | ÷ redis_rate | ÷ envoy |"
fi
echo "|---|--:|--:|--:|--:|--:|--:|"
for spec in "${specs[@]}"; do
	for tx in "${txs[@]}"; do
		e=$(median "${ex[$spec|$tx]}")
		c=$(median "${cp[$spec|$tx]}")
		b=""
		[ -n "${rb[$spec|$tx]:-}" ] && b=$(median "${rb[$spec|$tx]}")
		echo "| libdrl \`$spec\` tx=$tx | $e | $c | ${b:-—} | $(ratio "$b" "$rlf_m") | $(ratio "$b" "$rr_m") | $(ratio "$b" "$env_m") |"
	done
done
if [ -n "$module_so" ]; then
	for spec in "${specs[@]}"; do
		m=$(median "${ex[module|$spec]}")
		echo "| libdrl \`$spec\` DRL.DECIDE (Redis module) | — | — | $m | $(ratio "$m" "$rlf_m") | $(ratio "$m" "$rr_m") | $(ratio "$m" "$env_m") |"
	done
fi
if [ -n "$mc_port" ]; then
	for spec in "${specs[@]}"; do
		echo "| libdrl \`$spec\` on memcached (incr; gets/cas) | — | $(median "${mc[$spec]}") | — | — | — | — |"
	done
fi
[ -n "$rlf" ] && echo "| rate-limiter-flexible's script (EVALSHA) | — | — | $rlf_m | 1.00 | $(ratio "$rlf_m" "$rr_m") | $(ratio "$rlf_m" "$env_m") |"
echo "| go-redis/redis_rate's GCRA script (EVALSHA) | — | — | $rr_m | $(ratio "$rr_m" "$rlf_m") | 1.00 | $(ratio "$rr_m" "$env_m") |"
echo "| Envoy's INCRBY + EXPIRE (pipelined) | — | — | $env_m | $(ratio "$env_m" "$rlf_m") | $(ratio "$env_m" "$rr_m") | 1.00 |"
