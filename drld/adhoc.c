/* The bounded, least-recently-used table of ad-hoc limiters: see adhoc.h. */
#include "adhoc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct drld_adhoc_ref {
	atomic_size_t refs; /* the table's (while listed) + each holder's */
	struct drld_limit limit;
	/* under the table's lock: */
	uint64_t hash;
	uint64_t used;               /* tick of the last lookup */
	struct drld_adhoc_ref *next; /* in its bucket */
	drl_store *store;
	const char *prefix; /* in text after spec, or NULL */
	char spec[];
};

struct drld_adhoc {
	pthread_mutex_t lock;
	drl_store *store;
	struct drld_rule_stats *stats;
	size_t max, count, nbuckets; /* nbuckets: a power of two */
	uint64_t tick;
	uint64_t evictions;
	struct drld_adhoc_ref **buckets;
};

/* FNV-1a: the table only needs spread, not secrecy (at most max entries;
 * a colliding client slows its own lookups down). */
static uint64_t hash_spec(const char *s, const char *prefix)
{
	uint64_t h = UINT64_C(14695981039346656037);

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
	for (s = prefix; s != NULL; s = *s ? s + 1 : NULL)
		h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
	return h;
}

/* Whether entry e is the limiter of spec behind prefix on store. */
static bool same(const struct drld_adhoc_ref *e, drl_store *store,
		 const char *prefix, const char *spec, uint64_t h)
{
	return e->hash == h && e->store == store &&
	       strcmp(e->spec, spec) == 0 &&
	       (e->prefix == NULL
			? prefix == NULL
			: prefix != NULL && strcmp(e->prefix, prefix) == 0);
}

int drld_adhoc_new(struct drld_adhoc **out, drl_store *store, size_t max,
		   struct drld_rule_stats *stats)
{
	struct drld_adhoc *a = calloc(1, sizeof *a);
	size_t nb = 16;

	while (nb < 2 * max)
		nb *= 2;
	if (a == NULL ||
	    (a->buckets = calloc(nb, sizeof *a->buckets)) == NULL) {
		free(a);
		return -1;
	}
	pthread_mutex_init(&a->lock, NULL);
	a->store = store;
	a->stats = stats;
	a->max = max;
	a->nbuckets = nb;
	*out = a;
	return 0;
}

static void entry_free(struct drld_adhoc_ref *e)
{
	drld_limit_fini(&e->limit);
	free(e);
}

void drld_adhoc_put(struct drld_adhoc_ref *r)
{
	if (r != NULL &&
	    atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) == 1)
		entry_free(r);
}

void drld_adhoc_free(struct drld_adhoc *a)
{
	if (a == NULL)
		return;
	for (size_t i = 0; i < a->nbuckets; i++)
		for (struct drld_adhoc_ref *e = a->buckets[i], *next; e;
		     e = next) {
			next = e->next;
			drld_adhoc_put(e);
		}
	pthread_mutex_destroy(&a->lock);
	free(a->buckets);
	free(a);
}

/* With the lock held: the entry of spec behind prefix on store (hash h)
 * with a new reference and its use recorded, or NULL. */
static struct drld_adhoc_ref *find(struct drld_adhoc *a, drl_store *store,
				   const char *prefix, const char *spec,
				   uint64_t h)
{
	for (struct drld_adhoc_ref *e = a->buckets[h & (a->nbuckets - 1)]; e;
	     e = e->next)
		if (same(e, store, prefix, spec, h)) {
			e->used = ++a->tick;
			atomic_fetch_add_explicit(&e->refs, 1,
						  memory_order_relaxed);
			return e;
		}
	return NULL;
}

/* With the lock held: unlist the least recently used entry and return it
 * (the caller drops the table's reference after unlocking). */
static struct drld_adhoc_ref *evict(struct drld_adhoc *a)
{
	struct drld_adhoc_ref **victim = NULL;

	for (size_t i = 0; i < a->nbuckets; i++)
		for (struct drld_adhoc_ref **p = &a->buckets[i]; *p;
		     p = &(*p)->next)
			if (victim == NULL || (*p)->used < (*victim)->used)
				victim = p;
	if (victim == NULL)
		return NULL;
	struct drld_adhoc_ref *e = *victim;
	*victim = e->next;
	a->count--;
	a->evictions++;
	return e;
}

/* A new entry for spec with its limiter, holding one reference for the
 * table and one for the caller. */
