#!/usr/bin/env bash
# Build the libFuzzer targets (fuzz/, CC=clang, -Dfuzz=true) in build-fuzz/
# and run each for a bounded time on a copy of its corpus, so the repository
# is never written to. One line per target:
#
#   fuzz: fuzz_spec ok (123456 runs, 4567 exec/s, 30 s)
#   fuzz: fuzz_uri FAILED: crash, reproducer build-fuzz/fuzz-out/fuzz_uri/crash-...
#
# and a last line "fuzz: N passed, N failed". Exits nonzero when a target
# failed (a crash, a leak, a timeout or OOM of one input, or no build).
#
# Environment: FUZZ_SECONDS (default 30) per target; FUZZ_TARGETS (default
# all four) a space-separated subset; BUILD_DIR (default build-fuzz);
# FUZZ_SEED (default 0: libFuzzer picks one) the random seed, which
# scripts/test.sh fixes so that CI explores the same inputs on every run
# (a verdict that does not depend on the run's luck; exploring is for
# longer runs by hand).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

seconds=${FUZZ_SECONDS:-30}
seed=${FUZZ_SEED:-0}
targets=${FUZZ_TARGETS:-fuzz_spec fuzz_uri fuzz_redis_reply fuzz_memcached_reply fuzz_redis_module}
build=${BUILD_DIR:-build-fuzz}
out=$build/fuzz-out
passed=0
failed=0

case $seconds$seed in
'' | *[!0-9]*)
	echo "fuzz: FUZZ_SECONDS and FUZZ_SEED must be whole numbers" >&2
	exit 2
	;;
esac

# The dictionary of a target: fuzz/<name>.dict without "fuzz_" and "_reply".
dict_of() {
	local d=${1#fuzz_}
	echo "fuzz/${d%_reply}.dict"
}

# "N runs, N exec/s" from a libFuzzer log (its -print_final_stats lines).
stats_of() {
	awk '/stat::number_of_executed_units/ {r = $2}
	     /stat::average_exec_per_sec/ {e = $2}
	     END {printf "%s runs, %s exec/s", r ? r : "?", e ? e : "?"}' "$1"
}

# Run target $1 for $seconds on a fresh copy of its corpus.
run_target() {
	local t=$1 dir=$out/$1 rc
	rm -rf "$dir"
	mkdir -p "$dir/corpus" "$dir/artifacts" "$dir/tmp"
	cp -r "fuzz/corpus/$t/." "$dir/corpus/"
	# The reply fuzzers' socket directory: left here, not in /tmp, when a
	# crash ends the run before it can be removed.
	local tmp=$dir/tmp
	[ "${tmp#/}" != "$tmp" ] || tmp=$PWD/$tmp
	# -max_total_time bounds the run, -timeout one input, -rss_limit_mb
	# memory; the outer timeout is a backstop should libFuzzer hang.
	TMPDIR=$tmp timeout --kill-after=10 $((seconds + 60)) \
		"$build/fuzz/$t" \
		"$dir/corpus" -dict="$(dict_of "$t")" \
		-max_total_time="$seconds" -seed="$seed" -max_len=4096 -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$dir/artifacts/" >"$dir/log" 2>&1
	rc=$?
	local found
	found=$(find "$dir/artifacts" -type f | head -n 1)
	if [ "$rc" -eq 0 ] && [ -z "$found" ]; then
		echo "fuzz: $t ok ($(stats_of "$dir/log"), $seconds s)"
		passed=$((passed + 1))
		return
	fi
	echo "fuzz: $t FAILED (exit $rc): ${found:+reproducer $found; }log $dir/log"
	grep -m 5 -E 'ERROR|SUMMARY|fuzz(_spec|_uri)?:' "$dir/log" | sed 's/^/  /'
	if [ -n "$found" ]; then
		echo "  rerun: $build/fuzz/$t $found"
	fi
	failed=$((failed + 1))
}

if ! command -v clang >/dev/null; then
	echo "fuzz: clang not found (bash scripts/deps.sh installs it)" >&2
	echo "fuzz: 0 passed, 1 failed"
	exit 1
fi
if [ -f "$build/meson-private/coredata.dat" ]; then
	setup=(meson setup --reconfigure "$build" -Dfuzz=true -Dtests=false)
else
	setup=(meson setup "$build" -Dfuzz=true -Dtests=false)
fi
setup_log=$(mktemp)
if ! CC=clang "${setup[@]}" >"$setup_log" 2>&1 ||
	! ninja -C "$build" >>"$setup_log" 2>&1; then
	echo "fuzz: build FAILED"
	tail -n 20 "$setup_log" | sed 's/^/  /'
	rm -f "$setup_log"
	echo "fuzz: 0 passed, 1 failed"
	exit 1
fi
rm -f "$setup_log"

for t in $targets; do
	if [ ! -x "$build/fuzz/$t" ]; then
		echo "fuzz: $t FAILED: no such target"
		failed=$((failed + 1))
		continue
	fi
	run_target "$t"
done

echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
