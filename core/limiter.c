/*
 * drl_limiter: a store, a policy of one or more limits, a key prefix, what
 * to do when the store fails (on_error, core/failure.c), and what to
 * remember of the store's denials (block_on_exceed, near_cache:
 * core/near.c).
 *
 * A policy is decided limit by limit, each consuming as it allows; when one
 * denies, what the earlier ones consumed is refunded. So a denied request
 * consumes nothing, and concurrent callers can only ever be denied too
 * often for an instant (while a refund is in flight), never admitted too
 * often.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_PREFIX "drl:"

int64_t drl_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* What a policy's option segments set, as they are parsed. */
typedef struct policy_opts {
	bool seen_on_error;
	bool seen_shadow;
	drl__near_opts near;
} policy_opts;

/* "shadow=0|1" (value vlen bytes). */
static int parse_shadow(drl_limiter *l, const char *value, size_t vlen,
			policy_opts *po, drl_error *err)
{
	if (po->seen_shadow)
		return drl_error_set(err, DRL_EINVAL,
				     "option \"shadow\" given twice");
	po->seen_shadow = true;
	if (vlen != 1 || (value[0] != '0' && value[0] != '1'))
		return drl_error_set(err, DRL_EINVAL,
				     "shadow=%.*s must be 0 or 1",
				     (int)(vlen < 32 ? vlen : 32), value);
	l->shadow = value[0] == '1';
	return 0;
}

/* A policy option segment "name=value" (no ':' before the '='): on_error,
 * or one of the near cache's. 1 when seg is not an option (a limit), 0
 * when taken, or DRL_EINVAL. */
static int parse_option(drl_limiter *l, const char *seg, size_t n,
			policy_opts *po, drl_error *err)
{
	const char *eq = memchr(seg, '=', n);
	const char *colon = memchr(seg, ':', n);
	if (eq == NULL || (colon != NULL && colon < eq))
		return 1;
	size_t nlen = (size_t)(eq - seg);
	const char *value = eq + 1;
	size_t vlen = n - nlen - 1;
	if (nlen == 8 && memcmp(seg, "on_error", 8) == 0) {
		if (po->seen_on_error)
			return drl_error_set(err, DRL_EINVAL,
					     "option \"on_error\" given twice");
		po->seen_on_error = true;
		return drl__on_error_parse(&l->on_error, value, vlen, err);
	}
	if (nlen == 6 && memcmp(seg, "shadow", 6) == 0)
		return parse_shadow(l, value, vlen, po, err);
	int rc = drl__near_option(&po->near, seg, nlen, value, vlen, err);
	if (rc != 1)
		return rc;
	return drl_error_set(
		err, DRL_EINVAL,
		"unknown policy option \"%.*s\" (expected "
		"on_error=deny|allow|local, shadow=0|1, "
		"block_on_exceed=, near_cache=, near_cache_sync=, "
		"near_cache_keys=, or a limit ALGORITHM:LIMIT/PERIOD)",
		(int)(nlen < 32 ? nlen : 32), seg);
}

/* Parse limit seg[0..n) into the next slot of l's policy. */
static int add_limit(drl_limiter *l, const char *spec, const char *seg,
		     size_t n, drl_error *err)
{
	if (l->nlimits == DRL_POLICY_LIMITS_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "a policy has at most %d limits",
				     DRL_POLICY_LIMITS_MAX);
	drl__limit *lim = &l->limits[l->nlimits];
	int rc = drl__limit_parse(lim, seg, n, err);
	if (rc)
		return rc;
	for (size_t i = 0; i < l->nlimits; i++)
		if (l->limits[i].taglen == lim->taglen &&
		    !memcmp(l->limits[i].tag, lim->tag, lim->taglen))
			return drl_error_set(
				err, DRL_EINVAL,
				"limit \"%.*s\" appears twice in the policy "
				"\"%.64s\"",
				(int)(n < 64 ? n : 64), seg, spec);
	l->nlimits++;
	return 0;
}

