# Sourced by the Redis benchmarks (scripts/bench_server_cost.sh,
# scripts/bench_client.sh): their arguments, the drl binary, one
# redis-server of their own on a free loopback port (stopped, and $tmp
# removed, on exit), and helpers.
#   bench_redis_setup DEFAULT_SECONDS "$@"   sets build, secs, rounds, drl,
#                                            tmp, port, rpid
#   cli ARGS...                              redis-cli on that server
#   cpu_now                                  its used_cpu_sys + _user (s)
#   median "v1 v2 ..."                       the median of the values
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
	# BENCH_REDIS_WRAP: a command to run the server under (e.g. valgrind)
	${BENCH_REDIS_WRAP:-} redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$tmp" >"$tmp/redis.log" 2>&1 &
	rpid=$!
	trap 'stop_pids $rpid; rm -rf "$tmp"' EXIT
	wait_port "$port" || { echo "redis-server did not start" >&2; exit 3; }
}

cli() { redis-cli -p "$port" "$@"; }

cpu_now() {
	cli INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/{s+=$2} END{printf "%f", s}'
}

median() {
	tr ' ' '\n' <<<"$1" | grep . | sort -g |
		awk '{a[NR]=$1} END{print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'
}
