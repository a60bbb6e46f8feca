# Sourced by the benchmarks that drive drld's HTTP API with wrk
# (scripts/bench_drld.sh, scripts/bench_envoy.sh) and nginx's
# (scripts/bench_nginx.sh).

# parse_wrk: wrk --latency output on stdin as one line
# "RPS P50_US P99_US NON2XX ERRORS" (ERRORS "ok", or "errors:" and wrk's
# socket error counts).
parse_wrk() {
	"$PYTHON3" -c '
import re, sys
t = sys.stdin.read()
def us(v, unit):
    return float(v) * {"us": 1, "ms": 1e3, "s": 1e6}[unit]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
pct = {m.group(1): us(m.group(2), m.group(3)) for m in
       re.finditer(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", t, re.M)}
bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", t)
err = re.search(r"Socket errors: (.*)", t)
print(rps, pct["50"], pct["99"], int(bad.group(1)) if bad else 0,
      "errors:" + err.group(1).replace(" ", "") if err else "ok")'
}

# wrk_numbers WHO OUT: rps, p50 and p99 (parse_wrk) of wrk's output OUT;
# exits 1, saying WHO and OUT on stderr, when a response was not 2xx or
# 3xx or a socket failed (a benchmark of failures measures nothing).
# shellcheck disable=SC2034 # the callers read them
wrk_numbers() {
	local non2xx errs
	read -r rps p50 p99 non2xx errs <<<"$(parse_wrk <<<"$2")"
	if [ "$non2xx" != 0 ] || [ "$errs" != ok ]; then
		echo "$1: $non2xx non-2xx, $errs" >&2
		echo "$2" >&2
		exit 1
	fi
}
