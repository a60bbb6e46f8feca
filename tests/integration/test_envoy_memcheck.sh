#!/usr/bin/env bash
# drld's Envoy service under valgrind memcheck: one drld on the memory
# store with --grpc-listen and envoyproxy/ratelimit's README examples
# answers gRPC calls (allowed, over limit, shadowed, unlimited, replaces,
# an unknown domain, malformed requests) and a health check, is scraped,
# reloads a good and a bad config, and stops on SIGTERM; valgrind
# (tests/fixtures/valgrind.sh) must report no invalid access, no uninitialised
# use and no definite or indirect leak, and drld must exit 0. test_envoy.sh
# has the behaviour; this is the memory check (in other runs, the build's
# sanitizers).
#
# usage: test_envoy_memcheck.sh DRLD VALGRIND_SH PROTO_DIR
set -uo pipefail

drld=$1
wrap=()
[ -n "${DRL_VALGRIND:-}" ] && wrap=(bash "$2")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
client=(/usr/bin/python3 "$here/../fixtures/envoy_client.py" "$3")
tmp=$(mktemp -d)
pid=
rpid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; [ -n "$rpid" ] && kill "$rpid" 2>/dev/null; rm -rf "$tmp"' EXIT

# shellcheck source=../fixtures/tap.sh
source "$here/../fixtures/tap.sh"

if ! /usr/bin/python3 -c 'import grpc, grpc_tools' 2>/dev/null ||
	"$drld" --grpc-listen 127.0.0.1:0 probe 2>&1 | grep -q 'without gRPC'; then
	if [ "${CI:-}" = "true" ]; then
		check 1 "drld's gRPC service and python3-grpcio are installed (CI=true)"
	else
		echo "# skip: no gRPC in drld or no python3-grpcio"
	fi
	echo "# $((n - failed)) of $n assertions passed"
	[ "$failed" -eq 0 ]
	exit
fi

mkdir -p "$tmp/cfg"
cp "$here"/../fixtures/envoy_readme/*.yaml "$tmp/cfg/"

# start_drld ARGS...: drld (under valgrind when asked) with the README
# config and ARGS; sets pid, port and gport, or ends the test.
start_drld() {
	# emptied here, not by the child's redirection: that runs after the
	# fork, and the loop below could read the previous drld's ports
	# first (a clean-clone run on a busy core did)
	: >"$tmp/err"
	"${wrap[@]}" "$drld" --listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 \
		--envoy-config "$tmp/cfg" --grpc-headers "$@" 2>>"$tmp/err" &
	pid=$!
	port= gport=
	for ((i = 0; i < 1200; i++)); do # valgrind starts slowly: up to 60 s
		port=$(sed -n 's/^drld: listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$tmp/err")
		gport=$(sed -n 's/^drld: grpc listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$tmp/err")
		[ -n "$port" ] && [ -n "$gport" ] && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	[ -n "$port" ] && [ -n "$gport" ]
	check $? "drld $* starts (${wrap[*]:-no wrapper})"
	if [ -z "$port" ] || [ -z "$gport" ]; then
		cat "$tmp/err"
		echo "# $((n - failed)) of $n assertions passed"
		exit 1
	fi
}

# stop_drld: SIGTERM; drld must exit 0 (valgrind's error exit otherwise).
stop_drld() {
	kill -TERM "$pid"
	wait "$pid"
	local st=$?
	pid=
	[ "$st" -eq 0 ]
	check $? "drld exits 0 on SIGTERM: no valgrind error, no leak (exit $st)"
	if [ "$st" -ne 0 ]; then
		sed 's/^/#   /' "$tmp/err" | head -200
	fi
}

start_drld

# call WANT DOMAIN ENTRIES: one gRPC call's summary is WANT (a prefix).
call() {
	local got
	got=$("${client[@]}" call "$gport" "$2" "$3" 2>&1)
	[[ "$got" == "$1"* ]]
	check $? "$2 $3: $1 (got $got)"
}

call "OK OK 99" messaging to_number=m
call "OVER_LIMIT OVER_LIMIT 0" edge_proxy_per_ip remote_address=50.0.0.5
call "OK OK 4294967295" internal ldap=x
call "OK OK 9" example6 service=auth-service,user=user-a
call "OK OK 0" no-such-domain k=v
call "INVALID_ARGUMENT" "" k=v
call "OK OK 19" example9 key1=valueX
got=$("${client[@]}" health "$gport" ratelimit 2>&1)
[ "$got" = SERVING ]
check $? "Health/Check ratelimit: SERVING (got $got)"
curl -s -o /dev/null "http://127.0.0.1:$port/metrics"
check $? "/metrics"

# reload_and_wait TEXT: SIGHUP, then wait for one more TEXT line on stderr.
reload_and_wait() {
	local before
	before=$(grep -c "$1" "$tmp/err")
	kill -HUP "$pid"
	wait_more "$tmp/err" "$1" "$before"
}
reload_and_wait "drld: reloaded"
check $? "a good reload"
printf 'domain: bad\ndescriptors:\n  - key: k\n    rate_limit: {unit: aeon}\n' \
	>"$tmp/cfg/bad.yaml"
reload_and_wait "drld: reload failed"
check $? "a bad reload is refused"
call "OK OK 98" messaging to_number=m

stop_drld

# The same drld on Redis tx=lua (shared connections): its gRPC calls and
# its /v1/check are started through libdrl's async API and end on an
# async loop's thread (docs/envoy.md, "Threads").
if command -v redis-server >/dev/null; then
	# shellcheck source=../../scripts/ports.sh
	. "$here/../../scripts/ports.sh"
	rport=$(free_port)
	start_redis "$rport" "$tmp"
	rpid=$!
	wait_port "$rport"
	check $? "a redis-server listens on $rport"
	rm -f "$tmp/cfg/bad.yaml"
	start_drld --store "redis://127.0.0.1:$rport"
	call "OK OK 99" messaging to_number=m
	call "OK OK 98" messaging to_number=m
	call "OVER_LIMIT OVER_LIMIT 0" edge_proxy_per_ip remote_address=50.0.0.5
	call "OK OK 4294967295" internal ldap=x
	call "INVALID_ARGUMENT" "" k=v
	# and HTTP's /v1/check, also started through the async API there
	got=$(curl -s -X POST -H 'Content-Type: application/json' \
		--data-binary '{"key":"m","limit":"fixed_window:5/1h"}' \
		"http://127.0.0.1:$port/v1/check")
	[[ "$got" == '{"allowed":true,"limit":5,"remaining":4,'* ]]
	check $? "POST /v1/check on Redis: allowed, 4 left (got $got)"
	stop_drld
	kill "$rpid"
	wait "$rpid" 2>/dev/null
elif [ "${CI:-}" = "true" ]; then
	check 1 "redis-server is installed (CI=true)"
else
	echo "# skip: the Redis part (no redis-server)"
fi
echo "# $((n - failed)) of $n assertions passed"
[ "$failed" -eq 0 ]
