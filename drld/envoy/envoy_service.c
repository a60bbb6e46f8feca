/* ShouldRateLimit decided in C: see envoy_service.h. */
#include "envoy_service.h"

#include "drld.h"
#include "envoy_config.h"

#include <drl/async.h>

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What one descriptor resolved to before anything is decided. */
struct plan {
	struct drld_envoy_match m;
	const struct drld_envoy_limit *limit; /* NULL: none, or replaced */
	bool unlimited;
	/* a limit override: its adhoc limiter, and numbers */
	struct drld_adhoc_ref *ref;
	uint32_t rpu;
	int unit;
	uint64_t hits;
	bool applies; /* a limit or an override applies */
	bool over, shadowed;
	bool peek_over; /* all or nothing: its hits would not pass */
	drl_result r;
};

/* Write a printf-style message to msg and return outcome o. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static enum drld_envoy_outcome
refuse(enum drld_envoy_outcome o, char *msg, size_t n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, n, fmt, ap);
	va_end(ap);
	return o;
}

/* Bytes the store key of descriptor q takes (see store_key()). */
static size_t key_size(const struct drld_envoy_request *q,
		       const struct drld_envoy_descriptor *dq)
{
	size_t len = 6 + 21 + q->domainlen;

	for (size_t i = 0; i < dq->nentries; i++)
		len += 42 + dq->entries[i].keylen + dq->entries[i].valuelen;
	return len;
}

/* Check q whole: a malformed request is refused before anything counts. */
static enum drld_envoy_outcome check(const struct drld_envoy_request *q,
				     char *msg, size_t n)
{
	if (q->domainlen == 0)
		return refuse(DRLD_ENVOY_INVALID, msg, n,
			      "rate limit domain must not be empty");
	if (q->ndescriptors == 0)
		return refuse(DRLD_ENVOY_INVALID, msg, n,
			      "rate limit descriptor list must not be empty");
	if (q->ndescriptors > DRLD_ENVOY_DESCRIPTORS_MAX)
		return refuse(DRLD_ENVOY_INVALID, msg, n,
			      "more than %d descriptors",
			      DRLD_ENVOY_DESCRIPTORS_MAX);
	/* as a descriptor's own (below): a cost no limit can take */
	if ((uint64_t)q->hits_addend > (uint64_t)DRL_LIMIT_MAX)
		return refuse(DRLD_ENVOY_INVALID, msg, n,
			      "hits_addend over %lld",
			      (long long)DRL_LIMIT_MAX);
	/* a descriptor without entries, with more entries than a config
	 * nests, or with an empty key matches no configured limit: OK, as
	 * envoyproxy/ratelimit answers it (an override still applies) */
	for (size_t i = 0; i < q->ndescriptors; i++) {
		const struct drld_envoy_descriptor *dq = &q->descriptors[i];
		if (key_size(q, dq) > DRL_KEY_MAX)
			return refuse(DRLD_ENVOY_INVALID, msg, n,
				      "descriptor %zu: its entries make a "
				      "key of more than %d bytes",
				      i, DRL_KEY_MAX);
		if (dq->has_override &&
		    (drld_envoy_unit_seconds(dq->override_unit) == 0 ||
		     dq->override_rpu > DRL_LIMIT_MAX))
			return refuse(
				DRLD_ENVOY_INVALID, msg, n,
				"descriptor %zu: a limit override needs "
				"a unit from SECOND to YEAR, or WEEK (7), "
				"and at most %lld requests_per_unit",
				i, (long long)DRL_LIMIT_MAX);
		if (dq->has_hits && dq->hits > (uint64_t)DRL_LIMIT_MAX)
			return refuse(DRLD_ENVOY_INVALID, msg, n,
				      "descriptor %zu: hits_addend over %lld",
				      i, (long long)DRL_LIMIT_MAX);
	}
	return DRLD_ENVOY_OK;
}

