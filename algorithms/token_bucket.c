/*
 * token_bucket: a bucket of `burst` tokens (default LIMIT) refilled at
 * LIMIT tokens per PERIOD; a request takes `cost` tokens or is denied.
 *
 * Exact integer arithmetic: the fill level is kept in units of 1/PERIOD
 * token ("token-microseconds per LIMIT"), so refilling t µs adds exactly
 * t * LIMIT units and a token is exactly PERIOD units: no rounding, no
 * floating point, and the same decisions as gcra with the same parameters.
 *
 * Time going backwards (clients whose clocks differ): a request is decided
 * at max(now, last refill), so a lagging client is neither charged for
 * time the bucket has already refilled nor credited with any; retry_after
 * and reset_after are counted from the caller's own now
 * (docs/algorithms.md).
 *
 * State (57 bytes): 'B', whole tokens (floor), fraction (0..PERIOD-1
 * units), time of the last refill, then the parameters it was written
 * under (LIMIT, PERIOD, burst, version: algorithms/params.c); all int64
 * little-endian. The level runs from -burst (a penalty's debt: drl_adjust
 * leaves at most 2 x burst used) to burst tokens. A decision that finds
 * other parameters refills at the stored LIMIT up to now, then decides
 * with the newer version's numbers, converting the level by on_change=
 * (and writes it, even when it consumes nothing). The 25-byte 'T' state
 * of clients built before (no parameters, under a key that named LIMIT
 * and burst) is never found under the key this one uses; met anyway, it
 * is DRL_ECORRUPT (docs/algorithms.md, "When a limit changes").
 */
#include "internal.h"

#define OWN_LEN 25 /* before the parameters */
#define STATE_LEN (OWN_LEN + DRL__PARAMS_LEN)

typedef struct bucket {
	drl__i128 level; /* units of 1/PERIOD token */
	int64_t last;    /* µs; refill is computed up to here */
} bucket;

/* Read the stored bucket, or a full one when absent, refilled to `now`
 * (never back in time: a clock that goes backwards refills nothing) at
 * its stored LIMIT, into the numbers that decide (*eff, drl__params_settle).
 * 1: converted (write it), 0, or DRL_ECORRUPT (in call->err). */
static int load_bucket(const drl__limit *lim, const drl__call *call,
		       const void *old, size_t oldlen, bucket *bk,
		       drl__limit *eff)
{
	*eff = *lim;
	bk->last = call->now;
	bk->level = (drl__i128)lim->burst * lim->period_us;
	if (old == NULL)
		return 0;
	const unsigned char *p = old;
	drl__params_at at;
	if (oldlen != STATE_LEN || p[0] != 'B')
		return drl__state_corrupt(lim, call);
	if (drl__params_read(lim, p + OWN_LEN, &at, call->err))
		return DRL_ECORRUPT;
	drl__i128 full = (drl__i128)at.burst * lim->period_us;
	int64_t whole = drl__get64(p + 1), frac = drl__get64(p + 9);
	int64_t last = drl__get64(p + 17);
	if (whole < -at.burst || frac < 0 || frac >= lim->period_us ||
	    last < 0 || last > DRL_TIME_MAX_US)
		return drl__state_corrupt(lim, call);
	bk->level = (drl__i128)whole * lim->period_us + frac;
	if (bk->level > full || bk->level < -full)
		return drl__state_corrupt(lim, call);
	if (call->now > last) {
		bk->level += (drl__i128)(call->now - last) * at.limit;
		if (bk->level > full)
			bk->level = full;
	} else {
		bk->last = last;
	}
	return drl__params_settle(lim, &at, eff, &bk->level, call->err);
}

static void store_bucket(const drl__limit *lim, const bucket *bk,
			 unsigned char *out, size_t *outlen)
{
	int64_t whole = drl__i128_floor_div(bk->level, lim->period_us);
	out[0] = 'B';
	drl__put64(out + 1, whole);
	drl__put64(out + 9,
		   (int64_t)(bk->level - (drl__i128)whole * lim->period_us));
	drl__put64(out + 17, bk->last);
	drl__params_put(lim, out + OWN_LEN);
	*outlen = STATE_LEN;
}

/* µs from `now` until the state no longer matters: the bucket is full and
 * `now` has reached the refill time. A key's TTL is this plus the grace. */
static int64_t settled_after(const drl__limit *lim, const bucket *bk,
			     int64_t now)
{
	drl__i128 full = (drl__i128)lim->burst * lim->period_us;
	return (bk->last - now) +
	       drl__i128_ceil_div(full - bk->level, lim->limit);
}

/* reset_after: µs from `now` until the bucket is full again; 0 when it is
 * full (a refill time ahead of a lagging clock holds no debt). */
static int64_t until_full(const drl__limit *lim, const bucket *bk, int64_t now)
{
	drl__i128 full = (drl__i128)lim->burst * lim->period_us;
	return bk->level < full ? settled_after(lim, bk, now) : 0;
}

/* The decision at call->now on bucket bk (refilled to max(now, last)):
 * 1 when allowed and consumed (bk drained, undo set), 0 otherwise.
 * Shared by the C step and the twin's answer. */
