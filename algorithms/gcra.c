/*
 * gcra: the generic cell rate algorithm (leaky bucket as a meter). The
 * theoretical arrival time (TAT) is when the meter is empty again: a
 * request of `cost` is admitted when max(TAT, now) + cost*T - now <= burst*T,
 * where T = PERIOD / LIMIT is the emission interval.
 *
 * T is rarely a whole number of µs (1m / 7), so time is counted in ticks of
 * 1/LIMIT µs: T is then exactly PERIOD ticks and nothing is rounded.
 *
 * Time going backwards (clients whose clocks differ): `now` is taken as
 * max(now, NEWEST), NEWEST being the latest time the state was advanced
 * to, exactly as token_bucket refills nothing backwards. A lagging client
 * is then neither charged for time the state has already counted nor
 * credited with any; without NEWEST, TAT - now would charge it its lag
 * (docs/algorithms.md). So every field is identical to token_bucket with
 * the same parameters, at any sequence of times.
 *
 * State (25 bytes): 'G', TAT in whole µs, TAT's remainder in ticks
 * (0..LIMIT-1), NEWEST in µs; int64 little-endian. Always
 * NEWEST <= TAT <= NEWEST + 2*burst*T: beyond burst*T only through a
 * penalty (drl_adjust leaves at most 2 x burst used), which clients built
 * before drl_adjust read as malformed. The 17-byte state written before
 * NEWEST existed ('G', TAT µs, remainder) is still read, with NEWEST the
 * earliest that TAT allows, ceil(TAT - burst*T): never more quota than the
 * true NEWEST would give, and the old decision for every now from
 * TAT - burst*T on. Clients built before cannot read the 25-byte state.
 */
#include "internal.h"

#define STATE_LEN 25
#define OLD_STATE_LEN 17

typedef struct meter {
	drl__i128 tat;  /* ticks, >= newest: max(TAT, NEWEST) */
	int64_t newest; /* µs, >= the call's now */
} meter;

/* Read the stored meter (or an empty one when absent) as seen at
 * max(now, NEWEST). */
static int load_meter(const drl__limit *lim, const void *old, size_t oldlen,
		      int64_t now, meter *m)
{
	drl__i128 tau = (drl__i128)lim->burst * lim->period_us;
	m->newest = now;
	m->tat = (drl__i128)now * lim->limit;
	if (old == NULL)
		return 0;
	const unsigned char *p = old;
	if ((oldlen != STATE_LEN && oldlen != OLD_STATE_LEN) || p[0] != 'G')
		return DRL_ECORRUPT;
	int64_t us = drl__get64(p + 1), rem = drl__get64(p + 9), newest;
	if (us < 0 || rem < 0 || rem >= lim->limit)
		return DRL_ECORRUPT;
	drl__i128 tat = (drl__i128)us * lim->limit + rem;
	if (oldlen == STATE_LEN) {
		newest = drl__get64(p + 17);
		if (newest < 0 || newest > DRL_TIME_MAX_US ||
		    tat < (drl__i128)newest * lim->limit ||
		    tat - (drl__i128)newest * lim->limit > 2 * tau)
			return DRL_ECORRUPT;
	} else {
		newest = drl__i128_ceil_div(tat - tau, lim->limit);
		if (newest > DRL_TIME_MAX_US)
			return DRL_ECORRUPT;
	}
	if (newest > m->newest)
		m->newest = newest;
	drl__i128 floor_t = (drl__i128)m->newest * lim->limit;
	m->tat = tat > floor_t ? tat : floor_t;
	return 0;
}

static void store_meter(const drl__limit *lim, const meter *m,
			unsigned char *out, size_t *outlen)
{
	out[0] = 'G';
	drl__put64(out + 1, (int64_t)(m->tat / lim->limit));
	drl__put64(out + 9, (int64_t)(m->tat % lim->limit));
	drl__put64(out + 17, m->newest);
	*outlen = STATE_LEN;
}

/* µs from `now` until the state no longer matters: the meter is empty and
 * `now` has reached NEWEST. A key's TTL is this plus the grace. */
static int64_t settled_after(const drl__limit *lim, const meter *m, int64_t now)
{
	return drl__i128_ceil_div(m->tat - (drl__i128)now * lim->limit,
				  lim->limit);
}

/* reset_after: 0 when the meter is empty (a NEWEST ahead of a lagging
 * clock holds no debt). */
static int64_t until_full(const drl__limit *lim, const meter *m, int64_t now)
{
	return m->tat > (drl__i128)m->newest * lim->limit
		       ? settled_after(lim, m, now)
		       : 0;
}

/* The decision at call->now on meter m: 1 when allowed and consumed (m
 * advanced, undo set), 0 otherwise. Shared by the C step and the twin's
 * answer, which hands over the same meter relative to its own now. */
