/*
 * Limit specs: ALGORITHM:LIMIT/PERIOD[,option=value...]
 *
 * The grammar is small and strict on purpose: a typo in a rate limit must
 * be an error at startup, never a silently different limit.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#define SHOW_MAX 64 /* how much of a bad spec a message quotes */

/* Quote at most SHOW_MAX bytes of the spec in messages. */
static int show_len(size_t len)
{
	return (int)(len < SHOW_MAX ? len : SHOW_MAX);
}

static int bad(drl_error *err, const char *spec, size_t len, const char *what)
{
	return drl_error_set(err, DRL_EINVAL,
			     "invalid limit spec \"%.*s%s\": %s", show_len(len),
			     spec, len > SHOW_MAX ? "..." : "", what);
}

/* PERIOD, and every duration of a policy option (internal.h). */
int drl__parse_duration(const char *s, size_t len, int64_t max_us, int64_t *out)
{
	static const struct {
		const char *unit;
		int64_t us;
	} units[] = {
		{"ms", INT64_C(1000)},       {"s", INT64_C(1000000)},
		{"m", INT64_C(60000000)},    {"h", INT64_C(3600000000)},
		{"d", INT64_C(86400000000)},
	};
	size_t digits = 0;
	while (digits < len && s[digits] >= '0' && s[digits] <= '9')
		digits++;
	if (digits == 0)
		return DRL_EINVAL;
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		size_t ulen = strlen(units[i].unit);
		if (len - digits != ulen ||
		    memcmp(s + digits, units[i].unit, ulen))
			continue;
		int64_t n;
		if (drl_parse_int(s, digits, 0, max_us / units[i].us, &n))
			return DRL_ERANGE;
		*out = n * units[i].us;
		return 0;
	}
	return DRL_EINVAL;
}

/* Append the key tag naming this limit's state: every parameter that
 * changes what the stored state means is in it, so two limits never
 * share state they would read differently. A counter's state is what
 * was used in each window: its LIMIT is not in the tag, so a changed
 * LIMIT keeps counting (drl__algorithm.counts_usage); PERIOD and the
 * sub-windows cut the windows, and are. A state that records its
 * parameters (drl__algorithm.keeps_params) converts a changed LIMIT and
 * burst itself: they are not in the tag, PERIOD is (two limits of one
 * policy differ by it, e.g. 10/1s;1000/1h). */
static void make_tag(drl__limit *lim)
{
	int n = lim->algo->counts_usage || lim->algo->keeps_params
			? snprintf(lim->tag, sizeof lim->tag, "%s:%lld",
				   lim->algo->tag, (long long)lim->period_us)
			: snprintf(lim->tag, sizeof lim->tag, "%s:%lld:%lld",
				   lim->algo->tag, (long long)lim->limit,
				   (long long)lim->period_us);
	if (lim->burst && !lim->algo->keeps_params)
		n += snprintf(lim->tag + n, sizeof lim->tag - (size_t)n,
			      ":b%lld", (long long)lim->burst);
	if (lim->subwindows)
		n += snprintf(lim->tag + n, sizeof lim->tag - (size_t)n,
			      ":n%lld%s", (long long)lim->subwindows,
			      lim->trailing ? "t" : "");
	lim->taglen = (size_t)n;
}

static const char *const change_names[DRL__CHANGE_COUNT] = {
	[DRL__CHANGE_KEEP_USED] = "keep_used",
	[DRL__CHANGE_KEEP_AVAILABLE] = "keep_available",
	[DRL__CHANGE_SCALE] = "scale",
	[DRL__CHANGE_ADDITIVE] = "additive",
	[DRL__CHANGE_RESET] = "reset",
};

/* The options every algorithm is given: on_change= and version= (which
 * the algorithm may refuse, see check_change). 0 taken, 1 not one of
 * them, or DRL_EINVAL (in err). */
static int common_option(drl__limit *lim, const char *name, const char *value,
			 drl_error *err)
{
	if (strcmp(name, "version") == 0) {
		if (drl_parse_int(value, strlen(value), 1, DRL__VERSION_MAX,
				  &lim->version))
			return drl_error_set(err, DRL_EINVAL,
					     "version=%s must be an integer "
					     "from 1 to %lld",
					     value,
					     (long long)DRL__VERSION_MAX);
		return 0;
	}
	if (strcmp(name, "on_change") != 0)
		return 1;
	for (int i = 0; i < DRL__CHANGE_COUNT; i++)
		if (strcmp(value, change_names[i]) == 0) {
			lim->on_change = i;
			return 0;
		}
	return drl_error_set(err, DRL_EINVAL,
			     "on_change=%s: expected keep_used, "
			     "keep_available, scale, additive or reset",
			     value);
}

/* Refuse what the algorithm cannot do with a changed limit: a policy
 * other than keep_used that it does not take, or version= when its state
 * does not record the parameters. */
static int check_change(const drl__limit *lim, char *msg, size_t cap)
{
	const drl__algorithm *a = lim->algo;
	if (lim->on_change != DRL__CHANGE_KEEP_USED &&
	    !(a->changes & (1u << lim->on_change)))
		snprintf(msg, cap, "on_change=%s is not defined for %s (%s)",
			 change_names[lim->on_change], a->name,
			 a->why_not ? a->why_not : "only keep_used");
	else if (lim->version && !a->keeps_params)
		snprintf(msg, cap,
			 "version= needs a state that records its parameters "
			 "(token_bucket, gcra, sliding_log); %s keeps none",
			 a->name);
	else
		return 0;
	return DRL_EINVAL;
}

