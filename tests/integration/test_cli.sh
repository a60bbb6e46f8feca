#!/usr/bin/env bash
# The drl CLI: exit codes (0 allowed, 1 denied, 2 bad usage/spec/URI),
# messages on stderr that name the bad part, and the --json fields, at fixed
# times (--now-ms) so every number is exact. Then the bad-input rows of
# docs/bad-input.md against a redis-server of its own that wants a password
# (stopped by PID at exit): nothing reaches the store, no output holds the
# password (docs/security.md).
#
# usage: test_cli.sh PATH/TO/drl [PART]
# PART: local (the fixed-time checks on memory://), store (the bad-input
# rows and the password checks on Redis), or all (the default); meson runs
# the two as tests of their own, in parallel.
# Prints one "ok N - ..." / "not ok N - ..." line per assertion and exits
# nonzero when any failed.
set -u

# shellcheck source=../../scripts/python.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/python.sh"

drl=${1:?usage: test_cli.sh PATH/TO/drl [PART]}
# shellcheck source=../fixtures/parts.sh
. "$(dirname "${BASH_SOURCE[0]}")/../fixtures/parts.sh"
choose_part test_cli.sh "${2:-}" local store
tmp=$(mktemp -d)
pids=() # servers this script started, stopped by PID at exit

cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

# DRL_VALGRIND set (meson test --setup valgrind): every drl runs under
# valgrind memcheck (tests/fixtures/valgrind.sh), and an error exits 99.
wrap=()
if [ -n "${DRL_VALGRIND:-}" ]; then
	wrap=("$(dirname "$0")/../fixtures/valgrind.sh")
fi

# shellcheck source=../fixtures/tap.sh
source "$(dirname "$0")/../fixtures/tap.sh"
T=1000000 # --now-ms used below: an aligned second, far from 0

# Run drl with the given arguments, keeping stdout, stderr and the status.
run() {
	last_args=("$@")
	"${wrap[@]}" "$drl" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
	rc=$?
	rm -f "$tmp/json"
}

# The last command's stream $1 (out|err) is empty.
expect_empty() {
	[ ! -s "$tmp/$1" ]
	check $? "std$1 empty: drl ${last_args[*]}"
}

# Line $1 (1-based) of the last stdout is exactly $2.
expect_line() {
	[ "$(sed -n "${1}p" "$tmp/out")" = "$2" ]
	check $? "line $1 is '$2'"
}

# The last stdout has exactly $1 lines.
expect_lines() {
	[ "$(wc -l <"$tmp/out")" -eq "$1" ]
	check $? "$1 lines of output: drl ${last_args[*]}"
}

