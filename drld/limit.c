/* A limiter with its HTTP header data: see limit.h. */
#include "limit.h"

#include "common/args.h"
#include "common/json.h"
#include "common/result.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* From one limit of a spec, "ALGO:LIMIT/PERIOD[,options]" (len bytes),
 * its LIMIT and its PERIOD in whole seconds, rounded up (the draft's w is
 * whole seconds; at least 1). The library has checked the spec already;
 * this only reads it. Returns false when it cannot. */
static bool limit_numbers(const char *s, size_t len, int64_t *q, int64_t *w)
{
	char buf[128]; /* "ALGO:LIMIT/PERIOD" is far shorter */
	const char *comma = memchr(s, ',', len);
	int64_t period_us;

	if (comma != NULL) /* the options do not matter here */
		len = (size_t)(comma - s);
	const char *colon = memchr(s, ':', len);
	if (colon == NULL || len >= sizeof buf)
		return false;
	memcpy(buf, s, len); /* the limit alone, ended by '\0' */
	buf[len] = '\0';
	if (!tl_parse_limit_period(buf + (colon - s) + 1, q, &period_us))
		return false;
	*w = tl_ceil_div(period_us, 1000000);
	if (*w < 1)
		*w = 1;
	return true;
}

/* Fill l->nlimits and l->policy from the spec: one item per limit
 * segment (segments holding ':'; options such as on_error=deny do not).
 * On anything unexpected the policy stays "". */
static void make_policy(struct drld_limit *l, const char *spec)
{
	size_t n = strlen(spec), used = 0;
	int count = 0;
	const char *seg = spec;
	bool ok = true;

	for (const char *p = spec; p <= spec + n; p++) /* count limits */
		if (*p == ';' || *p == '\0') {
			count += memchr(seg, ':', (size_t)(p - seg)) != NULL;
			seg = p + 1;
		}
	l->nlimits = count;
	seg = spec;
	for (int i = 0; ok && i < count && seg <= spec + n;) {
		const char *semi = strchr(seg, ';');
		size_t len = semi ? (size_t)(semi - seg) : strlen(seg);
		int64_t q = 0, w = 0;

		if (memchr(seg, ':', len) != NULL) {
			int k;
			ok = limit_numbers(seg, len, &q, &w);
			if (count == 1)
				k = snprintf(l->policy + used,
					     sizeof l->policy - used,
					     "\"%s\";q=%lld;w=%lld", l->name,
					     (long long)q, (long long)w);
			else
				k = snprintf(l->policy + used,
					     sizeof l->policy - used,
					     "%s\"%s.%d\";q=%lld;w=%lld",
					     i ? ", " : "", l->name, i,
					     (long long)q, (long long)w);
			ok = ok && k > 0 && (size_t)k < sizeof l->policy - used;
			used += ok ? (size_t)k : 0;
			i++;
		}
		seg += len + 1;
	}
	if (!ok || count == 0)
		l->policy[0] = '\0';
}

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
	make_policy(l, spec);
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
	int64_t t_us = r->reset_after_us;

	if (!r->would_allow && r->retry_after_us != DRL_NEVER)
		t_us = r->retry_after_us;
	if (l->nlimits > 1)
		snprintf(buf, n, "\"%s.%d\";r=%lld;t=%lld", l->name,
			 r->limit_index, (long long)r->remaining,
			 tl_ceil_div(t_us, 1000000));
	else
		snprintf(buf, n, "\"%s\";r=%lld;t=%lld", l->name,
			 (long long)r->remaining, tl_ceil_div(t_us, 1000000));
}
