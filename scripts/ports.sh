# Sourced by scripts that start their own servers on loopback
# (scripts/bench_*.sh, scripts/ab_bench.sh, tests/integration/*.sh):
# free_port prints a port that was free a moment ago; wait_port PORT waits
# (30 s at most) until something accepts connections on 127.0.0.1:PORT.

# shellcheck source=scripts/python.sh
. "$(dirname "${BASH_SOURCE[0]}")/python.sh"

free_port() {
	"$PYTHON3" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

wait_port() {
	"$PYTHON3" -c 'import socket, sys, time
end = time.time() + 30
while time.time() < end:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)' "$1"
}

# stop_pids PID...: SIGTERM each process (one that is gone already is
# fine), then reap them all. For the EXIT traps of scripts that keep the
# PIDs of what they started (under set -e too).
stop_pids() {
	local p
	for p in "$@"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "$@"; do
		wait "$p" 2>/dev/null || true
	done
}

# work_dir: $work, a fresh temporary folder, and pids=(), the processes
# the script starts: at exit every one of them is stopped (stop_pids) and
# the folder removed. For the benchmark scripts.
work_dir() {
	work=$(mktemp -d)
	pids=()
	trap 'stop_pids "${pids[@]}"; rm -rf "$work"' EXIT
}

# need_tools WHO TOOL...: exit 2, naming WHO and the tool, unless every
# TOOL is on PATH (scripts/deps.sh installs them).
need_tools() {
	local who=$1 t
	shift
	for t in "$@"; do
		command -v "$t" >/dev/null || {
			echo "$who: $t is not installed (scripts/deps.sh)" >&2
			exit 2
		}
	done
}

# bench_args SECONDS ROUNDS [BUILDDIR [SECONDS [ROUNDS]]]: a benchmark's
# leading arguments into build, seconds and rounds; a missing one takes
# its default (build, and the SECONDS and ROUNDS given first).
# shellcheck disable=SC2034 # the callers read them
bench_args() {
	local s=$1 r=$2
	shift 2
	build=${1:-build}
	seconds=${2:-$s}
	rounds=${3:-$r}
}

# need_built WHO HINT FILE...: exit 2, naming WHO, the file and HINT (how
# to build it), unless every FILE is an executable.
need_built() {
	local who=$1 hint=$2 f
	shift 2
	for f in "$@"; do
		[ -x "$f" ] || {
			echo "$who: no $f ($hint)" >&2
			exit 2
		}
	done
}

# start_redis PORT DIR [ARGS...]: start redis-server on 127.0.0.1:PORT in
# the background, persistence off, its files and its log
# (DIR/redis-PORT.log) in DIR, ARGS added (--requirepass PW). The caller
# keeps $! to stop it by PID, and waits for it with wait_port.
start_redis() {
	local port=$1 dir=$2
	shift 2
	redis-server --port "$port" --bind 127.0.0.1 --save "" \
		--appendonly no --dir "$dir" --daemonize no "$@" \
		>"$dir/redis-$port.log" 2>&1 &
}

# bench_redis WHO: for the benchmarks, after work_dir: a redis-server of
# their own (start_redis) on a free port in $work; sets redis_port and
# redis_pid, adds the PID to pids, and exits 1 naming WHO unless it
# listens.
bench_redis() {
	redis_port=$(free_port)
	start_redis "$redis_port" "$work"
	redis_pid=$!
	pids+=("$redis_pid")
	wait_port "$redis_port" || {
		echo "$1: redis-server did not start" >&2
		exit 1
	}
}

# bench_servers WHO: for the benchmarks over every network store, after
# work_dir: a redis-server (start_redis) and a memcached (start_memcached)
# of their own on free ports in $work; sets rport and mport, adds their
# PIDs to pids, and exits 1 naming WHO unless both listen.
bench_servers() {
	rport=$(free_port)
	start_redis "$rport" "$work"
	pids+=($!)
	mport=$(free_port)
	start_memcached "$mport" "$work"
	pids+=($!)
	wait_port "$rport" && wait_port "$mport" || {
		echo "$1: redis-server or memcached did not start" >&2
		exit 1
	}
}

# start_sentinel PORT DIR MASTER_PORT NAME [MASTER_PW [OWN_PW]]: start
# redis-sentinel on 127.0.0.1:PORT watching the master on
# 127.0.0.1:MASTER_PORT as NAME (quorum 1), with the master's password
# and one of its own when given; its config (DIR/sentinel-PORT.conf,
# which Sentinel rewrites) and log in DIR. The caller keeps $! and waits
# with wait_port.
start_sentinel() {
	local port=$1 dir=$2 conf="$2/sentinel-$1.conf"
	{
		echo "port $port"
		echo "bind 127.0.0.1"
		echo "dir $dir"
		echo "sentinel monitor $4 127.0.0.1 $3 1"
		if [ -n "${5:-}" ]; then
			echo "sentinel auth-pass $4 $5"
		fi
		if [ -n "${6:-}" ]; then
			echo "requirepass $6"
		fi
	} >"$conf"
	redis-sentinel "$conf" >"$dir/sentinel-$port.log" 2>&1 &
}

# start_memcached PORT DIR: the same for memcached (as root, it must be
# told to stay root), its log in DIR/memcached-PORT.log.
start_memcached() {
	local port=$1 dir=$2 user=()
	[ "$(id -u)" -eq 0 ] && user=(-u root)
	memcached -p "$port" -l 127.0.0.1 -U 0 "${user[@]}" \
		>"$dir/memcached-$port.log" 2>&1 &
}

# start_test_servers DIR: for the test scripts (tests/integration/test_drld.sh,
# tests/integration/test_envoy.sh): a redis-server and a memcached of their own
# on free ports, their files in DIR; sets rport and mport ("" for one that is
# not installed), appends their PIDs to the caller's pids array, and reports
# through the caller's check STATUS TEXT (tests/fixtures/tap.sh) and missing
# NAME.
start_test_servers() {
	rport=
	mport=
	if command -v redis-server >/dev/null; then
		rport=$(free_port)
		start_redis "$rport" "$1"
		pids+=($!)
		wait_port "$rport"
		check $? "redis-server listens on $rport"
	else
		missing redis-server
	fi
	if command -v memcached >/dev/null; then
		mport=$(free_port)
		start_memcached "$mport" "$1"
		pids+=($!)
		wait_port "$mport"
		check $? "memcached listens on $mport"
	else
		missing memcached
	fi
}
