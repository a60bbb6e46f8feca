"""The results file of a benchmark script (scripts/bench_drld.sh,
bench_envoy.sh, bench_nginx.sh): one line a cell a round, "CELL VALUE...".
medians(path) is {CELL: [the median of each VALUE column over the rounds]},
the cells in the order they first appear.

Run as a script it prints one of those scripts' Markdown tables from its
results file (the tables' rows read the cells each script writes):
    python3 scripts/bench_cells.py drld|nginx RESULTS
    python3 scripts/bench_cells.py envoy RESULTS CONC"""
import statistics
import sys


def medians(path):
    cells = {}
    with open(path) as f:
        for line in f:
            cell, *v = line.split()
            cells.setdefault(cell, []).append([float(x) for x in v])
    return {cell: [statistics.median(col) for col in zip(*rows)]
            for cell, rows in cells.items()}


def lat(v):
    """A latency in µs: one decimal below 10, whole above."""
    return f"{v:.1f}" if v < 10 else f"{v:,.0f}"


def drld_table(med):
    """bench_drld.sh: cells drld-STORE-T and library-STORE-T (req/s, p50,
    p99)."""
    yield ("| store | threads / callers | drld req/s (wrk) | p50 µs | p99 µs "
           "| library dec/s (drl bench) | p50 µs | p99 µs | drld / library |")
    yield "|---|--:|--:|--:|--:|--:|--:|--:|--:|"
    for cell in med:
        what, store, t = cell.split("-")
        if what != "drld":
            continue
        d, l = med[cell], med[f"library-{store}-{t}"]
        yield (f"| {store} | {t} | {d[0]:,.0f} | {lat(d[1])} | {lat(d[2])} "
               f"| {l[0]:,.0f} | {lat(l[1])} | {lat(l[2])} "
               f"| {d[0] / l[0]:.3f} |")


def nginx_table(med):
    """bench_nginx.sh: a cell per location (req/s, p50, p99, worker CPU µs
    a request), "plain" the one without a limit."""
    names = {"plain": "no limit", "memory": "drl memory://",
             "redis": "drl redis://"}
    yield ("| location | req/s (wrk) | p50 µs | p99 µs "
           "| worker CPU µs/request | over no limit |")
    yield "|---|--:|--:|--:|--:|--:|"
    for loc, (rps, p50, p99, cpu) in med.items():
        extra = "—" if loc == "plain" else f"+{cpu - med['plain'][3]:.1f} µs"
        yield (f"| {names[loc]} | {rps:,.0f} | {p50:.0f} | {p99:.0f} "
               f"| {cpu:.1f} | {extra} |")


def envoy_table(med, conc):
    """bench_envoy.sh: cells CLIENT-STORE (calls/s, p50, p99[, drld CPU µs
    a call]) for conc calls at once, each store's against its HTTP cell."""
    what = {"grpc-conns": f"gRPC, {conc} connections × 1 (h2load)",
            "grpc-mux": f"gRPC, 2 connections × {conc // 2} (h2load)",
            "http": f"HTTP /v1/check, {conc} connections (wrk)",
            "library": "library (drl bench)"}
    yield (f"| store | client, {conc} at once | decisions/s | p50 µs "
           "| p99 µs | drld CPU µs/call | / HTTP |")
    yield "|---|---|--:|--:|--:|--:|--:|"
    for store in ("memory", "redis"):
        http = med["http-" + store][0]
        for w in what:
            d = med[w + "-" + store]
            cpu = f"{d[3]:.1f}" if len(d) > 3 else "–"
            yield (f"| {store} | {what[w]} | {d[0]:,.0f} | {d[1]:,.0f} "
                   f"| {d[2]:,.0f} | {cpu} | {d[0] / http:.2f} |")


TABLES = {"drld": drld_table, "nginx": nginx_table, "envoy": envoy_table}

if __name__ == "__main__":
    kind, path, *extra = sys.argv[1:]
    for row in TABLES[kind](medians(path), *map(int, extra)):
        print(row)