/* Append "LEN:BYTES" to b: the store key is a run of these (the domain,
 * then each entry's key and value), so no two descriptors share one. */
static size_t put(char *b, size_t at, const char *s, size_t len)
{
	/* the length's digits by hand, not sprintf: three of these per
	 * descriptor of every call, and printf's machinery cost more than
	 * the rest of the key (docs/performance.md, "drld over gRPC") */
	char digits[20];
	size_t n = 0, v = len;
	do
		digits[n++] = (char)('0' + v % 10);
	while ((v /= 10) > 0);
	while (n > 0)
		b[at++] = digits[--n];
	b[at++] = ':';
	memcpy(b + at, s, len);
	return at + len;
}

/* The store key of descriptor dq (malloc'd, *len bytes): "envoy/", the
 * domain and every entry, a share_threshold entry by its pattern. */
static char *store_key(const struct drld_envoy_request *q,
		       const struct drld_envoy_descriptor *dq,
		       const struct drld_envoy_match *m, size_t *len)
{
	char *b = malloc(key_size(q, dq) + 1);
	size_t at = 6;

	if (b == NULL)
		return NULL;
	memcpy(b, "envoy/", 6);
	at = put(b, at, q->domain, q->domainlen);
	for (size_t i = 0; i < dq->nentries; i++) {
		const struct drld_envoy_entry *e = &dq->entries[i];
		at = put(b, at, e->key, e->keylen);
		if (i < DRLD_ENVOY_DEPTH_MAX && m->shared[i] != NULL)
			at = put(b, at, m->shared[i], strlen(m->shared[i]));
		else
			at = put(b, at, e->value, e->valuelen);
	}
	*len = at;
	return b;
}

/* Cut a descriptor's metric name of len bytes (a request chose it) to at
 * most DRLD_ENVOY_METRIC_NAME_MAX: its first bytes, cut at a UTF-8
 * character's start, '~' and the FNV-1a hash of the whole name in 16 hex
 * digits, so names that differ after the cut stay apart. Returns the new
 * length. */
static size_t bound_name(char *name, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	uint64_t h = 1469598103934665603u;
	size_t cut = DRLD_ENVOY_METRIC_NAME_MAX - 17;

	if (len <= DRLD_ENVOY_METRIC_NAME_MAX)
		return len;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)name[i]) * 1099511628211u;
	while (cut > 0 && ((unsigned char)name[cut] & 0xC0) == 0x80)
		cut--;
	name[cut++] = '~';
	for (int i = 60; i >= 0; i -= 4)
		name[cut++] = hex[(h >> i) & 15];
	return cut;
}

/* The counters a decision of p goes to: its limit's, or by the request's
 * values (an override, value_to_metric, detailed_metric), as
 * envoyproxy/ratelimit names them: "key_value.key2", bounded in length
 * (bound_name()). */
static struct drld_envoy_stat *stats_for(struct drld *d,
					 const struct drld_envoy_request *q,
					 const struct drld_envoy_descriptor *dq,
					 const struct plan *p)
{
	if (p->limit != NULL && !p->m.by_request)
		return p->limit->stats;

	char domain[256];
	size_t cap = 1, at = 0;
	snprintf(domain, sizeof domain, "%.*s",
		 (int)(q->domainlen < 255 ? q->domainlen : 255), q->domain);
	for (size_t i = 0; i < dq->nentries; i++)
		cap += dq->entries[i].keylen + dq->entries[i].valuelen + 2;
	char *name = malloc(cap);
	if (name == NULL)
		return NULL;
	for (size_t i = 0; i < dq->nentries; i++) {
		const struct drld_envoy_entry *e = &dq->entries[i];
		const char *v = p->ref ? e->value : p->m.mvalue[i];
		size_t vlen = p->ref ? e->valuelen : p->m.mlen[i];
		if (i > 0)
			name[at++] = '.';
		memcpy(name + at, e->key, e->keylen);
		at += e->keylen;
		if (v != NULL && vlen > 0) {
			name[at++] = '_';
			memcpy(name + at, v, vlen);
			at += vlen;
		}
	}
	at = bound_name(name, at);
	struct drld_envoy_stat *st =
		drld_envoy_stats_get(d->envoy_stats, domain, name, at);
	free(name);
	return st;
}

