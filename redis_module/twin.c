/*
 * DRL.TWIN key twin arg...: the call the Redis store sends instead of
 * EVALSHA under tx=module (backends/redis/module.c). The twin's name and
 * integers say which limit decides; they are turned back into the spec
 * they came from and parsed by the spec parser, so a number the library
 * refuses in a spec is refused here too (the change rules, on_change= and
 * version=, are set after it, checked as it checks them).
 */
#include "decide.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static bool is(const char *s, size_t len, const char *word)
{
	return len == strlen(word) && memcmp(s, word, len) == 0;
}

/* The spec the twin's numbers a[0..nargs) say, into spec[cap]: 0 or
 * DRL_EINVAL. */
static int twin_spec(const char *twin, size_t twinlen, const int64_t *a,
		     size_t nargs, char *spec, size_t cap, drl_error *err)
{
	int64_t limit = a[2], period = a[3], burst = nargs > 4 ? a[4] : 0;
	int64_t word = nargs > 5 ? a[5] : 0, trailing = nargs > 6 ? a[6] : 0;
	if (period <= 0 || period % 1000 != 0)
		return drl_error_set(err, DRL_EINVAL,
				     "PERIOD %" PRId64 " us: expected a "
				     "positive whole number of ms",
				     period);
	long long ms = (long long)(period / 1000), l = (long long)limit;
	int n;
	if (is(twin, twinlen, "counter")) {
		bool t = (trailing & 1) != 0;
		if (word == 1)
			n = snprintf(spec, cap, "%s:%lld/%lldms",
				     t ? "sliding_window" : "fixed_window", l,
				     ms);
		else
			n = snprintf(spec, cap,
				     "subwindow:%lld/%lldms,subwindows=%lld%s",
				     l, ms, (long long)word,
				     t ? ",trailing=1" : "");
	} else if (is(twin, twinlen, "token_bucket") ||
		   is(twin, twinlen, "gcra")) {
		n = snprintf(spec, cap, "%.*s:%lld/%lldms,burst=%lld",
			     (int)twinlen, twin, l, ms, (long long)burst);
	} else if (is(twin, twinlen, "sliding_log")) {
		n = snprintf(spec, cap, "sliding_log:%lld/%lldms", l, ms);
	} else {
		return drl_error_set(err, DRL_EINVAL,
				     "twin \"%.*s\": expected counter, "
				     "token_bucket, gcra or sliding_log",
				     (int)(twinlen > 32 ? 32 : twinlen), twin);
	}
	if (n < 0 || (size_t)n >= cap)
		return drl_error_set(err, DRL_EINVAL, "spec too long");
	return 0;
}

/* The change rules a token_bucket or gcra twin is sent (ARGV[6]:
 * on_change + 8 x version, drl__change_word) onto lim, checked as the
 * spec parser checks on_change= and version=. */
static int apply_changes(drl__limit *lim, int64_t word, drl_error *err)
{
	int64_t oc = word % 8, v = word / 8;
	if (word < 0 || v > DRL__VERSION_MAX || oc >= DRL__CHANGE_COUNT ||
	    (oc != DRL__CHANGE_KEEP_USED && !(lim->algo->changes & (1u << oc))))
		return drl_error_set(err, DRL_EINVAL,
				     "change rules %" PRId64 ": not on_change "
				     "+ 8 x version for %s",
				     word, lim->algo->name);
	lim->on_change = (int)oc;
	lim->version = v;
	return 0;
}

int drl__rm_parse_twin(drl__rm_request *q, const char *key, size_t keylen,
		       const char *twin, size_t twinlen, size_t nargs,
		       const char *const *arg, const size_t *len,
		       drl_error *err)
{
	memset(q, 0, sizeof *q);
	if (keylen == 0 || keylen > sizeof q->kb.buf)
		return drl_error_set(err, DRL_EINVAL,
				     "key is %zu bytes; expected 1..%zu",
				     keylen, sizeof q->kb.buf);
	if (nargs == DRL__SCRIPT_NARGS + 1)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_adjust is not done by DRL.TWIN yet "
				     "(use tx=lua)");
	if (nargs < 4 || nargs > DRL__SCRIPT_NARGS)
		return drl_error_set(err, DRL_EINVAL,
				     "%zu twin arguments; expected 4..%d",
				     nargs, DRL__SCRIPT_NARGS);
	int64_t a[DRL__SCRIPT_NARGS];
	for (size_t i = 0; i < nargs; i++)
		if (drl_parse_int(arg[i], len[i], INT64_MIN, INT64_MAX, &a[i]))
			return drl_error_set(err, DRL_EINVAL,
					     "twin argument %zu: expected an "
					     "integer",
					     i + 1);
	if (a[0] == DRL__NOW_STORE)
		return drl_error_set(err, DRL_EINVAL,
				     "the store's clock (clock=server) is not "
				     "done by DRL.TWIN yet: send the time");
	if (a[0] < 0 || a[0] > DRL_TIME_MAX_US)
		return drl_error_set(err, DRL_EINVAL,
				     "now_us: expected an integer in 0..2^62");
	char spec[DRL__RM_SPEC_MAX];
	int rc = twin_spec(twin, twinlen, a, nargs, spec, sizeof spec, err);
	if (rc == 0)
		rc = drl__limit_parse(&q->lim, spec, strlen(spec), err);
	if (rc == 0 && q->lim.algo->keeps_params && nargs > 5)
		rc = apply_changes(&q->lim, a[5], err);
	if (rc)
		return rc;
	q->now = a[0];
	q->peek = a[1] < 0;
	q->cost = a[1] < 0 ? -1 - a[1] : a[1]; /* -1 - INT64_MIN fits */
	memcpy(q->kb.buf, key, keylen);
	q->kb.len = keylen;
	return 0;
}
