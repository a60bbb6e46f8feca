#!/usr/bin/env bash
# The Python binding against its anchors (docs/performance.md, "Python"):
# - memory://: what the binding adds per decision over the C call (the same
#   call looped in C, in the same process);
# - Redis, one key of 1,000 per decision: 16 threads, and one asyncio loop
#   with 64 decisions in flight, through drl, against limits' own Redis
#   storage (redis-py) with 16 threads, moving window (its exact strategy)
#   and fixed window;
# - flask-limiter under gunicorn (4 workers, wrk 2 threads x 16
#   connections, every request allowed): requests/s and Redis commands per
#   request, drl (drl+redis://, drl-fixed_window and drl-gcra) against
#   limits' redis:// (fixed-window, moving-window).
# A benchmark, not a test: it asserts no speed. Every cell runs ROUNDS
# times, interleaved; the report is each cell's median and the ratios of
# medians from this one run.
#
#   scripts/bench_python.sh [BUILDDIR] [ROUNDS] [SECONDS]
#
# BUILDDIR (default build) holds python/drl (ninja builds it first);
# ROUNDS default 3; SECONDS (default 5) per wrk run. Starts its own
# redis-server (persistence off) on a free loopback port and gunicorns on
# free loopback ports, stops them by PID. All traffic is on 127.0.0.1.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
# shellcheck source=scripts/ports.sh
. scripts/ports.sh

build=${1:-build}
rounds=${2:-3}
seconds=${3:-5}
ninja -C "$build" >/dev/null || exit 1
export PYTHONPATH=$PWD/$build/python
out=$(mktemp)
port=$(free_port)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
	>/dev/null &
redis_pid=$!
trap 'stop_pids $redis_pid; rm -f "$out"' EXIT
wait_port "$port" || exit 1
url="redis://127.0.0.1:$port"
bench="$PYTHON3 python/bench/bench_decisions.py"

# One cell: its name is the first word of every line it prints.
cell() {
	case $1 in
	memory) $bench memory ;;
	cffi) $PYTHON3 python/bench/cffi_call.py "$build/libdrl.so" ;;
	limits-*) STRATEGY=${1#limits-} $bench limits-threads "$url" |
		sed "s/^/${1#limits-} /" ;;
	*-threads | *-asyncio) SPEC=${1%-*}:100/1m $bench "drl-${1##*-}" "$url" |
		sed "s/^/${1%-*} /" ;;
	flask-*)
		local name=${1#flask-} storage strategy
		case $name in
		drl-*) storage=drl+$url strategy=$name ;;
		limits-*) storage=$url strategy=${name#limits-} ;;
		esac
		$PYTHON3 python/bench/bench_flask.py "$name" "$storage" \
			"$strategy" "$port" "$seconds" | sed 's/^/flask /' ;;
	esac
}

cells=(memory cffi limits-moving-window limits-fixed-window
	sliding_log-threads gcra-threads fixed_window-threads
	sliding_log-asyncio gcra-asyncio fixed_window-asyncio
	flask-drl-fixed_window flask-drl-gcra flask-limits-fixed-window
	flask-limits-moving-window)
# Round r starts at cell r: a burst of load elsewhere on the machine does
# not always fall on the same cells.
for r in $(seq "$rounds"); do
	echo "--- round $r of $rounds" >&2
	for i in "${!cells[@]}"; do
		cell "${cells[$(((i + r - 1) % ${#cells[@]}))]}" | tee -a "$out"
	done
done

"$PYTHON3" - "$out" <<'PY'
import re, statistics, sys
cells = {}
for line in open(sys.argv[1]):
    w = line.split()
    if w[0] == "cffi":
        cells.setdefault(("memory ns/decision", "cffi"), []).append(float(w[2]))
    elif w[0] == "memory":
        for name, v in (("python", w[2]), ("C", w[5]), ("binding", w[8])):
            cells.setdefault(("memory ns/decision", name), []).append(float(v))
    elif w[0] == "flask":
        cells.setdefault(("flask req/s", w[1]), []).append(float(w[2]))
        cells.setdefault(("flask Redis cmds/req", w[1]), []).append(float(w[3]))
    else:
        name = w[0] + " " + w[1]
        cells.setdefault(("redis decisions/s", name), []).append(float(w[2]))
        cells.setdefault(("redis CPU us/decision, client + server", name),
                         []).append(float(w[8]) + float(w[11]))
med = {k: statistics.median(v) for k, v in cells.items()}
print("\n| measure | cell | median | runs |\n|---|---|---|---|")
for k, v in med.items():
    print("| %s | %s | %.6g | %s |" % (k[0], k[1], v,
                                      " ".join("%.6g" % x for x in cells[k])))
def ratios(measure, base):
    """Each cell of measure against base: the ratio of medians, then the
    ratio within each round (cells append one value per round)."""
    b = cells[(measure, base)]
    print("\n%s, against %s (median %.6g):" % (measure, base, med[(measure, base)]))
    for k, v in cells.items():
        if k[0] == measure and k[1] != base:
            print("  %s: %.2fx (rounds: %s)" % (k[1], med[k] / med[(measure, base)],
                  " ".join("%.2f" % (x / y) for x, y in zip(v, b))))
ratios("redis decisions/s", "moving-window limits-threads")
ratios("redis CPU us/decision, client + server", "moving-window limits-threads")
ratios("flask req/s", "limits-moving-window")
ratios("flask req/s", "limits-fixed-window")
PY
