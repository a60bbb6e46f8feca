#!/usr/bin/env bash
# A/B the cost per decision of two builds of drl on the network stores:
# runs `drl bench` of OLD and NEW alternately, ROUNDS times per cell (1 and
# 16 threads; on Redis tx=auto and tx=lua also 64 requests in flight on one
# event loop, --async 1; memory:// with 1 thread), on a redis-server and a
# memcached this script starts
# on free loopback ports (and stops), and prints the median rate and p50
# of each with the ratio.
#
# usage: scripts/ab_bench.sh OLD/tools/drl NEW/tools/drl [ROUNDS]
#   e.g. git worktree add /tmp/old 0ac7b27 && meson setup /tmp/old/b
#        -Dbuildtype=release ... && scripts/ab_bench.sh /tmp/old/b/tools/drl
#        build-release/tools/drl 5
set -euo pipefail
old=${1:?usage: ab_bench.sh OLD_DRL NEW_DRL [ROUNDS]}
new=${2:?usage: ab_bench.sh OLD_DRL NEW_DRL [ROUNDS]}
rounds=${3:-5}
PYTHON3=${PYTHON3:-python3}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/ports.sh
. "$here/ports.sh"

work_dir # $work, pids: stopped and removed at exit (ports.sh)
bench_servers ab_bench # rport, mport

echo "# $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); token_bucket, 10k keys, 0.6 s cells, $rounds rounds"
for store in "memory://?max_keys=100000" \
	"redis://127.0.0.1:$rport?pool=32" \
	"redis://127.0.0.1:$rport?tx=lua&pool=32" \
	"redis://127.0.0.1:$rport?tx=watch&pool=32" \
	"memcached://127.0.0.1:$mport?pool=32"; do
	# 64a: 64 requests in flight on one event loop (--async 1), Redis
	# tx=lua only (the async API's native path)
	cells="1 16"
	case $store in
	memory://*) cells="1" ;;
	redis://*tx=lua* | "redis://127.0.0.1:$rport?pool=32") cells="1 16 64a" ;;
	esac
	for c in $cells; do
		callers=(-c "${c%a}")
		[ "$c" != "${c%a}" ] && callers+=(--async 1)
		for _ in $(seq "$rounds"); do
			for v in old new; do
				bin=$old
				[ "$v" = new ] && bin=$new
				"$bin" bench --store "$store" \
					--limit token_bucket:1000000000/1s "${callers[@]}" \
					-k 10000 -d 0.6 --json 2>/dev/null |
					"$PYTHON3" -c 'import json,sys
d = json.load(sys.stdin)[0]
print(sys.argv[1], sys.argv[2], sys.argv[3], d["decisions_per_s"], d["latency_us"]["p50"], d["errors"])' \
						"$v" "${store%%\?*}?${store#*\?}" "$c"
			done
		done
	done
done >"$work/raw"
"$PYTHON3" - "$work/raw" <<'PY'
import collections, statistics, sys
rate = collections.defaultdict(list)
p50 = collections.defaultdict(list)
for line in open(sys.argv[1]):
    v, store, c, r, p, err = line.split()
    scheme = store.split("://")[0]
    tx = [o for o in store.split("?")[1].split("&") if o.startswith("tx=")]
    store = scheme + (" " + tx[0] if tx else " tx=auto" if scheme == "redis" else "")
    rate[(store, c, v)].append(float(r))
    p50[(store, c, v)].append(float(p))
print("| store | callers (a: async, one loop) | old decisions/s (p50 µs) | new decisions/s (p50 µs) | new/old |")
print("|---|--:|--:|--:|--:|")
for store, c in sorted({(k[0], k[1]) for k in rate},
                       key=lambda k: (k[0], int(k[1].rstrip("a")))):
    o = statistics.median(rate[(store, c, "old")])
    n = statistics.median(rate[(store, c, "new")])
    print(f"| {store} | {c} | {o:.0f} ({statistics.median(p50[(store, c, 'old')]):.0f}) "
          f"| {n:.0f} ({statistics.median(p50[(store, c, 'new')]):.0f}) | {n / o:.2f} |")
PY
