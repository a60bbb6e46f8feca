/* Command-line values for the drl tools: see args.h. */
#include "args.h"

#include <drl/drl.h>

#include <stdio.h>
#include <string.h>

bool tl_parse_uint_n(const char *s, size_t len, int64_t min, int64_t max,
		     int64_t *out)
{
	int64_t v = 0;

	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		int d = s[i] - '0';
		if (v > (INT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	if (v < min || v > max)
		return false;
	*out = v;
	return true;
}

bool tl_parse_uint(const char *s, int64_t min, int64_t max, int64_t *out)
{
	return tl_parse_uint_n(s, strlen(s), min, max, out);
}

bool tl_parse_seconds(const char *s, int64_t min_us, int64_t max_us,
		      int64_t *us)
{
	const char *dot = strchr(s, '.');
	size_t ilen = dot ? (size_t)(dot - s) : strlen(s);
	int64_t whole, frac = 0;

	if (!tl_parse_uint_n(s, ilen, 0, max_us / 1000000, &whole))
		return false;
	if (dot) {
		size_t flen = strlen(dot + 1);
		if (flen == 0 || flen > 6 ||
		    !tl_parse_uint_n(dot + 1, flen, 0, 999999, &frac))
			return false;
		for (size_t i = flen; i < 6; i++)
			frac *= 10;
	}
	int64_t v = whole * 1000000 + frac;
	if (v < min_us || v > max_us)
		return false;
	*us = v;
	return true;
}

bool tl_parse_limit_period(const char *s, int64_t *limit, int64_t *period_us)
{
	static const struct {
		const char *unit;
		int64_t us;
	} units[] = {
		{"ms", 1000},
		{"s", 1000000},
		{"m", INT64_C(60000000)},
		{"h", INT64_C(3600000000)},
		{"d", INT64_C(86400000000)},
	};
	const char *slash = strchr(s, '/');
	size_t end = strcspn(s, ",");
	int64_t n;

	if (slash == NULL || (size_t)(slash - s) > end ||
	    !tl_parse_uint_n(s, (size_t)(slash - s), 1, DRL_LIMIT_MAX, limit))
		return false;
	s = slash + 1;
	end = strcspn(s, ",");
	size_t digits = strspn(s, "0123456789");
	if (digits == 0 || digits > end ||
	    !tl_parse_uint_n(s, digits, 1, DRL_PERIOD_MAX_US, &n))
		return false;
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		size_t ul = strlen(units[i].unit);
		if (end - digits == ul &&
		    strncmp(s + digits, units[i].unit, ul) == 0) {
			if (n > DRL_PERIOD_MAX_US / units[i].us)
				return false;
			*period_us = n * units[i].us;
			return true;
		}
	}
	return false;
}