/* Resolve every descriptor of q in domain dom (NULL: unknown) into
 * plans: match, override, replaces, unlimited. */
static enum drld_envoy_outcome plan_all(struct drld *d,
					const struct drld_envoy_request *q,
					const struct drld_envoy_domain *dom,
					struct plan *plans, char *msg, size_t n)
{
	for (size_t i = 0; i < q->ndescriptors && dom != NULL; i++) {
		const struct drld_envoy_descriptor *dq = &q->descriptors[i];
		struct plan *p = &plans[i];
		p->hits = dq->has_hits ? dq->hits
				       : (q->hits_addend ? q->hits_addend : 1);
		if (!dq->has_override) {
			drld_envoy_match(dom, dq->entries, dq->nentries, &p->m);
			p->limit = p->m.limit;
			if (p->limit != NULL) {
				p->applies = true;
				p->rpu = p->limit->requests_per_unit;
				p->unit = p->limit->unit;
			}
			continue;
		}
		char spec[640];
		drl_error err = {0};
		/* by envoy.type.v3.RateLimitUnit, and 7: WEEK, which
		 * envoyproxy/ratelimit reads as its response's WEEK */
		static const char *const periods[] = {
			"", "1s", "1m", "1h", "1d", "30d", "365d", "7d"};
		p->applies = true;
		p->rpu = dq->override_rpu;
		p->unit = dq->override_unit;
		if (p->rpu == 0)
			continue;
		/* the rule the descriptor matches, if any: the override
		 * counts on its state (its algorithm, key and prefix), as
		 * envoyproxy/ratelimit's override keeps the key's count; it
		 * replaces no other limit and is named by the request */
		drld_envoy_match(dom, dq->entries, dq->nentries, &p->m);
		const struct drld_envoy_limit *rule = p->m.limit;
		p->m.limit = NULL;
		int rc;
		if (rule != NULL && rule->ov_alg != NULL) {
			snprintf(spec, sizeof spec, "%s:%u/%s%s", rule->ov_alg,
				 p->rpu, periods[p->unit], rule->ov_tail);
			rc = drld_adhoc_get_on(d->adhoc, rule->store,
					       rule->ov_prefix, spec, &p->ref,
					       &err);
		} else {
			memset(&p->m, 0, sizeof p->m);
			snprintf(spec, sizeof spec, "fixed_window:%u/%s",
				 p->rpu, periods[p->unit]);
			rc = drld_adhoc_get(d->adhoc, spec, &p->ref, &err);
		}
		if (rc != 0)
			return refuse(
				rc == DRL_ENOMEM ? DRLD_ENVOY_INTERNAL
						 : DRLD_ENVOY_INVALID,
				msg, n, "descriptor %zu: limit override: %s%s",
				i, err.message,
				rc == DRL_ENOTSUP ? " (--max-specs is 0)" : "");
	}
	/* unlimited ones answer at once (and may replace others); a limit
	 * replaced by another matched one is skipped */
	for (size_t i = 0; i < q->ndescriptors; i++) {
		const struct drld_envoy_limit *l = plans[i].limit;
		if (l != NULL && l->unlimited) {
			plans[i].unlimited = true;
			plans[i].applies = false;
			continue;
		}
		for (size_t j = 0; l != NULL && j < q->ndescriptors; j++) {
			const struct drld_envoy_limit *o = plans[j].m.limit;
			for (size_t k = 0;
			     o != NULL && l->name != NULL && k < o->nreplaces;
			     k++)
				if (strcmp(o->replaces[k], l->name) == 0)
					plans[i].applies = false;
		}
		if (!plans[i].applies)
			plans[i].limit = NULL;
	}
	return DRLD_ENVOY_OK;
}

