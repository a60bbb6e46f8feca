/*
 * `drl bench`: what each store and strategy costs (tools/bench.c).
 *
 * Runs a grid of cells (store x spec x keys x concurrency), each for a fixed
 * time, and reports decisions/s, latency percentiles, the contention
 * counters of drl_store_stats, an exactness check at one fixed time and,
 * with --ceiling, the raw ceiling of the same server measured in the same
 * run. See tool_bench_cli for the options and the output.
 */
#ifndef DRL_TOOLS_BENCH_H
#define DRL_TOOLS_BENCH_H

#include "common/opts.h"

/* Its command line (its --help too). */
extern const tl_opts tool_bench_cli;

/* `drl bench`: argv[0] names the subcommand. Returns the process exit
 * status: 0 every cell ran and none over-admitted, 1 some exactness check
 * admitted more than the limit, 2 bad usage, 3 a store could not be used
 * (or output failed). */
int tool_cmd_bench(int argc, char **argv);

#endif /* DRL_TOOLS_BENCH_H */
