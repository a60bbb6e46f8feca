/*
 * bucket: the engine token_bucket and gcra share. Both are one algorithm,
 * a bucket of `burst` tokens refilled at LIMIT tokens per PERIOD, kept in
 * two encodings of one 57-byte state (a tag byte, 24 bytes of their own,
 * the parameters: algorithms/params.c). Here the bucket is a level in
 * units of 1/PERIOD token and the time it was refilled to; a codec
 * (drl__bucket_codec, the algorithm's `codec`) turns a state into that and
 * back. Everything that decides is written once, here: exact integers, no
 * floating point, the same decisions from both algorithms.
 *
 * Time going backwards (clients whose clocks differ): a request is decided
 * at max(now, last), so a lagging client is neither charged for time the
 * bucket has already refilled nor credited with any; retry_after and
 * reset_after are counted from the caller's own now (docs/algorithms.md).
 */
#include "internal.h"

#define STATE_LEN DRL__BUCKET_STATE_LEN
#define OWN_LEN (STATE_LEN - DRL__PARAMS_LEN)

/* Read the stored bucket, or a full one when absent, refilled to `now`
 * (never back in time) at its stored LIMIT, into the numbers that decide
 * (*eff, drl__params_settle). 1: converted (write it), 0, or
 * DRL_ECORRUPT (in call->err). */
static int load(const drl__limit *lim, const drl__call *call, const void *old,
		size_t oldlen, drl__bucket *bk, drl__limit *eff)
{
	const drl__bucket_codec *codec = lim->algo->codec;
	*eff = *lim;
	bk->last = call->now;
	bk->level = (drl__i128)lim->burst * lim->period_us;
	if (old == NULL)
		return 0;
	const unsigned char *p = old;
	drl__params_at at;
	if (oldlen != STATE_LEN || p[0] != codec->tag)
		return drl__state_corrupt(lim, call);
	if (drl__params_read(lim, p + OWN_LEN, &at, call->err))
		return DRL_ECORRUPT;
	drl__i128 full = (drl__i128)at.burst * lim->period_us;
	drl__bucket stored;
	if (codec->decode(lim, &at, p + 1, &stored) || stored.last < 0 ||
	    stored.last > DRL_TIME_MAX_US || stored.level > full ||
	    stored.level < -full)
		return drl__state_corrupt(lim, call);
	bk->level = stored.level;
	if (call->now > stored.last) {
		bk->level += (drl__i128)(call->now - stored.last) * at.limit;
		if (bk->level > full)
			bk->level = full;
	} else {
		bk->last = stored.last;
	}
	return drl__params_settle(lim, &at, eff, &bk->level, call->err);
}

static void store(const drl__limit *lim, const drl__bucket *bk,
		  unsigned char *out, size_t *outlen)
{
	const drl__bucket_codec *codec = lim->algo->codec;
	out[0] = codec->tag;
	codec->encode(lim, bk, out + 1);
	drl__params_put(lim, out + OWN_LEN);
	*outlen = STATE_LEN;
}

/* µs from `now` until the state no longer matters: the bucket is full and
 * `now` has reached `last`. */
static int64_t settled_after(const drl__limit *lim, const drl__bucket *bk,
			     int64_t now)
{
	drl__i128 full = (drl__i128)lim->burst * lim->period_us;
	return (bk->last - now) +
	       drl__i128_ceil_div(full - bk->level, lim->limit);
}

/* reset_after: 0 when the bucket is full (a `last` ahead of a lagging
 * clock holds no debt). */
static int64_t until_full(const drl__limit *lim, const drl__bucket *bk,
			  int64_t now)
{
	drl__i128 full = (drl__i128)lim->burst * lim->period_us;
	return bk->level < full ? settled_after(lim, bk, now) : 0;
}

