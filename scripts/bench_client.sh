#!/usr/bin/env bash
# The client side of one decision on Redis, beside rate-limiter-flexible
# (Node.js), in one run against one redis-server started here on a free
# loopback port (docs/performance.md, "What a decision costs the server":
# the client side).
#
#   bash scripts/bench_client.sh [BUILDDIR] [SECONDS] [ROUNDS]
#
# The shape of rate-limiter-flexible's own benchmarks: fixed window, one
# process, 10,000 keys, limits never reached. Cells, in turn, ROUNDS times
# (default 3), each SECONDS long (default 3):
#   rlf 16       RateLimiterRedis on ioredis, 16 consume() in flight
#                (bench/peers/rlf_client.js; rate-limiter-flexible and
#                ioredis installed from npm into a temporary folder: a
#                benchmark's tool, never a dependency of the library)
#   async 16/64  drl bench --async 1: 16 (64) requests in flight on one
#                event loop (drl_async_allow, Redis tx=auto: no worker)
#   threads 16   drl bench: 16 threads calling drl_allow (and with
#                pipelines=0: a pooled connection per thread)
#   ceiling 16/64  bench/peers/hiredis_ceiling.c: one hiredis loop on one
#                connection sending what a decision sends (INCRBY +
#                PEXPIRE), 16 (64) decisions in flight, nothing else,
#                one write a round (what it reads, it answers in one
#                write): what a loop that takes turns with the server
#                reaches here. libdrl's loop writes in parts and passes
#                it (docs/performance.md, "The loop writes in parts")
#   ceiling 16 x2  the same, 16 in flight over 2 connections (8 on each,
#                poll() for the ready ones): whether a second connection
#                raises that ceiling here (it did not: docs/performance.md,
#                so libdrl's loop keeps one connection per store)
#   threads ceiling 16  bench/peers/threads_ceiling.c: 16 threads making
#                the same decisions blocking, meeting on one shared
#                connection as libdrl's pipes did (one futex wake a batch,
#                every waiting caller asleep), nothing else
#   threads ceiling 16 yield  the same, each waiting caller yielding its
#                CPU 8 times before it sleeps, as libdrl's pipes do now
# Per cell: decisions/s (median), the client's CPU per decision (user+sys
# of the client process, from wait4's rusage, setup included) and
# redis-server's CPU per decision (INFO cpu), and the rate over rlf's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/bench_redis.sh
bench_redis_setup 3 "$@"
command -v node >/dev/null || { echo "node is needed for the peer" >&2; exit 2; }

(cd "$tmp" && npm install --silent --no-audit --no-fund \
	rate-limiter-flexible ioredis >/dev/null 2>&1) ||
	{ echo "npm could not install rate-limiter-flexible" >&2; exit 3; }
cp bench/peers/rlf_client.js "$tmp/"
# The ceiling of one loop on one connection: a hiredis C client sending
# what a decision sends (INCRBY + PEXPIRE), nothing else per decision.
cc -O2 -o "$tmp/hiredis_ceiling" bench/peers/hiredis_ceiling.c -lhiredis ||
	{ echo "cannot build bench/peers/hiredis_ceiling.c" >&2; exit 3; }
cc -O2 -pthread -o "$tmp/threads_ceiling" bench/peers/threads_ceiling.c \
	-lhiredis ||
	{ echo "cannot build bench/peers/threads_ceiling.c" >&2; exit 3; }


declare -A rate ccpu scpu
uri="redis://127.0.0.1:$port?pool=16"
spec="fixed_window:1000000/1m"
for ((k = 0; k < rounds; k++)); do
	cell "rlf 16" node "$tmp/rlf_client.js" "$port" "$secs" 16
	cell "async 16" "$drl" bench --json --store "$uri" --limit "$spec" \
		--keys 10000 --concurrency 16 --async 1 --duration "$secs"
	cell "async 64" "$drl" bench --json --store "$uri" --limit "$spec" \
		--keys 10000 --concurrency 64 --async 1 --duration "$secs"
	cell "threads 16" "$drl" bench --json --store "$uri" --limit "$spec" \
		--keys 10000 --concurrency 16 --duration "$secs"
	cell "threads 16 pipelines=0" "$drl" bench --json \
		--store "$uri&pipelines=0" --limit "$spec" \
		--keys 10000 --concurrency 16 --duration "$secs"
	cell "ceiling 16" "$tmp/hiredis_ceiling" "$port" "$secs" 16
	cell "ceiling 16 x2" "$tmp/hiredis_ceiling" "$port" "$secs" 16 2
	cell "ceiling 64" "$tmp/hiredis_ceiling" "$port" "$secs" 64
	cell "threads ceiling 16" "$tmp/threads_ceiling" "$port" "$secs" 16 ring
	cell "threads ceiling 16 yield" "$tmp/threads_ceiling" "$port" "$secs" \
		16 yield
done

base=$(median "${rate[rlf 16]}")
echo "redis-server $(redis-server --version | awk '{print $3}'), node $(node --version), $(nproc) CPUs, ${secs}s x $rounds rounds, medians"
echo
echo "| client (fixed_window, 10k keys) | decisions/s | × rlf | client CPU µs/decision | redis-server CPU µs/decision |"
echo "|---|--:|--:|--:|--:|"
for name in "rlf 16" "async 16" "async 64" "threads 16" \
	"threads 16 pipelines=0" "ceiling 16" "ceiling 16 x2" "ceiling 64" \
	"threads ceiling 16" "threads ceiling 16 yield"; do
	r=$(median "${rate[$name]}")
	echo "| $name | $r | $(awk -v a="$r" -v b="$base" 'BEGIN{printf "%.2f", a/b}') | $(median "${ccpu[$name]}") | $(median "${scpu[$name]}") |"
done
