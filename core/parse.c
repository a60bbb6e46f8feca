/* Strict decimal integers for specs and URI options. */
#include "internal.h"

/*
 * Parse s[0..len) as one whole decimal int64 in [min, max] into *out.
 * Accepted: an optional leading '-' then one or more ASCII digits, nothing
 * else (no spaces, no '+', no "0x", no trailing bytes); s need not be
 * NUL-terminated. Returns 0, or DRL_EINVAL (with *out unchanged) for an
 * empty or malformed string, an int64 overflow, a value outside [min, max]
 * or min > max. Writes no message: callers know what the number was for.
 */
int drl_parse_int(const char *s, size_t len, int64_t min, int64_t max,
		  int64_t *out)
{
	if (s == NULL || out == NULL || len == 0 || min > max)
		return DRL_EINVAL;
	size_t i = 0;
	bool neg = false;
	if (s[0] == '-') {
		neg = true;
		i = 1;
		if (len == 1)
			return DRL_EINVAL;
	}
	/* Accumulate as a negative number: its range holds INT64_MIN. */
	int64_t v = 0;
	for (; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return DRL_EINVAL;
		int d = s[i] - '0';
		if (v < (INT64_MIN + d) / 10)
			return DRL_EINVAL;
		v = v * 10 - d;
	}
	if (!neg) {
		if (v == INT64_MIN)
			return DRL_EINVAL;
		v = -v;
	}
	if (v < min || v > max)
		return DRL_EINVAL;
	*out = v;
	return 0;
}
