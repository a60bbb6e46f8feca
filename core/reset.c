/*
 * drl_reset: forget a user key on every limit of a limiter.
 *
 * The layers split the work: each algorithm names the store keys it
 * writes for a user key (drl__algorithm.keys: its state key, or the
 * counter windows a decision can still read), the store deletes them
 * (drl_backend.del, vtable version 4, one atomic step where it can), and
 * the core drops this process's near cache blocks for the key. Neither
 * the algorithm nor the store learns about the other. A reset is a
 * request like a decision (core/decision.c: behind the same breaker, its
 * step the delete).
 *
 * Every key of one (limit, user key) carries the user key's hash tag, and
 * the tag holds only the user key: so all the keys of one reset share one
 * Redis Cluster slot, and one DEL removes them together.
 */
#include "internal.h"

/* Checked arguments: the request's steps (core/decision.c) reset l's
 * on_error=local copy (it decides while the store is away, so it forgets
 * the key even when the store's delete then fails), l's store, then its
 * near cache. The near cache's time is read first (begin), so a store
 * answer to a call that began before the reset is not remembered. */
static int reset(drl_limiter *l, const void *key, size_t keylen, int64_t now_us,
		 drl_error *err)
{
	drl_batch_item it = {.key = key, .keylen = keylen};
	drl__req q;
	drl__req_init(&q, DRL__REQ_RESET, l, &it, 1, now_us, err);
	drl__req_decide(&q);
	return it.rc;
}

/* drl_reset_at's checks but the time's: DRL_EINVAL, nothing deleted. */
static int checked(drl_limiter *l, const void *key, size_t keylen,
		   int64_t now_us, drl_error *err)
{
	if (l == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_reset: NULL limiter");
	int rc = drl__key_check("drl_reset", key, keylen, err);
	return rc ? rc : reset(l, key, keylen, now_us, err);
}

int drl_reset_at(drl_limiter *l, const void *key, size_t keylen, int64_t now_us,
		 drl_error *err)
{
	int rc = drl__time_check(now_us, err);
	return rc ? rc : checked(l, key, keylen, now_us, err);
}

int drl_reset(drl_limiter *l, const void *key, size_t keylen, drl_error *err)
{
	return checked(l, key, keylen, DRL__NOW_READ, err);
}
