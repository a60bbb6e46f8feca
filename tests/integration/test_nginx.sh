#!/usr/bin/env bash
# ngx_http_drl_module (docs/nginx.md) in Debian's real nginx binary, each
# nginx started here with its own prefix, config and pid file in a temp
# dir, on free loopback ports, and stopped by PID:
#   input     malformed directives rejected by `nginx -t` with a clear
#             message (and no password shown)
#   memory    memory:// in one worker: exactly the limit of a concurrent
#             burst, the RateLimit headers, the variables in the access
#             log, dry run (drl_dry_run and the spec's shadow=1), several
#             limits per location (the first denial stops), drl_status,
#             an empty key, an internal redirect deciding once
#   shared    two nginx (two workers each) sharing one limit exactly on
#             one redis-server (counters and a Lua-twin algorithm) and on
#             one memcached
#   failure   a stopped store with each on_error (and none: 503), a
#             stalled store answered by on_error after timeout_ms, clients
#             that go away while their decision is in flight
#   service   reload under load (nothing fails), reload and `quit` with
#             decisions in flight (each request answered, workers exit)
# Every nginx must exit 0 on SIGQUIT and log no crash, alert or sanitizer
# report. An ASan-built module is loaded into Debian's nginx with the
# sanitizer runtimes preloaded.
#
# usage: test_nginx.sh PATH/TO/ngx_http_drl_module.so [PART]
# A missing nginx/redis-server/memcached/curl skips what needs it, except
# under CI=true, where it is a failure. Prints one "ok N - ..." / "not ok
# N - ..." line per assertion and exits nonzero when any failed.
set -u

module=${1:?usage: test_nginx.sh PATH/TO/ngx_http_drl_module.so [PART]}
module=$(realpath "$module")
# shellcheck source=../fixtures/parts.sh
. "$(dirname "${BASH_SOURCE[0]}")/../fixtures/parts.sh"
choose_part test_nginx.sh "${2:-}" input memory shared failure service
here=$(dirname "${BASH_SOURCE[0]}")
client="$here/../fixtures/nginx_client.py"
tmp=$(mktemp -d)
chmod 755 "$tmp" # nginx's workers (another user unless root) read html/
pids=()          # every process this script started, stopped by PID at exit
declare -A npid  # nginx master PID by instance name

# shellcheck source=../../scripts/ports.sh
. "$here/../../scripts/ports.sh"

cleanup() {
	local p
	[ -n "${NGINX_TEST_KEEP:-}" ] && cp -r "$tmp" "$NGINX_TEST_KEEP"
	for p in "${pids[@]}"; do # a SIGSTOPped server would not stop
		kill -CONT "$p" 2>/dev/null
	done
	stop_pids "${pids[@]}" # scripts/ports.sh
	rm -rf "$tmp"
}
trap cleanup EXIT

# shellcheck source=../fixtures/tap.sh
source "$here/../fixtures/tap.sh"
source "$here/../fixtures/pause.sh"

nginx=$(command -v nginx || echo /usr/sbin/nginx)
if [ ! -x "$nginx" ] || ! command -v curl >/dev/null; then
	[ -x "$nginx" ] || missing nginx
	command -v curl >/dev/null || missing curl
	finish
fi

# An ASan/UBSan-built module needs the sanitizer runtimes first in an
# uninstrumented nginx: preload them (leak checks off: nginx's own pools
# are not freed at exit; a use after free or an overflow still aborts).
preload=
if nm -D --undefined-only "$module" 2>/dev/null | grep -q __asan_init; then
	preload="$(gcc -print-file-name=libasan.so)"
	if nm -D --undefined-only "$module" | grep -q __ubsan_handle; then
		preload="$preload $(gcc -print-file-name=libubsan.so)"
	fi
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
fi

# ---- nginx instances ---------------------------------------------------

