# Sourced by the server-cost benchmarks (scripts/bench_server_cost.sh,
# scripts/bench_twin_ab.sh) for BENCH_MEASURE=instructions: redis-server
# runs under `$cg_wrap` (valgrind --tool=callgrind), and
#   cg_zero                 zeroes its counters (callgrind_control --zero)
#   cg_per_decision N       prints "exec all" instructions per decision
#                           since cg_zero, for N decisions: "exec" inclusive
#                           in processCommand() (the command's lookup and
#                           execution with a script's commands: what
#                           commandstats times), "all" every instruction
#                           of the server (reading, parsing, replying, the
#                           event loop)
# They need $rpid (the server's PID) and $PYTHON3 (scripts/python.sh).
cgdir=$(mktemp -d)
cg_wrap="valgrind --tool=callgrind --quiet --callgrind-out-file=$cgdir/cg.out"
cg_zero() { callgrind_control --zero "$rpid" >/dev/null 2>&1; }
cg_per_decision() {
	rm -f "$cgdir"/cg.out.*
	callgrind_control --dump "$rpid" >/dev/null 2>&1
	callgrind_annotate --inclusive=yes --threshold=100 \
		"$(ls "$cgdir"/cg.out.* | head -1)" 2>/dev/null |
		"$PYTHON3" -c '
import re, sys
n = float(sys.argv[1])
total = execi = 0
for line in sys.stdin:
    m = re.match(r"\s*([\d,]+)\s.*PROGRAM TOTALS", line)
    if m:
        total = int(m.group(1).replace(",", ""))
    m = re.match(r"\s*([\d,]+)\s.*:processCommand\b", line)
    if m and not execi:
        execi = int(m.group(1).replace(",", ""))
print("%.0f %.0f" % (execi / n, total / n))' "$1"
}
