/*
 * gcra: the generic cell rate algorithm (leaky bucket as a meter). One
 * number of state, the theoretical arrival time (TAT): a request of `cost`
 * is admitted when max(TAT, now) + cost*T - now <= burst*T, where
 * T = PERIOD / LIMIT is the emission interval.
 *
 * T is rarely a whole number of µs (1m / 7), so time is counted in ticks of
 * 1/LIMIT µs: T is then exactly PERIOD ticks, nothing is rounded, and the
 * admission is identical to token_bucket with the same parameters.
 *
 * State (17 bytes): 'G', TAT in whole µs, TAT's remainder in ticks
 * (0..LIMIT-1); int64 little-endian.
 */
#include "internal.h"

#define STATE_LEN 17

/* TAT in ticks; absent (or in the past) means `now`. */
static int load_tat(const drl__limit *lim, const void *old, size_t oldlen,
		    drl__i128 now_t, drl__i128 *tat)
{
	*tat = now_t;
	if (old == NULL)
		return 0;
	const unsigned char *p = old;
	if (oldlen != STATE_LEN || p[0] != 'G')
		return DRL_ECORRUPT;
	int64_t us = drl__get64(p + 1), rem = drl__get64(p + 9);
	if (us < 0 || us > DRL_TIME_MAX_US + DRL_FILL_TIME_MAX_US || rem < 0 ||
	    rem >= lim->limit)
		return DRL_ECORRUPT;
	drl__i128 t = (drl__i128)us * lim->limit + rem;
	if (t > now_t)
		*tat = t;
	return 0;
}

static void store_tat(const drl__limit *lim, drl__i128 tat, unsigned char *out,
		      size_t *outlen)
{
	out[0] = 'G';
	drl__put64(out + 1, (int64_t)(tat / lim->limit));
	drl__put64(out + 9, (int64_t)(tat % lim->limit));
	*outlen = STATE_LEN;
}

static int corrupt(const drl__call *call)
{
	return drl_error_set(call->err, DRL_ECORRUPT,
			     "gcra state in the store is malformed");
}

static int step(const drl__limit *lim, const drl__call *call, const void *old,
		size_t oldlen, void *out, size_t cap, size_t *outlen,
		int64_t *ttl_us, drl_result *res, drl__undo *undo)
{
	(void)cap;
	drl__i128 now_t = (drl__i128)call->now * lim->limit, tat;
	if (load_tat(lim, old, oldlen, now_t, &tat))
		return corrupt(call);
	drl__i128 tau = (drl__i128)lim->burst * lim->period_us;
	drl__i128 new_tat = tat + (drl__i128)call->cost * lim->period_us;
	/* cost 0 only peeks: always allowed, even when time went backwards
	 * past the TAT */
	if (call->cost > lim->burst ||
	    (call->cost > 0 && new_tat - now_t > tau)) {
		int64_t retry =
			call->cost > lim->burst
				? DRL_NEVER
				: drl__i128_ceil_div(new_tat - now_t - tau,
						     lim->limit);
		drl__result_fill(res, false, lim->burst,
				 drl__i128_floor_div(tau - (tat - now_t),
						     lim->period_us),
				 drl__i128_ceil_div(tat - now_t, lim->limit),
				 retry);
		return 0;
	}
	int write = !call->peek && call->cost > 0;
	if (!write)
		new_tat = tat;
	int64_t reset = drl__i128_ceil_div(new_tat - now_t, lim->limit);
	if (write) {
		store_tat(lim, new_tat, out, outlen);
		*ttl_us = reset + DRL__TTL_GRACE_US;
		undo->a = call->cost;
	}
	drl__result_fill(
		res, true, lim->burst,
		drl__i128_floor_div(tau - (new_tat - now_t), lim->period_us),
		reset, 0);
	return write;
}

/* Take call->cost emission intervals back off the TAT. */
static int refund_step(const drl__limit *lim, const drl__call *call,
		       const void *old, size_t oldlen, void *out, size_t cap,
		       size_t *outlen, int64_t *ttl_us, drl_result *res,
		       drl__undo *undo)
{
	(void)cap, (void)res, (void)undo;
	drl__i128 now_t = (drl__i128)call->now * lim->limit, tat;
	if (load_tat(lim, old, oldlen, now_t, &tat))
		return corrupt(call);
	tat -= (drl__i128)call->cost * lim->period_us;
	if (tat < now_t)
		tat = now_t;
	store_tat(lim, tat, out, outlen);
	*ttl_us =
		drl__i128_ceil_div(tat - now_t, lim->limit) + DRL__TTL_GRACE_US;
	return 1;
}

const drl__algorithm drl__gcra = {
	.name = "gcra",
	.tag = "gcra",
	.option = drl__burst_option,
	.finish = drl__burst_finish,
	.decide = drl__state_decide,
	.refund = drl__state_refund,
	.step = step,
	.unstep = refund_step,
	.state_len = STATE_LEN,
	.lua = &drl__lua_gcra,
	.lua_batch = &drl__lua_batch_gcra,
};