# conf NAME PORT WORKERS HTTP_BODY: write $tmp/NAME/nginx.conf: the module,
# the instance's own files, an access log with the drl variables, and
# HTTP_BODY (drl_zone lines) in the http block, with a server on
# 127.0.0.1:PORT (listen options: $listen_opts) serving $tmp/NAME/html.
conf() {
	local name=$1 port=$2 workers=$3 body=$4 d=$tmp/$1 user=
	mkdir -p "$d/html"
	echo ok >"$d/html/index.html"
	[ "$(id -u)" -eq 0 ] && user="user root;"
	cat >"$d/nginx.conf" <<EOF
load_module $module;
daemon off;
worker_processes $workers;
$user
error_log $d/error.log info;
pid $d/nginx.pid;
events { worker_connections 1024; }
http {
	log_format drl '\$request_uri \$status \$drl_status \$drl_remaining \$drl_retry_after \$drl_limit \$drl_zone \$drl_path';
	log_format worker '\$pid \$drl_status';
	access_log $d/access.log drl;
	client_body_temp_path $d/body;
	proxy_temp_path $d/proxy;
	fastcgi_temp_path $d/fastcgi;
	uwsgi_temp_path $d/uwsgi;
	scgi_temp_path $d/scgi;
$body
	server {
		listen 127.0.0.1:$port${listen_opts:+ $listen_opts};
		root $d/html;
		LOCATIONS
	}
}
EOF
}

# locations NAME TEXT: put TEXT in place of the server's LOCATIONS.
locations() {
	"$PYTHON3" - "$tmp/$1/nginx.conf" "$2" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read().replace("LOCATIONS", sys.argv[2])
open(p, "w").write(s)
PY
}

# ngx_test NAME: `nginx -t` of NAME's config; its output in $tmp/NAME/t.out.
ngx_test() {
	local d=$tmp/$1
	LD_PRELOAD=$preload "$nginx" -t -p "$d" -c "$d/nginx.conf" \
		>"$d/t.out" 2>&1
}

# ngx_start NAME PORT: start NAME's nginx (in the foreground of a
# background job: $! is the master) and wait until it listens on PORT.
ngx_start() {
	local d=$tmp/$1
	LD_PRELOAD=$preload "$nginx" -p "$d" -c "$d/nginx.conf" \
		>"$d/stderr" 2>&1 &
	npid[$1]=$!
	pids+=($!)
	wait_port "$2"
	check $? "$1: nginx listens on $2"
}

# ngx_stop NAME: SIGQUIT (graceful); nginx must exit 0 with nothing bad
# in its logs.
ngx_stop() {
	local d=$tmp/$1 p=${npid[$1]} st
	kill -QUIT "$p"
	wait "$p"
	st=$?
	[ "$st" -eq 0 ]
	check $? "$1: nginx exits 0 on SIGQUIT (got $st)"
	! grep -E '\[(alert|emerg|crit)\]|exited on signal|AddressSanitizer|runtime error:' \
		"$d/error.log" "$d/stderr"
	check $? "$1: no crash, alert or sanitizer report in its logs"
}

# get URL [CURL ARGS...]: the status in $code, headers in $tmp/hdr.
get() {
	local url=$1
	shift
	code=$(curl -s -o /dev/null -D "$tmp/hdr" -w '%{http_code}' "$@" "$url")
}

# The value of response header $1 in $tmp/hdr, "<absent>" if none.
hdr() {
	local v
	v=$(grep -i "^$1:" "$tmp/hdr" | head -n1 | cut -d: -f2- | tr -d '\r' |
		sed 's/^ *//')
	[ -n "$v" ] && echo "$v" || echo "<absent>"
}

# logline NAME K: the access log's line K (1-based) of NAME.
logline() { sed -n "${2}p" "$tmp/$1/access.log"; }

# wait_log NAME TEXT COUNT [TRIES]: wait (TRIES x 50 ms, default 1200: a
# minute) until NAME's error log holds COUNT lines with TEXT.
wait_log() {
	local i
	for ((i = 0; i < ${4:-1200}; i++)); do
		[ "$(grep -c -- "$2" "$tmp/$1/error.log")" -ge "$3" ] && return 0
		sleep 0.05
	done
	return 1
}

# wait_recvq PORT: wait (60 s at most) until a socket of the server on
# 127.0.0.1:PORT holds unread bytes: a SIGSTOPped store has decisions in
# flight.
wait_recvq() {
	local i hex
	hex=$(printf '%04X' "$1")
	for ((i = 0; i < 1200; i++)); do
		awk -v p=":$hex" 'NR > 1 && substr($2, length($2) - 4) == p &&
			$4 == "01" { split($5, q, ":"); if (q[2] != "00000000") f = 1 }
			END { exit !f }' /proc/net/tcp && return 0
		sleep 0.05
	done
	return 1
}

# own_redis: a redis-server of the part's own on a free port (rport, its
# PID rpid: the part stops and stalls it); none installed: skip the part,
# or fail under CI.
own_redis() {
	if ! command -v redis-server >/dev/null; then
		missing redis-server
		finish
	fi
	redis_up rport rpid "redis-server"
}

