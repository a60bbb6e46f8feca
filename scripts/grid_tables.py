"""The tables of docs/performance.md's Redis and Memcached sections, from the
JSON of one `drl bench` grid (scripts/bench_grid.sh ... --json > grid.json):

    python3 scripts/grid_tables.py grid.json

prints, for each store of the grid but memory://, its table (the store's
section; Redis with the pipelined ceiling, `redis-benchmark -P 16`, beside
the plain one), then for each store with CAS attempts the hot-key conflicts
table, then the figures the sections' prose quotes (how far a cell's rounds
spread, first; ratios to the ceilings by concurrency). A cell's figures are
`drl bench`'s: decisions/s the median round, latencies over all rounds,
`exact` the hot-key check."""
import json
import statistics
import sys


def lat(v):
    """A latency in µs as the tables give it: one decimal below 100."""
    return f"{v:.1f}" if v < 100 else f"{v:.0f}"


def exact(c):
    e = c["exact"]
    if c["keys"] != 1 or e is None:
        return "—"
    s = f"{e['allowed']}/{e['capacity']}"
    if e["over_admission"]:
        return s + " **OVER**"
    return s if e["complete"] else s + " (cut short)"


def ratio(c, which="ceiling"):
    ceil = c[which]
    return None if ceil is None else c["decisions_per_s"] / ceil["per_s"]


def state_algo(c):
    return c["cas_attempts_per_decision"] > 0


def row(c, cas, piped):
    ceil = c["ceiling"]
    cols = [f"`{c['spec']}`", "hot" if c["keys"] == 1 else "100k",
            str(c["concurrency"]), f"{c['decisions_per_s']:.0f}",
            lat(c["latency_us"]["p50"]), lat(c["latency_us"]["p99"]),
            lat(c["latency_us"]["p999"]),
            f"{100 * c['allowed'] / max(c['decisions'], 1):.0f}%"]
    if cas:
        n = c["cas_exhausted"]
        cols += [f"{c['cas_retries_per_decision']:.2f}" if state_algo(c)
                 else "—", f"{n} ({c['errors']})" if n else str(c["errors"])]
    cols += [exact(c), f"{ceil['per_s']:.0f}" if ceil else "—",
             f"{ratio(c):.2f}" if ceil else "—"]
    if piped:
        p = c["ceiling_pipelined"]
        cols += [f"{p['per_s']:.0f}" if p else "—",
                 f"{ratio(c, 'ceiling_pipelined'):.2f}" if p else "—"]
    return "| " + " | ".join(cols) + " |"


def table(cells, cas, piped):
    head = ["spec", "keys", "C", "decisions/s", "p50 µs", "p99 µs",
            "p99.9 µs", "allowed"]
    if cas:
        head += ["CAS retries/dec", "exhausted (errors)"]
    head += ["exact", "ceiling/s", "lib/ceiling"]
    if piped:
        head += ["`-P 16`/s", "lib/`-P 16`"]
    yield "| " + " | ".join(head) + " |"
    yield "|---|---|" + "--:|" * (len(head) - 2)
    for c in cells:
        yield row(c, cas, piped)


def conflicts(cells):
    yield ("| spec | C | decisions/s | CAS attempts/dec | retries/dec "
           "| exhausted (= errors) | share of calls |")
    yield "|---|--:|--:|--:|--:|--:|--:|"
    for c in cells:
        if c["keys"] != 1 or not state_algo(c):
            continue
        share = 100 * c["cas_exhausted"] / max(c["decisions"], 1)
        yield (f"| `{c['spec']}` | {c['concurrency']} "
               f"| {c['decisions_per_s']:.0f} "
               f"| {c['cas_attempts_per_decision']:.2f} "
               f"| {c['cas_retries_per_decision']:.2f} "
               f"| {c['cas_exhausted']} | {share:.1f}% |")


def summary(name, cells, which="ceiling"):
    by_c = {}
    for c in cells:
        r = ratio(c, which)
        if r is not None and not (c["keys"] == 1 and
                                  c["spec"].startswith("sliding_log")):
            by_c.setdefault(c["concurrency"], []).append(r)
    every = [r for rs in by_c.values() for r in rs]
    if not every:
        return
    print(f"# {name}: lib/{which} over {len(every)} cells (sliding_log hot "
          f"left out): median {statistics.median(every):.2f}, "
          f"{sum(r >= 0.8 for r in every)} >= 0.8; " +
          ", ".join(f"C={k} median {statistics.median(v):.2f} "
                    f"(lowest {min(v):.2f})" for k, v in by_c.items()))


def noise(cells):
    """How far a cell's rounds spread (max / min decisions/s): the median
    and the 90th percentile over the grid's cells."""
    f = sorted(max(r) / min(r) for r in (c["decisions_per_s_rounds"]
                                         for c in cells) if min(r) > 0)
    print(f"# rounds of a cell, max/min: median {statistics.median(f):.2f}, "
          f"90th percentile {f[int(0.9 * len(f))]:.2f}")


def main(path):
    cells = json.load(open(path))
    noise(cells)
    stores = []
    for c in cells:
        if c["store"] not in stores and not c["store"].startswith("memory"):
            stores.append(c["store"])
    for s in stores:
        mine = [c for c in cells if c["store"] == s]
        cas = any(state_algo(c) for c in mine)
        piped = any(c["ceiling_pipelined"] for c in mine)
        print(f"## {s}\n")
        print("\n".join(table(mine, cas, piped)))
        if cas:
            print()
            print("\n".join(conflicts(mine)))
        print()
        summary(s, mine)
        if piped:
            summary(s, mine, "ceiling_pipelined")
        print()


if __name__ == "__main__":
    main(sys.argv[1])
