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
