/* A limiter with its HTTP header data: see limit.h. */
#include "limit.h"

#include "common/ratelimit.h"

#include <stdio.h>
#include <string.h>

int drld_limit_init(struct drld_limit *l, drl_store *store, const char *spec,
		    const char *prefix, const char *name,
		    struct drld_rule_stats *stats, drl_error *err)
{
	memset(l, 0, sizeof *l);
	snprintf(l->name, sizeof l->name, "%s", name);
	l->stats = stats;
	int rc = drl_limiter_new(&l->lim, store, spec, prefix, err);
	if (rc != 0)
		return rc;
	l->nlimits =
		tl_ratelimit_policy(l->policy, sizeof l->policy, l->name, spec);
	return 0;
}

void drld_limit_fini(struct drld_limit *l)
{
	drl_limiter_free(l->lim);
	l->lim = NULL;
}

void drld_limit_ratelimit(const struct drld_limit *l, const drl_result *r,
			  char *buf, size_t n)
{
	tl_ratelimit_value(buf, n, l->name, l->nlimits, r);
}
