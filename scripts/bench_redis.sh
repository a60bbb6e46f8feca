# Sourced by the Redis benchmarks (scripts/bench_server_cost.sh,
# scripts/bench_client.sh): their arguments, the drl binary, one
# redis-server of their own on a free loopback port (stopped, and $tmp
# removed, on exit), and helpers.
#   bench_redis_setup DEFAULT_SECONDS "$@"   sets build, secs, rounds, drl,
#                                            tmp, port, rpid
#   cli ARGS...                              redis-cli on that server
#   cpu_now                                  its used_cpu_sys + _user (s)
#   median "v1 v2 ..."                       the median of the values
#   run_measured CMD..., cell NAME CMD...    a client's rate and CPU
# shellcheck source=scripts/ports.sh
. "$(dirname "${BASH_SOURCE[0]}")/ports.sh"

bench_redis_setup() {
	build=${2:-build}
	secs=${3:-$1}
	rounds=${4:-3}
	drl="$build/tools/drl"
	[ -x "$drl" ] || {
		echo "no $drl: build first (meson setup $build && ninja -C $build)" >&2
		exit 2
	}
	tmp=$(mktemp -d)
	port=$(free_port)
	# BENCH_REDIS_WRAP: a command to run the server under (e.g. valgrind);
	# BENCH_REDIS_ARGS: more arguments for it (e.g. a TLS port)
	# shellcheck disable=SC2086
	${BENCH_REDIS_WRAP:-} redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$tmp" ${BENCH_REDIS_ARGS:-} >"$tmp/redis.log" 2>&1 &
	rpid=$!
	trap 'stop_pids $rpid; rm -rf "$tmp"' EXIT
	wait_port "$port" || { echo "redis-server did not start" >&2; exit 3; }
}

cli() { redis-cli -p "$port" "$@"; }

cpu_now() {
	cli INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/{s+=$2} END{printf "%f", s}'
}

# Run a command; print "decisions seconds client_cpu_s" (the command
# prints "decisions seconds" or drl bench's JSON; its CPU from wait4's
# rusage, setup included).
run_measured() {
	"$PYTHON3" - "$@" <<'PY'
import json, os, subprocess, sys
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
out = p.stdout.read().decode()
_, status, ru = os.wait4(p.pid, 0)
if status != 0:
    sys.exit("failed: " + " ".join(sys.argv[1:]))
cpu = ru.ru_utime + ru.ru_stime
try:
    cells = json.loads(out)
    n, took = cells[0]["decisions"], cells[0]["duration_s"]
except ValueError:
    n, took = out.split()
print(int(n), float(took), cpu)
PY
}

# cell NAME COMMAND...: run it once (FLUSHALL first) and add its
# decisions/s, client CPU µs and redis-server CPU µs per decision to
# rate[NAME], ccpu[NAME], scpu[NAME] (declare -A them first).
cell() {
	local name=$1 c0 c1 n took cpu
	shift
	cli FLUSHALL >/dev/null
	c0=$(cpu_now)
	read -r n took cpu < <(run_measured "$@")
	c1=$(cpu_now)
	rate[$name]+="$(awk -v n="$n" -v t="$took" 'BEGIN{printf "%.0f", n/t}') "
	ccpu[$name]+="$(awk -v c="$cpu" -v n="$n" 'BEGIN{printf "%.2f", c*1e6/n}') "
	scpu[$name]+="$(awk -v a="$c0" -v b="$c1" -v n="$n" 'BEGIN{printf "%.2f", (b-a)*1e6/n}') "
}

median() {
	tr ' ' '\n' <<<"$1" | grep . | sort -g |
		awk '{a[NR]=$1} END{print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'
}
