/*
 * What a limiter does when its store fails: the on_error policy.
 *
 *   (none)  the call returns the store's error; *result is a denial.
 *   deny    fail closed: 0, denied, path DRL_PATH_FAIL_CLOSED,
 *           retry_after = when the store will be tried again.
 *   allow   fail open: 0, allowed, path DRL_PATH_FAIL_OPEN; nothing is
 *           counted anywhere, so remaining and the times are 0.
 *   local   the same limits, decided in this process on a memory store of
 *           the limiter's own (path DRL_PATH_LOCAL), for as long as the
 *           store fails; each process then admits up to the limit on its
 *           own, so N processes admit up to N x LIMIT between them.
 *
 * Only store failures (drl__is_store_failure) are handled so: bad input,
 * malformed state, a spent contention budget and out-of-memory are errors
 * under every policy. A fail-open never hides a bug or an attack on the
 * limiter itself, only an unreachable or failing server.
 */
#include "internal.h"

#include <string.h>

void drl__result_deny(drl_result *r)
{
	memset(r, 0, sizeof *r);
	r->path = DRL_PATH_STORE;
}

int drl__on_error_parse(drl__on_error *out, const char *value, size_t len,
			drl_error *err)
{
	static const struct {
		const char *name;
		drl__on_error policy;
	} names[] = {
		{"deny", DRL__ON_ERROR_DENY},
		{"allow", DRL__ON_ERROR_ALLOW},
		{"local", DRL__ON_ERROR_LOCAL},
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		if (strlen(names[i].name) == len &&
		    memcmp(names[i].name, value, len) == 0) {
			*out = names[i].policy;
			return 0;
		}
	}
	return drl_error_set(err, DRL_EINVAL,
			     "on_error=\"%.*s\": expected deny, allow or local",
			     (int)(len < 32 ? len : 32), value);
}

/* The capacity reported on the policy paths: the first limit's. */
static int64_t capacity(const drl_limiter *l)
{
	const drl__limit *lim = &l->limits[0];
	return lim->burst ? lim->burst : lim->limit;
}

int drl__fallback(drl_limiter *l, const void *key, size_t keylen, int64_t cost,
		  int64_t now_us, drl_result *result, drl_error *err)
{
	drl_store *s = l->store;
	drl__result_deny(result);
	result->limit = capacity(l);
	switch (l->on_error) {
	case DRL__ON_ERROR_DENY:
		result->retry_after_us = drl__breaker_retry_us(s);
		result->path = DRL_PATH_FAIL_CLOSED;
		break;
	case DRL__ON_ERROR_ALLOW:
		result->allowed = 1;
		result->path = DRL_PATH_FAIL_OPEN;
		break;
	case DRL__ON_ERROR_LOCAL: {
		if (now_us < 0) /* DRL__NOW_READ or DRL__NOW_STORE */
			now_us = drl_now_us();
		drl_error local_err;
		int rc = drl__limiter_decide(l->local, key, keylen, cost,
					     now_us, result, &local_err);
		if (rc) {
			drl__result_deny(result);
			return drl_error_set(err, rc, "on_error=local: %s",
					     local_err.message);
		}
		result->path = DRL_PATH_LOCAL;
		break;
	}
	case DRL__ON_ERROR_RETURN:
	default:
		return DRL_EINTERNAL; /* callers check on_error first */
	}
	DRL__COUNT(&s->stats, fallbacks);
	return 0;
}
