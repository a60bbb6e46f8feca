/*
 * The library's two clocks, in µs, written once (public: include/drl/drl.h).
 * Decisions use the real-time one (stores are shared across machines, so
 * a monotonic clock cannot name a window); everything measured within this
 * process (the breaker's open periods, near cache blocks, deadlines) uses
 * the monotonic one, which no step of the wall clock moves. The memory
 * store reads CLOCK_MONOTONIC_COARSE on its own, for speed
 * (backends/memory.c says why).
 */
#include "internal.h"

#include <time.h>

/* µs from a timespec. */
static int64_t us_of(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000 + ts->tv_nsec / 1000;
}

int64_t drl_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return us_of(&ts);
}

int64_t drl_mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return us_of(&ts);
}
