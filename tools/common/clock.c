/* Elapsed time for the drl tools: see clock.h. */
#include "clock.h"

#include <errno.h>
#include <time.h>

int64_t tl_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void tl_sleep_ns(int64_t ns)
{
	if (ns <= 0)
		return;
	struct timespec ts = {(time_t)(ns / 1000000000),
			      (long)(ns % 1000000000)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}
