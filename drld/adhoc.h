/*
 * Ad-hoc limits: the limiters for specs given in /v1/check bodies
 * ("limit": "token_bucket:100/1m"), one per distinct spec string, cached
 * in a table of at most `max` specs.
 *
 * Beyond `max`, the least recently used spec's limiter is evicted. That
 * loses no state: a limit's state lives in the store, under keys named by
 * the limit itself, so a limiter made again for the same spec continues
 * where the evicted one stopped. (What a limiter keeps in the process —
 * an on_error=local fallback store, a near cache — starts afresh.) An
 * evicted limiter still in use by a request is freed when that request
 * lets go of it: entries are reference-counted.
 *
 * Thread-safe: one mutex guards the table, held for a hash lookup (or an
 * insert) and never while a limiter is made, used or freed.
 */
#ifndef DRLD_ADHOC_H
#define DRLD_ADHOC_H

#include <drl/drl.h>

#include "limit.h"
#include "metrics.h"

#include <stddef.h>

/* Longest ad-hoc spec accepted. */
#define DRLD_SPEC_MAX 1024

struct drld_adhoc;
struct drld_adhoc_ref;

/* Make an empty table of at most `max` specs (0: ad-hoc limits are
 * refused), whose limiters live on `store` and count into `stats`.
 * Returns 0 or -1 (out of memory). */
int drld_adhoc_new(struct drld_adhoc **out, drl_store *store, size_t max,
		   struct drld_rule_stats *stats);
/* Free the table; no reference may be held any more. */
void drld_adhoc_free(struct drld_adhoc *a);

/* A reference to the limiter of `spec`, made on first use. Returns 0, or
 * DRL_EINVAL (a bad or too long spec; err says why), DRL_ENOTSUP (max is
 * 0), DRL_ENOMEM. */
int drld_adhoc_get(struct drld_adhoc *a, const char *spec,
		   struct drld_adhoc_ref **out, drl_error *err);
/* The same for a limiter on `store` (NULL: the table's) behind key
 * prefix `prefix` (NULL: the default): an Envoy `limit` override made
 * from a configured rule, counting on that rule's state. */
int drld_adhoc_get_on(struct drld_adhoc *a, drl_store *store,
		      const char *prefix, const char *spec,
		      struct drld_adhoc_ref **out, drl_error *err);
/* The limiter a reference holds; valid until drld_adhoc_put(). */
const struct drld_limit *drld_adhoc_limit(const struct drld_adhoc_ref *r);
/* Let go of a reference. */
void drld_adhoc_put(struct drld_adhoc_ref *r);

/* Fill g's ad-hoc gauges (specs cached now, evictions so far). */
void drld_adhoc_gauges(struct drld_adhoc *a, struct drld_gauges *g);

#endif /* DRLD_ADHOC_H */
