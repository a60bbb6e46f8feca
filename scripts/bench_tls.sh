#!/usr/bin/env bash
# What TLS costs a decision on Redis: decisions/s, the client's CPU and
# redis-server's CPU per decision, plaintext against TLS on the same
# server (docs/performance.md, "Redis over TLS"), in one run against one
# redis-server started here with a plaintext and a TLS port on loopback
# (a CA and a P-256 server certificate made by openssl here).
#
#   bash scripts/bench_tls.sh [BUILDDIR] [SECONDS] [ROUNDS]
#
# Cells, in turn, ROUNDS times (default 3), each SECONDS long (default 3):
# 16 threads (drl_allow, pipelined connections) and 64 requests in flight
# on one event loop (drl_async_allow, the direct path), each on
# redis:// and rediss://; gcra (a script: tx=auto's default for it),
# 10,000 keys, limits never reached. The client CPU is the drl bench
# process's user+sys (wait4), setup (and the handshakes: connections are
# pooled and kept, so a handshake per connection) included.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
pki=$(mktemp -d)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout "$pki/ca.key" -out "$pki/ca.crt" -days 2 -subj "/CN=bench CA" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout "$pki/server.key" -out "$pki/server.csr" -subj "/CN=127.0.0.1" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$pki/ext"
openssl x509 -req -in "$pki/server.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
	-CAcreateserial -out "$pki/server.crt" -days 2 -extfile "$pki/ext" 2>/dev/null
. scripts/ports.sh
tport=$(free_port)
export BENCH_REDIS_ARGS="--tls-port $tport --tls-cert-file $pki/server.crt --tls-key-file $pki/server.key --tls-ca-cert-file $pki/ca.crt --tls-auth-clients no"
. scripts/bench_redis.sh
bench_redis_setup 3 "$@"
trap 'stop_pids $rpid; rm -rf "$tmp" "$pki"' EXIT
wait_port "$tport" || { echo "the TLS port did not open" >&2; exit 3; }

declare -A rate ccpu scpu
plain="redis://127.0.0.1:$port?pool=16"
tls="rediss://127.0.0.1:$tport?pool=16&tls_ca=$pki/ca.crt"
spec="gcra:1000000/1m"
names=()
for ((k = 0; k < rounds; k++)); do
	for how in "threads 16" "async 64"; do
		set -- --concurrency 16
		[ "$how" = "async 64" ] && set -- --concurrency 64 --async 1
		for uri in "$plain" "$tls"; do
			name="$how, ${uri%%://*}://"
			[ "$k" = 0 ] && names+=("$name")
			cell "$name" "$drl" bench --json --store "$uri" --limit "$spec" \
				--keys 10000 --duration "$secs" "$@"
		done
	done
done

echo "redis-server $(redis-server --version | awk '{print $3}'), $(openssl version | awk '{print $1, $2}'), $(nproc) CPUs, ${secs}s x $rounds rounds, medians"
echo
echo "| client (gcra, 10k keys) | decisions/s | client CPU µs/decision | redis-server CPU µs/decision |"
echo "|---|--:|--:|--:|"
for name in "${names[@]}"; do
	echo "| $name | $(median "${rate[$name]}") | $(median "${ccpu[$name]}") | $(median "${scpu[$name]}") |"
done
