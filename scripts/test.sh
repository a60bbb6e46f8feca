#!/usr/bin/env bash
# Install what is missing, build, and run the whole test suite: once as a
# normal build with warnings as errors (build/), once under ASan+UBSan
# (build-asan/), and the threaded tests once more under TSan (build-tsan/).
# Idempotent; works unattended (CI=true, no stdin).
#
# The last line is always "N passed, N failed, N skipped", counted from
# each run's meson-logs/testlog.json; the exit status is nonzero when
# anything failed (a build that does not compile counts as a failure).
#
# More runs (TSan, valgrind, fuzzers) are one more run_suite line at the
# bottom.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
# shellcheck source=scripts/python.sh
. scripts/python.sh

passed=0
failed=0
skipped=0

# Count one failure that no testlog.json records (setup or build broke).
fail_step() {
	echo "FAILED: $*" >&2
	failed=$((failed + 1))
}

# Configure BUILDDIR with the given meson setup arguments: a fresh setup the
# first time, a reconfigure (applying the same arguments) afterwards.
setup_dir() {
	local dir=$1
	shift
	if [ -f "$dir/meson-private/coredata.dat" ]; then
		meson setup --reconfigure "$dir" "$@"
	else
		meson setup "$dir" "$@"
	fi
}

# Add the results in testlog.json $1 to the totals: OK and EXPECTEDFAIL
# pass, SKIP skips, anything else (FAIL, TIMEOUT, ERROR, UNEXPECTEDPASS)
# fails. Prints this run's counts.
count_results() {
	local counts p f s
	counts=$("$PYTHON3" - "$1" <<'PY'
import json, sys
p = f = s = 0
with open(sys.argv[1]) as log:
    for line in log:
        line = line.strip()
        if not line:
            continue
        r = json.loads(line).get("result")
        if r in ("OK", "EXPECTEDFAIL"):
            p += 1
        elif r == "SKIP":
            s += 1
        else:
            f += 1
print(p, f, s)
PY
	) || {
		fail_step "cannot read $1"
		return
	}
	read -r p f s <<<"$counts"
	echo "--- $p passed, $f failed, $s skipped"
	passed=$((passed + p))
	failed=$((failed + f))
	skipped=$((skipped + s))
}

# run_suite NAME BUILDDIR [meson setup args...]
# Configure and build BUILDDIR, run every test suite in it with
# `meson test`, and add its results to the totals. Environment for the
# tests (e.g. UBSAN_OPTIONS) can be given on the call:
#   UBSAN_OPTIONS=... run_suite asan build-asan -Db_sanitize=address
# With MESON_TEST_ARGS="--setup S", meson logs to testlog-S.json: say so
# in TESTLOG.
run_suite() {
	local t0=$SECONDS
	build_and_test "$@"
	echo "=== $1: $((SECONDS - t0)) s (setup, build and tests)"
}

build_and_test() {
	local name=$1 dir=$2 rc log
	shift 2
	log="$dir/meson-logs/${TESTLOG:-testlog.json}"
	echo "=== $name: $dir ${*:-}"
	if ! setup_dir "$dir" "$@"; then
		fail_step "$name: meson setup $dir"
		return
	fi
	if ! ninja -C "$dir"; then
		fail_step "$name: build in $dir"
		return
	fi
	rm -f "$log"
	# shellcheck disable=SC2086 # MESON_TEST_ARGS is a word list
	meson test -C "$dir" --print-errorlogs ${MESON_TEST_ARGS:-}
	rc=$?
	if [ ! -f "$log" ]; then
		fail_step "$name: meson test wrote no $log (exit $rc)"
		return
	fi
	local before=$failed
	count_results "$log"
	if [ "$rc" -ne 0 ] && [ "$failed" -eq "$before" ]; then
		fail_step "$name: meson test exited $rc"
	fi
}

if ! bash scripts/deps.sh; then
	fail_step "scripts/deps.sh"
	echo "$passed passed, $failed failed, $skipped skipped"
	exit 1
fi

run_suite werror build -Dwerror=true
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	run_suite asan build-asan -Db_sanitize=address,undefined \
	-Db_lundef=false -Dbenchmarks=false
# ThreadSanitizer on everything that runs threads against a store (TLS and
# Sentinel included: the resolver thread, its subscriptions), and on
# drld (HTTP threads, reloads, a graceful stop) under test_drld.sh, and its
# gRPC threads under test_envoy.sh (which suppresses reports inside the
# uninstrumented grpc++/abseil libraries: tests/fixtures/tsan_grpc.supp).
# The matrix (every store x spec x path) runs in the werror, ASan and
# valgrind runs, not here: 80-200 s under TSan would take CI past 30
# minutes, and the threaded tests above cover the same threads.
# test_drld.sh's per-store tables run on memory and Redis (tx=lua) only
# here (DRLD_TEST_STORES): the same request path per store, four times, was
# a third of this build's time; its concurrent parts all run.
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	DRLD_TEST_STORES="memory redis" \
	MESON_TEST_ARGS="threads memory_store redis_store redis_pipe redis_tls redis_sentinel cross_process faults cluster near_cache near_cache_stores async async_chan async_cluster async_libuv async_libevent drld_input drld_decisions drld_shadow drld_service envoy" \
	run_suite tsan build-tsan -Db_sanitize=thread -Db_lundef=false \
	-Dbuildtype=debugoptimized -Dbenchmarks=false
# valgrind memcheck (setup 'valgrind' in tests/meson.build): every C test,
# drl under test_cli.sh and drld under test_drld_memcheck.sh, but not the
# other shell tests or the 'no_valgrind' ones (deadline-heavy, and the
# cross-process test); about 4 minutes on 2 cores. It runs on the werror
# build's binaries (a plain build, as memcheck wants): no second build.
if command -v valgrind >/dev/null; then
	MESON_TEST_ARGS="--setup valgrind" TESTLOG=testlog-valgrind.json \
		run_suite valgrind build -Dwerror=true
else
	fail_step "valgrind is not installed (scripts/deps.sh)"
fi
# libFuzzer (fuzz/README.md): each target a bounded while on a copy of its
# corpus; each counts as one test. FUZZ_SECONDS=10 keeps it near a minute
# and a half (most of it the build): a regression check of the corpus and
# a short exploration; longer runs are by hand (fuzz/README.md);
# FUZZ_SEED=1 makes every run explore from the same seed, so a CI verdict
# does not hang on the run's luck (a new find by a longer run by hand goes
# into the corpus as a regression input).
echo "=== fuzz: build-fuzz"
t0=$SECONDS
fuzz_out=$(FUZZ_SECONDS=${FUZZ_SECONDS:-10} FUZZ_SEED=${FUZZ_SEED:-1} \
	bash scripts/fuzz.sh 2>&1)
echo "$fuzz_out"
fp=$(grep -c '^fuzz: fuzz_[a-z_]* ok' <<<"$fuzz_out")
ff=$(grep -c '^fuzz: .*FAILED' <<<"$fuzz_out")
passed=$((passed + fp))
failed=$((failed + ff))
echo "=== fuzz: $((SECONDS - t0)) s (build and runs)"
if [ "$fp" -eq 0 ] && [ "$ff" -eq 0 ]; then
	fail_step "fuzz: scripts/fuzz.sh ran no target"
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
