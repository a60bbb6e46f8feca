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
 * State (57 bytes): 'H', TAT in whole µs, TAT's remainder in ticks
 * (0..LIMIT-1), NEWEST in µs, then the parameters it was written under
 * (LIMIT, PERIOD, burst, version: algorithms/params.c); int64
 * little-endian. Always NEWEST <= TAT <= NEWEST + 2*burst*T: beyond
 * burst*T only through a penalty (drl_adjust leaves at most 2 x burst
 * used). The debt TAT - max(now, NEWEST) in ticks of the stored 1/LIMIT
 * µs is what is used in units of 1/PERIOD token under any LIMIT, so a
 * decision that finds other parameters converts it as token_bucket
 * converts its level (drl__params_settle) and rebuilds the TAT in ticks
 * of the LIMIT that decides. The 'G' states of clients built before (25
 * bytes, and 17 before NEWEST), under a key that named LIMIT and burst,
 * are never found under the key this one uses; met anyway, they are
 * DRL_ECORRUPT (docs/algorithms.md, "When a limit changes").
 */
#include "internal.h"

#define OWN_LEN 25 /* before the parameters */
#define STATE_LEN (OWN_LEN + DRL__PARAMS_LEN)

typedef struct meter {
	drl__i128 tat;  /* ticks, >= newest: max(TAT, NEWEST) */
	int64_t newest; /* µs, >= the call's now */
} meter;

/* Read the stored meter (or an empty one when absent) as seen at
 * max(now, NEWEST), in the numbers that decide (*eff,
 * drl__params_settle). 1: converted (write it), 0, or DRL_ECORRUPT (in
 * call->err). */
static int load_meter(const drl__limit *lim, const drl__call *call,
		      const void *old, size_t oldlen, meter *m, drl__limit *eff)
{
	*eff = *lim;
	m->newest = call->now;
	m->tat = (drl__i128)call->now * lim->limit;
	if (old == NULL)
		return 0;
	const unsigned char *p = old;
	drl__params_at at;
	if (oldlen != STATE_LEN || p[0] != 'H')
		return drl__state_corrupt(lim, call);
	if (drl__params_read(lim, p + OWN_LEN, &at, call->err))
		return DRL_ECORRUPT;
	drl__i128 tau = (drl__i128)at.burst * lim->period_us;
	int64_t us = drl__get64(p + 1), rem = drl__get64(p + 9);
	int64_t newest = drl__get64(p + 17);
	if (us < 0 || rem < 0 || rem >= at.limit || newest < 0 ||
	    newest > DRL_TIME_MAX_US)
		return drl__state_corrupt(lim, call);
	drl__i128 tat = (drl__i128)us * at.limit + rem;
	if (tat < (drl__i128)newest * at.limit ||
	    tat - (drl__i128)newest * at.limit > 2 * tau)
		return drl__state_corrupt(lim, call);
	if (newest > m->newest)
		m->newest = newest;
	drl__i128 debt = tat - (drl__i128)m->newest * at.limit;
	drl__i128 level = tau - (debt > 0 ? debt : 0);
	int rc = drl__params_settle(lim, &at, eff, &level, call->err);
	m->tat = (drl__i128)m->newest * eff->limit +
		 (drl__i128)eff->burst * eff->period_us - level;
	return rc;
}

static void store_meter(const drl__limit *lim, const meter *m,
			unsigned char *out, size_t *outlen)
{
	out[0] = 'H';
	drl__put64(out + 1, (int64_t)(m->tat / lim->limit));
	drl__put64(out + 9, (int64_t)(m->tat % lim->limit));
	drl__put64(out + 17, m->newest);
	drl__params_put(lim, out + OWN_LEN);
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
	drl__limit eff;
	int changed = load_meter(lim, call, old, oldlen, &m, &eff);
	if (changed < 0)
		return changed;
	int write =
		judge(&eff, call, &m, res, undo) || (changed && !call->peek);
	if (write) {
		store_meter(&eff, &m, out, outlen);
		*ttl_us =
			settled_after(&eff, &m, call->now) + DRL__TTL_GRACE_US;
	}
	return write;
}

/* The twin's answer (gcra.lua): the debt TAT - max(now, NEWEST) in ticks
 * before the call, in the numbers that decide (drl__params_answer), and (when a second value comes) how far NEWEST is
 * ahead of the call's now, in µs. Every field of the decision depends on
 * those two alone, so the meter is rebuilt relative to a now of 0 and
 * judged as the C step judges it. */
static int lua_answer(const drl__limit *lim, const drl__call *call,
		      const int64_t *out, size_t nret, drl_result *res,
		      drl__undo *undo, drl_error *err)
{
	int64_t debt, ahead;
	drl__call rel;
	drl__limit eff;
	int rc = drl__params_answer(lim, call, out, nret, &eff, &debt, &ahead,
				    &rel, err);
	if (rc)
		return rc;
	meter m = {.tat = (drl__i128)ahead * eff.limit + debt, .newest = ahead};
	(void)judge(&eff, &rel, &m, res, undo);
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
	drl__limit eff;
	int rc = load_meter(lim, call, old, oldlen, &m, &eff);
	if (rc < 0)
		return rc;
	drl__i128 floor_t = (drl__i128)m.newest * eff.limit;
	m.tat -= (drl__i128)call->cost * eff.period_us;
	if (m.tat < floor_t)
		m.tat = floor_t;
	store_meter(&eff, &m, out, outlen);
	*ttl_us = settled_after(&eff, &m, call->now) + DRL__TTL_GRACE_US;
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
	drl__limit eff;
	int rc = load_meter(lim, call, old, oldlen, &m, &eff);
	if (rc < 0)
		return rc;
	drl__i128 floor_t = (drl__i128)m.newest * eff.limit;
	drl__i128 top = floor_t + 2 * (drl__i128)eff.burst * eff.period_us;
	drl__i128 tat = m.tat + (drl__i128)call->delta * eff.period_us;
	if (call->delta > 0) /* m.tat <= top: load_meter checked it */
		m.tat = tat > top ? top : tat;
	else
		m.tat = tat < floor_t ? floor_t : tat;
	(void)judge(&eff, call, &m, res, undo);
	store_meter(&eff, &m, out, outlen);
	*ttl_us = settled_after(&eff, &m, call->now) + DRL__TTL_GRACE_US;
	return 1;
}

const drl__algorithm drl__gcra = {
	.name = "gcra",
	.tag = "gcra",
	.keeps_params = true,
	.changes = DRL__PARAMS_CHANGES,
	.option = drl__burst_option,
	.finish = drl__burst_finish,
	DRL__STATE_ENGINE,
	.step = step,
	.unstep = refund_step,
	.adjust_step = adjust_step,
	.state_len = STATE_LEN,
	.lua = &drl__lua_gcra,
	.lua_batch = &drl__lua_batch_gcra,
	.lua_answer = lua_answer,
	.lua_nargs = 6, /* to the change rules (gcra.lua) */
};
