/*
 * subwindow: the window split into N sub-windows, counts summed.
 *
 * With trailing=1 the sub-window that just left the window still counts,
 * weighted by how much of it the sliding window still overlaps
 * (senderista/sliding-window-rate-limiter). This file is also the engine
 * of fixed_window (N=1) and sliding_window (N=1, trailing): one counter
 * per sub-window, named by its index floor(now / S), so a window's
 * identity is in its key and the TTL only cleans up.
 *
 * Exactness under contention: the current sub-window is incremented first
 * (atomically), then the estimate is checked and an over-limit increment is
 * refunded. Every admitted request's increment is seen by every later one,
 * so concurrent callers can never admit more than LIMIT at one instant.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* The counts the estimate at `now` is made of: c[0] is the current
 * sub-window, c[k] the one k back; c[N] is the trailing one. */
typedef struct counts {
	int64_t c[DRL_SUBWINDOWS_MAX + 1];
} counts;

/* floor(c * r / S): the trailing sub-window's weight with r µs of it still
 * inside the window. */
static int64_t weighted(int64_t c, int64_t r, int64_t s)
{
	return drl__i128_floor_div((drl__i128)c * r, s);
}

/* Estimate at offset e into the current sub-window. */
static int64_t estimate(const drl__limit *lim, const counts *k, int64_t e,
			int64_t s)
{
	int64_t n = lim->subwindows, sum = 0;
	for (int64_t j = 0; j < n; j++)
		sum += k->c[j];
	if (lim->trailing)
		sum += weighted(k->c[n], s - e, s);
	return sum;
}

/* Until the estimate is 0 with no more traffic. */
static int64_t reset_after(const drl__limit *lim, const counts *k, int64_t e,
			   int64_t s)
{
	int64_t n = lim->subwindows;
	int64_t last = lim->trailing ? n : n - 1;
	for (int64_t j = 0; j <= last; j++)
		if (k->c[j] > 0)
			return (n - j) * s - e + (lim->trailing ? s : 0);
	return 0;
}

/* The first moment, from offset e into the current sub-window, at which a
 * request of `cost` fits, with no other traffic. Walks forward sub-window
 * by sub-window: m sub-windows on, the m oldest have left the window and
 * c[n - m] is the trailing one, whose weight falls linearly. */
static int64_t retry_after(const drl__limit *lim, const counts *k, int64_t e,
			   int64_t s, int64_t cost)
{
	int64_t n = lim->subwindows, need = lim->limit - cost, full = 0;
	for (int64_t j = 0; j < n; j++)
		full += k->c[j];
	for (int64_t m = 0; m <= n; m++) {
		if (m > 0)
			full -= k->c[n - m];
		if (full > need)
			continue;
		int64_t start = m == 0 ? e : 0;
		int64_t base = m == 0 ? 0 : (s - e) + (m - 1) * s;
		int64_t old = lim->trailing ? k->c[n - m] : 0;
		if (old == 0)
			return base;
		/* the largest r with floor(old * r / s) <= need - full */
		int64_t rmax = drl__i128_ceil_div(
				       (drl__i128)(need - full + 1) * s, old) -
			       1;
		int64_t at = rmax >= s ? 0 : s - rmax;
		if (at < start)
			at = start;
		return base + (at - start);
	}
	return (s - e) + n * s; /* not reached: at m == n nothing is left */
}

/* Counts as the estimate sees them: a negative one (a refund that outlived
 * its key) counts as 0; one beyond DRL__COUNT_MAX is not a libdrl count.
 * counter.lua does the same. */
static int check_counts(counts *k, size_t n, drl_error *err)
{
	for (size_t j = 0; j < n; j++) {
		if (k->c[j] > DRL__COUNT_MAX)
			return drl_error_set(err, DRL_ECORRUPT,
					     "counter in the store is out of "
					     "range: not a libdrl count");
		if (k->c[j] < 0)
			k->c[j] = 0;
	}
	return 0;
}

