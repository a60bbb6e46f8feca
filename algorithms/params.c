/*
 * The parameters a state records (token_bucket, gcra): LIMIT, PERIOD,
 * burst and the spec's version, after the algorithm's own fields. A
 * decision that finds other parameters decides with the newer version's,
 * converting the state by the on_change= policy in the same step
 * (docs/algorithms.md, "When a limit changes"). Integer arithmetic: the
 * level is in units of 1/PERIOD token, and PERIOD is the same on both
 * sides (it is in the key), so a conversion is a function of the level
 * and the two bursts alone. The Lua twins compute the same numbers.
 */
#include "internal.h"

void drl__params_put(const drl__limit *lim, unsigned char *p)
{
	drl__put64(p, lim->limit);
	drl__put64(p + 8, lim->period_us);
	drl__put64(p + 16, lim->burst);
	drl__put64(p + 24, lim->version);
}

int drl__params_read(const drl__limit *lim, const unsigned char *p,
		     drl__params_at *at, drl_error *err)
{
	at->limit = drl__get64(p);
	at->burst = drl__get64(p + 16);
	at->version = drl__get64(p + 24);
	/* The caller's own parameters, the common case: checked when its
	 * spec was parsed (and the 128-bit division below costs about as
	 * much as the rest of a memory:// decision). */
	if (at->limit == lim->limit && at->burst == lim->burst &&
	    at->version == lim->version && drl__get64(p + 8) == lim->period_us)
		return 0;
	if (drl__get64(p + 8) != lim->period_us || at->limit < 1 ||
	    at->limit > DRL_LIMIT_MAX || at->burst < 1 ||
	    at->burst > DRL_LIMIT_MAX || at->version < 0 ||
	    at->version > DRL__VERSION_MAX ||
	    (drl__i128)at->burst * lim->period_us / at->limit >
		    DRL_FILL_TIME_MAX_US)
		return drl_error_set(err, DRL_ECORRUPT,
				     "%s state in the store is malformed "
				     "(its parameters)",
				     lim->algo->name);
	return 0;
}

drl__i128 drl__params_convert(const drl__limit *lim, int64_t old_burst,
			      drl__i128 level)
{
	drl__i128 full = (drl__i128)lim->burst * lim->period_us;
	drl__i128 old_full = (drl__i128)old_burst * lim->period_us;
	int policy = lim->on_change;
	if (policy == DRL__CHANGE_ADDITIVE) /* bucket4j's ADDITIVE */
		policy = lim->burst > old_burst ? DRL__CHANGE_KEEP_USED
						: DRL__CHANGE_KEEP_AVAILABLE;
	switch (policy) {
	case DRL__CHANGE_KEEP_AVAILABLE:
		break;
	case DRL__CHANGE_SCALE: /* |level| x burst < 2^53 x 2^30 */
		return drl__i128_floor_div(level * lim->burst, old_burst);
	case DRL__CHANGE_RESET:
		return full;
	default: /* keep_used: what was used, at most a penalty's 2 x burst */
		level = full - (old_full - level);
		break;
	}
	return level > full ? full : level < -full ? -full : level;
}

int drl__params_settle(const drl__limit *lim, const drl__params_at *at,
		       drl__limit *eff, drl__i128 *level, drl_error *err)
{
	/* *eff is a copy of *lim already (the caller's load) */
	bool same = at->limit == lim->limit && at->burst == lim->burst;
	if (at->version > lim->version) {
		eff->limit = at->limit;
		eff->burst = at->burst;
		eff->version = at->version;
		return 0;
	}
	if (same && at->version == lim->version)
		return 0;
	if (at->version == lim->version && lim->version > 0)
		return drl_error_set(
			err, DRL_ECORRUPT,
			"%s: version %lld of this limit is stored with other "
			"parameters (LIMIT %lld, burst %lld): a changed limit "
			"needs a higher version",
			lim->algo->name, (long long)lim->version,
			(long long)at->limit, (long long)at->burst);
	*level = drl__params_convert(lim, at->burst, *level);
	return 1;
}

int drl__params_answer(const drl__limit *lim, const drl__call *call,
		       const int64_t *out, size_t nret, drl__limit *eff,
		       int64_t *x, int64_t *ahead, drl__call *rel,
		       drl_error *err)
{
	*eff = *lim;
	if (nret == 4 && (out[2] != 0 || out[3] != 0)) {
		if (out[2] < 1 || out[2] > DRL_LIMIT_MAX || out[3] < 1 ||
		    out[3] > DRL_LIMIT_MAX)
			nret = 0; /* drl__twin_pair: not a decision */
		eff->limit = out[2];
		eff->burst = out[3];
	}
	return drl__twin_pair(
		eff, call, out, nret == 4 ? 2 : nret,
		drl__i128_clamp(2 * (drl__i128)eff->burst * eff->period_us), x,
		ahead, rel, err);
}
