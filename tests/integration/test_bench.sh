#!/usr/bin/env bash
# drl bench: a short run on every store (memory, Redis tx=lua and tx=watch,
# memcached) returns every field with sane values, what a decision costs a
# Redis server is measured (and n/a, not a failure, where the server will
# not say), and bad input exits 2 with a message naming it.
#
# usage: test_bench.sh PATH/TO/drl
# Starts its own redis-server and memcached on free loopback ports and
# stops them (by PID) at exit. A missing server binary skips that store,
# except under CI=true, where it is a failure.
# Prints one "ok N - ..." / "not ok N - ..." line per assertion and exits
# nonzero when any failed.
set -u

drl=${1:?usage: test_bench.sh PATH/TO/drl}
here=$(dirname "${BASH_SOURCE[0]}")
# shellcheck source=../fixtures/scratch.sh
source "$here/../fixtures/scratch.sh" # $tmp, pids, tap.sh

run() {
	last_args=("$@")
	"$drl" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
	rc=$?
}


# One TAP line per "ok|not ok<TAB>what" line of $tmp/checks (written by
# a Python check of the JSON output).
report_checks() {
	while IFS=$'\t' read -r verdict what; do
		[ "$verdict" = ok ]
		unset last_args
		check $? "$what"
	done <"$tmp/checks"
}

# A server binary is missing: skip its store, or fail under CI (missing:
# tests/fixtures/tap.sh).
stores=("memory://")
ceiling_stores=()
redis_store=

if command -v redis-server >/dev/null; then
	rport=$(free_port)
	redis-server --port "$rport" --bind 127.0.0.1 --save "" \
		--appendonly no --dir "$tmp" --daemonize no \
		>"$tmp/redis.log" 2>&1 &
	pids+=($!)
	wait_port "$rport"
	check $? "redis-server listens on $rport"
	stores+=("redis://127.0.0.1:$rport?tx=lua&pool=8"
		"redis://127.0.0.1:$rport?tx=watch&pool=8")
	ceiling_stores+=("redis")
	redis_store="redis://127.0.0.1:$rport"
else
	missing redis-server
fi

if command -v memcached >/dev/null; then
	mport=$(free_port)
	muser=()
	[ "$(id -u)" -eq 0 ] && muser=(-u root)
	memcached -p "$mport" -l 127.0.0.1 -U 0 "${muser[@]}" \
		>"$tmp/memcached.log" 2>&1 &
	pids+=($!)
	wait_port "$mport"
	check $? "memcached listens on $mport"
	stores+=("memcached://127.0.0.1:$mport?pool=8")
	ceiling_stores+=("memcached")
else
	missing memcached
fi

if [ "${#ceiling_stores[@]}" -gt 0 ] && ! command -v redis-benchmark \
	>/dev/null && [ "${CI:-}" = "true" ]; then
	unset last_args
	check 1 "redis-benchmark is installed (CI=true)"
fi

store_list=$(
	IFS=,
	echo "${stores[*]}"
)

# ---- the grid: every field present and sane ----
# --exact-limit 100: each exactness phase has 0.5 s (see below).
run bench --store "$store_list" \
	--limit "fixed_window:1000000/1m;token_bucket:1000000/1m" \
	--concurrency 1,4 --keys 1,1000 --duration 0.3 --ceiling --json \
	--exact-limit 100
expect_rc 0
# stderr is not a terminal: the plan line only, no progress line
grep -q "planned total" "$tmp/err"
check $? "the planned total goes to stderr"
! grep -q $'\r' "$tmp/err"
check $? "no progress line when stderr is not a terminal"

"$PYTHON3" - "$tmp/out" "${#stores[@]}" <<'EOF' >"$tmp/checks"
import json, sys

cells = json.load(open(sys.argv[1]))
nstores = int(sys.argv[2])
out = []

def ok(cond, what):
    out.append(("ok" if cond else "not ok") + "\t" + what)

ok(len(cells) == nstores * 2 * 2 * 2,
   "%d cells for %d stores x 2 specs x 2 key counts x 2 concurrencies"
   % (len(cells), nstores))