static int judge(const drl__limit *lim, const drl__call *call, bucket *bk,
		 drl_result *res, drl__undo *undo)
{
	int64_t cost = call->cost, ahead = bk->last - call->now;
	drl__i128 need = (drl__i128)cost * lim->period_us;
	if (cost > lim->burst || bk->level < need) {
		int64_t retry =
			cost > lim->burst
				? DRL_NEVER
				: ahead + drl__i128_ceil_div(need - bk->level,
							     lim->limit);
		drl__result_fill(res, false, lim->burst,
				 drl__i128_floor_div(bk->level, lim->period_us),
				 until_full(lim, bk, call->now), retry);
		return 0;
	}
	int write = !call->peek && cost > 0;
	if (write) {
		bk->level -= need;
		undo->a = cost;
	}
	drl__result_fill(res, true, lim->burst,
			 drl__i128_floor_div(bk->level, lim->period_us),
			 until_full(lim, bk, call->now), 0);
	return write;
}

static int step(const drl__limit *lim, const drl__call *call, const void *old,
		size_t oldlen, void *out, size_t cap, size_t *outlen,
		int64_t *ttl_us, drl_result *res, drl__undo *undo)
{
	(void)cap;
	bucket bk;
	drl__limit eff;
	int changed = load_bucket(lim, call, old, oldlen, &bk, &eff);
	if (changed < 0)
		return changed;
	int write =
		judge(&eff, call, &bk, res, undo) || (changed && !call->peek);
	if (write)
		store_bucket(&eff, &bk, out, outlen);
	*ttl_us = settled_after(&eff, &bk, call->now) + DRL__TTL_GRACE_US;
	return write;
}

/* The twin's answer (token_bucket.lua): what is used before the call,
 * under the numbers that decide (drl__params_answer),
 * burst x PERIOD - level (units of 1/PERIOD token, refilled to max(now,
 * last); 0..2 x burst x PERIOD: a bucket in debt answers no negative
 * number, which a batch would take for a failure) and (when a second value
 * comes) how far `last` is ahead of the call's now, in µs. Every field of
 * the decision depends on those two alone: the bucket is rebuilt relative
 * to a now of 0 and judged as the C step judges it. */
static int lua_answer(const drl__limit *lim, const drl__call *call,
		      const int64_t *out, size_t nret, drl_result *res,
		      drl__undo *undo, drl_error *err)
{
	int64_t used, ahead;
	drl__call rel;
	drl__limit eff;
	int rc = drl__params_answer(lim, call, out, nret, &eff, &used, &ahead,
				    &rel, err);
	if (rc)
		return rc;
	bucket bk = {.level = (drl__i128)eff.burst * eff.period_us - used,
		     .last = ahead};
	(void)judge(&eff, &rel, &bk, res, undo);
	return 0;
}

/* Put call->cost tokens back (never above burst). */
static int refund_step(const drl__limit *lim, const drl__call *call,
		       const void *old, size_t oldlen, void *out, size_t cap,
		       size_t *outlen, int64_t *ttl_us, drl_result *res,
		       drl__undo *undo)
{
	(void)cap, (void)res, (void)undo;
	bucket bk;
	drl__limit eff;
	int rc = load_bucket(lim, call, old, oldlen, &bk, &eff);
	if (rc < 0)
		return rc;
	drl__i128 full = (drl__i128)eff.burst * eff.period_us;
	bk.level += (drl__i128)call->cost * eff.period_us;
	if (bk.level > full)
		bk.level = full;
	store_bucket(&eff, &bk, out, outlen);
	*ttl_us = settled_after(&eff, &bk, call->now) + DRL__TTL_GRACE_US;
	return 1;
}

/* drl_adjust: call->delta tokens taken (the level never below -burst,
 * nor lowered when it is there already) or given back (never above
 * burst), at max(now, last refill); then the peek of call (cost 1). */
static int adjust_step(const drl__limit *lim, const drl__call *call,
		       const void *old, size_t oldlen, void *out, size_t cap,
		       size_t *outlen, int64_t *ttl_us, drl_result *res,
		       drl__undo *undo)
{
	(void)cap;
	bucket bk;
	drl__limit eff;
	int rc = load_bucket(lim, call, old, oldlen, &bk, &eff);
	if (rc < 0)
		return rc;
	drl__i128 full = (drl__i128)eff.burst * eff.period_us;
	drl__i128 d = (drl__i128)call->delta * eff.period_us;
	if (d > 0)
		bk.level = bk.level - d < -full ? -full : bk.level - d;
	else
		bk.level = bk.level - d > full ? full : bk.level - d;
	(void)judge(&eff, call, &bk, res, undo);
	store_bucket(&eff, &bk, out, outlen);
	*ttl_us = settled_after(&eff, &bk, call->now) + DRL__TTL_GRACE_US;
	return 1;
}

const drl__algorithm drl__token_bucket = {
	.name = "token_bucket",
	.tag = "tb",
	.keeps_params = true,
	.changes = DRL__PARAMS_CHANGES,
	.option = drl__burst_option,
	.finish = drl__burst_finish,
	DRL__STATE_ENGINE,
	.step = step,
	.unstep = refund_step,
	.adjust_step = adjust_step,
	.state_len = STATE_LEN,
	.lua = &drl__lua_token_bucket,
	.lua_batch = &drl__lua_batch_token_bucket,
	.lua_answer = lua_answer,
	.lua_nargs = 6, /* to the change rules (token_bucket.lua) */
};
