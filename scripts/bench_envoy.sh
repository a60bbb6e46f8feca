#!/usr/bin/env bash
# drld's Envoy service over gRPC beside its HTTP API and the library, in the
# same run, on the same store, spec and concurrency: decisions/s and
# latency. A benchmark, not a test: it asserts no speed; docs/performance.md
# ("drld over gRPC") has a table it made.
#
#   scripts/bench_envoy.sh [BUILDDIR] [SECONDS] [ROUNDS] [CONCURRENCY]
#
# BUILDDIR (default build) holds drld/drld, tools/drl and bench/bench_grpc
# (meson -Dgrpc). Each round runs, for each store (memory://, Redis
# tx=lua), three loads of SECONDS (default 5) one after the other:
#   grpc    bench/bench_grpc (C++, grpc++ sync stubs): CONCURRENCY callers
#           (default 32), each on its own HTTP/2 connection, one
#           ShouldRateLimit at a time, descriptor (user, userN)
#   http    wrk: 2 threads, CONCURRENCY keep-alive connections, POST
#           /v1/check {"key": "userN", "limit": "token_bucket:100/1s"}
#   library drl bench --concurrency CONCURRENCY, the same spec
# N cycles over 10,000 keys; the Envoy config's limit is
# token_bucket 100/second, the spec the others use, so every decision is
# an allowed write. The report is the median over ROUNDS (default 3).
# drld runs with --threads 8 (HTTP) and gRPC's own thread pool. Starts its
# own redis-server and drld on free loopback ports; stops them by PID.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
# shellcheck source=scripts/ports.sh
. scripts/ports.sh
# shellcheck source=scripts/wrk.sh
. scripts/wrk.sh

build=${1:-build}
seconds=${2:-5}
rounds=${3:-3}
conc=${4:-32}
drld=$build/drld/drld
drl=$build/tools/drl
grpcb=$build/bench/bench_grpc
spec='token_bucket:100/1s'
keys=10000

for tool in "$drld" "$drl" "$grpcb"; do
	[ -x "$tool" ] || {
		echo "bench_envoy: no $tool (ninja -C $build, with -Dgrpc)" >&2
		exit 2
	}
done
command -v wrk >/dev/null || {
	echo "bench_envoy: wrk is not installed (scripts/deps.sh)" >&2
	exit 2
}

work=$(mktemp -d)
pids=()
cleanup() {
	stop_pids "${pids[@]}" # scripts/ports.sh
	rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/check.lua" <<EOF
local n = 0
request = function()
  n = n + 1
  local body = string.format('{"key":"user%d","limit":"$spec"}', n % $keys)
  return wrk.format("POST", "/v1/check",
                    {["Content-Type"] = "application/json"}, body)
end
EOF
mkdir -p "$work/envoy"
cat >"$work/envoy/bench.yaml" <<'EOF'
domain: bench
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: token_bucket}
EOF

redis_port=$(free_port)
start_redis "$redis_port" "$work"
pids+=($!)
wait_port "$redis_port" || {
	echo "bench_envoy: redis-server did not start" >&2
	exit 1
}
stores=("memory://" "redis://127.0.0.1:$redis_port?tx=lua&pool=64")

# start_drld STORE: drld with both listeners; sets $hport and $gport.
start_drld() {
	local log=$work/drld-$RANDOM.log
	"$drld" --listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 --store "$1" \
		--threads 8 --max-connections 256 \
		--envoy-config "$work/envoy" >"$log" 2>&1 &
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

hports=() gports=()
for s in "${stores[@]}"; do
	start_drld "$s"
	hports+=("$hport")
	gports+=("$gport")
done

# drl bench --json on stdin as "RPS P50_US P99_US".
parse_lib() {
	"$PYTHON3" -c '
import json, sys
c = json.load(sys.stdin)[0]
assert c["errors"] == 0, c["first_error"]
print(c["decisions_per_s"], c["latency_us"]["p50"], c["latency_us"]["p99"])'
}

results=$work/results
: >"$results"
for r in $(seq "$rounds"); do
	for i in "${!stores[@]}"; do
		name=${stores[$i]%%:*}
		out=$("$grpcb" "127.0.0.1:${gports[$i]}" "$conc" "$seconds" \
			"$keys" bench user)
		[[ "$out" =~ rate=([0-9]+)/s\ p50=([0-9]+)us\ p99=([0-9]+)us\ errors=0\ over=0 ]] || {
			echo "bench_envoy: bench_grpc on $name: $out" >&2
			exit 1
		}
		echo "grpc-$name ${BASH_REMATCH[1]} ${BASH_REMATCH[2]} ${BASH_REMATCH[3]}" >>"$results"
		echo "round $r grpc $name: $out" >&2

		out=$(wrk -t2 -c"$conc" -d"${seconds}s" --latency \
			-s "$work/check.lua" "http://127.0.0.1:${hports[$i]}" 2>&1)
		read -r rps p50 p99 non2xx errs <<<"$(parse_wrk <<<"$out")"
		if [ "$non2xx" != 0 ] || [ "$errs" != ok ]; then
			echo "bench_envoy: wrk on $name: $out" >&2
			exit 1
		fi
		line="$rps $p50 $p99"
		echo "http-$name $line" >>"$results"
		echo "round $r http $name: $line" >&2

		out=$("$drl" bench --store "${stores[$i]}" --limit "$spec" \
			--keys "$keys" --concurrency "$conc" --duration "$seconds" \
			--exact-limit 0 --json 2>/dev/null)
		line=$(parse_lib <<<"$out") || {
			echo "bench_envoy: drl bench on $name: $out" >&2
			exit 1
		}
		echo "library-$name $line" >>"$results"
		echo "round $r library $name: $line" >&2
	done
done

echo "| store | client, $conc at once | decisions/s | p50 µs | p99 µs | / library |"
echo "|---|---|--:|--:|--:|--:|"
"$PYTHON3" - "$results" <<'EOF'
import statistics, sys
cells = {}
for line in open(sys.argv[1]):
    cell, *v = line.split()
    cells.setdefault(cell, []).append([float(x) for x in v])
def med(cell):
    return [statistics.median(col) for col in zip(*cells[cell])]
what = {"grpc": "gRPC ShouldRateLimit (bench_grpc, C++)",
        "http": "HTTP /v1/check (wrk)", "library": "library (drl bench)"}
for store in ("memory", "redis"):
    lib = med("library-" + store)[0]
    for w in ("grpc", "http", "library"):
        d = med(w + "-" + store)
        print(f"| {store} | {what[w]} | {d[0]:,.0f} | {d[1]:,.0f} "
              f"| {d[2]:,.0f} | {d[0] / lib:.3f} |")
EOF
