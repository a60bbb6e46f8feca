#!/usr/bin/env bash
# What TLS costs a decision on Redis (docs/performance.md, "Redis over
# TLS"): one redis-server started here with a plaintext port and a TLS
# port (a P-256 CA and server certificate made by openssl in a temporary
# folder), the same server for both, so the only difference is TLS.
#
#   bash scripts/bench_tls.sh [BUILDDIR] [SECONDS] [ROUNDS]
#
# Cells, in turn, ROUNDS times (default 3), each SECONDS long (default 3),
# fixed_window, 10,000 keys, limits never reached (bench_client.sh's
# shape), on redis:// and on rediss://:
#   threads 16   drl bench: 16 threads calling drl_allow (pipelined)
#   async 64     drl bench --async 1: 64 requests in flight on one event
#                loop (drl_async_allow, tx=auto: the direct path)
# Per cell: decisions/s (median), the client's CPU per decision (user+sys
# of the drl process, from wait4's rusage, setup and handshakes included)
# and redis-server's CPU per decision (INFO cpu).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v openssl >/dev/null || { echo "openssl is needed" >&2; exit 2; }

certs=$(mktemp -d)
(
	cd "$certs"
	openssl ecparam -name prime256v1 -genkey -noout -out ca.key
	openssl req -x509 -new -key ca.key -subj /CN=drl-bench-ca -days 1 \
		-out ca.crt
	openssl ecparam -name prime256v1 -genkey -noout -out server.key
	openssl req -new -key server.key -subj /CN=localhost -out server.csr
	echo 'subjectAltName=IP:127.0.0.1,DNS:localhost' >ext
	openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key \
		-CAcreateserial -days 1 -extfile ext -out server.crt
) >/dev/null 2>&1 || { echo "openssl could not make the certificates" >&2; exit 3; }

. scripts/ports.sh
tport=$(free_port)
BENCH_REDIS_ARGS=(--tls-port "$tport" --tls-cert-file "$certs/server.crt"
	--tls-key-file "$certs/server.key" --tls-ca-cert-file "$certs/ca.crt"
	--tls-auth-clients no)
. scripts/bench_redis.sh
bench_redis_setup 3 "$@"
trap 'stop_pids $rpid; rm -rf "$tmp" "$certs"' EXIT
wait_port "$tport" || { echo "the TLS port did not open" >&2; exit 3; }

plain="redis://127.0.0.1:$port?pool=16"
tls="rediss://127.0.0.1:$tport?pool=16&tls_ca=$certs/ca.crt"
spec="fixed_window:1000000/1m"
for ((k = 0; k < rounds; k++)); do
	for t in plain tls; do
		uri=$plain
		[ "$t" = tls ] && uri=$tls
		cell "threads 16 $t" "$drl" bench --json --store "$uri" \
			--limit "$spec" --keys 10000 --concurrency 16 \
			--duration "$secs"
		cell "async 64 $t" "$drl" bench --json --store "$uri" \
			--limit "$spec" --keys 10000 --concurrency 64 --async 1 \
			--duration "$secs"
	done
done

echo "redis-server $(redis-server --version | awk '{print $3}'), $(nproc) CPUs, ${secs}s x $rounds rounds, medians"
echo
echo "| callers (fixed_window, 10k keys) | store | decisions/s | client CPU µs/decision | redis-server CPU µs/decision |"
echo "|---|---|--:|--:|--:|"
for name in "threads 16" "async 64"; do
	for t in plain tls; do
		echo "| $name | $([ $t = tls ] && echo rediss:// || echo redis://) | $(median "${rate[$name $t]}") | $(median "${ccpu[$name $t]}") | $(median "${scpu[$name $t]}") |"
	done
done
