/* The algorithms, by the name used in specs. */
#include "internal.h"

#include <string.h>

static const drl__algorithm *const all[] = {
	&drl__fixed_window, &drl__sliding_window, &drl__subwindow,
	&drl__token_bucket, &drl__gcra,           &drl__sliding_log,
};

const drl__algorithm *drl__algorithm_find(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		if (strlen(all[i]->name) == len &&
		    memcmp(all[i]->name, name, len) == 0)
			return all[i];
	return NULL;
}

void drl__result_fill(drl_result *res, bool allowed, int64_t limit,
		      int64_t remaining, int64_t reset_after,
		      int64_t retry_after)
{
	res->allowed = allowed;
	res->limit = limit;
	res->remaining = remaining < 0 ? 0 : remaining;
	res->reset_after_us = reset_after < 0 ? 0 : reset_after;
	res->retry_after_us = allowed ? 0 : retry_after;
	res->path = DRL_PATH_STORE;
}

int drl__state_corrupt(const drl__limit *lim, const drl__call *call)
{
	return drl_error_set(call->err, DRL_ECORRUPT,
			     "%s state in the store is malformed",
			     lim->algo->name);
}
