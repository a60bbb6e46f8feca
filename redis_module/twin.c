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

/* The limits parsed lately, each under the bytes that said it (the
 * twin's name and its arguments after now and cost, as sent): a limit
 * sent again in the same bytes is copied, not rebuilt and parsed again.
 * Only limits the parser took are kept, so an entry answers exactly what
 * parsing its bytes answers. Direct-mapped, CACHE_SLOTS entries (a few
 * tens of kB, whatever the traffic); one thread (Redis's main thread). */
#define CACHE_SLOTS 64
#define SIG_MAX 120 /* the bytes of a signature: longer ones are not kept */

typedef struct signature {
	unsigned char b[SIG_MAX];
	size_t len;
} signature;

typedef struct cached {
	signature sig; /* len 0: empty */
	drl__limit lim;
} cached;

static cached cache[CACHE_SLOTS];

/* The signature of twin and arg[2..nargs) into *s (each part its length
 * byte, then its bytes: one sequence of bytes says one list of parts):
 * false, and s->len 0, when it does not fit. */
static bool sign(signature *s, const char *twin, size_t twinlen, size_t nargs,
		 const char *const *arg, const size_t *len)
{
	s->len = 0;
	for (size_t i = 1; i < nargs; i++) {
		const char *p = i == 1 ? twin : arg[i];
		size_t l = i == 1 ? twinlen : len[i];
		if (l > 255 || s->len + 1 + l > SIG_MAX) {
			s->len = 0;
			return false;
		}
		s->b[s->len++] = (unsigned char)l;
		memcpy(s->b + s->len, p, l);
		s->len += l;
	}
	return true;
}

/* The slot of s: a hash of its bytes eight at a time (the tail zero
 * padded; an entry is found by comparing every byte, so the hash only
 * spreads the signatures over the slots). */
static cached *slot_of(const signature *s)
{
	uint64_t h = s->len;
	for (size_t i = 0; i < s->len; i += 8) {
		uint64_t w = 0;
		memcpy(&w, s->b + i, s->len - i < 8 ? s->len - i : 8);
		h = (h ^ w) * UINT64_C(0x9E3779B97F4A7C15);
	}
	return &cache[(h >> 32 ^ h) % CACHE_SLOTS];
}

void drl__rm_twin_cache_clear(void)
{
	memset(cache, 0, sizeof cache);
}

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

/* The limit twin and a[2..nargs) say (a[0..nargs) parsed): built as a
 * spec and parsed, the change rules set as the parser sets them. */
static int twin_limit(drl__limit *lim, const char *twin, size_t twinlen,
		      const int64_t *a, size_t nargs, drl_error *err)
{
	char spec[DRL__RM_SPEC_MAX];
	int rc = twin_spec(twin, twinlen, a, nargs, spec, sizeof spec, err);
	if (rc == 0)
		rc = drl__limit_parse(lim, spec, strlen(spec), err);
	if (rc == 0 && lim->algo->keeps_params && nargs > 5)
		rc = apply_changes(lim, a[5], err);
	return rc;
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
	signature sig;
	cached *c = NULL;
	if (sign(&sig, twin, twinlen, nargs, arg, len)) {
		c = slot_of(&sig);
		if (c->sig.len != sig.len ||
		    memcmp(c->sig.b, sig.b, sig.len) != 0)
			c = NULL;
	}
	/* now and cost always; the limit's numbers when it is not cached */
	size_t parsed = c ? 2 : nargs;
	int64_t a[DRL__SCRIPT_NARGS];
	for (size_t i = 0; i < parsed; i++)
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
	if (c) {
		memcpy(&q->lim, &c->lim, sizeof q->lim);
	} else {
		int rc = twin_limit(&q->lim, twin, twinlen, a, nargs, err);
		if (rc)
			return rc;
		if (sig.len) {
			c = slot_of(&sig);
			memcpy(&c->lim, &q->lim, sizeof c->lim);
			c->sig = sig;
		}
	}
	q->now = a[0];
	q->peek = a[1] < 0;
	q->cost = a[1] < 0 ? -1 - a[1] : a[1]; /* -1 - INT64_MIN fits */
	memcpy(q->kb.buf, key, keylen);
	q->kb.len = keylen;
	return 0;
}