fields = ["store", "spec", "keys", "concurrency", "procs", "async_workers",
          "duration_s",
          "decisions", "decisions_per_s", "allowed", "errors",
          "first_error", "rounds", "decisions_per_s_rounds", "latency_us",
          "round_trips_per_decision", "store_decisions",
          "scripts_per_decision", "cas_attempts_per_decision",
          "cas_retries_per_decision", "cas_exhausted", "server_exec_us",
          "server_cpu_us", "server_note", "exact", "ceiling"]
for c in cells:
    name = "%s %s keys=%s C=%s" % (c.get("store"), c.get("spec"),
                                   c.get("keys"), c.get("concurrency"))
    missing = [f for f in fields if f not in c]
    ok(not missing, name + ": every field present " + str(missing))
    if missing:
        continue
    lat = c["latency_us"]
    ok(c["decisions"] > 0 and c["decisions_per_s"] > 0,
       name + ": decisions/s > 0")
    ok(0 < lat["p50"] <= lat["p99"] <= lat["p999"] <= lat["max"],
       name + ": 0 < p50 <= p99 <= p99.9 <= max " + json.dumps(lat))
    ok(c["errors"] == 0 and c["first_error"] is None,
       name + ": no errors (%s)" % c["first_error"])
    ok(0 <= c["allowed"] <= c["decisions"], name + ": allowed <= decisions")
    ok(c["duration_s"] > 0.2, name + ": ran about --duration")
    ok(c["store_decisions"] >= c["decisions"],
       name + ": the store counted every decision")
    ok(c["cas_exhausted"] == 0, name + ": no retry budget spent")
    for f in ["scripts_per_decision", "cas_attempts_per_decision",
              "cas_retries_per_decision"]:
        ok(c[f] >= 0, name + ": " + f + " >= 0")
    store = c["store"]
    rt = c["round_trips_per_decision"]
    cas_spec = c["spec"].startswith("token_bucket")
    if store.startswith("memory"):
        ok(rt == 0, name + ": 0 round trips in process")
        ok(c["ceiling"] is None, name + ": no ceiling for memory")
    elif "tx=lua" in store:
        ok(rt == 1 and c["scripts_per_decision"] == 1,
           name + ": one script round trip per decision")
        ok(c["cas_attempts_per_decision"] == 0, name + ": no CAS with Lua")
    else:
        ok(rt is None, name + ": round trips unknown")
        if cas_spec:
            ok(c["cas_attempts_per_decision"] >= 1,
               name + ": at least one CAS round per decision")
            if c["concurrency"] == 1:
                ok(c["cas_retries_per_decision"] == 0,
                   name + ": no conflicts with one caller")
    if c["keys"] == 1:
        x = c["exact"]
        ok(x is not None and x["capacity"] == 100 and
           x["allowed"] == x["capacity"] and x["over_admission"] == 0 and
           x["complete"] is True and
           x["errors"] == 0,
           name + ": exactly the capacity admitted at one instant " +
           json.dumps(x))
    else:
        ok(c["exact"] is None, name + ": no exactness phase on many keys")
    # what the server spent: measured on Redis only (never a speed)
    srv = {f: c[f] for f in ["server_exec_us", "server_cpu_us",
                             "server_note"]}
    if store.startswith("redis"):
        ok((srv["server_exec_us"] or 0) > 0 and
           srv["server_cpu_us"] is not None and
           srv["server_cpu_us"] >= 0 and srv["server_note"] is None,
           name + ": the server's exec > 0 and CPU >= 0 " + json.dumps(srv))
    else:
        ok(list(srv.values()) == [None, None, None],
           name + ": no server figures " + json.dumps(srv))
    if not store.startswith("memory"):
        cl = c["ceiling"]
        ok(cl is not None and (cl.get("per_s") or 0) > 0 and
           (cl.get("ratio") or 0) > 0,
           name + ": a ceiling and a ratio " + json.dumps(cl))
        cl = cl or {}
        srv = {f: cl.get(f, 0) for f in ["server_exec_us", "server_cpu_us"]}
        if store.startswith("redis"):
            ok((srv["server_exec_us"] or 0) > 0 and
               srv["server_cpu_us"] is not None and
               srv["server_cpu_us"] >= 0,
               name + ": the ceiling's server exec > 0 and CPU >= 0 " +
               json.dumps(srv))
        else:
            ok(list(srv.values()) == [None, None],
               name + ": no server figures for the ceiling " +
               json.dumps(srv))
    cp = c["ceiling_pipelined"]
    if store.startswith("redis"):
        ok(cp is not None and (cp.get("per_s") or 0) > 0 and
           " -P 16 " in cp.get("command", ""),
           name + ": a pipelined ceiling (-P 16) " + json.dumps(cp))
    else:
        ok(cp is None, name + ": no pipelined ceiling " + json.dumps(cp))