/* Whether rc is the store failing. */
static bool store_failure(int rc)
{
	return rc == DRL_ESTORE || rc == DRL_ETIMEDOUT ||
	       rc == DRL_EUNAVAILABLE || rc == DRL_ECONFLICT ||
	       rc == DRL_ECORRUPT || rc == DRL_ERANGE;
}

/* The limiter plan p is decided by, or NULL (none, or no store call). */
static drl_limiter *plan_limiter(const struct plan *p)
{
	if (p->unlimited || !p->applies)
		return NULL;
	return p->ref ? drld_adhoc_limit(p->ref)->lim
		      : (p->limit ? p->limit->lim : NULL);
}

/* The part of deciding plan p (descriptor dq) into status st before the
 * store: what needs no store call is decided here; otherwise *lim and
 * *key (malloc'd, *keylen bytes) are the call to make, then end_one(). */
static enum drld_envoy_outcome begin_one(const struct drld_envoy_request *q,
					 const struct drld_envoy_descriptor *dq,
					 struct plan *p,
					 struct drld_envoy_status *st,
					 drl_limiter **lim, char **key,
					 size_t *keylen, char *msg, size_t n)
{
	*lim = NULL;
	*key = NULL;
	memset(st, 0, sizeof *st);
	st->code = DRLD_ENVOY_CODE_OK;
	if (p->unlimited) {
		st->remaining = UINT32_MAX;
		return DRLD_ENVOY_OK;
	}
	if (!p->applies)
		return DRLD_ENVOY_OK;
	st->has_limit = true;
	st->requests_per_unit = p->rpu;
	st->unit = p->unit;
	st->name = p->limit ? p->limit->name : NULL;
	st->has_reset = true;
	drl_limiter *l = plan_limiter(p);
	if (l == NULL) { /* requests_per_unit 0: over, but for 0 hits */
		int64_t unit = drld_envoy_unit_seconds(p->unit) * 1000000;
		st->reset_us = unit - drl_now_us() % unit;
		p->over = p->hits > 0;
		p->r.limit = 0;
		return DRLD_ENVOY_OK;
	}
	if ((*key = store_key(q, dq, &p->m, keylen)) == NULL)
		return refuse(DRLD_ENVOY_INTERNAL, msg, n, "out of memory");
	*lim = l;
	return DRLD_ENVOY_OK;
}

/* The rest of deciding p into st once the store answered (lim NULL: it
 * was not asked; else rc and err are drl_allow()'s, p->r its result):
 * the status, the metrics, or the call's error. */
static enum drld_envoy_outcome end_one(
	struct drld *d, const struct drld_envoy_request *q,
	const struct drld_envoy_descriptor *dq, struct plan *p,
	struct drld_envoy_status *st, const drl_limiter *lim, int rc,
	const drl_error *err, char *msg, size_t n)
{
	if (!p->applies)
		return DRLD_ENVOY_OK;
	if (lim != NULL && rc != 0) {
		drld_metrics_store_error(d->metrics);
		return refuse(store_failure(rc)     ? DRLD_ENVOY_UNAVAILABLE
			      : rc == DRL_ENOMEM    ? DRLD_ENVOY_INTERNAL
			      : rc == DRL_EBUSY     ? DRLD_ENVOY_EXHAUSTED
			      : rc == DRL_ECANCELED ? DRLD_ENVOY_UNAVAILABLE
						    : DRLD_ENVOY_INVALID,
			      msg, n, "%s",
			      err && err->message[0] ? err->message
						     : drl_strerror(rc));
	}
	if (lim != NULL) {
		if (p->r.path == DRL_PATH_LOCAL ||
		    p->r.path == DRL_PATH_FAIL_OPEN ||
		    p->r.path == DRL_PATH_FAIL_CLOSED)
			drld_metrics_store_error(d->metrics);
		/* shadow_mode limiters have shadow=1: allowed is always 1,
		 * would_allow the real decision (and its numbers) */
		p->over = !p->r.would_allow;
		st->remaining = p->over ? 0
				: p->r.remaining > UINT32_MAX
					? UINT32_MAX
					: (uint32_t)p->r.remaining;
		st->reset_us = p->over && p->r.retry_after_us != DRL_NEVER
				       ? p->r.retry_after_us
				       : p->r.reset_after_us;
	}
	p->shadowed = p->over && p->limit != NULL && p->limit->shadow;
	st->code = p->over && !p->shadowed ? DRLD_ENVOY_CODE_OVER_LIMIT
					   : DRLD_ENVOY_CODE_OK;
	struct drld_envoy_stat *stat = stats_for(d, q, dq, p);
	if (stat != NULL)
		drld_envoy_stats_count(stat, p->hits, p->over, p->shadowed,
				       lim ? p->r.limit : 0,
				       lim ? p->r.remaining : 0);
	return DRLD_ENVOY_OK;
}

