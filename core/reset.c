/*
 * drl_reset: forget a user key on every limit of a limiter.
 *
 * The layers split the work: each algorithm names the store keys it
 * writes for a user key (drl__algorithm.keys: its state key, or the
 * counter windows a decision can still read), the store deletes them
 * (drl_backend.del, vtable version 4, one atomic step where it can), and
 * the core drops this process's near cache blocks for the key. Neither
 * the algorithm nor the store learns about the other.
 *
 * Every key of one (limit, user key) carries the user key's hash tag, and
 * the tag holds only the user key: so all the keys of one reset share one
 * Redis Cluster slot, and one DEL removes them together.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Everything one reset deletes: every limit's keys for the user key. */
typedef struct reset_keys {
	drl__key kbuf[DRL_POLICY_LIMITS_MAX * DRL__LIMIT_KEYS_MAX];
	drl_bytes keys[DRL_POLICY_LIMITS_MAX * DRL__LIMIT_KEYS_MAX];
	size_t n;
} reset_keys;

/* The keys of every limit of l for key, as of `now`. */
static void collect(const drl_limiter *l, const void *key, size_t keylen,
		    int64_t now, reset_keys *rk)
{
	rk->n = 0;
	for (size_t i = 0; i < l->nlimits; i++) {
		const drl__limit *lim = &l->limits[i];
		drl__keybase kb;
		drl__keybase_make(&kb, l->prefix, l->prefixlen, lim, key,
				  keylen);
		if (lim->algo->keys == NULL) {
			rk->keys[rk->n] = drl__key_plain(&rk->kbuf[rk->n], &kb);
			rk->n++;
			continue;
		}
		rk->n += lim->algo->keys(lim, &kb, now, rk->kbuf + rk->n,
					 rk->keys + rk->n);
	}
}

/* The time a reset is made at: now_us when explicit, else the store's
 * clock (clock=server) or the real-time clock. */
static int reset_now(drl_limiter *l, int64_t now_us, int64_t *now,
		     drl_error *err)
{
	drl_backend *b = l->store->backend;
	if (now_us != DRL__NOW_READ)
		*now = now_us;
	else if ((b->caps & DRL_CAP_CLOCK) && b->now != NULL)
		return b->now(b, now, err);
	else
		*now = drl_now_us();
	return 0;
}

/* Delete l's keys for key on l's store, behind its breaker. */
static int delete_keys(drl_limiter *l, const void *key, size_t keylen,
		       int64_t now_us, drl_error *err)
{
	drl_backend *b = l->store->backend;
	if (b->version < 4 || b->del == NULL)
		return drl_error_set(err, DRL_ENOTSUP,
				     "drl_reset: store \"%s\" (vtable version "
				     "%d) cannot delete keys (del(), vtable "
				     "version 4)",
				     b->name ? b->name : "?", b->version);
	reset_keys *rk = malloc(sizeof *rk);
	if (rk == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	bool probe;
	int rc = drl__breaker_enter(l->store, &probe, err);
	if (rc == 0) {
		int64_t now;
		rc = reset_now(l, now_us, &now, err);
		if (rc == 0) {
			collect(l, key, keylen, now, rk);
			rc = b->del(b, rk->n, rk->keys, err);
		}
		drl__breaker_leave(l->store, probe, rc);
	}
	free(rk);
	return rc;
}

/* Checked arguments: reset l's on_error=local copy (it decides while the
 * store is away, so it forgets the key even when the store's delete then
 * fails), l's store, then its near cache. The near cache's time is read
 * first, so a store answer to a call that began before the reset is not
 * remembered. */
static int reset(drl_limiter *l, const void *key, size_t keylen, int64_t now_us,
		 drl_error *err)
{
	drl__near_req q;
	if (l->near != NULL) {
		int base;
		int64_t t;
		drl__near_now(now_us, &base, &t);
		drl__near_req_make(l->near, &q, key, keylen, base, t);
	}
	int rc = 0;
	if (l->local != NULL)
		rc = delete_keys(l->local, key, keylen, now_us, err);
	if (rc == 0)
		rc = delete_keys(l, key, keylen, now_us, err);
	if (rc == 0 && l->near != NULL)
		drl__near_forget(l->near, &q);
	return rc;
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