print("\n".join(out))
EOF
check $? "the JSON parses"
report_checks

# ---- Markdown by default; --procs across processes ----
if [ "${#stores[@]}" -gt 1 ]; then
	# --exact-limit 100: the exactness phase has 0.5 s (it is a benchmark,
	# bounded in time); 100 admissions fit in it on a loaded machine under
	# ASan, where 1000 were once cut short at 817.
	run bench --store "${stores[1]}" --limit gcra:1000000/1m \
		--concurrency 4 --procs 2 --duration 0.3 --exact-limit 100
	expect_rc 0
	expect_in out "| store | spec | keys | C | decisions/s |"
	expect_in out "| 100/100 |"
	# the parent asks the server around both processes' throughput phase
	expect_in out "| exact (admitted/cap) | srv exec µs | srv CPU µs |"
	grep -qE '\| 100/100 \| [0-9.]+ \| [0-9.]+ \|$' "$tmp/out"
	check $? "--procs 2: numbers in srv exec µs and srv CPU µs"
fi

# ---- what a decision costs the server: Redis only, n/a if it won't say ----
# A memory cell (no figures), a Redis cell on the default tx (plain
# commands: exec is their sum) and, when redis-cli can make one, a Redis
# user who may not run CONFIG: exec n/a with a note, CPU still read, and
# the cell runs all the same. No speed is asserted.
if [ -n "$redis_store" ]; then
	srv_stores="memory://,$redis_store?pool=4"
	nocfg=0
	if command -v redis-cli >/dev/null &&
		redis-cli -p "$rport" ACL SETUSER drlnocfg on '>nocfgpw' '~*' \
			'&*' '+@all' '-config' 2>/dev/null | grep -q OK; then
		nocfg=1
		srv_stores+=",redis://drlnocfg:nocfgpw@127.0.0.1:$rport?pool=4"
	else
		echo "# skip: no redis-cli (or no ACL): the CONFIG-refused case"
	fi
	run bench --store "$srv_stores" --limit fixed_window:1000000/1m \
		--concurrency 2 --duration 0.2 --exact-limit 0 --json
	expect_rc 0
	"$PYTHON3" - "$tmp/out" "$nocfg" <<'EOF' >"$tmp/checks"
import json, sys

cells = json.load(open(sys.argv[1]))
nocfg = sys.argv[2] == "1"
out = []

def ok(cond, what):
    out.append(("ok" if cond else "not ok") + "\t" + what)

def fig(c):
    return json.dumps({f: c.get(f) for f in
                       ["server_exec_us", "server_cpu_us", "server_note"]})

ok(len(cells) == 2 + nocfg, "server cost: a cell per store")
for c in cells:
    name = "server cost: " + c.get("store", "?")
    exec_us, cpu_us = c.get("server_exec_us"), c.get("server_cpu_us")
    note = c.get("server_note")
    ok(c.get("decisions", 0) > 0 and c.get("errors") == 0,
       name + ": decisions, no errors (%s)" % c.get("first_error"))
    if c["store"].startswith("memory"):
        ok(exec_us is None and cpu_us is None and note is None,
           name + ": null figures " + fig(c))
    elif "drlnocfg" in c["store"]:
        ok(exec_us is None and cpu_us is not None and cpu_us >= 0 and
           "CONFIG" in (note or ""),
           name + ": exec null with a note, CPU >= 0 " + fig(c))
    else:
        ok(exec_us is not None and exec_us > 0 and cpu_us is not None and
           cpu_us >= 0 and note is None,
           name + ": exec > 0, CPU >= 0 " + fig(c))