/* Decide plan p (descriptor dq) into status st, blocking in the store. */
static enum drld_envoy_outcome decide_one(
	struct drld *d, const struct drld_envoy_request *q,
	const struct drld_envoy_descriptor *dq, struct plan *p,
	struct drld_envoy_status *st, char *msg, size_t n)
{
	drl_limiter *lim;
	char *key;
	size_t keylen = 0;
	drl_error err = {0};
	int rc = 0;
	enum drld_envoy_outcome o =
		begin_one(q, dq, p, st, &lim, &key, &keylen, msg, n);
	if (o != DRLD_ENVOY_OK)
		return o;
	if (lim != NULL) {
		rc = drl_allow(lim, key, keylen, (int64_t)p->hits, &p->r, &err);
		free(key);
	}
	return end_one(d, q, dq, p, st, lim, rc, &err, msg, n);
}

/* The RateLimit-* headers, as envoyproxy/ratelimit picks them: the
 * status with the least remaining, an over-limit one before any. */
static void headers(struct drld_envoy_answer *a, size_t n)
{
	const struct drld_envoy_status *min = NULL;

	for (size_t i = 0; i < n; i++) {
		const struct drld_envoy_status *s = &a->statuses[i];
		if (!s->has_limit)
			continue;
		if (s->code == DRLD_ENVOY_CODE_OVER_LIMIT ||
		    ((min == NULL || s->remaining < min->remaining) &&
		     (min == NULL || min->code != DRLD_ENVOY_CODE_OVER_LIMIT)))
			min = s;
	}
	if (min == NULL)
		return;
	a->headers = true;
	a->header_limit = min->requests_per_unit;
	a->header_remaining = min->remaining;
	a->header_reset_s = (min->reset_us + 999999) / 1000000;
}

/* The start of every call: check q, then plan each descriptor (*plans
 * calloc'd, the config held in *c). */
static enum drld_envoy_outcome prepare(struct drld *d,
				       const struct drld_envoy_request *q,
				       struct drld_envoy_answer *a,
				       struct plan **plans,
				       struct drld_envoy_config **c, char *msg,
				       size_t n)
{
	enum drld_envoy_outcome o = check(q, msg, n);

	*plans = NULL;
	*c = NULL;
	a->overall = DRLD_ENVOY_CODE_OK;
	a->headers = false;
	if (o == DRLD_ENVOY_OK &&
	    (*plans = calloc(q->ndescriptors, sizeof **plans)) == NULL)
		o = refuse(DRLD_ENVOY_INTERNAL, msg, n, "out of memory");
	if (o == DRLD_ENVOY_OK) {
		*c = drld_envoy_acquire(&d->envoy);
		const struct drld_envoy_domain *dom =
			*c ? drld_envoy_config_domain(*c, q->domain,
						      q->domainlen)
			   : NULL;
		o = plan_all(d, q, dom, *plans, msg, n);
	}
	return o;
}