static int make(struct drld_adhoc *a, drl_store *store, const char *prefix,
		const char *spec, uint64_t h, struct drld_adhoc_ref **out,
		drl_error *err)
{
	size_t len = strlen(spec), plen = prefix ? strlen(prefix) + 1 : 0;
	struct drld_adhoc_ref *e = calloc(1, sizeof *e + len + 1 + plen);

	if (e == NULL) {
		snprintf(err->message, sizeof err->message, "out of memory");
		return err->code = DRL_ENOMEM;
	}
	int rc = drld_limit_init(&e->limit, store, spec, prefix, "default",
				 a->stats, err);
	if (rc != 0) {
		free(e);
		return rc;
	}
	memcpy(e->spec, spec, len + 1);
	if (prefix != NULL)
		e->prefix = memcpy(e->spec + len + 1, prefix, plen);
	e->store = store;
	e->hash = h;
	atomic_init(&e->refs, 2);
	*out = e;
	return 0;
}

/* Policy options a request may not give: they make the limiter hold
 * memory or a thread in drld (a near-cache table of up to 88 MiB and a
 * sync thread, a local fallback store of up to 1M keys), and --max-specs
 * such limiters would be the client's to size. An operator gives them in
 * a config rule. */
static const char *const process_options[] = {
	"block_on_exceed=", "near_cache=",    "near_cache_sync=",
	"near_cache_keys=", "on_error=local", NULL,
};

/* Refuse (DRL_EINVAL, err filled) a spec holding one of process_options;
 * anything else is left to drl_limiter_new() to judge. */
static int check_options(const char *spec, drl_error *err)
{
	for (const char *seg = spec; seg != NULL;) {
		const char *semi = strchr(seg, ';');
		size_t len = semi ? (size_t)(semi - seg) : strlen(seg);
		for (int i = 0; process_options[i] != NULL; i++) {
			size_t n = strlen(process_options[i]);
			if (len >= n &&
			    memcmp(seg, process_options[i], n) == 0) {
				snprintf(err->message, sizeof err->message,
					 "\"%.*s\" is not allowed in a "
					 "request's limit (it holds memory "
					 "in drld): give it in a config rule",
					 (int)(len > 64 ? 64 : len), seg);
				return err->code = DRL_EINVAL;
			}
		}
		seg = semi ? semi + 1 : NULL;
	}
	return 0;
}

int drld_adhoc_get(struct drld_adhoc *a, const char *spec,
		   struct drld_adhoc_ref **out, drl_error *err)
{
	return drld_adhoc_get_on(a, NULL, NULL, spec, out, err);
}

int drld_adhoc_get_on(struct drld_adhoc *a, drl_store *store,
		      const char *prefix, const char *spec,
		      struct drld_adhoc_ref **out, drl_error *err)
{
	if (store == NULL)
		store = a->store;
	uint64_t h = hash_spec(spec, prefix);
	struct drld_adhoc_ref *e, *mine = NULL, *old = NULL;

	if (a->max == 0) {
		snprintf(err->message, sizeof err->message,
			 "limits given in requests are disabled (drld "
			 "--max-specs 0): name a rule");
		return err->code = DRL_ENOTSUP;
	}
	if (strlen(spec) > DRLD_SPEC_MAX) {
		snprintf(err->message, sizeof err->message,
			 "a limit spec is at most %d bytes", DRLD_SPEC_MAX);
		return err->code = DRL_EINVAL;
	}
	pthread_mutex_lock(&a->lock);
	e = find(a, store, prefix, spec, h);
	pthread_mutex_unlock(&a->lock);
	if (e == NULL) {
		int rc = check_options(spec, err);
		if (rc != 0)
			return rc;
		/* made unlocked (the limiter may start a thread); another
		 * thread may list the same spec meanwhile: first one wins */
		rc = make(a, store, prefix, spec, h, &mine, err);
		if (rc != 0)
			return rc;
		pthread_mutex_lock(&a->lock);
		e = find(a, store, prefix, spec, h);
		if (e == NULL) {
			if (a->count >= a->max)
				old = evict(a);
			e = mine;
			e->used = ++a->tick;
			e->next = a->buckets[h & (a->nbuckets - 1)];
			a->buckets[h & (a->nbuckets - 1)] = e;
			a->count++;
			mine = NULL;
		}
		pthread_mutex_unlock(&a->lock);
		if (mine != NULL) /* lost the race: drop both references */
			entry_free(mine);
		drld_adhoc_put(old);
	}
	*out = e;
	return 0;
}

const struct drld_limit *drld_adhoc_limit(const struct drld_adhoc_ref *r)
{
	return &r->limit;
}

void drld_adhoc_gauges(struct drld_adhoc *a, struct drld_gauges *g)
{
	pthread_mutex_lock(&a->lock);
	g->adhoc_limiters = a->count;
	g->adhoc_evictions = a->evictions;
	pthread_mutex_unlock(&a->lock);
}
