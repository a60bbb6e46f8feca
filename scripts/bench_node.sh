#!/usr/bin/env bash
# The Node.js addon against rate-limiter-flexible (RLF), each in one Node
# process, on the same redis-server, memcached and in memory
# (docs/performance.md, "Node.js: RateLimiterDrl against
# rate-limiter-flexible").
#
#   bash scripts/bench_node.sh [BUILDDIR] [SECONDS] [ROUNDS]
#   BENCH_STORES="redis" bash scripts/bench_node.sh ...   (some stores only)
#   BENCH_COMPARE=DIR2 bash scripts/bench_node.sh DIR ... (two addons)
#
# BENCH_COMPARE: a second build's addon (DIR2/node/drl.node) runs each
# cell too, in turn with the first and RLF, and a second table gives the
# two addons' medians side by side (B is DIR2) and B/A.
#
# Every cell: node/bench/bench.js, IN_FLIGHT (16, 64) consume() calls in
# flight on 10,000 distinct keys, fixed window, limits never reached, for
# SECONDS (default 3) after a 0.5 s warm-up. RLF, ioredis and memcached
# (its client) come from the npm registry into a temporary folder (as
# scripts/bench_server_cost.sh does); the addon is BUILDDIR/node/drl.node
# (default build). A redis-server and a memcached of its own on free
# loopback ports, stopped on exit. Each figure is the median of ROUNDS
# rounds (default 3), the cells of a round in turn (drl and rlf
# alternate, so a noisy neighbour hits both); ratios are of medians of
# the same run. Prints a Markdown table; its CPU columns are the Node
# process's CPU time per decision (bench.js: process.cpuUsage(), all its
# threads, not the servers'), which a busy neighbour inflates far less
# than the wall clock: on memory:// (no server, one busy JS thread) its
# ratio stands for the rate's ratio on a quiet machine (V8's helper
# threads count in it, for both); on Redis and memcached it is the
# client's share of the work only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/ports.sh
build=${1:-build}
secs=${2:-3}
rounds=${3:-3}
addon="$build/node/drl.node"
[ -f "$addon" ] || {
	echo "no $addon: build first (meson setup $build && ninja -C $build)" >&2
	exit 2
}
addon_a=$(realpath "$addon")
addon_b=
libs="drl rlf"
if [ -n "${BENCH_COMPARE:-}" ]; then
	[ -f "$BENCH_COMPARE/node/drl.node" ] || {
		echo "no $BENCH_COMPARE/node/drl.node: build it first" >&2
		exit 2
	}
	addon_b=$(realpath "$BENCH_COMPARE/node/drl.node")
	libs="drl drl-b rlf"
fi

tmp=$(mktemp -d)
rport=$(free_port)
mport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no \
	--dir "$tmp" >"$tmp/redis.log" 2>&1 &
rpid=$!
mc_user=()
[ "$(id -u)" = 0 ] && mc_user=(-u root)
memcached -p "$mport" -l 127.0.0.1 -U 0 "${mc_user[@]}" >"$tmp/mc.log" 2>&1 &
mpid=$!
trap 'stop_pids $rpid $mpid; rm -rf "$tmp"' EXIT
wait_port "$rport" || { echo "redis-server did not start" >&2; exit 3; }
wait_port "$mport" || { echo "memcached did not start" >&2; exit 3; }

(cd "$tmp" && npm install --silent --no-audit --no-fund \
	rate-limiter-flexible ioredis memcached >/dev/null 2>&1) ||
	{ echo "npm could not install rate-limiter-flexible, ioredis, memcached" >&2; exit 3; }
export NODE_PATH="$tmp/node_modules"
rlf_version=$(node -p "require('rate-limiter-flexible/package.json').version")

declare -A rate cpu
cells=()
for store in ${BENCH_STORES:-redis memcached memory}; do
	for n in 16 64; do
		cells+=("$store $n")
	done
done
for ((round = 1; round <= rounds; round++)); do
	for c in "${cells[@]}"; do
		read -r store n <<<"$c"
		port=$rport
		[ "$store" = memcached ] && port=$mport
		for lib in $libs; do
			a=$addon_a
			[ "$lib" = drl-b ] && a=$addon_b
			out=$(LIBDRL_NODE_ADDON=$a node node/bench/bench.js \
				"${lib%-b}" "$store" "$port" "$n" "$secs")
			r=$(awk '{printf "%.0f", $1 / $2}' <<<"$out")
			u=$(awk '{printf "%.0f", $3 * 1e9 / $1}' <<<"$out")
			rate["$lib $c"]+="$r "
			cpu["$lib $c"]+="$u "
			echo "round $round: $lib $c: $r decisions/s, $u CPU ns/decision" >&2
		done
	done
done

median() {
	tr ' ' '\n' <<<"$1" | grep . | sort -g |
		awk '{a[NR]=$1} END{print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'
}
# rows X Y: a table row per cell, X's medians against Y's: rates, X / Y,
# the rounds, CPU per decision, and Y's CPU / X's (above 1: X is cheaper).
rows() {
	local c store n x y xc yc
	for c in "${cells[@]}"; do
		read -r store n <<<"$c"
		x=$(median "${rate[$1 $c]}")
		y=$(median "${rate[$2 $c]}")
		xc=$(median "${cpu[$1 $c]}")
		yc=$(median "${cpu[$2 $c]}")
		printf '| %s | %s | %.0f | %.0f | %.2f | %s/ %s| %.0f / %.0f | %.2f |\n' \
			"$store" "$n" "$x" "$y" "$(awk -v a="$x" -v b="$y" 'BEGIN{print a / b}')" \
			"${rate[$1 $c]}" "${rate[$2 $c]}" "$xc" "$yc" \
			"$(awk -v a="$yc" -v b="$xc" 'BEGIN{print a / b}')"
	done
}
echo "rate-limiter-flexible $rlf_version, node $(node --version), $rounds rounds of $secs s, medians"
echo
echo "| store | in flight | RateLimiterDrl decisions/s | RLF decisions/s | × RLF | rounds (drl / rlf) | Node CPU ns/decision (drl / RLF) | × RLF by CPU |"
echo "|---|---|---|---|---|---|---|---|"
rows drl rlf
[ -n "$addon_b" ] || exit 0
echo
echo "A: $addon_a, B: $addon_b"
echo
echo "| store | in flight | B decisions/s | A decisions/s | B / A | rounds (B / A) | Node CPU ns/decision (B / A) | A CPU / B CPU |"
echo "|---|---|---|---|---|---|---|---|"
rows drl-b drl