/* LIMIT[;LIMIT...] with option segments (on_error=...) anywhere. */
static int parse_policy(drl_limiter *l, const char *spec, policy_opts *po,
			drl_error *err)
{
	size_t len = strlen(spec);
	if (len == 0)
		return drl_error_set(err, DRL_EINVAL, "empty limit spec");
	const char *s = spec;
	for (;;) {
		const char *semi = memchr(s, ';', len - (size_t)(s - spec));
		size_t n = semi ? (size_t)(semi - s) : len - (size_t)(s - spec);
		if (n == 0)
			return drl_error_set(err, DRL_EINVAL,
					     "empty limit in policy \"%.64s\"",
					     spec);
		int rc = parse_option(l, s, n, po, err);
		if (rc == 1)
			rc = add_limit(l, spec, s, n, err);
		if (rc)
			return rc;
		if (!semi)
			break;
		s = semi + 1;
	}
	if (l->nlimits == 0)
		return drl_error_set(
			err, DRL_EINVAL,
			"policy \"%.64s\" has options but no limit", spec);
	return drl__near_finish(&po->near, err);
}

/* on_error=local: a copy of l's limits on an in-process store of its own
 * (backends/registry.c picks it), bounded: during an outage the callers
 * choose the keys. When it is full a new key's local decision is
 * DRL_ESTORE ("store full"), a denial; keys already there carry on, and
 * expired ones make room. */
