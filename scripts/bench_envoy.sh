#!/usr/bin/env bash
# drld's Envoy service over gRPC beside its HTTP API and the library, in the
# same run, on the same store, spec and concurrency: decisions/s, latency
# and drld's CPU per call. A benchmark, not a test: it asserts no speed;
# docs/performance.md ("drld over gRPC") has a table it made.
#
#   scripts/bench_envoy.sh [BUILDDIR] [SECONDS] [ROUNDS] [CONCURRENCY]
#
# BUILDDIR (default build) holds drld/drld (meson -Dgrpc) and tools/drl.
# Each round runs, for each store (memory://, Redis tx=lua), four loads of
# SECONDS (default 5) one after the other, each CONCURRENCY (default 32)
# calls at once:
#   grpc-conns  h2load (nghttp2's HTTP/2 load generator, in C): CONCURRENCY
#               connections, one ShouldRateLimit at a time on each
#   grpc-mux    h2load: 2 connections, CONCURRENCY/2 streams at once on
#               each, the way Envoy talks to a rate limit service (a few
#               HTTP/2 connections, calls multiplexed on them)
#   http        wrk: CONCURRENCY keep-alive connections, POST /v1/check
#   library     drl bench --concurrency CONCURRENCY
# Both load generators run one thread. h2load sends one fixed request
# body, so every load asks about one key, (user, bench1) in domain bench,
# under token_bucket 1000000000/s: every decision is an allowed write of
# the same key (the same for the four loads). drld answers each gRPC call
# OK or the script stops: it checks h2load's 2xx count and drld's
# drld_grpc_calls_total{outcome="ok"} against the calls sent. The report
# is the median over ROUNDS (default 3). drld runs with --threads 8 (HTTP)
# and its default --grpc-threads and --grpc-pollers (DRLD_ARGS adds
# options). Starts its own redis-server and drld on
# free loopback ports; stops them by PID.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
# shellcheck source=scripts/ports.sh
. scripts/ports.sh
# shellcheck source=scripts/wrk.sh
. scripts/wrk.sh

bench_args 5 3 "$@"
conc=${4:-32}
drld=${DRLD:-$build/drld/drld} # DRLD: another drld to measure (A/B)
# DRLD_ARGS: more drld options, e.g. DRLD_ARGS='--grpc-pollers 2'
read -r -a drld_args <<<"${DRLD_ARGS:-}"
drl=$build/tools/drl
spec='token_bucket:1000000000/1s'
method=/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit

need_built bench_envoy "ninja -C $build, with -Dgrpc" "$drld" "$drl"
need_tools bench_envoy wrk h2load
if [ "$conc" -lt 2 ] || [ $((conc % 2)) -ne 0 ]; then
	echo "bench_envoy: CONCURRENCY must be even (2 connections for grpc-mux)" >&2
	exit 2
fi

work_dir # $work, pids (scripts/ports.sh)

cat >"$work/check.lua" <<EOF
request = function()
  return wrk.format("POST", "/v1/check",
                    {["Content-Type"] = "application/json"},
                    '{"key":"bench1","limit":"$spec"}')
end
EOF
mkdir -p "$work/envoy"
cat >"$work/envoy/bench.yaml" <<'EOF'
domain: bench
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 1000000000, algorithm: token_bucket}
EOF
# The gRPC request h2load sends: a length-prefixed RateLimitRequest
# {domain: "bench", descriptors: [{entries: [{key: "user", value:
# "bench1"}]}]}, field numbers of drld/envoy/proto/envoy_rls.proto.
"$PYTHON3" - "$work/call.bin" <<'PYEOF'
import struct, sys
def field(number, data):  # a length-delimited field (wire type 2)
    tag, n = (number << 3) | 2, len(data)
    assert tag < 128 and n < 128
    return bytes([tag, n]) + data
entry = field(1, b"user") + field(2, b"bench1")
message = field(1, b"bench") + field(2, field(1, entry))
with open(sys.argv[1], "wb") as f:
    f.write(b"\0" + struct.pack(">I", len(message)) + message)
PYEOF

bench_redis bench_envoy # redis_port (scripts/ports.sh)
stores=("memory://" "redis://127.0.0.1:$redis_port?tx=lua&pool=64")

