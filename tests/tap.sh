# TAP-style assertions shared by the CLI test scripts: source it, then call
# `check STATUS DESCRIPTION` per assertion; $n counts them and $failed the
# failures. When last_args (and $rc, $tmp/out, $tmp/err) are set, a failure
# also shows the command, its exit status and its output.
# shellcheck shell=bash

n=0
failed=0

# Record one assertion: pass (0) or fail (nonzero) with a description.
check() {
	local ok=$1 what=$2
	n=$((n + 1))
	if [ "$ok" -eq 0 ]; then
		echo "ok $n - $what"
	else
		failed=$((failed + 1))
		echo "not ok $n - $what"
		if [ -n "${last_args+x}" ]; then
			echo "#   command: drl ${last_args[*]}"
			echo "#   exit: $rc"
			head -c 4000 "$tmp/out" | sed 's/^/#   stdout: /'
			head -c 4000 "$tmp/err" | sed 's/^/#   stderr: /'
		fi
	fi
}

# End the script: the count of passed assertions, and exit 0 only when
# none failed (the EXIT trap still runs).
finish() {
	echo "# $((n - failed)) of $n assertions passed"
	[ "$failed" -eq 0 ]
	exit
}

# wait_more FILE TEXT BEFORE [TRIES]: wait (TRIES x 50 ms, default 1200:
# a minute, for valgrind) until FILE holds more than BEFORE lines with
# TEXT. For "the reload was reported" after a SIGHUP.
wait_more() {
	local i
	for ((i = 0; i < ${4:-1200}; i++)); do
		[ "$(grep -c -- "$2" "$1")" -gt "$3" ] && return 0
		sleep 0.05
	done
	return 1
}

# gone_soon PID [TRIES]: wait (TRIES x 50 ms, default 400: 20 s) for
# process PID to end (a bounded wait, in count: for a stop that must not
# wait for a stalled store). Returns nonzero when it still runs.
gone_soon() {
	local i
	for ((i = 0; i < ${2:-400}; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.05
	done
	! kill -0 "$1" 2>/dev/null
}

# missing NAME: a program the script needs is not installed: skip what
# needs it, or under CI=true fail (scripts/deps.sh installs it).
missing() {
	if [ "${CI:-}" = "true" ]; then
		unset last_args
		check 1 "$1 is installed (CI=true: a missing program fails)"
	else
		echo "# skip: $1 not found"
	fi
}

# clear_of_hour_edge: wait until the next aligned hour edge is more than
# 60 s away. Windows of an hour (fixed_window:N/1h) count in aligned hours:
# a sequence that straddles an edge starts over there (a wall-clock edge,
# not a race), so each such sequence (a few requests, seconds even under a
# sanitizer) starts clear of one.
clear_of_hour_edge() {
	local left=$((3600 - $(date +%s) % 3600))
	if [ "$left" -le 60 ]; then
		sleep $((left + 1))
	fi
}
