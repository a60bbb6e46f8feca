/*
 * Counters of the Envoy rate limit service, per domain and descriptor, as
 * envoyproxy/ratelimit keeps them (docs/envoy.md, "Metrics"): total hits,
 * over limit, near limit (80% of the limit), within limit and shadow mode
 * (over limit, answered OK because the descriptor is in shadow_mode).
 *
 * A descriptor is named as envoyproxy/ratelimit names it: the path of the
 * config's descriptors ("message_type_marketing.to_number"), or with
 * detailed_metric / value_to_metric the request's own values, which a
 * client chooses: so the table is bounded (DRLD_ENVOY_STATS_MAX names
 * since start, each of at most DRLD_ENVOY_METRIC_NAME_MAX bytes: a longer
 * one is cut and a hash of it appended, envoy_service.c), and beyond it
 * the hits of a new name count under domain="_overflow",
 * descriptor="_overflow".
 *
 * Thread-safe: counters are relaxed atomics; one mutex guards the insertion
 * of a name (rules' names are looked up once per config load, detailed
 * names once per decision).
 */
#ifndef DRLD_ENVOY_STATS_H
#define DRLD_ENVOY_STATS_H

#include "envoy_service.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Most distinct (domain, descriptor) names counted since start. */
#define DRLD_ENVOY_STATS_MAX 4096

/* Longest descriptor name a request's values make (the domain's is cut
 * at 255 bytes): at most 4,096 x 256 bytes of names in all. */
#define DRLD_ENVOY_METRIC_NAME_MAX 256

struct drld_envoy_stat {
	char *domain;
	char *descriptor;
	atomic_uint_fast64_t total_hits;
	atomic_uint_fast64_t over_limit;
	atomic_uint_fast64_t near_limit;
	atomic_uint_fast64_t within_limit;
	atomic_uint_fast64_t shadow_mode;
};

struct drld_envoy_stats;

/* Make an empty table. Returns 0 or -1 (out of memory). */
int drld_envoy_stats_new(struct drld_envoy_stats **out);
/* Free it; every drld_envoy_stat pointer dies with it. NULL is a no-op. */
void drld_envoy_stats_free(struct drld_envoy_stats *s);

/* The counters of `descriptor` (len bytes) in `domain`, made on first
 * use; the "_overflow" counters once the table is full; NULL only when
 * out of memory. Valid until drld_envoy_stats_free(). */
struct drld_envoy_stat *drld_envoy_stats_get(struct drld_envoy_stats *s,
					     const char *domain,
					     const char *descriptor,
					     size_t len);

/* Count a decision of `hits` on a limit of `limit` requests that left
 * `remaining`: total hits; then over limit when denied, else within
 * limit, and near limit for the hits that landed above 80% of the limit
 * (as envoyproxy/ratelimit counts them). `shadow`: denied, answered OK. */
void drld_envoy_stats_count(struct drld_envoy_stat *st, uint64_t hits,
			    bool over, bool shadow, int64_t limit,
			    int64_t remaining);

/* Count one request answered OK by --shadow although over limit. */
void drld_envoy_stats_global_shadow(struct drld_envoy_stats *s);
/* Count one ShouldRateLimit call by its outcome (envoy_service.h). */
void drld_envoy_stats_call(struct drld_envoy_stats *s,
			   enum drld_envoy_outcome o);

/* Render the connections dealt to n shards (n <= DRLD_GRPC_POLLERS_MAX;
 * 0: none are dealt, none rendered). */
void drld_envoy_stats_shards(struct drld_envoy_stats *s, unsigned n);
/* Count one connection dealt to shard i (< n). */
void drld_envoy_stats_connection(struct drld_envoy_stats *s, unsigned i);

/* Count one connection closed undealt, for reason why (acceptor.h's
 * enum drld_closed_reason). */
void drld_envoy_stats_closed(struct drld_envoy_stats *s, unsigned why);

/* Write every counter in the Prometheus text format to f. */
void drld_envoy_stats_render(struct drld_envoy_stats *s, FILE *f);

#endif /* DRLD_ENVOY_STATS_H */
