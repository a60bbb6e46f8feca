#!/usr/bin/env bash
# drl simulate: the boundary pattern drives fixed_window to ~2x LIMIT while
# sliding_log stays at LIMIT; the perfect window and sliding_log make no
# wrong decision; the same seed gives byte-identical output and another
# seed does not; bad input exits 2 naming it; --plot without gnuplot
# exits 3.
#
# usage: test_simulate.sh PATH/TO/drl
# Prints one "ok N - ..." / "not ok N - ..." line per assertion and exits
# nonzero when any failed. Runs take simulated time, not real time.
set -u

# shellcheck source=../../scripts/python.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/python.sh"

drl=${1:?usage: test_simulate.sh PATH/TO/drl}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=../fixtures/tap.sh
source "$(dirname "$0")/../fixtures/tap.sh"

# Run drl with the arguments; output in $tmp/out and $tmp/err, status $rc.
run() {
	last_args=("$@")
	"$drl" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
}

# Evaluate a Python expression over the JSON document in $tmp/out, with
# rows = {spec: row}; exits 0 when it is true.
json_true() {
	"$PYTHON3" - "$tmp/out" "$1" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
rows = {r["spec"]: r for r in doc["rows"]}
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}

# (1) bursts of LIMIT just before and after window edges.
run simulate --rate-limit 50/1m --traffic boundary --duration 600 --json \
	--no-timing
check "$rc" "boundary run exits 0"
json_true 'rows["fixed_window:50/1m"]["max_x_limit"] >= 1.9'
check $? "boundary: fixed_window admits >= 1.9x LIMIT in a sliding PERIOD"
json_true 'rows["sliding_log:50/1m"]["max_x_limit"] <= 1.0'
check $? "boundary: sliding_log admits <= 1.0x LIMIT"
json_true 'rows["perfect"]["max_x_limit"] <= 1.0'
check $? "boundary: the perfect window admits <= 1.0x LIMIT"

# (2) the reference and the exact algorithm make no wrong decision.
for t in poisson bursty ramp; do
	run simulate --rate-limit 100/1m --traffic "$t" --rate 3 \
		--duration 1800 --seed 7 --json --no-timing
	check "$rc" "$t run exits 0"
	for spec in perfect sliding_log:100/1m; do
		json_true "rows['$spec']['wrongly_allowed'] == 0 and \
rows['$spec']['wrongly_denied'] == 0 and \
rows['$spec']['max_x_limit'] <= 1.0 and \
rows['$spec']['allowed'] == rows['perfect']['allowed'] and \
doc['requests'] > 1000"
		check $? "$t: $spec has 0 wrong decisions and max <= 1.0x"
	done
done
run simulate --rate-limit 100/1m --traffic zipf --rate 20 --keys 200 \
	--duration 600 --json --no-timing
json_true "rows['sliding_log:100/1m']['wrongly_allowed'] == 0 and \
rows['sliding_log:100/1m']['wrongly_denied'] == 0 and \
rows['token_bucket:100/1m']['max_x_limit'] > 1.0"
check $? "zipf: sliding_log exact, token_bucket above LIMIT"

# (3) reproducible: same seed, same bytes; another seed, other bytes.
for t in poisson bursty ramp zipf boundary; do
	args=(simulate --traffic "$t" --duration 900 --json --no-timing)
	[ "$t" = boundary ] || args+=(--seed 42)
	run "${args[@]}"
	cp "$tmp/out" "$tmp/a"
	run "${args[@]}"
	cmp -s "$tmp/a" "$tmp/out"
	check $? "$t: the same seed gives byte-identical --json"
done
run simulate --traffic poisson --duration 900 --seed 43 --json --no-timing
cp "$tmp/out" "$tmp/b"
run simulate --traffic poisson --duration 900 --seed 42 --json --no-timing
! cmp -s "$tmp/b" "$tmp/out"
check $? "poisson: another seed gives other output"
run simulate --traffic poisson --duration 900 --seed 42 --json
grep -q '"decisions_per_s":' "$tmp/out"
check $? "--json without --no-timing has decisions_per_s"
run simulate --traffic poisson --duration 900 --seed 42
grep -q '^perfect ' "$tmp/out" && grep -q '^sliding_log:100/1m ' "$tmp/out"
check $? "the table has a perfect row and every algorithm"

# (4) bad input exits 2 with a message naming it.
bad() {
	local needle=$1
	shift
	run simulate "$@"
	[ "$rc" -eq 2 ] && grep -qF -- "$needle" "$tmp/err"
	check $? "bad input exits 2 naming '$needle': $*"
}
bad "--rate '-1'" --rate -1
bad "--rate 'abc'" --rate abc
bad "--rate '0'" --rate 0
bad "--traffic 'foo'" --traffic foo
bad "--duration '1x'" --duration 1x
bad "--keys '0'" --traffic zipf --keys 0
bad "--keys applies" --traffic poisson --keys 5
bad "--seed '-3'" --seed -3
bad "--rate-limit '5'" --rate-limit 5
bad "nope:1/1s" --limit 'nope:1/1s'
bad "gcra:10/1s" --limit 'token_bucket:5/1s;gcra:10/1s'
bad "exclude" --limit 'gcra:5/1s' --rate-limit 5/1s
bad "--frob" --frob
bad "requests" --rate 1e7 --duration 31536000
bad "--rate does not apply" --traffic boundary --rate 5

# --plot without gnuplot on PATH: a clear error, exit 3.
last_args=(simulate --plot "$tmp/plot")
PATH=/nonexistent "$drl" simulate --plot "$tmp/plot" >"$tmp/out" \
	2>"$tmp/err"
rc=$?
[ "$rc" -eq 3 ] && grep -q gnuplot "$tmp/err"
check $? "--plot without gnuplot exits 3 naming gnuplot"

# --plot with gnuplot: data files and PNGs.
if command -v gnuplot >/dev/null; then
	run simulate --rate-limit 50/1m --traffic boundary --duration 300 \
		--plot "$tmp/plot"
	[ "$rc" -eq 0 ] && [ -s "$tmp/plot/overview.png" ] &&
		[ -s "$tmp/plot/1-fixed_window.png" ] &&
		[ -s "$tmp/plot/6-sliding_log.dat" ]
	check $? "--plot writes data files and PNGs"
else
	echo "# gnuplot not installed: --plot rendering not tested"
fi

echo "1..$n"
[ "$failed" -eq 0 ]