print("\n".join(out))
EOF
	check $? "the server-cost JSON parses"
	report_checks
	if [ "$nocfg" = 1 ]; then
		run bench --store "redis://drlnocfg:nocfgpw@127.0.0.1:$rport" \
			--limit fixed_window:1000000/1m --duration 0.1 \
			--exact-limit 0
		expect_rc 0
		expect_in out "| n/a |"
		expect_in out "server cost: CONFIG RESETSTAT"
		! grep -q nocfgpw "$tmp/out" "$tmp/err"
		check $? "the password is not shown"
	fi
fi

# ---- --async: requests in flight on one loop, on every store ----
run bench --store "$store_list" --limit "gcra:1000000/1m;sliding_log:1000/1m" \
	--concurrency 16 --keys 1 --duration 0.3 --async 4 --json \
	--exact-limit 100
expect_rc 0
"$PYTHON3" - "$tmp/out" "${#stores[@]}" <<'EOF' >"$tmp/checks"
import json, sys

cells = json.load(open(sys.argv[1]))
out = []

def ok(cond, what):
    out.append(("ok" if cond else "not ok") + "\t" + what)

ok(len(cells) == int(sys.argv[2]) * 2, "--async: a cell per store and spec")
for c in cells:
    name = "--async 4: %s %s" % (c.get("store"), c.get("spec"))
    x = c.get("exact") or {}
    ok(c.get("async_workers") == 4 and c.get("concurrency") == 16,
       name + ": async_workers 4, 16 in flight")
    ok(c.get("decisions", 0) > 0 and c.get("errors") == 0,
       name + ": decisions, no errors (%s)" % c.get("first_error"))
    ok(x.get("capacity") == 100 and x.get("allowed") == 100 and
       x.get("over_admission") == 0 and x.get("complete") is True,
       name + ": exactly the capacity admitted " + json.dumps(x))
print("\n".join(out))
EOF
check $? "the --async JSON parses"
report_checks
run bench --limit gcra:1000000/1m --concurrency 8 --duration 0.2 --async 2
expect_rc 0
expect_in out "| 8 async/2 |"

# ---- bad input: exit 2, a message naming it ----
run bench --help
expect_rc 0
expect_in out "usage: drl bench"
run --help
expect_in out "bench"

run bench
expect_rc 2
expect_in err "--limit"

L=(--limit fixed_window:10/1s)
for bad in "--duration 0" "--duration abc" "--duration 1.1234567" \
	"--duration -1" "--duration 1e3" "--duration 3601" \
	"--concurrency 0" "--concurrency 1,,4" "--concurrency 16x" \
	"--concurrency 2000" "--concurrency ,1" "--keys 0" "--keys 1,x" \
	"--procs 0" "--procs 65" "--rounds 0" "--rounds 16" \
	"--exact-limit -1" "--async 0" "--async 257" "--async x"; do
	read -r opt val <<<"$bad"
	run bench "${L[@]}" "$opt" "$val"
	expect_rc 2
	expect_in err "$opt '$val'"
done

run bench "${L[@]}" --bogus
expect_rc 2
expect_in err "--bogus"

run bench "${L[@]}" extra-arg
expect_rc 2
expect_in err "extra-arg"

run bench --limit "fixed_window:10/1s;bogus:1/1s"
expect_rc 2
expect_in err "bogus"

run bench --limit "fixed_window:10/1s;;gcra:1/1s"
expect_rc 2
expect_in err "empty spec"

run bench "${L[@]}" --procs 2
expect_rc 2
expect_in err "memory://"

run bench "${L[@]}" --store "nope://x"
expect_rc 2
expect_in err "nope"

cport=$(free_port)
run bench "${L[@]}" --store "redis://127.0.0.1:$cport" --duration 0.1
if grep -q "unknown store scheme" "$tmp/err"; then
	echo "# skip: built without Redis"
else
	expect_rc 3
	expect_in err "redis://127.0.0.1:$cport"
fi

echo "1..$n"
[ "$failed" -eq 0 ]
