/*
 * drl_limiter: a store, a policy of one or more limits, a key prefix, what
 * to do when the store fails (on_error, core/failure.c), and what to
 * remember of the store's denials (block_on_exceed, near_cache:
 * core/near.c).
 *
 * The public calls check their arguments here and hand the request to
 * the decision's steps (core/decision.c), which are written once for
 * every call.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_PREFIX "drl:"

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
				"\"%.64s\" (or counts what another limit of "
				"it counts: the same algorithm and period)",
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

int drl__policy_check(const char *spec, drl_error *err)
{
	if (spec == NULL)
		return drl_error_set(err, DRL_EINVAL, "spec is NULL");
	drl_limiter *l = calloc(1, sizeof *l);
	if (!l)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	policy_opts po = {0};
	int rc = parse_policy(l, spec, &po, err);
	free(l); /* parsing allocates nothing: the local store and the near
		  * cache are made by drl_limiter_new() after it */
	return rc;
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
		rc = drl__near_new(&l->near, l, &po.near, drl__req_peek, err);
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

/* A checked request at now_us (explicit, or DRL__NOW_READ) decided and
 * answered: the steps are core/decision.c's. */
static int allow_one(drl_limiter *l, const void *key, size_t keylen,
		     int64_t cost, int64_t now_us, drl_result *result,
		     drl_error *err)
{
	drl_batch_item it = {.key = key, .keylen = keylen, .cost = cost};
	drl__req q;
	drl__req_init(&q, DRL__REQ_ONE, l, &it, 1, now_us, err);
	drl__req_decide(&q);
	*result = it.result;
	return it.rc;
}

int drl_allow_at(drl_limiter *l, const void *key, size_t keylen, int64_t cost,
		 int64_t now_us, drl_result *result, drl_error *err)
{
	int rc = check_call(l, key, keylen, cost, result, err);
	if (rc == 0)
		rc = drl__time_check(now_us, err);
	if (rc)
		return rc;
	return allow_one(l, key, keylen, cost, now_us, result, err);
}

int drl_allow(drl_limiter *l, const void *key, size_t keylen, int64_t cost,
	      drl_result *result, drl_error *err)
{
	int rc = check_call(l, key, keylen, cost, result, err);
	if (rc)
		return rc;
	return allow_one(l, key, keylen, cost, DRL__NOW_READ, result, err);
}

/* DRL_EINVAL for a batch call that cannot run at all. */
static int check_batch(const drl_limiter *l, const drl_batch_item *items,
		       size_t n, drl_error *err)
{
	if (l == NULL || items == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_allow_batch: NULL %s",
				     l == NULL ? "limiter" : "items");
	if (n == 0 || n > DRL_BATCH_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "a batch of %zu items is outside 1..%d", n,
				     DRL_BATCH_MAX);
	return 0;
}

/* A checked batch at now_us decided and answered, item by item as
 * drl_allow_at() would (core/decision.c, core/batch.c). */
static void allow_batch(drl_limiter *l, drl_batch_item *items, size_t n,
			int64_t now_us, drl_error *err)
{
	drl__req q;
	drl__req_init(&q, DRL__REQ_BATCH, l, items, n, now_us, err);
	drl__req_decide(&q);
}

int drl_allow_batch_at(drl_limiter *l, drl_batch_item *items, size_t n,
		       int64_t now_us, drl_error *err)
{
	int rc = check_batch(l, items, n, err);
	if (rc == 0)
		rc = drl__time_check(now_us, err);
	if (rc)
		return rc;
	allow_batch(l, items, n, now_us, err);
	return 0;
}

int drl_allow_batch(drl_limiter *l, drl_batch_item *items, size_t n,
		    drl_error *err)
{
	int rc = check_batch(l, items, n, err);
	if (rc)
		return rc;
	allow_batch(l, items, n, DRL__NOW_READ, err);
	return 0;
}
