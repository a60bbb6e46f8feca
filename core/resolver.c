/* The resolver's cache: see include/drl/resolver.h. */
#include <drl/resolver.h>

#include "internal.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#define MAX_KEYS_LIMIT ((size_t)1 << 24)

struct entry {
	struct entry *next;     /* in its bucket */
	TAILQ_ENTRY(entry) lru; /* the LRU list */
	uint64_t hash;
	int64_t expires; /* on the cache's clock */
	bool is_default;
	char *spec;
	size_t keylen;
	unsigned char key[];
};

struct drl_resolver {
	drl_resolver_options o;
	char *default_spec;
	pthread_mutex_t lock;
	/* under lock: */
	struct entry **buckets; /* nbuckets, a power of two */
	size_t nbuckets, count;
	TAILQ_HEAD(lru_list, entry) lru; /* newest first */
	uint64_t gen;                    /* grows at every invalidation */
	drl_resolver_stats stats;
};

static int fail(drl_error *err, int code, const char *msg)
{
	if (err != NULL) {
		err->code = code;
		snprintf(err->message, sizeof err->message, "%s", msg);
	}
	return code;
}

static int64_t now_of(const drl_resolver *r)
{
	return r->o.now_us ? r->o.now_us(r->o.now_arg) : drl_mono_us();
}

/* FNV-1a: spread for the table, not secrecy (a key chosen to collide
 * slows its own lookups, bounded by max_keys). */
static uint64_t hash_key(const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t h = UINT64_C(14695981039346656037);

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * UINT64_C(1099511628211);
	return h;
}

int drl_resolver_new(drl_resolver **out, const drl_resolver_options *opts,
		     drl_error *err)
{
	if (out == NULL || opts == NULL || opts->resolve == NULL)
		return fail(err, DRL_EINVAL,
			    "drl_resolver_new: out, opts and opts->resolve "
			    "are required");
	*out = NULL;
	if (opts->max_keys < 1 || opts->max_keys > MAX_KEYS_LIMIT)
		return fail(err, DRL_EINVAL,
			    "drl_resolver_new: max_keys must be 1 .. 2^24");
	if (opts->ttl_us < 1 || opts->ttl_us > DRL_TIME_MAX_US)
		return fail(err, DRL_EINVAL,
			    "drl_resolver_new: ttl_us must be 1 .. "
			    "DRL_TIME_MAX_US");
	if (opts->default_spec != NULL &&
	    (opts->default_spec[0] == '\0' ||
	     strlen(opts->default_spec) > DRL_RESOLVER_SPEC_MAX))
		return fail(err, DRL_EINVAL,
			    "drl_resolver_new: default_spec must be 1 .. "
			    "DRL_RESOLVER_SPEC_MAX bytes");
	drl_error why = {0};
	if (opts->default_spec != NULL &&
	    drl__policy_check(opts->default_spec, &why) != 0)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_resolver_new: default_spec is "
				     "refused: %s",
				     why.message);

	drl_resolver *r = calloc(1, sizeof *r);
	size_t nb = 16;
	while (nb < opts->max_keys)
		nb *= 2;
	if (r == NULL ||
	    (r->buckets = calloc(nb, sizeof *r->buckets)) == NULL ||
	    (opts->default_spec != NULL &&
	     (r->default_spec = strdup(opts->default_spec)) == NULL)) {
		if (r != NULL)
			free(r->buckets);
		free(r);
		return fail(err, DRL_ENOMEM, "out of memory");
	}
	r->o = *opts;
	r->o.default_spec = r->default_spec;
	r->nbuckets = nb;
	TAILQ_INIT(&r->lru);
	pthread_mutex_init(&r->lock, NULL);
	*out = r;
	return 0;
}

static void entry_free(struct entry *e)
{
	if (e != NULL)
		free(e->spec);
	free(e);
}

/* With the lock held: take e out of its bucket and the LRU list. */
static void unlink_entry(drl_resolver *r, struct entry *e)
{
	struct entry **p = &r->buckets[e->hash & (r->nbuckets - 1)];
	while (*p != e)
		p = &(*p)->next;
	*p = e->next;
	TAILQ_REMOVE(&r->lru, e, lru);
	r->count--;
}

/* With the lock held: e (unlinked) into its bucket and to the front of
 * the LRU list. */
static void link_newest(drl_resolver *r, struct entry *e)
{
	size_t b = e->hash & (r->nbuckets - 1);
	e->next = r->buckets[b];
	r->buckets[b] = e;
	r->count++;
	TAILQ_INSERT_HEAD(&r->lru, e, lru);
}

/* With the lock held: free every entry; the table and list are left
 * dangling (the caller empties or frees them). */
static void free_entries(drl_resolver *r)
{
	for (struct entry *e = TAILQ_FIRST(&r->lru), *next; e; e = next) {
		next = TAILQ_NEXT(e, lru);
		entry_free(e);
	}
}

static struct entry *lookup(drl_resolver *r, const void *key, size_t len,
			    uint64_t h)
{
	for (struct entry *e = r->buckets[h & (r->nbuckets - 1)]; e;
	     e = e->next)
		if (e->hash == h && e->keylen == len &&
		    memcmp(e->key, key, len) == 0)
			return e;
	return NULL;
}

void drl_resolver_free(drl_resolver *r)
{
	if (r == NULL)
		return;
	if (r->o.arg_free != NULL)
		r->o.arg_free(r->o.arg);
	free_entries(r);
	pthread_mutex_destroy(&r->lock);
	free(r->buckets);
	free(r->default_spec);
	free(r);
}