/* Let go of q's plans (the ad-hoc limiters they hold); NULL: none. */
static void plans_release(const struct drld_envoy_request *q,
			  struct plan *plans)
{
	for (size_t i = 0; plans != NULL && i < q->ndescriptors; i++)
		if (plans[i].ref != NULL)
			drld_adhoc_put(plans[i].ref);
	free(plans);
}

/* The end of every call (o: how deciding went): the overall code,
 * headers and --shadow, the plans let go, the outcome counted. */
static enum drld_envoy_outcome finish(struct drld *d,
				      const struct drld_envoy_request *q,
				      struct drld_envoy_answer *a,
				      struct plan *plans,
				      struct drld_envoy_config *c,
				      enum drld_envoy_outcome o)
{
	for (size_t i = 0; o == DRLD_ENVOY_OK && i < q->ndescriptors; i++)
		if (a->statuses[i].code == DRLD_ENVOY_CODE_OVER_LIMIT)
			a->overall = DRLD_ENVOY_CODE_OVER_LIMIT;
	if (o == DRLD_ENVOY_OK && d->envoy_headers)
		headers(a, q->ndescriptors);
	if (o == DRLD_ENVOY_OK && a->overall == DRLD_ENVOY_CODE_OVER_LIMIT) {
		o = DRLD_ENVOY_OVER_LIMIT;
		if (d->envoy_shadow) {
			a->overall = DRLD_ENVOY_CODE_OK;
			drld_envoy_stats_global_shadow(d->envoy_stats);
		}
	}
	plans_release(q, plans);
	a->hold = c; /* the statuses' names live in c */
	drld_envoy_stats_call(d->envoy_stats, o);
	return o;
}

/* The descriptors of q whose plan asks a limiter or is over without
 * asking (requests_per_unit 0). */
static size_t limited(const struct drld_envoy_request *q,
		      const struct plan *plans)
{
	size_t k = 0;
	for (size_t i = 0; i < q->ndescriptors; i++)
		k += plans[i].applies && !plans[i].unlimited;
	return k;
}

/* All or nothing, first step: ask plan p's limiter (descriptor dq) with
 * cost 0, which counts nothing, into st and p->r; p->peek_over says
 * whether its hits would be over. */
static enum drld_envoy_outcome peek_one(struct drld *d,
					const struct drld_envoy_request *q,
					const struct drld_envoy_descriptor *dq,
					struct plan *p,
					struct drld_envoy_status *st, char *msg,
					size_t n)
{
	drl_limiter *lim;
	char *key;
	size_t keylen = 0;
	drl_error err = {0};
	enum drld_envoy_outcome o =
		begin_one(q, dq, p, st, &lim, &key, &keylen, msg, n);
	if (o != DRLD_ENVOY_OK)
		return o;
	if (lim == NULL) { /* none, unlimited, or requests_per_unit 0 */
		p->peek_over = p->over;
		return DRLD_ENVOY_OK;
	}
	int rc = drl_allow(lim, key, keylen, 0, &p->r, &err);
	free(key);
	if (rc != 0)
		return end_one(d, q, dq, p, st, lim, rc, &err, msg, n);
	p->peek_over = p->hits > 0 && (p->r.remaining < 0 ||
				       (uint64_t)p->r.remaining < p->hits);
	return DRLD_ENVOY_OK;
}

/*
 * --stop-cache-key-increment-when-overlimit: q's descriptors are counted
 * all or nothing. Each limit is first asked with cost 0; when every one
 * would take its hits, each is decided (and counted) as usual; when one
 * would not, only those that would not are decided (denied: a denial
 * counts nothing) and the others answer what the first step saw, counting
 * nothing. The two steps are not one atomic step: a limit that another
 * call fills between them is denied in the second, after the ones before
 * it were counted (envoyproxy/ratelimit's GET, then INCRBY, is the same);
 * no limit ever admits past its own bound.
 */
