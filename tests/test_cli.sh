#!/usr/bin/env bash
# The drl CLI: exit codes (0 allowed, 1 denied, 2 bad usage/spec/URI),
# messages on stderr that name the bad part, and the --json fields, at fixed
# times (--now-ms) so every number is exact.
#
# usage: test_cli.sh PATH/TO/drl
# Prints one "ok N - ..." / "not ok N - ..." line per assertion and exits
# nonzero when any failed.
set -u

drl=${1:?usage: test_cli.sh PATH/TO/drl}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

n=0
failed=0
T=1000000 # --now-ms used below: an aligned second, far from 0

# Record one assertion: pass (0) or fail (nonzero) with a description.
check() {
	local ok=$1 what=$2
	n=$((n + 1))
	if [ "$ok" -eq 0 ]; then
		echo "ok $n - ${what//$'\n'/\\n}"
	else
		failed=$((failed + 1))
		echo "not ok $n - ${what//$'\n'/\\n}"
		echo "#   command: drl ${last_args[*]}"
		echo "#   exit: $rc"
		sed 's/^/#   stdout: /' "$tmp/out"
		sed 's/^/#   stderr: /' "$tmp/err"
	fi
}

# Run drl with the given arguments, keeping stdout, stderr and the status.
run() {
	last_args=("$@")
	"$drl" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
	rc=$?
	rm -f "$tmp/json"
}

# The last command exited with status $1.
expect_rc() {
	[ "$rc" -eq "$1" ]
	check $? "exit $1: drl ${last_args[*]}"
}

# The last command's stream $1 (out|err) contains the fixed string $2.
expect_in() {
	grep -qF -- "$2" "$tmp/$1"
	check $? "std$1 has '$2': drl ${last_args[*]}"
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
		python3 -c '
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

echo "# $((n - failed)) of $n assertions passed"
[ "$failed" -eq 0 ]
