#!/usr/bin/env bash
# drld under valgrind memcheck: one drld on the memory store walks every
# handler once (ad-hoc and rule decisions, a denial, a protected path and
# its 429, resets, a shadowed denial, /metrics, 404, 405, bad JSON, an
# oversized body, a good and a bad SIGHUP reload) and stops on SIGTERM;
# valgrind (tests/fixtures/valgrind.sh) must report no invalid access, no
# uninitialised use and no definite or indirect leak, and drld must exit 0.
#
# Under `meson test --setup valgrind` (DRL_VALGRIND set) drld runs under
# valgrind; in the other runs it runs as it is, under the build's
# sanitizers. test_drld.sh has the behaviour; this is the memory check.
#
# usage: test_drld_memcheck.sh DRLD VALGRIND_SH
set -uo pipefail

drld=$1
wrap=()
[ -n "${DRL_VALGRIND:-}" ] && wrap=(bash "$2")
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT

# shellcheck source=../fixtures/tap.sh
source "$(dirname "${BASH_SOURCE[0]}")/../fixtures/tap.sh"

cat >"$tmp/c.json" <<'EOF'
{"rules": {"r": {"limit": "fixed_window:1/1h", "key": "{ip}:{path}",
                 "on_error": "deny"}},
 "protect": [{"prefix": "/p/", "rule": "r"}]}
EOF

"${wrap[@]}" "$drld" --listen 127.0.0.1:0 --config "$tmp/c.json" \
	--max-body 256 2>"$tmp/err" &
pid=$!
port=
for ((i = 0; i < 600; i++)); do # valgrind starts slowly: up to 30 s
	port=$(sed -n 's/^drld: listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' \
		"$tmp/err")
	[ -n "$port" ] && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.05
done
[ -n "$port" ]
check $? "drld starts (${wrap[*]:-no wrapper})"
if [ -z "$port" ]; then
	cat "$tmp/err"
	echo "# $((n - failed)) of $n assertions passed"
	exit 1
fi

# code METHOD PATH [CURL ARGS...]: the status of one request.
code() {
	local m=$1 p=$2
	shift 2
	curl -s -o /dev/null -w '%{http_code}' --max-time 30 -X "$m" "$@" \
		"http://127.0.0.1:$port$p"
}
post() {
	code POST /v1/check -H 'Content-Type: application/json' \
		--data-binary "$1"
}

[ "$(post '{"key":"a","limit":"token_bucket:1/1h"}')" = 200 ]
check $? "an ad-hoc decision"
[ "$(post '{"key":"a","limit":"token_bucket:1/1h"}')" = 200 ]
check $? "an ad-hoc denial"
[ "$(post '{"key":"a","rule":"r","cost":0}')" = 200 ]
check $? "a rule's decision"
[ "$(code GET /p/x)" = 200 ] && [ "$(code GET /p//x)" = 429 ]
check $? "a protected path, then its 429"
rst() {
	code POST /v1/reset -H 'Content-Type: application/json' \
		--data-binary "$1"
}
[ "$(rst '{"key":"a","limit":"token_bucket:1/1h"}')" = 200 ] &&
	[ "$(rst '{"key":"a","rule":"r"}')" = 200 ] &&
	[ "$(rst '{"key":"a","rule":"nope"}')" = 404 ] &&
	[ "$(rst '{"key":')" = 400 ]
check $? "resets of an ad-hoc limit and a rule, a 404 and a 400"
[ "$(post '{"key":"s","limit":"token_bucket:1/1h;shadow=1"}')" = 200 ] &&
	[ "$(post '{"key":"s","limit":"token_bucket:1/1h;shadow=1"}')" = 200 ]
check $? "a shadowed ad-hoc denial"
[ "$(code GET /metrics)" = 200 ]
check $? "/metrics"
[ "$(code GET /nope)" = 404 ] && [ "$(code GET /v1/check)" = 405 ]
check $? "404 and 405"
[ "$(post '{"key":')" = 400 ] && [ "$(post '{"key":"a","limit":"x"}')" = 400 ]
check $? "bad JSON and a bad spec: 400"
[ "$(post "{\"key\":\"$(head -c 300 /dev/zero | tr '\0' k)\"}")" = 413 ]
check $? "a body over --max-body: 413"

# reload_and_wait RESULT: SIGHUP, then wait for the reload's line on
# stderr (RESULT "reloaded" or "reload failed").
reload_and_wait() {
	local before
	before=$(grep -c "$1" "$tmp/err")
	kill -HUP "$pid"
	wait_more "$tmp/err" "$1" "$before" 600
}
reload_and_wait "drld: reloaded"
check $? "a good reload"
printf '{"rules": {"r": {"limit": "nope"}}}' >"$tmp/c.json"
reload_and_wait "drld: reload failed"
check $? "a bad reload is refused"
[ "$(post '{"key":"b","rule":"r"}')" = 200 ]
check $? "the old config still serves"

kill -TERM "$pid"
wait "$pid"
st=$?
pid=
[ "$st" -eq 0 ]
check $? "drld exits 0 on SIGTERM: no valgrind error, no leak (exit $st)"
if [ "$st" -ne 0 ]; then
	sed 's/^/#   /' "$tmp/err"
fi
echo "# $((n - failed)) of $n assertions passed"
[ "$failed" -eq 0 ]
