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
 * The decisions are token_bucket's (algorithms/bucket.c, the engine both
 * run on); this file is the encoding. State (57 bytes): 'H', TAT in whole µs, TAT's remainder in ticks
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

/* The bucket's level L (at `last` = NEWEST) is burst*T - (TAT - NEWEST) in
 * ticks: TAT = NEWEST*LIMIT + burst*PERIOD - L. */
static int decode(const drl__limit *lim, const drl__params_at *at,
		  const unsigned char *p, drl__bucket *bk)
{
	int64_t us = drl__get64(p), rem = drl__get64(p + 8);
	if (us < 0 || rem < 0 || rem >= at->limit)
		return -1;
	bk->last = drl__get64(p + 16);
	bk->level = (drl__i128)at->burst * lim->period_us -
		    ((drl__i128)us * at->limit + rem -
		     (drl__i128)bk->last * at->limit);
	return 0;
}

static void encode(const drl__limit *lim, const drl__bucket *bk,
		   unsigned char *p)
{
	drl__i128 tat = (drl__i128)bk->last * lim->limit +
			(drl__i128)lim->burst * lim->period_us - bk->level;
	drl__put64(p, (int64_t)(tat / lim->limit));
	drl__put64(p + 8, (int64_t)(tat % lim->limit));
	drl__put64(p + 16, bk->last);
}

static const drl__bucket_codec codec = {
	.tag = 'H', .decode = decode, .encode = encode};

const drl__algorithm drl__gcra = {
	.name = "gcra",
	.tag = "gcra",
	DRL__BUCKET_ENGINE(&codec),
	.lua = &drl__lua_gcra,
	.lua_batch = &drl__lua_batch_gcra,
};