static int judge(const drl__limit *lim, const drl__call *call, meter *m,
		 drl_result *res, drl__undo *undo)
{
	drl__i128 tau = (drl__i128)lim->burst * lim->period_us;
	drl__i128 now_t = (drl__i128)call->now * lim->limit;
	drl__i128 debt = m->tat - (drl__i128)m->newest * lim->limit;
	drl__i128 need = (drl__i128)call->cost * lim->period_us;
	int64_t remaining = drl__i128_floor_div(tau - debt, lim->period_us);
	if (call->cost > lim->burst || debt + need > tau) {
		/* allowed at the first µs t with TAT + need - t <= tau */
		int64_t retry = call->cost > lim->burst
					? DRL_NEVER
					: drl__i128_ceil_div(
						  m->tat + need - tau - now_t,
						  lim->limit);
		drl__result_fill(res, false, lim->burst, remaining,
				 until_full(lim, m, call->now), retry);
		return 0;
	}
	int write = !call->peek && call->cost > 0;
	if (write) {
		m->tat += need;
		undo->a = call->cost;
		remaining =
			drl__i128_floor_div(tau - debt - need, lim->period_us);
	}
	drl__result_fill(res, true, lim->burst, remaining,
			 until_full(lim, m, call->now), 0);
	return write;
}

static int step(const drl__limit *lim, const drl__call *call, const void *old,
		size_t oldlen, void *out, size_t cap, size_t *outlen,
		int64_t *ttl_us, drl_result *res, drl__undo *undo)
{
	(void)cap;
	meter m;
	if (load_meter(lim, old, oldlen, call->now, &m))
		return drl__state_corrupt(lim, call);
	int write = judge(lim, call, &m, res, undo);
	if (write) {
		store_meter(lim, &m, out, outlen);
		*ttl_us = settled_after(lim, &m, call->now) + DRL__TTL_GRACE_US;
	}
	return write;
}

/* The twin's answer (gcra.lua): the debt TAT - max(now, NEWEST) in ticks
 * before the call, and (when a second value comes) how far NEWEST is
 * ahead of the call's now, in µs. Every field of the decision depends on
 * those two alone, so the meter is rebuilt relative to a now of 0 and
 * judged as the C step judges it. */
static int lua_answer(const drl__limit *lim, const drl__call *call,
		      const int64_t *out, size_t nret, drl_result *res,
		      drl__undo *undo, drl_error *err)
{
	int64_t debt, ahead;
	drl__call rel;
	int rc = drl__twin_pair(
		lim, call, out, nret,
		drl__i128_clamp(2 * (drl__i128)lim->burst * lim->period_us),
		&debt, &ahead, &rel, err);
	if (rc)
		return rc;
	meter m = {.tat = (drl__i128)ahead * lim->limit + debt,
		   .newest = ahead};
	(void)judge(lim, &rel, &m, res, undo);
	return 0;
}

/* Take call->cost emission intervals back off the TAT (never below
 * NEWEST). */
static int refund_step(const drl__limit *lim, const drl__call *call,
		       const void *old, size_t oldlen, void *out, size_t cap,
		       size_t *outlen, int64_t *ttl_us, drl_result *res,
		       drl__undo *undo)
{
	(void)cap, (void)res, (void)undo;
	meter m;
	if (load_meter(lim, old, oldlen, call->now, &m))
		return drl__state_corrupt(lim, call);
	drl__i128 floor_t = (drl__i128)m.newest * lim->limit;
	m.tat -= (drl__i128)call->cost * lim->period_us;
	if (m.tat < floor_t)
		m.tat = floor_t;
	store_meter(lim, &m, out, outlen);
	*ttl_us = settled_after(lim, &m, call->now) + DRL__TTL_GRACE_US;
	return 1;
}

/* drl_adjust: call->delta emission intervals added to the TAT (never to
 * more than 2 x burst x T after max(now, NEWEST), nor lowered when it is
 * there already) or taken off it (never before max(now, NEWEST)); then
 * the peek of call (cost 1). */
static int adjust_step(const drl__limit *lim, const drl__call *call,
		       const void *old, size_t oldlen, void *out, size_t cap,
		       size_t *outlen, int64_t *ttl_us, drl_result *res,
		       drl__undo *undo)
{
	(void)cap;
	meter m;
	if (load_meter(lim, old, oldlen, call->now, &m))
		return drl__state_corrupt(lim, call);
	drl__i128 floor_t = (drl__i128)m.newest * lim->limit;
	drl__i128 top = floor_t + 2 * (drl__i128)lim->burst * lim->period_us;
	drl__i128 tat = m.tat + (drl__i128)call->delta * lim->period_us;
	if (call->delta > 0) /* m.tat <= top: load_meter checked it */
		m.tat = tat > top ? top : tat;
	else
		m.tat = tat < floor_t ? floor_t : tat;
	(void)judge(lim, call, &m, res, undo);
	store_meter(lim, &m, out, outlen);
	*ttl_us = settled_after(lim, &m, call->now) + DRL__TTL_GRACE_US;
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
	.adjust = drl__state_adjust,
	.adjust_step = adjust_step,
	.state_len = STATE_LEN,
	.lua = &drl__lua_gcra,
	.lua_batch = &drl__lua_batch_gcra,
	.lua_answer = lua_answer,
	.lua_nout = 2,
	.lua_nargs = 5, /* to burst (gcra.lua) */
};