static enum drld_envoy_outcome decide_together(
	struct drld *d, const struct drld_envoy_request *q,
	struct drld_envoy_answer *a, struct plan *plans, char *msg, size_t n)
{
	enum drld_envoy_outcome o = DRLD_ENVOY_OK;
	bool any_over = false;

	for (size_t i = 0; o == DRLD_ENVOY_OK && i < q->ndescriptors; i++) {
		o = peek_one(d, q, &q->descriptors[i], &plans[i],
			     &a->statuses[i], msg, n);
		any_over = any_over || plans[i].peek_over;
	}
	for (size_t i = 0; o == DRLD_ENVOY_OK && i < q->ndescriptors; i++) {
		struct plan *p = &plans[i];
		const drl_limiter *lim = plan_limiter(p);
		if (!any_over || p->peek_over || lim == NULL)
			o = decide_one(d, q, &q->descriptors[i], p,
				       &a->statuses[i], msg, n);
		else /* the first step's answer; nothing counted */
			o = end_one(d, q, &q->descriptors[i], p,
				    &a->statuses[i], lim, 0, NULL, msg, n);
	}
	return o;
}

enum drld_envoy_outcome drld_envoy_decide(struct drld *d,
					  const struct drld_envoy_request *q,
					  struct drld_envoy_answer *a,
					  char *msg, size_t n)
{
	struct drld_envoy_config *c;
	struct plan *plans;
	enum drld_envoy_outcome o = prepare(d, q, a, &plans, &c, msg, n);

	if (o == DRLD_ENVOY_OK && d->envoy_stop_increment &&
	    limited(q, plans) > 1)
		o = decide_together(d, q, a, plans, msg, n);
	else
		for (size_t i = 0; o == DRLD_ENVOY_OK && i < q->ndescriptors;
		     i++)
			o = decide_one(d, q, &q->descriptors[i], &plans[i],
				       &a->statuses[i], msg, n);
	return finish(d, q, a, plans, c, o);
}

/* ---- a call decided through the async API ------------------------------- */

/* One descriptor of a started call, and its store call if it has one. */
struct slot {
	struct drld_envoy_call *call;
	size_t i;
	drl_limiter *lim; /* NULL: decided at start, no store call */
	int rc;           /* the store call's (or its start's) */
	drl_error err;
};

struct drld_envoy_call {
	struct drld *d;
	const struct drld_envoy_request *q;
	struct drld_envoy_answer *a;
	struct plan *plans;
	struct drld_envoy_config *c;
	drld_envoy_done_fn done;
	void *arg;
	/* How starting went: o_start, and the descriptors begun (the ones
	 * after a failure are not, as the blocking path stops there). */
	enum drld_envoy_outcome o_start;
	size_t begun;
	/* store calls in flight, plus 1 while the starter starts them:
	 * whoever brings it to 0 ends the call */
	atomic_size_t left;
	char msg[512];
	struct slot slots[]; /* q->ndescriptors */
};

/* Every store call of `call` is over: each status in descriptor order
 * (the first failure ends it, as in drld_envoy_decide), the outcome,
 * done(). */
static void call_end(struct drld_envoy_call *call)
{
	const struct drld_envoy_request *q = call->q;
	enum drld_envoy_outcome o = DRLD_ENVOY_OK;

	for (size_t i = 0; o == DRLD_ENVOY_OK && i < call->begun; i++) {
		struct slot *sl = &call->slots[i];
		o = end_one(call->d, q, &q->descriptors[i], &call->plans[i],
			    &call->a->statuses[i], sl->lim, sl->rc, &sl->err,
			    call->msg, sizeof call->msg);
	}
	if (o == DRLD_ENVOY_OK)
		o = call->o_start; /* its message is in call->msg */
	o = finish(call->d, q, call->a, call->plans, call->c, o);
	call->done(call->arg, o, call->msg);
	free(call);
}

static void call_release(struct drld_envoy_call *call)
{
	if (atomic_fetch_sub(&call->left, 1) == 1)
		call_end(call);
}