/* Write bk (under lim's numbers) with its TTL: 1. */
static int put(const drl__limit *lim, const drl__bucket *bk, int64_t now,
	       unsigned char *out, size_t *outlen, int64_t *ttl_us)
{
	store(lim, bk, out, outlen);
	*ttl_us = settled_after(lim, bk, now) + DRL__TTL_GRACE_US;
	return 1;
}

/* The decision at call->now on bk (refilled to max(now, last)): 1 when
 * allowed and consumed (bk drained, undo set), 0 otherwise. Shared by the
 * C step and the twin's answer. */
static int judge(const drl__limit *lim, const drl__call *call, drl__bucket *bk,
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

int drl__bucket_step(const drl__limit *lim, const drl__call *call,
		     const void *old, size_t oldlen, void *out, size_t cap,
		     size_t *outlen, int64_t *ttl_us, drl_result *res,
		     drl__undo *undo)
{
	(void)cap;
	drl__bucket bk;
	drl__limit eff;
	int changed = load(lim, call, old, oldlen, &bk, &eff);
	if (changed < 0)
		return changed;
	if (judge(&eff, call, &bk, res, undo) || (changed && !call->peek))
		return put(&eff, &bk, call->now, out, outlen, ttl_us);
	return 0;
}

/* The twin's answer: what is used before the call, under the numbers that
 * decide (drl__params_answer), burst x PERIOD - level (units of 1/PERIOD
 * token, refilled to max(now, last); 0..2 x burst x PERIOD) and (when a
 * second value comes) how far `last` is ahead of the call's now, in µs.
 * Every field of the decision depends on those two alone: the bucket is
 * rebuilt relative to a now of 0 and judged as the C step judges it. */
int drl__bucket_answer(const drl__limit *lim, const drl__call *call,
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
	drl__bucket bk = {.level = (drl__i128)eff.burst * eff.period_us - used,
			  .last = ahead};
	(void)judge(&eff, &rel, &bk, res, undo);
	return 0;
}

/* Take `taken` tokens from the stored bucket (a negative number gives
 * them back): the level never below -burst when taking, nor lowered when
 * it is there already, never above burst when giving; at max(now, last).
 * Then, when res is set, the peek of call; written (1) or an error. */
static int move(const drl__limit *lim, const drl__call *call, const void *old,
		size_t oldlen, int64_t taken, void *out, size_t *outlen,
		int64_t *ttl_us, drl_result *res, drl__undo *undo)
{
	drl__bucket bk;
	drl__limit eff;
	int rc = load(lim, call, old, oldlen, &bk, &eff);
	if (rc < 0)
		return rc;
	drl__i128 full = (drl__i128)eff.burst * eff.period_us;
	drl__i128 level = bk.level - (drl__i128)taken * eff.period_us;
	if (taken > 0)
		bk.level = level < -full ? -full : level;
	else
		bk.level = level > full ? full : level;
	if (res)
		(void)judge(&eff, call, &bk, res, undo);
	return put(&eff, &bk, call->now, out, outlen, ttl_us);
}

/* Put call->cost tokens back (never above burst). */
int drl__bucket_refund(const drl__limit *lim, const drl__call *call,
		       const void *old, size_t oldlen, void *out, size_t cap,
		       size_t *outlen, int64_t *ttl_us, drl_result *res,
		       drl__undo *undo)
{
	(void)cap, (void)res, (void)undo;
	return move(lim, call, old, oldlen, -call->cost, out, outlen, ttl_us,
		    NULL, NULL);
}

/* drl_adjust: call->delta tokens taken or given back (move); then the
 * peek of call (cost 1). */
int drl__bucket_adjust(const drl__limit *lim, const drl__call *call,
		       const void *old, size_t oldlen, void *out, size_t cap,
		       size_t *outlen, int64_t *ttl_us, drl_result *res,
		       drl__undo *undo)
{
	(void)cap;
	return move(lim, call, old, oldlen, call->delta, out, outlen, ttl_us,
		    res, undo);
}
