/*
 * A decision as the drl tools print it (tools/common/result.c): the names
 * and rounded times `drl check --json` and drld show.
 */
#ifndef TL_RESULT_H
#define TL_RESULT_H

#include <stdint.h>

/* The name of a decision's path (drl_path: "store", "local", "fail_open",
 * "fail_closed", "near"), as `drl check --json` and drld print it. */
const char *tl_path_name(int path);

/* Microseconds to whole units of `unit` µs, rounded up (waiting that long
 * is never too early); negative values (DRL_NEVER) give -1. */
long long tl_ceil_div(int64_t us, int64_t unit);

#endif /* TL_RESULT_H */