static void slot_decided(drl_async *as, int rc, const drl_result *r,
			 const drl_error *err, void *arg)
{
	(void)as;
	struct slot *sl = arg;
	sl->rc = rc;
	if (rc != 0)
		sl->err = *err;
	sl->call->plans[sl->i].r = *r;
	call_release(sl->call);
}

int drld_envoy_store_direct(struct drld *d)
{
	return d->store_direct;
}

int drld_envoy_start(struct drld *d, drl_async *as,
		     const struct drld_envoy_request *q,
		     struct drld_envoy_answer *a, drld_envoy_done_fn done,
		     void *arg)
{
	size_t nd = q->ndescriptors <= DRLD_ENVOY_DESCRIPTORS_MAX
			    ? q->ndescriptors
			    : 0; /* check() refuses it */
	struct drld_envoy_call *call =
		calloc(1, sizeof *call + nd * sizeof call->slots[0]);
	if (call == NULL)
		return -1;
	call->d = d;
	call->q = q;
	call->a = a;
	call->done = done;
	call->arg = arg;
	atomic_init(&call->left, 1);
	enum drld_envoy_outcome o = prepare(d, q, a, &call->plans, &call->c,
					    call->msg, sizeof call->msg);
	/* a limit the async API would hand to a worker, or several
	 * counted all or nothing (two steps, drld_envoy_decide): the
	 * caller's deciders take the whole call instead (nothing counted
	 * yet) */
	bool together = o == DRLD_ENVOY_OK && d->envoy_stop_increment &&
			limited(q, call->plans) > 1;
	for (size_t i = 0; o == DRLD_ENVOY_OK && i < q->ndescriptors; i++) {
		drl_limiter *l = plan_limiter(&call->plans[i]);
		if ((l != NULL && !drl_async_direct(l)) ||
		    (together && i == 0)) {
			plans_release(q, call->plans);
			drld_envoy_config_release(call->c);
			free(call);
			return 1;
		}
	}
	for (size_t i = 0; o == DRLD_ENVOY_OK && i < q->ndescriptors; i++) {
		struct slot *sl = &call->slots[i];
		struct plan *p = &call->plans[i];
		char *key;
		size_t keylen = 0;
		sl->call = call;
		sl->i = i;
		o = begin_one(q, &q->descriptors[i], p, &a->statuses[i],
			      &sl->lim, &key, &keylen, call->msg,
			      sizeof call->msg);
		if (o != DRLD_ENVOY_OK)
			break;
		call->begun = i + 1;
		if (sl->lim == NULL)
			continue;
		atomic_fetch_add(&call->left, 1);
		/* Once started, the slot is the callback's, which may run
		 * before the start returns: only a failed start (no
		 * callback) is written here. */
		drl_error serr = {0};
		int src = drl_async_allow(as, sl->lim, key, keylen,
					  (int64_t)p->hits, slot_decided, sl,
					  &serr);
		free(key);      /* the context copied it */
		if (src != 0) { /* not started: end_one reports it */
			sl->rc = src;
			sl->err = serr;
			atomic_fetch_sub(&call->left, 1);
			break;
		}
	}
	call->o_start = o;
	call_release(call);
	return 0;
}

void drld_envoy_not_decided(struct drld *d, enum drld_envoy_outcome o)
{
	drld_envoy_stats_call(d->envoy_stats, o);
}

void drld_envoy_shards(struct drld *d, unsigned n)
{
	drld_envoy_stats_shards(d->envoy_stats, n);
}

void drld_envoy_connection_dealt(struct drld *d, unsigned i)
{
	drld_envoy_stats_connection(d->envoy_stats, i);
}

void drld_envoy_connection_closed(struct drld *d, unsigned why)
{
	drld_envoy_stats_closed(d->envoy_stats, why);
}

void drld_envoy_answer_release(struct drld_envoy_answer *a)
{
	drld_envoy_config_release(a->hold);
	a->hold = NULL;
}
