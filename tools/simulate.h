/*
 * `drl simulate`: how accurate is each algorithm (tools/simulate.c).
 *
 * Replays one generated, seeded request stream against every algorithm
 * (each on its own memory store, at explicit times) and against a perfect
 * sliding window, and reports per algorithm the wrongly allowed and wrongly
 * denied decisions, the most it admitted in any sliding PERIOD, and the
 * decisions/s of the simulation. See tool_simulate_cli.
 */
#ifndef DRL_TOOLS_SIMULATE_H
#define DRL_TOOLS_SIMULATE_H

#include "common/opts.h"

/* Its command line (its --help too). */
extern const tl_opts tool_simulate_cli;

/* `drl simulate`: argv[0] names the subcommand. Returns the process exit
 * status: 0 done, 2 bad usage, 3 a store, output or gnuplot failed. */
int tool_cmd_simulate(int argc, char **argv);

#endif /* DRL_TOOLS_SIMULATE_H */