# In the JSON object on stdout line $1, field $2 is the JSON value $3
# (written as JSON: true, 5, -1, "user42"). The line must parse as JSON.
# stdout is parsed once per run, into "LINE<tab>FIELD<tab>VALUE" rows.
expect_json() {
	local got
	if [ ! -f "$tmp/json" ]; then
		"$PYTHON3" -c '
import json, sys
for n, line in enumerate(sys.stdin, 1):
    try:
        o = json.loads(line)
    except ValueError:
        print("%d\t<not JSON>\t" % n)
        continue
    for k, v in o.items():
        print("%d\t%s\t%s" % (n, k, json.dumps(v)))
' <"$tmp/out" >"$tmp/json" 2>&1
	fi
	got=$(awk -F '\t' -v n="$1" -v k="$2" \
		'$1 == n && $2 == k { print $3; found = 1 }
		 END { if (!found) print "<absent>" }' "$tmp/json")
	[ "$got" = "$3" ]
	check $? "json line $1: $2 = $3 (got $got)"
}

if in_part local; then
# ---- --version, --help, bad usage ----
run --version
expect_rc 0
grep -qE '^drl [0-9]+\.[0-9]+\.[0-9]+$' "$tmp/out"
check $? "--version prints 'drl X.Y.Z'"

run --help
expect_rc 0
expect_in out "usage: drl"
expect_in out "check"
expect_empty err

run check --help
expect_rc 0
expect_in out "--limit SPEC"

run
expect_rc 2
expect_in err "usage: drl"

run frobnicate
expect_rc 2
expect_in err "frobnicate"
expect_in err "usage: drl"
expect_empty out

run --frobnicate
expect_rc 2
expect_in err "--frobnicate"

run check --limit fixed_window:3/1s --bogus-option user42
expect_rc 2
expect_in err "--bogus-option"
expect_in err "usage: drl check"

run check --limit fixed_window:3/1s
expect_rc 2
expect_in err "KEY"

run check user42
expect_rc 2
expect_in err "--limit"

run check --limit fixed_window:3/1s user42 user43
expect_rc 2
expect_in err "user43"

run check user42 --limit
expect_rc 2
expect_in err "--limit"

# ---- strict numbers ----
for bad in abc -1 1x "" " 1" +1 1.5 99999999999999999999; do
	run check --limit fixed_window:3/1s --cost "$bad" user42
	expect_rc 2
	expect_in err "--cost"
done
for bad in 0 1000001 x; do
	run check --limit fixed_window:3/1s --repeat "$bad" user42
	expect_rc 2
	expect_in err "--repeat"
done
for bad in -5 soon 9223372036854776; do
	run check --limit fixed_window:3/1s --now-ms "$bad" user42
	expect_rc 2
	expect_in err "--now-ms"
done

# ---- bad specs and URIs: exit 2, the message names the bad part ----
run check --limit bogus_algo:5/1s user42
expect_rc 2
expect_in err "bogus_algo"
expect_empty out

run check --limit token_bucket:5/7parsecs user42
expect_rc 2
expect_in err "7parsecs"

run check --limit fixed_window:0/1s user42
expect_rc 2
expect_in err "fixed_window:0/1s"

run check --limit "fixed_window:5/1s;nonsense" user42
expect_rc 2
expect_in err "nonsense"

run check --store bogus-scheme://x --limit fixed_window:5/1s user42
expect_rc 2
expect_in err "bogus-scheme"

run check --limit fixed_window:5/1s ""
expect_rc 2

# ---- decisions: fixed window, human lines ----
run check --limit fixed_window:3/1s --now-ms $T --repeat 4 user42
expect_rc 1
expect_lines 4
expect_line 1 "allowed  key=user42 remaining=2 limit=3 reset=1000ms"
expect_line 3 "allowed  key=user42 remaining=0 limit=3 reset=1000ms"
expect_line 4 "denied   key=user42 remaining=0 limit=3 retry_after=1000ms"
expect_empty err

run check --limit fixed_window:3/1s --now-ms $T --repeat 3 user42
expect_rc 0

# the default store is memory://, and --store memory:// is the same
run check --store memory:// --limit fixed_window:3/1s --now-ms $T user42
expect_rc 0
expect_line 1 "allowed  key=user42 remaining=2 limit=3 reset=1000ms"

# ---- decisions: token bucket, JSON ----
run check --limit token_bucket:5/1s --now-ms $T --repeat 6 --json user42
expect_rc 1
expect_lines 6
expect_json 1 key '"user42"'
expect_json 1 allowed true
expect_json 1 limit 5
expect_json 1 remaining 4
expect_json 1 reset_ms 200
expect_json 1 reset_us 200000
expect_json 1 retry_after_ms 0
expect_json 1 retry_after_us 0
expect_json 1 retry_never false
expect_json 1 limit_index 0
expect_json 1 path '"store"'
expect_json 5 allowed true
expect_json 5 remaining 0
expect_json 5 reset_ms 1000
expect_json 6 allowed false
expect_json 6 remaining 0
expect_json 6 retry_after_ms 200
expect_json 6 retry_after_us 200000

# cost 0 consumes nothing and reports the quota
run check --limit token_bucket:5/1s --now-ms $T --cost 0 --repeat 3 --json k
expect_rc 0
expect_json 3 allowed true
expect_json 3 remaining 5

# cost 3 of 5, twice: the second is denied and waits for 1 token (200ms)
run check --limit token_bucket:5/1s --now-ms $T --cost 3 --repeat 2 --json k
expect_rc 1
expect_json 1 remaining 2
expect_json 2 allowed false
expect_json 2 retry_after_ms 200

# cost above capacity: denied forever, retry_after -1 with retry_never
run check --limit token_bucket:5/1s --now-ms $T --cost 6 --json k
expect_rc 1
expect_json 1 allowed false
expect_json 1 retry_after_ms -1
expect_json 1 retry_after_us -1
expect_json 1 retry_never true
run check --limit token_bucket:5/1s --now-ms $T --cost 6 k
expect_rc 1
expect_in out "retry_after=never"

# ---- policies: one spec with ';', or --limit repeated ----
run check --limit "fixed_window:2/1s;fixed_window:10/1m" --now-ms $T \
	--repeat 3 --json user42
expect_rc 1
expect_json 2 allowed true
expect_json 3 allowed false
expect_json 3 limit 2
expect_json 3 limit_index 0

run check --limit fixed_window:10/1m --limit fixed_window:2/1s --now-ms $T \
	--repeat 3 --json user42
expect_rc 1
expect_json 3 allowed false
expect_json 3 limit 2
expect_json 3 limit_index 1

# ---- block_on_exceed: the store's denial repeated locally, path "near" ----
run check --limit "fixed_window:2/1s;block_on_exceed=10s" --now-ms $T \
	--repeat 4 --json user42
expect_rc 1
expect_json 3 path '"store"'
expect_json 3 retry_after_ms 1000
expect_json 4 allowed false
expect_json 4 path '"near"'
expect_json 4 retry_after_ms 1000
run check --limit "fixed_window:2/1s;block_on_exceed=10s" --now-ms $T \
	--repeat 4 user42
expect_rc 1
expect_line 4 "denied   key=user42 remaining=0 limit=2 retry_after=1000ms limit_index=0 path=near"
# ---- shadow=1: the would-be decision printed, the exit status 0 ----
run check --limit "fixed_window:1/1s;shadow=1" --now-ms $T --repeat 2 user42
expect_rc 0
expect_line 1 "allowed  key=user42 remaining=0 limit=1 reset=1000ms limit_index=0"
expect_line 2 "denied   key=user42 remaining=0 limit=1 retry_after=1000ms limit_index=0 shadow=allowed"
run check --limit "fixed_window:1/1s;shadow=1" --now-ms $T --repeat 2 --json \
	user42
expect_rc 0
expect_json 1 would_allow true
expect_json 2 allowed true
expect_json 2 would_allow false
expect_json 2 retry_after_ms 1000
run check --limit "fixed_window:1/1s;shadow=2" k
expect_rc 2
expect_in err "shadow=2 must be 0 or 1"

# ---- drl reset (its effect on a shared store: below, with Redis) ----
run reset --help
expect_rc 0
expect_in out "usage: drl reset"
run reset --limit fixed_window:1/1s --now-ms $T user42
expect_rc 0
expect_line 1 "reset    key=user42"
run reset --limit fixed_window:1/1s --json $'a\x01'
expect_rc 0
expect_json 1 key '"a\u0001"'
expect_json 1 reset true

# ---- keys are bytes: JSON-escaped, human lines stay one token ----
run check --limit fixed_window:3/1s --now-ms $T --json $'a"b\\c\nd\x01'
expect_rc 0
expect_json 1 key '"a\"b\\c\nd\u0001"'
run check --limit fixed_window:3/1s --now-ms $T --json $'\xff\xc3\xa9'
expect_rc 0
expect_json 1 key '"\u00ff\u00e9"'
expect_json 1 key_hex '"ffc3a9"'
run check --limit fixed_window:3/1s --now-ms $T $'a b'
expect_rc 0
expect_in out 'key=a\x20b '

# ---- without --now-ms: the real-time clock ----
run check --limit token_bucket:5/1s --json user42
expect_rc 0
expect_json 1 remaining 4

# ---- tls_verify=no is said on stderr (no server needed: port 1) ----
run check --store 'rediss://127.0.0.1:1?tls_verify=no&timeout_ms=200' \
	--limit gcra:1/1s k
expect_in err "WARNING: tls_verify=no"
run check --store 'rediss://127.0.0.1:1?timeout_ms=200' --limit gcra:1/1s k
! grep -qF "WARNING" "$tmp/err"
check $? "no warning with tls_verify on: drl ${last_args[*]}"

fi # in_part local

if in_part store; then
# ---- bad input: exit 2, a message naming it, nothing reaches the store ----
# The rows run against a redis-server of this script's own that wants a
# password: after each, Redis holds no key and ran no command but
# connection setup (PING, AUTH; INFO commandstats), and neither stdout nor
# stderr holds the password. Without redis-server and redis-cli the rows
# run on memory:// and the store checks are skipped (CI=true: a failure).
# shellcheck source=../../scripts/ports.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/ports.sh"
pw='Cli-Pw-4711'
S=memory://
if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
	rport=$(free_port)
	redis-server --port "$rport" --bind 127.0.0.1 --save "" \
		--appendonly no --dir "$tmp" --requirepass "$pw" \
		--daemonize no >"$tmp/redis.log" 2>&1 &
	pids+=($!)
	wait_port "$rport"
	check $? "redis-server listens on $rport"
	S="redis://:$pw@127.0.0.1:$rport"
elif [ "${CI:-}" = "true" ]; then
	check 1 "redis-server and redis-cli are installed (CI=true)"
else
	echo "# skip: no redis-server/redis-cli: store checks left out"
fi

rcli() {
	REDISCLI_AUTH=$pw redis-cli --no-auth-warning -p "$rport" "$@"
}

# Calls of every Redis command other than connection setup and ours.
store_calls() {
	[ "$S" = memory:// ] && return
	rcli INFO commandstats | tr -d '\r' | awk -F '[:=,]' '
		/^cmdstat_/ && $1 !~ /^cmdstat_(ping|auth|hello|select|client.*|info|dbsize|config.*)$/ {
			n += $3
		}
		END { print n + 0 }'
}

# The store is as it was: no key, store_calls unchanged since $1.
expect_untouched() {
	[ "$S" = memory:// ] && return
	[ "$(rcli DBSIZE)" = 0 ] && [ "$(store_calls)" = "$1" ]
	check $? "store untouched: drl ${last_args[*]}"
}

# Neither stream of the last command holds the password.
expect_no_secret() {
	! grep -qF -- "$pw" "$tmp/out" "$tmp/err"
	check $? "no password in the output: drl ${last_args[*]}"
}

# bad TEXT ARGS...: drl ARGS exits 2 with TEXT on stderr, nothing on
# stdout, no password, the store untouched.
bad() {
	local text=$1 before
	shift
	before=$(store_calls)
	run "$@"
	expect_rc 2
	expect_in err "$text"
	expect_empty out
	expect_no_secret
	expect_untouched "$before"
}

nine="fixed_window:1/1s;fixed_window:2/2s;fixed_window:3/3s"
nine="$nine;fixed_window:4/4s;fixed_window:5/5s;fixed_window:6/6s"
nine="$nine;fixed_window:7/7s;fixed_window:8/8s;fixed_window:9/9s"
C=(check --store "$S")
bad 'LIMIT "0" must be an integer from 1 to 1000000000' \
	"${C[@]}" --limit fixed_window:0/1s k
bad 'LIMIT "-1"' "${C[@]}" --limit fixed_window:-1/1s k
bad 'LIMIT "1000000001"' "${C[@]}" --limit fixed_window:1000000001/1s k
bad 'PERIOD "0ms" must be from 1ms to 366d' \
	"${C[@]}" --limit fixed_window:10/0ms k
bad 'PERIOD "367d"' "${C[@]}" --limit fixed_window:10/367d k
bad 'PERIOD "1fortnight" must be a count and a unit' \
	"${C[@]}" --limit fixed_window:10/1fortnight k
bad 'option "burst" given twice' \
	"${C[@]}" --limit token_bucket:10/1s,burst=2,burst=3 k
bad 'unknown option "bogus" for token_bucket' \
	"${C[@]}" --limit token_bucket:10/1s,bogus=1 k
bad 'unknown algorithm "tokn_bucket"' "${C[@]}" --limit tokn_bucket:1/1s k
bad 'a policy has at most 8 limits' "${C[@]}" --limit "$nine" k
bad 'appears twice in the policy' \
	"${C[@]}" --limit fixed_window:10/1s --limit fixed_window:10/1s k
bad 'on_error="maybe"' "${C[@]}" --limit "fixed_window:10/1s;on_error=maybe" k
bad 'near_cache="2"' "${C[@]}" --limit "fixed_window:10/1s;near_cache=2" k
bad 'block_on_exceed="0"' "${C[@]}" --limit "fixed_window:10/1s;block_on_exceed=0" k
bad 'key length 0 is outside 1..1048576 bytes' \
	"${C[@]}" --limit fixed_window:10/1s ""
bad "bad --cost '-1'" "${C[@]}" --limit fixed_window:10/1s --cost -1 k
bad "bad --cost '99999999999999999999'" \
	"${C[@]}" --limit fixed_window:10/1s --cost 99999999999999999999 k
bad "bad --now-ms '9223372036854776'" \
	"${C[@]}" --limit fixed_window:10/1s --now-ms 9223372036854776 k
bad "bad --repeat '0'" "${C[@]}" --limit fixed_window:10/1s --repeat 0 k
bad "option '--limit' needs a value" "${C[@]}" k --limit
bad "option '--store' needs a value" check --limit fixed_window:10/1s k --store
bad "unknown option '--bogus'" "${C[@]}" --limit fixed_window:10/1s --bogus k
if [ "$S" != memory:// ]; then
	bad 'tx="bogus": expected auto, lua or watch' \
		check --store "$S?tx=bogus" --limit fixed_window:10/1s k
	bad 'unknown URI option "bogus" for a redis:// store' \
		check --store "$S?bogus=1" --limit fixed_window:10/1s k
	bad 'option "tx" given twice' \
		check --store "$S?tx=lua&tx=watch" --limit fixed_window:10/1s k
fi
R=(reset --store "$S")
bad 'key length 0 is outside 1..1048576 bytes' \
	"${R[@]}" --limit fixed_window:10/1s ""
bad 'missing --limit SPEC' "${R[@]}" k
bad 'missing KEY' "${R[@]}" --limit fixed_window:10/1s
bad 'LIMIT "0" must be' "${R[@]}" --limit fixed_window:0/1s k
bad "unknown option '--cost'" "${R[@]}" --limit fixed_window:10/1s --cost 1 k
bad "bad --now-ms 'x'" "${R[@]}" --limit fixed_window:10/1s --now-ms x k
bad "unexpected argument 'b'" "${R[@]}" --limit fixed_window:10/1s a b
B=(bench --store "$S" --duration 0.1)
bad 'LIMIT "0" must be' "${B[@]}" --limit fixed_window:0/1s
bad "bad --concurrency '0'" "${B[@]}" --limit fixed_window:5/1s \
	--concurrency 0
bad "bad --keys '0'" "${B[@]}" --limit fixed_window:5/1s --keys 0
bad "bad --duration '0'" bench --store "$S" --limit fixed_window:5/1s \
	--duration 0
bad "bad --rounds '16'" "${B[@]}" --limit fixed_window:5/1s --rounds 16
bad "unknown option '--bogus'" "${B[@]}" --limit fixed_window:5/1s --bogus
bad "bad --rate-limit '0/1s'" simulate --rate-limit 0/1s
bad "bad --rate-limit '10/367d'" simulate --rate-limit 10/367d
bad "bad --traffic 'bogus'" simulate --rate-limit 10/1s --traffic bogus
bad "bad --seed 'x'" simulate --rate-limit 10/1s --seed x

# --rate-limit takes any PERIOD, also one that 6 sub-windows do not split
# into whole microseconds (1s: the subwindow row gets 5).
run simulate --rate-limit 10/1s --traffic poisson --rate 20 --duration 2 \
	--seed 1 --no-timing
expect_rc 0
expect_in out "subwindow:10/1s,subwindows=5"

# ---- drl reset on a shared store: the key starts afresh, a neighbour
# that shares its bytes and a policy that shares its prefix keep theirs ----
if [ "$S" != memory:// ]; then
	P="sliding_window:2/1h;gcra:3/1h"
	run check --store "$S" --limit "$P" --now-ms $T --repeat 3 r1
	expect_rc 1
	run check --store "$S" --limit "$P" --now-ms $T r10
	expect_rc 0
	run check --store "$S" --limit fixed_window:1/1h --now-ms $T r1
	expect_rc 0
	run reset --store "$S" --limit "$P" --now-ms $T r1
	expect_rc 0
	expect_line 1 "reset    key=r1"
	run check --store "$S" --limit "$P" --now-ms $T --json r1
	expect_rc 0
	expect_json 1 remaining 1
	run check --store "$S" --limit "$P" --now-ms $T --cost 0 --json r10
	expect_json 1 remaining 1
	run check --store "$S" --limit fixed_window:1/1h --now-ms $T r1
	expect_rc 1
fi

# ---- passwords never reach the output (docs/security.md) ----
if [ "$S" != memory:// ]; then
	closed=$(free_port) # nothing listens there
	run check --store "$S" --limit fixed_window:10/1s --json k
	expect_rc 0
	expect_no_secret
	for uri in "redis://:Wrong-$pw@127.0.0.1:$rport" \
		"redis://u:$pw@127.0.0.1:$closed"; do
		run check --store "$uri" --limit fixed_window:10/1s k
		expect_rc 3
		expect_no_secret
		run bench --store "$uri" --limit fixed_window:10/1s \
			--duration 0.1
		expect_rc 3
		expect_no_secret
	done
	run bench --store "$S" --limit fixed_window:10/1s --duration 0.1 --json
	expect_rc 0
	expect_in out '"store":"redis://:***@127.0.0.1:'
	expect_no_secret
	run bench --store "$S" --limit fixed_window:10/1s --duration 0.1
	expect_rc 0
	expect_in out '| redis://:***@127.0.0.1:'
	expect_no_secret
	run bench --store "memory://u:$pw@" --limit fixed_window:10/1s --procs 2
	expect_rc 2
	expect_no_secret
fi

# ---- a Sentinel URI: the master the sentinel names, no password shown ----
if [ "$S" != memory:// ] && ! command -v redis-sentinel >/dev/null; then
	if [ "${CI:-}" = "true" ]; then
		check 1 "redis-sentinel is installed (CI=true)"
	else
		echo "# skip: no redis-sentinel: sentinel checks left out"
	fi
elif [ "$S" != memory:// ]; then
	sport=$(free_port)
	start_sentinel "$sport" "$tmp" "$rport" cm "$pw" "$pw"
	pids+=($!)
	wait_port "$sport"
	check $? "redis-sentinel listens on $sport"
	SS="redis-sentinel://:$pw@127.0.0.1:$sport/cm?sentinel_password=$pw"
	for want in 0 1; do
		run check --store "$SS" --limit fixed_window:1/1h --now-ms $T sk
		expect_rc $want
	done
	[ -n "$(rcli --scan --pattern '*sk*')" ]
	check $? "the sentinel's master holds the key"
	run check --store "${SS/\/cm?//nosuch?}" --limit gcra:1/1s k
	expect_rc 3
	expect_in err 'monitors no master named "nosuch"'
	expect_no_secret
	run bench --store "$SS" --limit fixed_window:10/1s --duration 0.1
	expect_rc 0
	expect_in out 'sentinel_password=***'
	expect_no_secret
fi

fi # in_part store

echo "# $((n - failed)) of $n assertions passed"
[ "$failed" -eq 0 ]
