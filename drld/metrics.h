/*
 * drld's counters: decisions, shadow denials and resets per rule, store
 * errors, HTTP responses by
 * status, reloads, and a latency histogram of the decisions, rendered in
 * the Prometheus text format (docs/drld.md, "Metrics").
 *
 * Every counter is a relaxed atomic: counting never takes a lock, and
 * rendering reads while requests count (a scrape sees each counter at
 * some instant, not all at one instant, as Prometheus expects).
 */
#ifndef DRLD_METRICS_H
#define DRLD_METRICS_H

#include <drl/drl.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Most distinct rule names counted since start (every config loaded adds
 * its names; counters are never dropped, so a rule that comes back after a
 * reload keeps counting where it stopped). */
#define DRLD_METRICS_RULES_MAX 1024
/* Longest rule name (config.h checks names against it). */
#define DRLD_RULE_NAME_MAX 64

/* The decision counters of one rule ("adhoc" for ad-hoc limits). */
struct drld_rule_stats {
	char name[DRLD_RULE_NAME_MAX + 1];
	atomic_uint_fast64_t allowed;
	atomic_uint_fast64_t denied;
	atomic_uint_fast64_t shadow_denied; /* shadow=1: would have denied */
	atomic_uint_fast64_t resets;        /* keys reset (POST /v1/reset) */
};

struct drld_metrics;

/* Gauges read from elsewhere at render time. */
struct drld_gauges {
	size_t adhoc_limiters;    /* ad-hoc limiters cached now */
	uint64_t adhoc_evictions; /* evicted since start */
	long requests_in_flight;  /* HTTP requests begun, not completed */
};

/* Make the counters, all zero. Returns 0 or -1 (out of memory). */
int drld_metrics_new(struct drld_metrics **out);
/* Free them; every drld_rule_stats pointer dies with them. */
void drld_metrics_free(struct drld_metrics *m);

/* The counters of rule `name` (at most DRLD_RULE_NAME_MAX bytes), made
 * on first use. Takes a mutex: call it when loading a config, not per
 * request. Returns NULL when DRLD_METRICS_RULES_MAX names exist already.
 * The pointer is valid until drld_metrics_free(). */
struct drld_rule_stats *drld_metrics_rule(struct drld_metrics *m,
					  const char *name);

/* Count one decision of a rule (as answered: a shadowed denial is
 * allowed). */
void drld_metrics_decision(struct drld_rule_stats *r, bool allowed);
/* Count one denial of a shadowed rule answered allowed (shadow=1). */
void drld_metrics_shadow_denial(struct drld_rule_stats *r);
/* Count one key reset on a rule. */
void drld_metrics_reset(struct drld_rule_stats *r);
/* Count one decision the store failed (answered by an on_error policy
 * or turned into a 503). */
void drld_metrics_store_error(struct drld_metrics *m);
/* Count one response drld's handlers sent, by HTTP status. */
void drld_metrics_http(struct drld_metrics *m, unsigned status);
/* Count one decision that took `us` microseconds. */
void drld_metrics_duration(struct drld_metrics *m, int64_t us);
/* Count one SIGHUP reload, valid (ok) or not. */
void drld_metrics_reload(struct drld_metrics *m, bool ok);

/* Add fn(f, arg) to what drld_metrics_render() writes, after drld's own
 * counters (the Envoy service's, docs/envoy.md). One at most; call it
 * before any request. */
void drld_metrics_extra(struct drld_metrics *m, void (*fn)(FILE *, void *),
			void *arg);

/* drld's second store (the limits clients choose, beside the default
 * memory://): its drl_store_stats are added to the store's in
 * drld_store_*_total. Call it before any request. */
void drld_metrics_second_store(struct drld_metrics *m, const drl_store *s);

/* Render every counter, the gauges and the stores' drl_store_stats as
 * Prometheus text (version 0.0.4) into a malloc'd buffer of *len bytes
 * (the caller frees it). Returns NULL when out of memory. */
char *drld_metrics_render(struct drld_metrics *m, const drl_store *store,
			  const struct drld_gauges *g, size_t *len);

#endif /* DRLD_METRICS_H */
