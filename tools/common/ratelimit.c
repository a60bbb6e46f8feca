/* The RateLimit header values: see ratelimit.h. */
#include "ratelimit.h"

#include "args.h"
#include "result.h"

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

int tl_ratelimit_policy(char *buf, size_t n, const char *name, const char *spec)
{
	size_t len = strlen(spec), used = 0;
	int count = 0;
	const char *seg = spec;
	bool ok = n > 0;

	for (const char *p = spec; p <= spec + len; p++) /* count limits */
		if (*p == ';' || *p == '\0') {
			count += memchr(seg, ':', (size_t)(p - seg)) != NULL;
			seg = p + 1;
		}
	seg = spec;
	for (int i = 0; ok && i < count && seg <= spec + len;) {
		const char *semi = strchr(seg, ';');
		size_t seglen = semi ? (size_t)(semi - seg) : strlen(seg);
		int64_t q = 0, w = 0;

		if (memchr(seg, ':', seglen) != NULL) {
			int k;
			ok = limit_numbers(seg, seglen, &q, &w);
			if (count == 1)
				k = snprintf(buf + used, n - used,
					     "\"%s\";q=%lld;w=%lld", name,
					     (long long)q, (long long)w);
			else
				k = snprintf(buf + used, n - used,
					     "%s\"%s.%d\";q=%lld;w=%lld",
					     i ? ", " : "", name, i,
					     (long long)q, (long long)w);
			ok = ok && k > 0 && (size_t)k < n - used;
			used += ok ? (size_t)k : 0;
			i++;
		}
		seg += seglen + 1;
	}
	if ((!ok || count == 0) && n > 0)
		buf[0] = '\0';
	return count;
}

void tl_ratelimit_value(char *buf, size_t n, const char *name, int nlimits,
			const drl_result *r)
{
	int64_t t_us = r->reset_after_us;

	if (!r->would_allow && r->retry_after_us != DRL_NEVER)
		t_us = r->retry_after_us;
	if (nlimits > 1)
		snprintf(buf, n, "\"%s.%d\";r=%lld;t=%lld", name,
			 r->limit_index, (long long)r->remaining,
			 tl_ceil_div(t_us, 1000000));
	else
		snprintf(buf, n, "\"%s\";r=%lld;t=%lld", name,
			 (long long)r->remaining, tl_ceil_div(t_us, 1000000));
}

int tl_ratelimit_has_numbers(const drl_result *r)
{
	return r->path == DRL_PATH_STORE || r->path == DRL_PATH_NEAR ||
	       r->path == DRL_PATH_LOCAL;
}