/* Options: comma-separated name=value pairs, each at most once. */
static int parse_options(drl__limit *lim, const char *spec, size_t speclen,
			 const char *s, size_t len, drl_error *err)
{
	char seen[8][32];
	size_t nseen = 0;
	while (len > 0) {
		const char *comma = memchr(s, ',', len);
		size_t item = comma ? (size_t)(comma - s) : len;
		const char *eq = memchr(s, '=', item);
		char name[32], value[32], msg[128];
		size_t nlen = eq ? (size_t)(eq - s) : 0;
		size_t vlen = eq ? item - nlen - 1 : 0;
		if (!eq || nlen == 0 || vlen == 0) {
			snprintf(msg, sizeof msg,
				 "option \"%.*s\" is not name=value",
				 show_len(item), s);
			return bad(err, spec, speclen, msg);
		}
		if (nlen >= sizeof name || vlen >= sizeof value) {
			snprintf(msg, sizeof msg, "option \"%.*s\" is too long",
				 show_len(item), s);
			return bad(err, spec, speclen, msg);
		}
		memcpy(name, s, nlen);
		name[nlen] = '\0';
		memcpy(value, eq + 1, vlen);
		value[vlen] = '\0';
		for (size_t i = 0; i < nseen; i++) {
			if (strcmp(seen[i], name) == 0) {
				snprintf(msg, sizeof msg,
					 "option \"%s\" given twice", name);
				return bad(err, spec, speclen, msg);
			}
		}
		if (nseen == sizeof seen / sizeof seen[0])
			return bad(err, spec, speclen, "too many options");
		memcpy(seen[nseen++], name, nlen + 1);

		drl_error sub = {0};
		int rc = common_option(lim, name, value, &sub);
		if (rc > 0)
			rc = lim->algo->option
				     ? lim->algo->option(lim, name, value, &sub)
				     : -1;
		if (rc != 0) {
			if (!sub.message[0])
				snprintf(sub.message, sizeof sub.message,
					 "unknown option \"%s\" for %s", name,
					 lim->algo->name);
			return bad(err, spec, speclen, sub.message);
		}
		if (!comma)
			break;
		if (item + 1 == len)
			return bad(err, spec, speclen, "trailing ','");
		s += item + 1;
		len -= item + 1;
	}
	return 0;
}

int drl__limit_parse(drl__limit *lim, const char *spec, size_t len,
		     drl_error *err)
{
	memset(lim, 0, sizeof *lim);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)spec[i];
		if (c <= 0x20 || c >= 0x7f)
			return bad(err, spec, len,
				   "spaces and control or non-ASCII bytes are "
				   "not allowed");
	}
	const char *colon = memchr(spec, ':', len);
	if (!colon)
		return bad(err, spec, len,
			   "expected ALGORITHM:LIMIT/PERIOD, e.g. "
			   "token_bucket:100/1m");
	size_t alen = (size_t)(colon - spec);
	lim->algo = drl__algorithm_find(spec, alen);
	if (!lim->algo) {
		char msg[160];
		snprintf(msg, sizeof msg,
			 "unknown algorithm \"%.*s\" (expected fixed_window, "
			 "sliding_window, subwindow, token_bucket, gcra or "
			 "sliding_log)",
			 show_len(alen), spec);
		return bad(err, spec, len, msg);
	}
	const char *rest = colon + 1;
	size_t rlen = len - alen - 1;
	const char *slash = memchr(rest, '/', rlen);
	if (!slash)
		return bad(err, spec, len, "expected LIMIT/PERIOD after ':'");
	size_t llen = (size_t)(slash - rest);
	if (drl_parse_int(rest, llen, 1, DRL_LIMIT_MAX, &lim->limit)) {
		char msg[128];
		snprintf(msg, sizeof msg,
			 "LIMIT \"%.*s\" must be an integer from 1 to %lld",
			 show_len(llen), rest, (long long)DRL_LIMIT_MAX);
		return bad(err, spec, len, msg);
	}
	const char *per = slash + 1;
	size_t plen = rlen - llen - 1;
	const char *comma = memchr(per, ',', plen);
	size_t perlen = comma ? (size_t)(comma - per) : plen;
	int rc = drl__parse_duration(per, perlen, DRL_PERIOD_MAX_US,
				     &lim->period_us);
	if (rc == 0 && lim->period_us < DRL_PERIOD_MIN_US)
		rc = DRL_ERANGE;
	if (rc) {
		char msg[160];
		snprintf(msg, sizeof msg,
			 rc == DRL_ERANGE
				 ? "PERIOD \"%.*s\" must be from 1ms to 366d"
				 : "PERIOD \"%.*s\" must be a count and a unit "
				   "(ms, s, m, h, d), e.g. 250ms or 1m",
			 show_len(perlen), per);
		return bad(err, spec, len, msg);
	}
	if (comma) {
		rc = parse_options(lim, spec, len, comma + 1, plen - perlen - 1,
				   err);
		if (rc)
			return rc;
		if (plen - perlen - 1 == 0)
			return bad(err, spec, len, "trailing ','");
	}
	if (lim->algo->finish) {
		drl_error sub = {0};
		if (lim->algo->finish(lim, &sub) != 0)
			return bad(err, spec, len, sub.message);
	}
	char msg[192];
	if (check_change(lim, msg, sizeof msg))
		return bad(err, spec, len, msg);
	make_tag(lim);
	int64_t widest = lim->burst > lim->limit ? lim->burst : lim->limit;
	lim->lua_ok = (drl__i128)widest * lim->period_us <= DRL__LUA_EXACT_MAX;
	return 0;
}