int drl__counter_decide(const drl__limit *lim, const drl__call *call,
			drl_result *res, drl__undo *undo)
{
	drl_backend *b = call->backend;
	int64_t n = lim->subwindows, s = lim->period_us / n;
	int64_t i = call->now / s, e = call->now % s;
	int64_t ttl = (n + 1) * s - e + DRL__TTL_GRACE_US;
	int64_t cost = call->cost, limit = lim->limit;
	size_t nkeys = (size_t)n + (lim->trailing ? 1 : 0);
	drl__key kbuf[DRL_SUBWINDOWS_MAX + 1];
	drl_bytes keys[DRL_SUBWINDOWS_MAX + 1];
	counts k; /* only c[0..nkeys) is used: filled below */
	int rc;

	for (size_t j = 0; j < nkeys; j++)
		keys[j] = drl__key_indexed(&kbuf[j], call->key, i - (int64_t)j);
	if (drl__script_usable(lim, call)) {
		rc = drl__script_decide(lim, call, nkeys, keys, res, undo);
		if (rc != DRL_BACKEND_ESPLIT)
			return rc;
	}

	bool consume = !call->peek && cost <= limit;
	if (consume) {
		rc = b->incr(b, keys[0], cost, ttl, &k.c[0], call->err);
		if (rc)
			return rc;
		/* what was there before us counts at least 0 */
		if (k.c[0] - cost < 0)
			k.c[0] = cost;
		if (nkeys > 1)
			rc = b->get_many(b, nkeys - 1, keys + 1, k.c + 1,
					 call->err);
		if (rc == 0)
			rc = check_counts(&k, nkeys, call->err);
		if (rc) {
			int64_t v;
			(void)b->incr(b, keys[0], -cost, ttl, &v, NULL);
			return rc;
		}
	} else {
		rc = b->get_many(b, nkeys, keys, k.c, call->err);
		if (rc == 0)
			rc = check_counts(&k, nkeys, call->err);
		if (rc)
			return rc;
	}

	int64_t est = estimate(lim, &k, e, s);
	if (consume && est <= limit) {
		undo->a = i;
		drl__result_fill(res, true, limit, limit - est,
				 reset_after(lim, &k, e, s), 0);
		return 0;
	}
	if (consume) {
		/* over the limit: give the increment back. Should the refund
		 * fail, the quota stays taken: the safe direction. */
		int64_t v;
		if (b->incr(b, keys[0], -cost, ttl, &v, NULL) == 0)
			k.c[0] = v < 0 ? 0 : v;
		else
			k.c[0] -= cost;
		est = estimate(lim, &k, e, s);
	}
	bool allowed =
		cost == 0 || (!consume && cost <= limit && est + cost <= limit);
	int64_t retry =
		cost > limit ? DRL_NEVER : retry_after(lim, &k, e, s, cost);
	drl__result_fill(res, allowed, limit, limit - est,
			 reset_after(lim, &k, e, s), retry);
	return 0;
}

int drl__counter_refund(const drl__limit *lim, const drl__call *call,
			const drl__undo *undo)
{
	drl_backend *b = call->backend;
	int64_t n = lim->subwindows, s = lim->period_us / n;
	/* with the store's clock unread, the longest TTL the key can need */
	int64_t e = call->now == DRL__NOW_STORE ? 0 : call->now % s;
	int64_t ttl = (n + 1) * s - e + DRL__TTL_GRACE_US;
	drl__key kbuf;
	int64_t v;
	return b->incr(b, drl__key_indexed(&kbuf, call->key, undo->a),
		       -call->cost, ttl, &v, call->err);
}

/* The sub-windows a decision at t reads are floor(t / S) - j for j in
 * [0, nkeys); a reset at `now` removes those of every t within one
 * sub-window of now (clients whose clocks differ by up to S, or a reset
 * that races a window edge): indexes i - nkeys .. i + 1. Older windows are
 * read by no decision at now or later, and their TTL removes them. */
size_t drl__counter_keys(const drl__limit *lim, const drl__keybase *kb,
			 int64_t now, drl__key *kbuf, drl_bytes *keys)
{
	int64_t s = lim->period_us / lim->subwindows;
	int64_t i = now / s;
	int64_t nkeys = lim->subwindows + (lim->trailing ? 1 : 0);
	size_t n = 0;
	for (int64_t j = i + 1; j >= i - nkeys; j--, n++)
		keys[n] = drl__key_indexed(&kbuf[n], kb, j);
	return n;
}

static int option(drl__limit *lim, const char *key, const char *value,
		  drl_error *err)
{
	int64_t v;
	size_t len = strlen(value);
	if (strcmp(key, "subwindows") == 0) {
		if (drl_parse_int(value, len, 1, DRL_SUBWINDOWS_MAX, &v))
			return drl_error_set(err, DRL_EINVAL,
					     "subwindows=%s must be from 1 to "
					     "%d",
					     value, DRL_SUBWINDOWS_MAX);
		lim->subwindows = v;
		return 0;
	}
	if (strcmp(key, "trailing") == 0) {
		if (drl_parse_int(value, len, 0, 1, &v))
			return drl_error_set(err, DRL_EINVAL,
					     "trailing=%s must be 0 or 1",
					     value);
		lim->trailing = (int)v;
		return 0;
	}
	return drl_error_set(err, DRL_EINVAL,
			     "unknown option \"%s\" for subwindow (expected "
			     "subwindows, trailing)",
			     key);
}

#define DEFAULT_SUBWINDOWS 10

static int finish(drl__limit *lim, drl_error *err)
{
	if (lim->subwindows == 0)
		lim->subwindows = DEFAULT_SUBWINDOWS;
	if (lim->period_us % lim->subwindows != 0)
		return drl_error_set(err, DRL_EINVAL,
				     "PERIOD (%lld us) is not a whole number "
				     "of microseconds per sub-window when "
				     "split into %lld",
				     (long long)lim->period_us,
				     (long long)lim->subwindows);
	return 0;
}

const drl__algorithm drl__subwindow = {
	.name = "subwindow",
	.tag = "sub",
	.option = option,
	.finish = finish,
	.decide = drl__counter_decide,
	.refund = drl__counter_refund,
	.lua = &drl__lua_counter,
	.lua_batch = &drl__lua_batch_counter,
	.keys = drl__counter_keys,
};
