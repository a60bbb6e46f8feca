/*
 * Elapsed time for the drl tools (tools/common/clock.c): CLOCK_MONOTONIC
 * in nanoseconds, for measuring how long something took. Decisions never
 * use it (the library takes its time in µs from the real-time clock or
 * from the caller).
 */
#ifndef TL_CLOCK_H
#define TL_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC now, in ns: only differences mean anything. Not the
 * library's drl_mono_us(): the same clock, but its µs are too coarse for
 * the histograms (hist.h: exact below 64 ns) of single in-process
 * decisions, which take well under a µs. */
int64_t tl_mono_ns(void);

/* Sleep ns nanoseconds (nothing when ns <= 0), across signals. */
void tl_sleep_ns(int64_t ns);

#endif /* TL_CLOCK_H */