#define LOCAL_MAX_KEYS 1000000
static int make_local(drl_limiter *l, drl_error *err)
{
	char uri[64];
	int rc = drl_store_open(
		&l->local_store,
		drl__backend_local_uri(uri, sizeof uri, LOCAL_MAX_KEYS), err);
	if (rc)
		return rc;
	l->local = malloc(sizeof *l->local);
	if (l->local == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	*l->local = *l;
	l->local->store = l->local_store;
	l->local->on_error = DRL__ON_ERROR_RETURN;
	l->local->local_store = NULL;
	l->local->local = NULL;
	l->local->near = NULL; /* fallbacks never make blocks */
	return 0;
}

int drl_limiter_new(drl_limiter **out, drl_store *store, const char *spec,
		    const char *prefix, drl_error *err)
{
	if (out == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_limiter_new: out is NULL");
	*out = NULL;
	if (store == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_limiter_new: store is NULL");
	if (spec == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_limiter_new: spec is NULL");
	if (prefix == NULL)
		prefix = DEFAULT_PREFIX;
	size_t plen = strlen(prefix);
	if (plen > DRL__PREFIX_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "key prefix is %zu bytes; at most %d",
				     plen, DRL__PREFIX_MAX);
	/* The user key sits in the one {...} hash tag after the prefix:
	 * a brace in the prefix would move the tag, and two limiters'
	 * keys could then meet. */
	if (strpbrk(prefix, "{}") != NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "key prefix \"%.32s\" holds '{' or '}' "
				     "(reserved for the key's hash tag)",
				     prefix);
	drl_limiter *l = calloc(1, sizeof *l);
	if (!l)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	l->store = store;
	memcpy(l->prefix, prefix, plen + 1);
	l->prefixlen = plen;
	policy_opts po = {0};
	int rc = parse_policy(l, spec, &po, err);
	if (rc == 0 && l->on_error == DRL__ON_ERROR_LOCAL)
		rc = make_local(l, err);
	if (rc == 0) /* last: its thread reads the finished limiter */
		rc = drl__near_new(&l->near, l, &po.near, err);
	if (rc) {
		drl_limiter_free(l);
		return rc;
	}
	*out = l;
	return 0;
}

void drl_limiter_free(drl_limiter *limiter)
{
	if (limiter == NULL)
		return;
	drl__near_free(limiter->near); /* first: its thread reads the rest */
	free(limiter->local);
	drl_store_free(limiter->local_store);
	free(limiter);
}

/* Decide limit i for call; the keybase is built here so each limit gets
 * its own. */
static int decide_one(drl_limiter *l, size_t i, drl__call *call,
		      drl__keybase *kb, const void *key, size_t keylen,
		      drl_result *r, drl__undo *undo)
{
	drl__limit *lim = &l->limits[i];
	drl__keybase_make(kb, l->prefix, l->prefixlen, lim, key, keylen);
	call->key = kb;
	DRL__COUNT(call->stats, decisions);
	memset(r, 0, sizeof *r);
	int rc = lim->algo->decide(lim, call, r, undo);
	r->limit_index = (int)i;
	return rc;
}

/* Give back what limits [0, n) consumed. A refund that fails leaves quota
 * consumed: the safe direction (a later request may be denied early), so
 * the decision already made stands. */
static void refund_all(drl_limiter *l, size_t n, const drl__call *call,
		       const void *key, size_t keylen, const drl__undo *undo)
{
	drl__keybase kb;
	drl__call c = *call;
	c.peek = false;
	c.err = NULL; /* keep the caller's message: the error that matters */
	for (size_t i = 0; i < n; i++) {
		drl__limit *lim = &l->limits[i];
		drl__keybase_make(&kb, l->prefix, l->prefixlen, lim, key,
				  keylen);
		c.key = &kb;
		(void)lim->algo->refund(lim, &c, &undo[i]);
	}
}

/* A denial *res, and another limit's decision r of the same request:
 * *res becomes r when r denies for longer (DRL_NEVER is the longest). */
static void widen(drl_result *res, const drl_result *r)
{
	if (r->allowed || res->retry_after_us == DRL_NEVER)
		return;
	if (r->retry_after_us == DRL_NEVER ||
	    r->retry_after_us > res->retry_after_us)
		*res = *r;
}

/* After limit `denied` said no: ask the limits after it (without
 * consuming) so retry_after is the time when every limit would allow. */
static int widen_retry(drl_limiter *l, size_t denied, drl__call *call,
		       const void *key, size_t keylen, drl_result *res)
{
	drl__keybase kb;
	for (size_t i = denied + 1; i < l->nlimits; i++) {
		drl_result r;
		drl__undo undo;
		call->peek = true;
		int rc = decide_one(l, i, call, &kb, key, keylen, &r, &undo);
		if (rc)
			return rc;
		widen(res, &r);
	}
	return 0;
}

int drl__limiter_peek(drl_limiter *l, const void *id, size_t idlen, bool digest,
		      int64_t cost, int64_t now_us, drl_result *result,
		      drl_error *err)
{
	drl__call call = {
		.backend = l->store->backend,
		.now = now_us,
		.cost = cost,
		.peek = true,
		.err = err,
		.stats = &l->store->stats,
	};
	drl__keybase kb;
	drl_result r;
	drl__undo undo;
	bool denied = false;
	for (size_t i = 0; i < l->nlimits; i++) {
		drl__limit *lim = &l->limits[i];
		drl__keybase_make_id(&kb, l->prefix, l->prefixlen, lim, id,
				     idlen, digest);
		call.key = &kb;
		memset(&r, 0, sizeof r);
		int rc = lim->algo->decide(lim, &call, &r, &undo);
		if (rc)
			return rc;
		r.limit_index = (int)i;
		if (denied)
			widen(result, &r);
		else if (i == 0 || !r.allowed ||
			 r.remaining < result->remaining)
			*result = r;
		denied = denied || !r.allowed;
	}
	return 0;
}

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

/* Everything drl_allow and drl_allow_at check before deciding; *result
 * (when there is one) is a denial from here on. */
static int check_call(drl_limiter *l, const void *key, size_t keylen,
		      int64_t cost, drl_result *result, drl_error *err)
{
	if (result != NULL)
		drl__result_deny(result);
	if (l == NULL || result == NULL)
		return drl_error_set(err, DRL_EINVAL, "drl_allow: NULL %s",
				     l == NULL ? "limiter" : "result");
	return drl__request_check(key, keylen, cost, err);
}

/* A checked request (now_us explicit, or DRL__NOW_READ) as drl_allow()
 * decides it: a key the store has denied is denied here until the store
 * could allow it again (core/near.c), without asking; everything else
 * goes to the store, whose denials make such blocks. A peek (cost 0)
 * always asks the store, and only the store's own decisions (path
 * DRL_PATH_STORE, no error) are remembered. */
static int decide_near(drl_limiter *l, const void *key, size_t keylen,
		       int64_t cost, int64_t now_us, drl_result *result,
		       drl_error *err)
{
	drl__near_req q;
	if (l->near == NULL || cost == 0)
		return drl__limiter_guarded(l, key, keylen, cost, now_us,
					    result, err);
	if (drl__near_denied(l, key, keylen, cost, now_us, &q, result))
		return 0;
	int rc =
		drl__limiter_guarded(l, key, keylen, cost, now_us, result, err);
	if (rc == 0 && result->path == DRL_PATH_STORE)
		drl__near_record(l->near, &q, cost, result);
	return rc;
}

bool drl__near_denied(drl_limiter *l, const void *key, size_t keylen,
		      int64_t cost, int64_t now_us, drl__near_req *q,
		      drl_result *result)
{
	if (l->near == NULL || cost == 0)
		return false;
	int base;
	int64_t t;
	drl__near_now(now_us, &base, &t);
	drl__near_req_make(l->near, q, key, keylen, base, t);
	if (!drl__near_check(l->near, q, cost, result))
		return false;
	DRL__COUNT(&l->store->stats, near_denials);
	return true;
}

void drl__shadow_answer(drl_limiter *l, drl_result *r)
{
	r->would_allow = r->allowed;
	if (!l->shadow || r->allowed)
		return;
	r->allowed = 1;
	DRL__COUNT(&l->store->stats, shadow_denials);
}

/* A checked request decided (decide_near) and answered (shadow=1). */
static int decide_answer(drl_limiter *l, const void *key, size_t keylen,
			 int64_t cost, int64_t now_us, drl_result *result,
			 drl_error *err)
{
	int rc = decide_near(l, key, keylen, cost, now_us, result, err);
	if (rc == 0)
		drl__shadow_answer(l, result);
	return rc;
}

int drl_allow_at(drl_limiter *l, const void *key, size_t keylen, int64_t cost,
		 int64_t now_us, drl_result *result, drl_error *err)
{
	int rc = check_call(l, key, keylen, cost, result, err);
	if (rc == 0)
		rc = drl__time_check(now_us, err);
	if (rc)
		return rc;
	return decide_answer(l, key, keylen, cost, now_us, result, err);
}

int drl__limiter_guarded(drl_limiter *l, const void *key, size_t keylen,
			 int64_t cost, int64_t now_us, drl_result *result,
			 drl_error *err)
{
	bool probe;
	int rc = drl__breaker_enter(l->store, &probe, err);
	if (rc == 0) {
		if (now_us == DRL__NOW_READ)
			rc = drl__limiter_now(l, &now_us, err);
		if (rc == 0)
			rc = drl__limiter_decide(l, key, keylen, cost, now_us,
						 result, err);
		drl__breaker_leave(l->store, probe, rc);
	}
	if (rc == 0)
		return 0;
	drl__result_deny(result);
	if (!drl__is_store_failure(rc) || l->on_error == DRL__ON_ERROR_RETURN)
		return rc;
	return drl__fallback(l, key, keylen, cost, now_us, result, err);
}

int drl__limiter_decide(drl_limiter *l, const void *key, size_t keylen,
			int64_t cost, int64_t now_us, drl_result *result,
			drl_error *err)
{
	if (l == NULL || result == NULL)
		return drl_error_set(err, DRL_EINVAL, "drl_allow: NULL %s",
				     l == NULL ? "limiter" : "result");
	int rc = drl__request_check(key, keylen, cost, err);
	if (rc)
		return rc;
	drl__call call = {
		.backend = l->store->backend,
		.now = now_us,
		.cost = cost,
		.peek = cost == 0,
		.err = err,
		.stats = &l->store->stats,
	};
	drl__undo undo[DRL_POLICY_LIMITS_MAX];
	drl__keybase kb;
	drl_result best = {0}, r;
	for (size_t i = 0; i < l->nlimits; i++) {
		call.peek = cost == 0;
		rc = decide_one(l, i, &call, &kb, key, keylen, &r, &undo[i]);
		if (rc) {
			if (!call.peek)
				refund_all(l, i, &call, key, keylen, undo);
			return rc;
		}
		if (!r.allowed) {
			if (!call.peek) /* a peek consumed nothing */
				refund_all(l, i, &call, key, keylen, undo);
			rc = widen_retry(l, i, &call, key, keylen, &r);
			if (rc)
				return rc;
			*result = r;
			return 0;
		}
		if (i == 0 || r.remaining < best.remaining)
			best = r;
	}
	*result = best;
	return 0;
}

/* Whether every limit of the policy runs as a Lua twin that reads the
 * store's clock itself, so no separate round trip for the time is needed. */
static bool twins_read_clock(const drl_limiter *l)
{
	drl__call probe = {.backend = l->store->backend, .now = DRL__NOW_STORE};
	for (size_t i = 0; i < l->nlimits; i++)
		if (!drl__script_usable(&l->limits[i], &probe))
			return false;
	return true;
}

int drl__limiter_now(drl_limiter *l, int64_t *now_us, drl_error *err)
{
	drl_backend *b = l->store->backend;
	if (!(b->caps & DRL_CAP_CLOCK)) {
		*now_us = drl_now_us();
		return 0;
	}
	if (twins_read_clock(l)) {
		*now_us = DRL__NOW_STORE;
		return 0;
	}
	return b->now(b, now_us, err);
}

int drl_allow(drl_limiter *l, const void *key, size_t keylen, int64_t cost,
	      drl_result *result, drl_error *err)
{
	int rc = check_call(l, key, keylen, cost, result, err);
	if (rc)
		return rc;
	return decide_answer(l, key, keylen, cost, DRL__NOW_READ, result, err);
}
