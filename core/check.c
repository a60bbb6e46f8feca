/*
 * The checks of a request's input every public call makes first (a
 * decision's begin): a bad one is DRL_EINVAL naming the bad part, and
 * nothing is decided or changed.
 */
#include "internal.h"

int drl__time_check(int64_t now_us, drl_error *err)
{
	if (now_us < 0 || now_us > DRL_TIME_MAX_US)
		return drl_error_set(err, DRL_EINVAL,
				     "time %lld us is outside 0..2^62 (the "
				     "epoch to ~146000 years on)",
				     (long long)now_us);
	return 0;
}

int drl__key_check(const char *fn, const void *key, size_t keylen,
		   drl_error *err)
{
	if (key == NULL)
		return drl_error_set(err, DRL_EINVAL, "%s: NULL key", fn);
	if (keylen == 0 || keylen > DRL_KEY_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "key length %zu is outside 1..%d bytes",
				     keylen, DRL_KEY_MAX);
	return 0;
}

int drl__request_check(const void *key, size_t keylen, int64_t cost,
		       drl_error *err)
{
	int rc = drl__key_check("drl_allow", key, keylen, err);
	if (rc)
		return rc;
	if (cost < 0)
		return drl_error_set(err, DRL_EINVAL, "cost %lld is negative",
				     (long long)cost);
	return 0;
}

int drl__adjust_check(const char *fn, const void *key, size_t keylen,
		      int64_t delta, drl_error *err)
{
	int rc = drl__key_check(fn, key, keylen, err);
	if (rc)
		return rc;
	if (delta < -DRL_LIMIT_MAX || delta > DRL_LIMIT_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "%s: delta %lld is outside -%lld..%lld",
				     fn, (long long)delta,
				     (long long)DRL_LIMIT_MAX,
				     (long long)DRL_LIMIT_MAX);
	return 0;
}
