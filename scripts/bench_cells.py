"""The results file of a benchmark script (scripts/bench_drld.sh,
bench_envoy.sh, bench_nginx.sh): one line a cell a round, "CELL VALUE...".
medians(path) is {CELL: [the median of each VALUE column over the rounds]},
the cells in the order they first appear."""
import statistics


def medians(path):
    cells = {}
    with open(path) as f:
        for line in f:
            cell, *v = line.split()
            cells.setdefault(cell, []).append([float(x) for x in v])
    return {cell: [statistics.median(col) for col in zip(*rows)]
            for cell, rows in cells.items()}
