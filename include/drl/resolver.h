/*
 * libdrl — limits per key: a resolver gives the spec for a key.
 *
 * A multi-tenant program limits each customer by its own plan. A resolver
 * asks a source (a callback of the program's, or a Redis hash:
 * drl_resolver_redis_new()) for a key's spec, keeps the answers in a
 * least-recently-used cache for a time to live, and answers a default
 * spec when the source fails. The spec it gives is made into a limiter
 * as any other (drl_limiter_new()); a counter's state does not hold the
 * limit, so a key whose spec changes keeps what it used (docs/api.md,
 * "Limits per key").
 *
 * Conventions as drl.h's. A resolver is thread-safe: any number of
 * threads may call drl_resolver_get() and drl_resolver_invalidate() on one
 * resolver at once. The source is called without the resolver's lock
 * held, possibly by several threads at once.
 */
#ifndef DRL_RESOLVER_H
#define DRL_RESOLVER_H

#include <drl/drl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest spec a resolver gives, in bytes (without the NUL). */
#define DRL_RESOLVER_SPEC_MAX 1024

typedef struct drl_resolver drl_resolver;

/* A source: write the spec for key (keylen bytes) into spec (cap bytes,
 * NUL-terminated) and return 0; or return a negative DRL_E* code (err
 * may say why) and the resolver gives the default spec. A spec that is
 * empty, does not fit, or is one drl_limiter_new() would refuse (a typo
 * in a plan's row) is a failure too. */
typedef int (*drl_resolve_fn)(void *arg, const void *key, size_t keylen,
			      char *spec, size_t cap, drl_error *err);

typedef struct drl_resolver_options {
	drl_resolve_fn resolve; /* required */
	void *arg;              /* handed to resolve and arg_free */
	/* called once by drl_resolver_free(), first (may be NULL) */
	void (*arg_free)(void *arg);
	/* the spec given when the source fails; NULL: the failure is
	 * returned instead */
	const char *default_spec;
	size_t max_keys; /* the cache's size: 1 .. 2^24 */
	int64_t ttl_us;  /* how long an answer is kept: 1 .. DRL_TIME_MAX_US */
	/* the cache's clock, microseconds (NULL: drl_mono_us()); for
	 * tests, which move time by hand */
	int64_t (*now_us)(void *now_arg);
	void *now_arg;
} drl_resolver_options;

/* A resolver from *opts (copied; default_spec too). DRL_EINVAL for a
 * NULL out, opts or resolve, max_keys or ttl_us out of range, or a
 * default spec that is empty, longer than DRL_RESOLVER_SPEC_MAX, or one
 * drl_limiter_new() would refuse (the parser's message is in err). */
DRL_EXPORT int drl_resolver_new(drl_resolver **out,
				const drl_resolver_options *opts,
				drl_error *err);
/* Call arg_free, then free the resolver. No call may be running on it. */
DRL_EXPORT void drl_resolver_free(drl_resolver *r);

/* The spec for key (keylen bytes, 1..DRL_KEY_MAX) into spec (cap bytes,
 * NUL-terminated): the cached answer while younger than ttl_us, else the
 * source's (then cached), else the default spec (cached as well, so a
 * failing source is asked once per key per ttl_us). *is_default (may be
 * NULL) says whether the default was given. Returns 0; DRL_EINVAL for a
 * NULL resolver or spec, a bad key; DRL_ERANGE when the spec does not
 * fit in cap (DRL_RESOLVER_SPEC_MAX + 1 always does); the source's code
 * when it failed and there is no default (DRL_EINVAL, with the parser's
 * message, for a refused spec); DRL_ENOMEM. */
DRL_EXPORT int drl_resolver_get(drl_resolver *r, const void *key, size_t keylen,
				char *spec, size_t cap, int *is_default,
				drl_error *err);

/* Forget key's answer (keylen bytes), or every answer when key is NULL:
 * the next drl_resolver_get() asks the source. A get already asking the
 * source for it when this is called does not cache its answer. */
DRL_EXPORT void drl_resolver_invalidate(drl_resolver *r, const void *key,
					size_t keylen);

/* The resolver's counters (they only grow). */
typedef struct drl_resolver_stats {
	uint64_t hits;      /* answered from the cache */
	uint64_t calls;     /* the source asked */
	uint64_t failures;  /* the source failed */
	uint64_t evictions; /* answers dropped for room (LRU) */
} drl_resolver_stats;
DRL_EXPORT int drl_resolver_stats_get(drl_resolver *r, drl_resolver_stats *out);

/* A resolver whose source is the Redis hash `hash`: a key's spec is
 * HGET hash key; a missing field or a failing server is a failure (the
 * default spec). `uri` is a redis:// or redis+unix:// URI as for
 * drl_store_open() (host, port, password, db, timeout_ms; other options
 * are ignored). A change is told by PUBLISH on channel
 * "drl:resolver:" + hash with the changed key as the message ("*": every
 * key); every resolver listening drops that answer at once (a thread of
 * its own, subscribed; after losing the subscription it drops every
 * answer and subscribes again). opts as drl_resolver_new()'s, resolve,
 * arg and arg_free ignored. DRL_ENOTSUP in a build without hiredis. */
DRL_EXPORT int drl_resolver_redis_new(drl_resolver **out, const char *uri,
				      const char *hash,
				      const drl_resolver_options *opts,
				      drl_error *err);

#ifdef __cplusplus
}
#endif
#endif /* DRL_RESOLVER_H */