# burst N URL...: N concurrent requests; sets $burst ("200=A 429=B other=C").
burst() {
	burst=$("$PYTHON3" "$client" burst "$@" | head -n1)
}

# ---- input: nginx -t ---------------------------------------------------

if in_part input; then
	p=$(free_port)
	# bad NAME BODY TEXT [LOCATION]: nginx -t fails and says TEXT.
	bad() {
		conf "$1" "$p" 1 "$2"
		locations "$1" "${4:-location / { }}"
		ngx_test "$1"
		local st=$?
		[ "$st" -ne 0 ] && grep -qF -- "$3" "$tmp/$1/t.out"
		check $? "nginx -t rejects $1: '$3'"
		[ "$st" -ne 0 ] || sed 's/^/#   /' "$tmp/$1/t.out"
	}
	z='drl_zone $binary_remote_addr zone=a spec=fixed_window:10/1h;'
	conf good "$p" 1 "$z
	drl_zone \$http_x_api_key zone=b \"spec=sliding_window:5/1s;fixed_window:100/1h\" store=memory:// on_error=deny;"
	locations good 'location / { drl zone=a; drl zone=b; drl_status 503; drl_dry_run on; drl_headers on; drl_log_level warn; }'
	ngx_test good
	check $? "nginx -t accepts every directive"
	grep -q 'test is successful' "$tmp/good/t.out"
	check $? "nginx -t says the test is successful"

	bad spec 'drl_zone $remote_addr zone=a spec=nonsense:1/1s;' \
		'drl_zone "a": spec="nonsense:1/1s": '
	bad uri 'drl_zone $remote_addr zone=a spec=fixed_window:1/1s store=redis://127.0.0.1:1?tx=bogus;' \
		'drl_zone "a": store="redis://127.0.0.1:1?tx=bogus": '
	bad password 'drl_zone $remote_addr zone=a spec=fixed_window:1/1s store=redis://:hunter2@127.0.0.1:1?tx=bogus;' \
		'drl_zone "a": store='
	! grep -q hunter2 "$tmp/password/t.out"
	check $? "nginx -t shows no password of a bad store URI"
	bad noname 'drl_zone $remote_addr spec=fixed_window:1/1s;' \
		'zone=NAME is required'
	bad badname 'drl_zone $remote_addr zone=a"b spec=fixed_window:1/1s;' \
		'zone=NAME is required'
	bad nospec 'drl_zone $remote_addr zone=a;' 'drl_zone "a": spec=SPEC is required'
	bad on_error 'drl_zone $remote_addr zone=a spec=fixed_window:1/1s on_error=maybe;' \
		'on_error="maybe": expected allow, deny or local'
	bad twice "$z $z" 'drl_zone "a" is already defined'
	bad param 'drl_zone $remote_addr zone=a spec=fixed_window:1/1s rate=1r/s;' \
		'drl_zone: invalid parameter "rate=..."'
	# attack: a misspelled store= is an unknown parameter whose value
	# holds a password: nginx -t names the parameter, not its value.
	bad misspelled 'drl_zone $remote_addr zone=a spec=fixed_window:1/1s stor=redis://:hunter2@127.0.0.1:1;' \
		'drl_zone: invalid parameter "stor=..."'
	! grep -q hunter2 "$tmp/misspelled/t.out"
	check $? "attack: nginx -t shows no password of a misspelled store="
	bad drlpw "$z" 'drl: invalid parameter "store=..."' \
		'location / { drl store=redis://:hunter2@h:1; }'
	! grep -q hunter2 "$tmp/drlpw/t.out"
	check $? "attack: nginx -t shows no value of drl's unknown parameter"
	bad unknown "$z" 'drl: unknown zone "nope"' 'location / { drl zone=nope; }'
	bad dup "$z" 'is duplicate' 'location / { drl zone=a; drl zone=a; }'
	bad status "$z" 'value must be between 400 and 599' \
		'location / { drl zone=a; drl_status 200; }'
	bad level "$z" 'invalid value "debug"' \
		'location / { drl zone=a; drl_log_level debug; }'
	bad drlarg "$z" 'drl: invalid parameter "a"' 'location / { drl a; }'
fi

# ---- memory: one worker ------------------------------------------------

