#!/usr/bin/env bash
# The nginx module's cost under wrk: requests/s, latency and the nginx
# worker's CPU per request of a location without the module and of the
# same location limited on memory:// and on Redis, in one run. A
# benchmark, not a test: it asserts no speed; docs/performance.md
# ("nginx module") has a table it made.
#
#   scripts/bench_nginx.sh [BUILDDIR] [SECONDS] [ROUNDS]
#
# BUILDDIR (default build) holds nginx/ngx_http_drl_module.so. Each round
# runs every location for SECONDS (default 5), locations interleaved; the
# report is the median over ROUNDS (default 3). Starts Debian's nginx (one
# worker: its CPU is the module's cost, the async context's threads
# included) and a redis-server of its own on free loopback ports, and stops
# them by PID when done.
#
# Workload: wrk, 1 thread and 32 keep-alive connections, GET of a 3-byte
# static file, ?k=userN with N cycling over 10,000 keys; the limit
# token_bucket:100/1s per key, so every decision is an allowed write. This
# machine has 2 cores, shared by wrk, nginx and redis-server.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
# shellcheck source=scripts/ports.sh
. scripts/ports.sh
# shellcheck source=scripts/wrk.sh
. scripts/wrk.sh

bench_args 5 3 "$@"
module=$(realpath "$build/nginx/ngx_http_drl_module.so" 2>/dev/null)
spec='token_bucket:100/1s'
keys=10000

[ -f "$module" ] || {
	echo "bench_nginx: no $build/nginx/ngx_http_drl_module.so (nginx-dev, ninja -C $build)" >&2
	exit 2
}
need_tools bench_nginx wrk nginx redis-server

work_dir # $work, pids (scripts/ports.sh)
chmod 755 "$work"

bench_redis bench_nginx # redis_port (scripts/ports.sh)

port=$(free_port)
mkdir -p "$work/html"
echo ok >"$work/html/index.html"
user=
[ "$(id -u)" -eq 0 ] && user="user root;"
cat >"$work/nginx.conf" <<EOF
load_module $module;
daemon off;
worker_processes 1;
$user
error_log $work/error.log warn;
pid $work/nginx.pid;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path $work/body;
	proxy_temp_path $work/proxy;
	fastcgi_temp_path $work/fastcgi;
	uwsgi_temp_path $work/uwsgi;
	scgi_temp_path $work/scgi;
	drl_zone \$arg_k zone=memory spec=$spec;
	drl_zone \$arg_k zone=redis spec=$spec store=redis://127.0.0.1:$redis_port;
	server {
		listen 127.0.0.1:$port;
		root $work/html;
		location /plain { try_files /index.html =404; }
		location /memory { drl zone=memory; try_files /index.html =404; }
		location /redis { drl zone=redis; try_files /index.html =404; }
	}
}
EOF
nginx -p "$work" -c "$work/nginx.conf" 2>"$work/stderr" &
master=$!
pids+=("$master")
wait_port "$port" || {
	echo "bench_nginx: nginx did not start: $(cat "$work/stderr")" >&2
	exit 1
}
worker=$(ps -o pid= --ppid "$master" | tr -d ' ' | head -n1)

# The worker's CPU so far (user + system, every thread), in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$worker/stat"; }
hz=$(getconf CLK_TCK)

cat >"$work/keys.lua" <<EOF
-- path from the command line's URL, ?k=userN cycling over $keys keys
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", wrk.path .. "?k=user" .. (n % $keys))
end
EOF

results=$work/results
: >"$results"
for r in $(seq "$rounds"); do
	for loc in plain memory redis; do
		c0=$(cpu_ticks)
		out=$(wrk -t1 -c32 -d"${seconds}s" --latency -s "$work/keys.lua" \
			"http://127.0.0.1:$port/$loc" 2>&1)
		c1=$(cpu_ticks)
		wrk_numbers "bench_nginx: /$loc" "$out"
		reqs=$(sed -n 's/^ *\([0-9]*\) requests in.*/\1/p' <<<"$out")
		cpu=$("$PYTHON3" -c "print(($c1 - $c0) * 1e6 / $hz / $reqs)")
		echo "$loc $rps $p50 $p99 $cpu" >>"$results"
		echo "round $r /$loc: $rps req/s p50 ${p50}us p99 ${p99}us worker CPU ${cpu}us/req" >&2
	done
done

"$PYTHON3" scripts/bench_cells.py nginx "$results"