# start_drld STORE: drld with both listeners; sets $hport, $gport, $dpid.
start_drld() {
	local log=$work/drld-$RANDOM.log
	"$drld" --listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 --store "$1" \
		--threads 8 --max-connections 256 "${drld_args[@]}" \
		--envoy-config "$work/envoy" >"$log" 2>&1 &
	dpid=$!
	pids+=($!)
	hport= gport=
	for _ in $(seq 100); do
		hport=$(sed -n 's/^drld: listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$log")
		gport=$(sed -n 's/^drld: grpc listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$log")
		[ -n "$hport" ] && [ -n "$gport" ] && return 0
		sleep 0.1
	done
	echo "bench_envoy: drld did not start: $(cat "$log")" >&2
	exit 1
}

hports=() gports=() dpids=()
for s in "${stores[@]}"; do
	start_drld "$s"
	hports+=("$hport")
	gports+=("$gport")
	dpids+=("$dpid")
done

# cpu_ticks PID: user+system CPU of the process so far, in clock ticks.
cpu_ticks() {
	awk '{print $14 + $15}' "/proc/$1/stat"
}
# ok_calls PORT: drld's drld_grpc_calls_total{outcome="ok"}.
ok_calls() {
	curl -sf "http://127.0.0.1:$1/metrics" |
		sed -n 's/^drld_grpc_calls_total{outcome="ok"} \([0-9]*\)$/\1/p'
}
# us_per_call TICKS CALLS: drld's CPU per call in µs.
us_per_call() {
	"$PYTHON3" -c "import os, sys
print(round(int(sys.argv[1]) * 1e6 / os.sysconf('SC_CLK_TCK') / int(sys.argv[2]), 1))" "$1" "$2"
}

# drl bench --json on stdin as "RPS P50_US P99_US".
parse_lib() {
	"$PYTHON3" -c '
import json, sys
c = json.load(sys.stdin)[0]
assert c["errors"] == 0, c["first_error"]
print(c["decisions_per_s"], c["latency_us"]["p50"], c["latency_us"]["p99"])'
}

# grpc_load I CONNS STREAMS: h2load on store I; prints "RPS P50 P99 CALLS".
grpc_load() {
	local i=$1 before after out log=$work/h2load.log
	rm -f "$log"
	before=$(ok_calls "${hports[$i]}")
	out=$(h2load -D "$seconds" -t 1 -c "$2" -m "$3" --log-file="$log" \
		-d "$work/call.bin" -H 'content-type: application/grpc' \
		-H 'te: trailers' "http://127.0.0.1:${gports[$i]}$method" 2>&1)
	after=$(ok_calls "${hports[$i]}")
	"$PYTHON3" - "$log" "$seconds" "$((after - before))" "$out" <<'PYEOF'
import re, statistics, sys
log, seconds, ok, out = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
done = [line.split("\t") for line in open(log) if line.strip()]
twoxx = int(re.search(r"status codes: (\d+) 2xx", out).group(1))
failed = re.search(r"(\d+) failed, (\d+) errored, (\d+) timeout", out)
if twoxx != len(done) or any(int(x) for x in failed.groups()) or ok < len(done):
    sys.exit(f"bench_envoy: h2load: {len(done)} calls, {twoxx} 2xx, "
             f"{ok} answered OK by drld: {out}")
us = sorted(int(d[2]) for d in done)
q = statistics.quantiles(us, n=100)
print(len(done) / seconds, q[49], q[98], len(done))
PYEOF
}

results=$work/results
: >"$results"
for r in $(seq "$rounds"); do
	for i in "${!stores[@]}"; do
		name=${stores[$i]%%:*}
		dpid=${dpids[$i]}
		for shape in conns mux; do
			if [ $shape = conns ]; then
				c=$conc m=1
			else
				c=2 m=$((conc / 2))
			fi
			t0=$(cpu_ticks "$dpid")
			read -r rps p50 p99 calls <<<"$(grpc_load "$i" $c $m)" ||
				exit 1
			t1=$(cpu_ticks "$dpid")
			[ -n "$calls" ] || exit 1
			line="$rps $p50 $p99 $(us_per_call $((t1 - t0)) "$calls")"
			echo "grpc-$shape-$name $line" >>"$results"
			echo "round $r grpc-$shape $name: $line" >&2
		done

		t0=$(cpu_ticks "$dpid")
		out=$(wrk -t1 -c"$conc" -d"${seconds}s" --latency \
			-s "$work/check.lua" "http://127.0.0.1:${hports[$i]}" 2>&1)
		t1=$(cpu_ticks "$dpid")
		wrk_numbers "bench_envoy: wrk on $name" "$out"
		calls=$(sed -n 's/^ *\([0-9]*\) requests in .*/\1/p' <<<"$out")
		line="$rps $p50 $p99 $(us_per_call $((t1 - t0)) "$calls")"
		echo "http-$name $line" >>"$results"
		echo "round $r http $name: $line" >&2

		out=$("$drl" bench --store "${stores[$i]}" --limit "$spec" \
			--keys 1 --concurrency "$conc" --duration "$seconds" \
			--exact-limit 0 --json 2>/dev/null)
		line=$(parse_lib <<<"$out") || {
			echo "bench_envoy: drl bench on $name: $out" >&2
			exit 1
		}
		echo "library-$name $line" >>"$results"
		echo "round $r library $name: $line" >&2
	done
done

"$PYTHON3" scripts/bench_cells.py envoy "$results" "$conc"
