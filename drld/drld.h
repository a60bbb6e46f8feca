/*
 * drld — a rate-limit service on libdrl (docs/drld.md, docs/envoy.md).
 *
 * What the parts of drld share: the server's state, made by main.c and
 * read by both fronts, the HTTP one (http/) and Envoy's gRPC service
 * (envoy/). Everything here is shared by their threads: the store and
 * the limiters are thread-safe (docs/threading.md), the config is an
 * immutable snapshot behind a reference count (config.h), the ad-hoc
 * table has its own lock (adhoc.h), and the metrics are atomics
 * (metrics.h).
 */
#ifndef DRLD_DRLD_H
#define DRLD_DRLD_H

#include <drl/async.h>
#include <drl/drl.h>

#include "adhoc.h"
#include "config.h"
#include "metrics.h"

#include <stdbool.h>
#include <stddef.h>

struct drld_envoy_stats; /* envoy/envoy_stats.h */

struct drld {
	drl_store *store;
	/* drld's default memory:// store only: a store of its own for the
	 * limits clients choose (ad-hoc specs, gRPC overrides), so keys they
	 * fill it with cannot lock the configured limits out; else NULL */
	drl_store *adhoc_store;
	bool store_in_process; /* memory://: no call waits for the network */
	/* single decisions go to the store without a thread waiting
	 * (drl_async_direct(): Redis tx=lua on shared connections) */
	bool store_direct;
	struct drld_metrics *metrics;
	struct drld_rule_stats *adhoc_stats; /* rule="adhoc" */
	struct drld_adhoc *adhoc;
	struct drld_slot config; /* drld_configs */
	/* Envoy's rate limit service (docs/envoy.md): --envoy-config's
	 * snapshot (cur NULL without it), its counters, --shadow and
	 * --grpc-headers */
	struct drld_slot envoy;
	struct drld_envoy_stats *envoy_stats;
	bool envoy_shadow;
	bool envoy_headers;
	/* --stop-cache-key-increment-when-overlimit: a call's descriptors
	 * counted all or nothing (envoy/envoy_service.h) */
	bool envoy_stop_increment;
};

#endif /* DRLD_DRLD_H */