if in_part memory; then
	clear_of_hour_edge # the windows of an hour (tests/fixtures/tap.sh)
	p=$(free_port)
	conf mem "$p" 1 '
	drl_zone $arg_k zone=burst spec=fixed_window:5/1h;
	drl_zone $arg_k zone=h spec=fixed_window:3/1h;
	drl_zone $arg_k zone=dry spec=fixed_window:2/1h;
	drl_zone $arg_k zone=shadow "spec=fixed_window:2/1h;shadow=1";
	drl_zone $arg_k zone=big spec=fixed_window:10/1h;
	drl_zone $arg_k zone=small spec=token_bucket:2/1h;
	drl_zone $arg_k zone=st spec=fixed_window:1/1h;
	drl_zone $http_x_key zone=empty spec=fixed_window:1/1h;
	drl_zone redirect zone=redir spec=fixed_window:3/1h;
	drl_zone $arg_k zone=after spec=fixed_window:1/1h;'
	locations mem '
		location /burst { drl zone=burst; try_files /index.html =404; }
		location /h { drl zone=h; drl_headers on; try_files /index.html =404; }
		location /noh { drl zone=h; try_files /index.html =404; }
		location /dry { drl zone=dry; drl_dry_run on; drl_headers on; try_files /index.html =404; }
		location /shadow { drl zone=shadow; try_files /index.html =404; }
		location /two { drl zone=small; drl zone=big; try_files /index.html =404; }
		location /mixed { drl zone=shadow; drl zone=after; drl_headers on; try_files /index.html =404; }
		location /big { drl zone=big; drl_headers on; try_files /index.html =404; }
		location /st { drl zone=st; drl_status 503; try_files /index.html =404; }
		location /empty { drl zone=empty; try_files /index.html =404; }
		location /missing { drl zone=redir; error_page 404 = /index.html; }
		location = /index.html { drl zone=redir; }'
	ngx_start mem "$p"
	u=http://127.0.0.1:$p

	burst 20 "$u/burst?k=b1"
	[ "$burst" = "200=5 429=15 other=0" ]
	check $? "memory: 20 concurrent requests on fixed_window:5/1h: exactly 5 pass ($burst)"

	get "$u/h?k=h1"
	[ "$code" = 200 ] && [ "$(hdr RateLimit-Policy)" = '"h";q=3;w=3600' ] &&
		[ "$(hdr RateLimit | sed 's/;t=.*//')" = '"h";r=2' ] &&
		[ "$(hdr Retry-After)" = "<absent>" ]
	check $? "headers: RateLimit-Policy and RateLimit on an allowed request ($(hdr RateLimit))"
	get "$u/h?k=h1"
	get "$u/h?k=h1"
	get "$u/h?k=h1"
	ra=$(hdr Retry-After)
	[ "$code" = 429 ] && [ "$(hdr RateLimit | sed 's/;t=.*//')" = '"h";r=0' ] &&
		[ "$ra" -ge 1 ] && [ "$ra" -le 3600 ]
	check $? "headers: a denial is 429 with RateLimit r=0 and Retry-After $ra"
	get "$u/noh?k=h2"
	[ "$code" = 200 ] && [ "$(hdr RateLimit)" = "<absent>" ] &&
		[ "$(hdr RateLimit-Policy)" = "<absent>" ]
	check $? "headers: none without drl_headers"
	grep -q "^/h?k=h1 429 REJECTED 0 $ra 3 h store$" "$tmp/mem/access.log"
	check $? "variables: \$drl_status REJECTED, remaining 0, retry_after $ra, limit 3, zone h, path store"
	grep -q '^/h?k=h1 200 PASSED 2 - 3 h store$' "$tmp/mem/access.log"
	check $? "variables: \$drl_status PASSED, remaining 2, no retry_after"

	for i in 1 2 3 4; do get "$u/dry?k=d1"; echo "$code"; done >"$tmp/dry"
	[ "$(sort -u "$tmp/dry")" = 200 ] && [ "$(hdr Retry-After)" = "<absent>" ]
	check $? "dry run: 4 requests on a limit of 2 all pass, no Retry-After"
	[ "$(grep -c '^/dry?k=d1 200 REJECTED_DRY_RUN 0' "$tmp/mem/access.log")" = 2 ] &&
		[ "$(grep -c '^/dry?k=d1 200 PASSED' "$tmp/mem/access.log")" = 2 ]
	check $? "dry run: \$drl_status PASSED twice, then REJECTED_DRY_RUN twice"
	grep -q 'limiting requests, dry run, by drl zone "dry"' "$tmp/mem/error.log"
	check $? "dry run: the error log says so"
	for i in 1 2 3; do get "$u/shadow?k=s1"; echo "$code"; done >"$tmp/shadow"
	[ "$(sort -u "$tmp/shadow")" = 200 ] &&
		grep -q '^/shadow?k=s1 200 REJECTED_DRY_RUN 0' "$tmp/mem/access.log"
	check $? "the spec's shadow=1: passes, \$drl_status REJECTED_DRY_RUN"

	get "$u/mixed?k=s1"
	get "$u/mixed?k=s1"
	[ "$code" = 429 ] && [ "$(hdr RateLimit | sed 's/;t=.*//')" = '"after";r=0' ] &&
		grep -q '^/mixed?k=s1 200 REJECTED_DRY_RUN 0 [0-9]* 2 shadow store$' "$tmp/mem/access.log" &&
		grep -q '^/mixed?k=s1 429 REJECTED 0 [0-9]* 1 after store$' "$tmp/mem/access.log"
	check $? "a dry-run denial, then a real one: the real one answers and is reported"

	for i in 1 2 3; do get "$u/two?k=t1"; echo "$code"; done >"$tmp/two"
	[ "$(tr '\n' ' ' <"$tmp/two")" = "200 200 429 " ] &&
		grep -q '^/two?k=t1 429 REJECTED 0 [0-9]* 2 small store$' "$tmp/mem/access.log"
	check $? "several limits: the smaller one (listed first) denies the third request"
	get "$u/big?k=t1"
	[ "$(hdr RateLimit | sed 's/;t=.*//')" = '"big";r=7' ]
	check $? "several limits: the denial stopped before 'big' was consumed (r=7 after 2 + 1)"

	get "$u/st?k=x"
	get "$u/st?k=x"
	[ "$code" = 503 ]
	check $? "drl_status 503: the denial's status is 503"
	for i in 1 2 3; do get "$u/empty"; echo "$code"; done >"$tmp/empty"
	[ "$(sort -u "$tmp/empty")" = 200 ] && grep -q '^/empty 200 - ' "$tmp/mem/access.log"
	check $? "an empty key is not limited (\$drl_status empty)"
	for i in 1 2 3 4; do get "$u/missing"; echo "$code"; done >"$tmp/redir"
	[ "$(tr '\n' ' ' <"$tmp/redir")" = "200 200 200 429 " ]
	check $? "an internal redirect (error_page) decides once: 3 of 3 pass, then 429 ($(tr '\n' ' ' <"$tmp/redir"))"
	ngx_stop mem

	# memory:// is per worker: two workers (reuseport spreads the
	# connections), each admits the limit of 5 of what it got
	p=$(free_port)
	listen_opts=reuseport conf workers "$p" 2 '	drl_zone one zone=w spec=fixed_window:5/1h;'
	locations workers "location / { drl zone=w; access_log $tmp/workers/pid.log worker; }"
	ngx_start workers "$p"
	burst 40 "http://127.0.0.1:$p/index.html"
	per=$(awk '{ n[$1]++; if ($2 == "PASSED") ok[$1]++ }
		END { for (w in n) printf "%d/%d ", ok[w], n[w] }' "$tmp/workers/pid.log")
	good=1
	for c in $per; do
		got=${c#*/} passed=${c%/*}
		[ "$passed" -eq $((got < 5 ? got : 5)) ] || good=0
	done
	[ "$good" = 1 ] && [ -n "$per" ]
	check $? "memory:// per worker: each worker admits min(5, its requests) (passed/requests per worker: $per)"
	ngx_stop workers

	# attack (issue 45, 9): a worker's memory:// store had no key bound,
	# and clients choose the keys. It is now bounded (100,000 keys a
	# worker unless store= says max_keys=), each limit to a quarter: a
	# client choosing zone a's keys fills a's share (here 2 of 8), a
	# refused key is 503, and zone b still takes new keys.
	p=$(free_port)
	conf bound "$p" 1 '
	drl_zone $arg_k zone=a spec=fixed_window:5/1h store=memory://?max_keys=8;
	drl_zone $arg_k zone=b spec=fixed_window:6/1h store=memory://?max_keys=8;'
	locations bound '
		location /a { drl zone=a; try_files /index.html =404; }
		location /b { drl zone=b; try_files /index.html =404; }'
	ngx_start bound "$p"
	for i in 1 2 3 4 5 6; do get "http://127.0.0.1:$p/a?k=a$i"; echo "$code"; done >"$tmp/bound_a"
	[ "$(tr '\n' ' ' <"$tmp/bound_a")" = "200 200 503 503 503 503 " ]
	check $? "attack: store=memory://?max_keys=8: a client choosing zone a's keys: 2 kept, then 503 ($(tr '\n' ' ' <"$tmp/bound_a"))"
	for i in 1 2; do get "http://127.0.0.1:$p/b?k=b$i"; echo "$code"; done >"$tmp/bound_b"
	[ "$(tr '\n' ' ' <"$tmp/bound_b")" = "200 200 " ]
	check $? "attack: meanwhile zone b takes new keys ($(tr '\n' ' ' <"$tmp/bound_b"))"
	grep -q 'memory store full' "$tmp/bound/error.log"
	check $? "attack: the refusal is in the error log (memory store full)"
	ngx_stop bound
fi

# ---- shared: two nginx, one store --------------------------------------

if in_part shared; then
	clear_of_hour_edge # the windows of an hour (tests/fixtures/tap.sh)
	start_test_servers "$tmp" # rport, mport (scripts/ports.sh)
	# share NAME URI SPEC: two nginx (2 workers each) on URI; 60
	# concurrent requests split over both for one key admit exactly the
	# spec's limit of 25.
	share() {
		local pa pb body
		pa=$(free_port)
		pb=$(free_port)
		body="	drl_zone \$arg_k zone=s spec=$3 store=$2;"
		conf "$1a" "$pa" 2 "$body"
		conf "$1b" "$pb" 2 "$body"
		locations "$1a" 'location / { drl zone=s; }'
		locations "$1b" 'location / { drl zone=s; }'
		ngx_start "$1a" "$pa"
		ngx_start "$1b" "$pb"
		burst 60 "http://127.0.0.1:$pa/index.html?k=$1" \
			"http://127.0.0.1:$pb/index.html?k=$1"
		[ "$burst" = "200=25 429=35 other=0" ]
		check $? "$1: two nginx sharing $2 with $3 admit exactly 25 of 60 ($burst)"
		[ "$(cat "$tmp/$1a/access.log" "$tmp/$1b/access.log" | grep -c ' 200 PASSED ')" = 25 ] &&
			[ "$(cat "$tmp/$1a/access.log" "$tmp/$1b/access.log" | grep -c ' 429 REJECTED ')" = 35 ]
		check $? "$1: the two access logs agree: 25 PASSED, 35 REJECTED"
		ngx_stop "$1a"
		ngx_stop "$1b"
	}
	if [ -n "$rport" ]; then
		share redis_counter "redis://127.0.0.1:$rport" fixed_window:25/1h
		share redis_lua "redis://127.0.0.1:$rport" gcra:25/1h
		share redis_watch "redis://127.0.0.1:$rport?tx=watch" token_bucket:25/1h
	fi
	[ -n "$mport" ] &&
		share memcached "memcached://127.0.0.1:$mport" sliding_window:25/1h
	# attack (issue 45, 1): on redis-sentinel:// with the default tx=auto
	# a worker died (SIGSEGV) on every new key of a counter zone (the
	# Sentinel store ran a Redis store's trim on its own struct): every
	# counter algorithm, shared exactly, and no worker lost. connect=eager:
	# a worker then knows the master when it starts (the module opens
	# network stores lazily, and a lazy Sentinel store answers a started
	# call before its first resolution as unavailable, docs/nginx.md)
	if [ -n "$rport" ] && command -v redis-sentinel >/dev/null; then
		sport=$(free_port)
		start_sentinel "$sport" "$tmp" "$rport" nm
		pids+=($!)
		wait_port "$sport"
		check $? "redis-sentinel listens on $sport"
		for spec in fixed_window:25/1h sliding_window:25/1h \
			subwindow:25/1h,subwindows=6; do
			share "sentinel_${spec%%:*}" "redis-sentinel://127.0.0.1:$sport/nm?connect=eager" "$spec"
		done
		! grep -h 'exited on signal' "$tmp"/sentinel_*/error.log
		check $? "attack: no nginx worker died on redis-sentinel:// counters"
	elif [ -n "$rport" ]; then
		missing redis-sentinel
	fi
fi

# ---- failure: the store away -------------------------------------------

if in_part failure; then
	clear_of_hour_edge # the windows of an hour (tests/fixtures/tap.sh)
	own_redis
	p=$(free_port)
	# the breaker off: every call goes to the store (and fails)
	r="redis://127.0.0.1:$rport?timeout_ms=300&breaker_failures=0"
	slow="redis://127.0.0.1:$rport?timeout_ms=4000&breaker_failures=0"
	conf fail "$p" 1 "
	drl_zone \$arg_k zone=allow spec=fixed_window:2/1h store=$r on_error=allow;
	drl_zone \$arg_k zone=deny spec=fixed_window:2/1h store=$r on_error=deny;
	drl_zone \$arg_k zone=local spec=fixed_window:2/1h store=$r on_error=local;
	drl_zone \$arg_k zone=none spec=fixed_window:2/1h store=$r;
	drl_zone \$arg_k zone=slow spec=fixed_window:2/1h store=$slow;"
	locations fail '
		location /allow { drl zone=allow; try_files /index.html =404; }
		location /deny { drl zone=deny; try_files /index.html =404; }
		location /local { drl zone=local; try_files /index.html =404; }
		location /none { drl zone=none; try_files /index.html =404; }
		location /slow { drl zone=slow; try_files /index.html =404; }'
	ngx_start fail "$p"
	u=http://127.0.0.1:$p
	get "$u/none?k=up"
	[ "$code" = 200 ]
	check $? "store up: a decision passes"

	# stalled (SIGSTOP): each decision waits timeout_ms, then on_error
	pause_pid "$rpid"
	get "$u/allow?k=st" --max-time 30
	[ "$code" = 200 ] && grep -q '^/allow?k=st 200 PASSED 0 - 2 allow fail_open$' "$tmp/fail/access.log"
	check $? "stalled store, on_error=allow: 200 after timeout_ms, \$drl_path fail_open"
	# clients that go away (0.5 s) while their decision (4 s) is in
	# flight: its callback finds the request gone and only says so
	gone=()
	for i in 1 2 3 4 5; do
		curl -s -o /dev/null --max-time 0.5 "$u/slow?k=gone$i" &
		gone+=($!)
	done
	wait "${gone[@]}"
	! wait_log fail 'after its request ended' 1 1
	check $? "stalled store: the clients left before their decisions came back"
	wait_log fail 'after its request ended (DRL_ETIMEDOUT)' 5
	check $? "each gone client's decision comes back, and touches no request"
	kill -CONT "$rpid"
	get "$u/none?k=after"
	[ "$code" = 200 ]
	check $? "after clients went away mid-decision the worker serves on"

	# stopped: connection refused
	kill "$rpid"
	wait "$rpid"
	for z in allow deny local none; do
		for i in 1 2 3; do get "$u/$z?k=down"; echo "$code"; done >"$tmp/$z"
	done
	[ "$(tr '\n' ' ' <"$tmp/allow")" = "200 200 200 " ]
	check $? "stopped store, on_error=allow: every request passes"
	[ "$(tr '\n' ' ' <"$tmp/deny")" = "429 429 429 " ] &&
		grep -q '^/deny?k=down 429 REJECTED 0 [0-9-]* 2 deny fail_closed$' "$tmp/fail/access.log"
	check $? "stopped store, on_error=deny: 429, \$drl_path fail_closed"
	[ "$(tr '\n' ' ' <"$tmp/local")" = "200 200 429 " ] &&
		grep -q '^/local?k=down 429 REJECTED 0 [0-9-]* 2 local local$' "$tmp/fail/access.log"
	check $? "stopped store, on_error=local: the limit of 2 holds in the worker"
	[ "$(tr '\n' ' ' <"$tmp/none")" = "503 503 503 " ] &&
		grep -q '^/none?k=down 503 ERROR ' "$tmp/fail/access.log" &&
		grep -q 'drl zone "none": DRL_EUNAVAILABLE' "$tmp/fail/error.log"
	check $? "stopped store, no on_error: 503, \$drl_status ERROR, the error logged"
	ngx_stop fail
fi

# ---- service: reload and quit ------------------------------------------

if in_part service; then
	own_redis
	p=$(free_port)
	conf svc "$p" 2 "
	drl_zone \$arg_k zone=r spec=fixed_window:100000/1h store=redis://127.0.0.1:$rport?timeout_ms=2000 on_error=allow;"
	locations svc 'location / { drl zone=r; } location = /status { stub_status; }'
	ngx_start svc "$p"
	u=http://127.0.0.1:$p
	pm=${npid[svc]}

	# wait_writing N: wait (60 s at most) until nginx's stub_status
	# counts N requests past reading their header (the status request
	# itself is one): the others are inside their decision
	wait_writing() {
		local i w
		for ((i = 0; i < 1200; i++)); do
			w=$(curl -s --max-time 5 "$u/status" |
				awk '/^Reading/ {print $4}')
			[ "${w:-0}" -ge "$1" ] && return 0
			sleep 0.05
		done
		return 1
	}

	# stalled_requests TAG: stall the store (SIGSTOP) and send 3
	# requests (keys TAG1..TAG3) whose decisions then wait in flight
	stalled_requests() {
		local i
		pause_pid "$rpid"
		inflight=()
		for i in 1 2 3; do
			curl -s -o /dev/null -w '%{http_code}\n' --max-time 60 \
				"$u/index.html?k=$1$i" >"$tmp/$1$i" &
			inflight+=($!)
			pids+=($!)
		done
		# all three in nginx's hands, not only the first at the
		# store: a quit closes the listener, and a request not yet
		# read then never is
		wait_recvq "$rport" && wait_writing 4
		check $? "$1: decisions in flight (store stalled)"
	}
	# answered TAG: once TAG's requests ended, their statuses (each
	# once) in $statuses
	answered() {
		wait "${inflight[@]}"
		statuses=$(cat "$tmp/$1"[123] | sort -u | tr '\n' ' ')
	}

	rm -f "$tmp/stop"
	"$PYTHON3" "$client" load "$tmp/stop" "$u/index.html?k=load" \
		>"$tmp/load.out" &
	lpid=$!
	pids+=("$lpid")
	for i in 1 2 3 4 5; do
		kill -HUP "$pm"
		wait_log svc 'reconfiguring' "$((i * 2))" # "received ..., reconfiguring" and "reconfiguring"
		wait_log svc 'gracefully shutting down' "$((i * 2))" # both old workers
	done
	touch "$tmp/stop"
	wait "$lpid"
	read -r out <"$tmp/load.out"
	[[ $out =~ ^requests=([0-9]+)\ 200=([0-9]+)\ 429=0\ other=0 ]] &&
		[ "${BASH_REMATCH[1]}" -ge 80 ]
	check $? "reload under load: 5 reloads, every request answered 200 ($out)"

	# reload with decisions in flight: they finish in the old workers
	stalled_requests reload
	before=$(grep -c 'gracefully shutting down' "$tmp/svc/error.log")
	kill -HUP "$pm"
	wait_log svc 'gracefully shutting down' "$((before + 2))"
	check $? "reload: the old workers are told to stop"
	kill -CONT "$rpid"
	wait_log svc 'exited with code 0' 12 # 5 x 2 before, these 2
	check $? "reload: the old workers exit once their decisions are done"
	answered reload
	[ "$statuses" = "200 " ] &&
		[ "$(grep -c '^/index.html?k=reload[0-9] 200 PASSED [0-9]* .* store$' "$tmp/svc/access.log")" -ge 3 ]
	check $? "reload: the decisions in flight were answered by the store: 200"

	# quit with decisions in flight: answered (on_error=allow after
	# timeout_ms, the store stalled), then nginx exits
	stalled_requests quit
	ngx_stop svc
	answered quit
	[ "$statuses" = "200 " ] &&
		[ "$(grep -c '^/index.html?k=quit[0-9] 200 PASSED 0 - [0-9]* r fail_open$' "$tmp/svc/access.log")" -ge 3 ]
	check $? "quit: every decision in flight was answered (on_error=allow: 200) before nginx exited"
	kill -CONT "$rpid"

	# a fast stop (SIGTERM) with decisions in flight: the worker ends at
	# once, its decisions finished at exit touch no request
	p=$(free_port)
	conf fast "$p" 1 "
	drl_zone \$arg_k zone=r spec=fixed_window:100/1h store=redis://127.0.0.1:$rport?timeout_ms=1000;"
	locations fast 'location / { drl zone=r; } location = /status { stub_status; }'
	ngx_start fast "$p"
	u=http://127.0.0.1:$p
	stalled_requests fast
	kill -TERM "${npid[fast]}"
	wait "${npid[fast]}"
	st=$?
	kill -CONT "$rpid"
	[ "$st" -eq 0 ] && ! grep -E '\[(alert|emerg|crit)\]|exited on signal|AddressSanitizer|runtime error:' \
		"$tmp/fast/error.log" "$tmp/fast/stderr"
	check $? "fast stop with decisions in flight: nginx exits 0 (got $st), no crash or report"
	answered fast
fi

finish
