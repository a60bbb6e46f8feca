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
 * The engine that decides is algorithms/bucket.c (gcra runs on it too);
 * this file is the encoding. State (57 bytes): 'B', whole tokens (floor), fraction (0..PERIOD-1
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

/* The level is whole x PERIOD + fraction units, at `last`. */
static int decode(const drl__limit *lim, const drl__params_at *at,
		  const unsigned char *p, drl__bucket *bk)
{
	int64_t whole = drl__get64(p), frac = drl__get64(p + 8);
	if (whole < -at->burst || frac < 0 || frac >= lim->period_us)
		return -1;
	bk->level = (drl__i128)whole * lim->period_us + frac;
	bk->last = drl__get64(p + 16);
	return 0;
}

static void encode(const drl__limit *lim, const drl__bucket *bk,
		   unsigned char *p)
{
	int64_t whole = drl__i128_floor_div(bk->level, lim->period_us);
	drl__put64(p, whole);
	drl__put64(p + 8,
		   (int64_t)(bk->level - (drl__i128)whole * lim->period_us));
	drl__put64(p + 16, bk->last);
}

static const drl__bucket_codec codec = {
	.tag = 'B', .decode = decode, .encode = encode};

const drl__algorithm drl__token_bucket = {
	.name = "token_bucket",
	.tag = "tb",
	DRL__BUCKET_ENGINE(&codec),
	.lua = &drl__lua_token_bucket,
	.lua_batch = &drl__lua_batch_token_bucket,
};
