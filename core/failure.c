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
 * The end of a decision (core/decision.c) applies the policy; this file
 * says what each means and how a failed item is reported.
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

void drl__req_fail(drl__req *q, size_t i, int rc, const drl_error *d)
{
	q->items[i].rc = rc;
	drl__result_deny(&q->items[i].result);
	if (q->kind != DRL__REQ_BATCH || i >= q->first)
		return; /* one request's detail is in *q->err already */
	q->first = i;
	if (d != NULL && d->code == rc)
		drl_error_set(q->err, rc, "item %zu: %s", i, d->message);
	else
		drl_error_set(q->err, rc, "item %zu: %s", i, drl_strerror(rc));
}
