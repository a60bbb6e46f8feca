#!/usr/bin/env bash
# The Redis store's shared, pipelined connections (pipelines=N) against a
# connection per caller (pipelines=0): decisions/s, p50/p99 and the CPU
# each decision costs the client process and redis-server, in one run, the
# configurations interleaved round by round. A benchmark, not a test: it
# asserts no speed; docs/performance.md ("Shared, pipelined connections")
# has a table it made.
#
#   scripts/bench_pipeline.sh [BUILDDIR] [SECONDS] [ROUNDS] [SPEC]
#
# BUILDDIR (default build) holds tools/drl. Each cell (pipelines 0, 1, 2,
# 4 at concurrency 1 and 16, and pipelines=1 with 64 requests in flight
# on one loop thread of the async API; 10,000 keys; SPEC default fixed_window:
# 1000000/1m, so every decision is an allowed write) runs SECONDS (default
# 3) per round; the report is the median over ROUNDS (default 3). CPU per
# decision is the client's user+sys time (drl bench's process, from
# /usr/bin/time) and redis-server's (/proc/PID/stat) over the cell,
# divided by its decisions: on a shared, noisy 2-core machine it moves far
# less than decisions/s, which the other load on the cores decides. The
# last lines are drl bench --ceiling for the same spec: redis-benchmark of
# the same script at -c 16, plain and -P 16. Starts its own redis-server
# (persistence off) on a free loopback port and stops it by PID.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
# shellcheck source=scripts/ports.sh
. scripts/ports.sh

bench_args 3 3 "$@"
spec=${4:-fixed_window:1000000/1m}
drl=$build/tools/drl
need_built bench_pipeline "ninja -C $build first" "$drl"
[ -x /usr/bin/time ] || {
	echo "bench_pipeline: /usr/bin/time is missing (apt-get install time)" >&2
	exit 2
}

work_dir # $work, pids (scripts/ports.sh)

bench_redis bench_pipeline # redis_port, redis_pid (scripts/ports.sh)

hz=$(getconf CLK_TCK)
server_ticks() { awk '{print $14 + $15}' "/proc/$redis_pid/stat"; }

echo "# $(uname -srm), $(nproc) cores, $(redis-server --version | cut -d' ' -f3)"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
# One cell: prints "CONFIG CONC rate p50 p99 client_us server_us". A
# third argument W runs the callers as requests in flight on one loop
# thread through the async API (drl bench --async W; CONFIG gets
# "+async").
cell() {
	local opts=$1 conc=$2 t0 t1 async=()
	[ $# -ge 3 ] && async=(--async "$3")
	t0=$(server_ticks)
	{ /usr/bin/time -f "TIME %U %S" "$drl" bench \
		--store "redis://127.0.0.1:$redis_port?pool=64&$opts" --limit "$spec" \
		--keys 10000 --concurrency "$conc" --duration "$seconds" \
		--exact-limit 0 --json "${async[@]}"; } >"$work/out" 2>&1
	t1=$(server_ticks)
	"$PYTHON3" - "$work/out" "$opts${async:++async}" "$conc" "$t0" "$t1" \
		"$hz" <<'EOF'
import json, re, sys
text = open(sys.argv[1]).read()
opts, conc = sys.argv[2], sys.argv[3]
t0, t1, hz = map(float, sys.argv[4:])
m = re.search(r"^TIME (\S+) (\S+)", text, re.M)
c = json.loads(text[text.index("["):text.rindex("]") + 1])[0]
n = c["decisions"]
client = (float(m.group(1)) + float(m.group(2))) * 1e6 / n
server = (t1 - t0) / hz * 1e6 / n
print(opts, conc, c["decisions_per_s"], c["latency_us"]["p50"],
      c["latency_us"]["p99"], client, server)
EOF
}

configs=("pipelines=0" "pipelines=1" "pipelines=2" "pipelines=4")
for ((r = 0; r < rounds; r++)); do
	for conc in 1 16; do
		for cfg in "${configs[@]}"; do
			cell "$cfg" "$conc" >>"$work/cells"
		done
	done
	# The async API: 64 in flight on one loop thread (issue 15's target:
	# at least the 16 blocking threads above, p99 reported).
	cell "pipelines=1" 64 16 >>"$work/cells"
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

"$PYTHON3" - "$work/cells" "$rounds" "$seconds" "$spec" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    opts, conc, *v = line.split()
    rows.setdefault((opts, int(conc)), []).append([float(x) for x in v])
print(f"\n{sys.argv[4]}, 10,000 keys, medians of {sys.argv[2]} rounds of "
      f"{sys.argv[3]} s\n")
print("| URI options | C | decisions/s | p50 µs | p99 µs | client CPU µs/dec "
      "| redis-server CPU µs/dec | total CPU µs/dec |")
print("|---|--:|--:|--:|--:|--:|--:|--:|")
for (opts, conc), vals in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    med = [statistics.median(col) for col in zip(*vals)]
    print(f"| {opts} | {conc} | {med[0]:.0f} | {med[1]:.1f} | {med[2]:.0f} | "
          f"{med[3]:.1f} | {med[4]:.1f} | {med[3] + med[4]:.1f} |")
EOF

echo
echo "# the server without the library (drl bench --ceiling), same spec:"
"$drl" bench --store "redis://127.0.0.1:$redis_port?pool=64&pipelines=0,redis://127.0.0.1:$redis_port?pool=64&pipelines=2" \
	--limit "$spec" --keys 10000 --concurrency 16 --duration "$seconds" \
	--rounds "$rounds" --exact-limit 0 --ceiling