/* Copy s into spec (cap bytes) or DRL_ERANGE. */
static int give(const char *s, char *spec, size_t cap, drl_error *err)
{
	size_t n = strlen(s);
	if (n >= cap)
		return fail(err, DRL_ERANGE,
			    "drl_resolver_get: the spec does not fit in cap "
			    "bytes");
	memcpy(spec, s, n + 1);
	return 0;
}

/* With the lock held: list key's answer (unless an invalidation came
 * since gen), evicting the least recently used beyond max_keys. */
static void store(drl_resolver *r, const void *key, size_t len, uint64_t h,
		  const char *spec, bool is_default, uint64_t gen)
{
	if (gen != r->gen)
		return;
	struct entry *e = lookup(r, key, len, h);
	if (e != NULL) {
		unlink_entry(r, e);
		entry_free(e);
	}
	if ((e = calloc(1, sizeof *e + len)) == NULL ||
	    (e->spec = strdup(spec)) == NULL) {
		free(e);
		return; /* not cached: asked again next time */
	}
	memcpy(e->key, key, len);
	e->keylen = len;
	e->hash = h;
	e->is_default = is_default;
	e->expires = now_of(r) + r->o.ttl_us;
	while (r->count >= r->o.max_keys) {
		struct entry *old = TAILQ_LAST(&r->lru, lru_list);
		unlink_entry(r, old);
		entry_free(old);
		r->stats.evictions++;
	}
	link_newest(r, e);
}

int drl_resolver_get(drl_resolver *r, const void *key, size_t keylen,
		     char *spec, size_t cap, int *is_default, drl_error *err)
{
	if (r == NULL || spec == NULL)
		return fail(err, DRL_EINVAL,
			    "drl_resolver_get: resolver and spec are required");
	if (key == NULL || keylen < 1 || keylen > DRL_KEY_MAX)
		return fail(
			err, DRL_EINVAL,
			"drl_resolver_get: a key is 1 .. DRL_KEY_MAX bytes");
	uint64_t h = hash_key(key, keylen);
	int rc;

	pthread_mutex_lock(&r->lock);
	struct entry *e = lookup(r, key, keylen, h);
	if (e != NULL && now_of(r) < e->expires) {
		r->stats.hits++;
		unlink_entry(r, e); /* to the front */
		link_newest(r, e);
		rc = give(e->spec, spec, cap, err);
		if (rc == 0 && is_default != NULL)
			*is_default = e->is_default;
		pthread_mutex_unlock(&r->lock);
		return rc;
	}
	uint64_t gen = r->gen;
	r->stats.calls++;
	pthread_mutex_unlock(&r->lock);

	/* the source, unlocked (it may take a round trip) */
	char buf[DRL_RESOLVER_SPEC_MAX + 2];
	drl_error serr = {0};
	buf[0] = '\0';
	rc = r->o.resolve(r->o.arg, key, keylen, buf, sizeof buf, &serr);
	buf[sizeof buf - 1] = '\0';
	bool ok = rc == 0 && buf[0] != '\0' &&
		  strlen(buf) <= DRL_RESOLVER_SPEC_MAX;
	/* A spec the library refuses (a typo in a plan's row) is a failure
	 * of the source too: it gets the default, cached as any failure,
	 * so one bad row costs one call per TTL, not one per request. */
	int refused = ok ? drl__policy_check(buf, &serr) : 0;
	if (refused)
		ok = false;
	if (!ok && r->default_spec == NULL) {
		pthread_mutex_lock(&r->lock);
		r->stats.failures++;
		pthread_mutex_unlock(&r->lock);
		if (refused)
			return drl_error_set(err, DRL_EINVAL,
					     "drl_resolver_get: the source's "
					     "spec is refused: %s",
					     serr.message);
		if (rc >= 0)
			return fail(err, DRL_ERANGE,
				    "drl_resolver_get: the source gave an "
				    "empty or too long spec");
		if (err != NULL)
			*err = serr, err->code = rc;
		return rc;
	}
	const char *s = ok ? buf : r->default_spec;
	pthread_mutex_lock(&r->lock);
	if (!ok)
		r->stats.failures++;
	store(r, key, keylen, h, s, !ok, gen);
	pthread_mutex_unlock(&r->lock);
	if (is_default != NULL)
		*is_default = !ok;
	return give(s, spec, cap, err);
}

void drl_resolver_invalidate(drl_resolver *r, const void *key, size_t keylen)
{
	if (r == NULL)
		return;
	pthread_mutex_lock(&r->lock);
	r->gen++;
	if (key == NULL) {
		free_entries(r);
		memset(r->buckets, 0, r->nbuckets * sizeof *r->buckets);
		TAILQ_INIT(&r->lru);
		r->count = 0;
	} else if (keylen >= 1 && keylen <= DRL_KEY_MAX) {
		struct entry *e = lookup(r, key, keylen, hash_key(key, keylen));
		if (e != NULL) {
			unlink_entry(r, e);
			entry_free(e);
		}
	}
	pthread_mutex_unlock(&r->lock);
}

int drl_resolver_stats_get(drl_resolver *r, drl_resolver_stats *out)
{
	if (r == NULL || out == NULL)
		return DRL_EINVAL;
	pthread_mutex_lock(&r->lock);
	*out = r->stats;
	pthread_mutex_unlock(&r->lock);
	return 0;
}
