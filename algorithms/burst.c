/* The burst= option shared by token_bucket and gcra. */
#include "internal.h"

#include <string.h>

int drl__burst_option(drl__limit *lim, const char *key, const char *value,
		      drl_error *err)
{
	if (strcmp(key, "burst") != 0)
		return drl_error_set(err, DRL_EINVAL,
				     "unknown option \"%s\" for %s (expected "
				     "burst)",
				     key, lim->algo->name);
	if (drl_parse_int(value, strlen(value), 1, DRL_LIMIT_MAX, &lim->burst))
		return drl_error_set(err, DRL_EINVAL,
				     "burst=%s must be an integer from 1 to "
				     "%lld",
				     value, (long long)DRL_LIMIT_MAX);
	return 0;
}

int drl__burst_finish(drl__limit *lim, drl_error *err)
{
	if (lim->burst == 0)
		lim->burst = lim->limit;
	if ((drl__i128)lim->burst * lim->period_us / lim->limit >
	    DRL_FILL_TIME_MAX_US)
		return drl_error_set(err, DRL_EINVAL,
				     "burst x PERIOD / LIMIT (the time to "
				     "refill an empty bucket) exceeds 2^52 us "
				     "(~142 years)");
	return 0;
}
