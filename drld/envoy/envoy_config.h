/*
 * The configuration of envoyproxy/ratelimit, read as it is (docs/envoy.md):
 * a directory of YAML files, one domain each,
 *
 *   domain: messaging
 *   descriptors:
 *     - key: message_type           required
 *       value: marketing            optional; "*" in it is a wildcard
 *       rate_limit:                 optional
 *         unit: day                 second minute hour day week month year
 *         requests_per_unit: 5      0 .. 1000000000 (0: always over limit)
 *         unlimited: true           instead of unit and requests_per_unit
 *         name: n                   replaces: [{name: n}]
 *         algorithm: sliding_window drld's: any libdrl algorithm and its
 *                                   options ("token_bucket,burst=20"),
 *                                   default fixed_window
 *         on_error: deny            drld's: deny, allow or local
 *       shadow_mode: true           detailed_metric, value_to_metric,
 *                                   share_threshold: as there
 *       descriptors: [...]          nested, same form
 *
 * parsed with libyaml and checked whole: every error names the file, the
 * line and the key. A loaded config is an immutable, reference-counted
 * snapshot with one libdrl limiter per rate_limit, swapped in on SIGHUP
 * as drld's own config is (config.h).
 *
 * Matching is envoyproxy/ratelimit's (its src/config/config_impl.go): a
 * request descriptor's entries walk the nested descriptors level by level,
 * each entry matching key and value exactly first, then a wildcard value,
 * then the key alone; the limit of the node the last entry reaches
 * applies (a limit at a shallower level does not).
 */
#ifndef DRLD_ENVOY_CONFIG_H
#define DRLD_ENVOY_CONFIG_H

#include <drl/drl.h>

#include "envoy_service.h"
#include "envoy_stats.h"
#include "slot.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest config error message. */
#define DRLD_ENVOY_MSG_MAX 1024
/* Bounds of one config: files, descriptors in all, nesting depth. */
#define DRLD_ENVOY_FILES_MAX 1024
#define DRLD_ENVOY_NODES_MAX 65536
#define DRLD_ENVOY_DEPTH_MAX 32

/* RateLimitResponse.RateLimit.Unit (envoy_rls.proto). */
enum drld_envoy_unit {
	DRLD_ENVOY_UNKNOWN = 0,
	DRLD_ENVOY_SECOND = 1,
	DRLD_ENVOY_MINUTE = 2,
	DRLD_ENVOY_HOUR = 3,
	DRLD_ENVOY_DAY = 4,
	DRLD_ENVOY_MONTH = 5,
	DRLD_ENVOY_YEAR = 6,
	DRLD_ENVOY_WEEK = 7,
};

/* Seconds in a unit (a month 30 days, a year 365, as envoyproxy/ratelimit
 * counts them), 0 for an unknown unit. */
int64_t drld_envoy_unit_seconds(int unit);

/* One rate_limit block. */
struct drld_envoy_limit {
	char *name; /* rate_limit.name, or NULL */
	char **replaces;
	size_t nreplaces;
	uint32_t requests_per_unit;
	int unit; /* enum drld_envoy_unit */
	bool unlimited;
	bool shadow;          /* shadow_mode */
	bool detailed_metric; /* metrics by the request's values */
	drl_limiter *lim; /* NULL when unlimited or requests_per_unit is 0 */
	/* how a request's `limit` override of this rule is decided (set
	 * with lim): the spec "ALG:N/PERIOD" + ov_tail on `store` behind
	 * ov_prefix (NULL: the default), so it counts on this rule's state
	 * (its algorithm and options, its on_error but local, no
	 * block_on_exceed or shadow_mode) */
	char *ov_alg, *ov_tail, *ov_prefix;
	drl_store *store;
	char *path; /* "key_value.key": the metric's descriptor */
	struct drld_envoy_stat *stats; /* by path */
};

/* One descriptor of the config. */
struct drld_envoy_node {
	char *key;
	char *value;          /* NULL: any value */
	bool wildcard;        /* value holds '*' */
	bool share_threshold; /* wildcard matches share one counter */
	bool value_to_metric;
	struct drld_envoy_limit *limit; /* NULL: none */
	struct drld_envoy_node *children;
	size_t nchildren;
};

struct drld_envoy_domain {
	char *name;
	struct drld_envoy_node root; /* its descriptors are the children */
};

struct drld_envoy_config {
	atomic_size_t refs;
	struct drld_envoy_domain *domains; /* sorted by name */
	size_t ndomains;
	size_t nfiles;
};

/* drld_envoy_config_load()'s flags. */
enum {
	/* each rate_limit's keys behind a prefix of its own,
	 * "drld:envoy:HASH:" (HASH: 16 hex digits of FNV-1a over its domain,
	 * a 0 byte and its descriptor path; drld's default memory store
	 * bounds keys per prefix), else the library's default prefix */
	DRLD_ENVOY_OWN_PREFIX = 1,
	/* a domain in several files is one domain: the files' top-level
	 * descriptors together, a composite key (key and value) twice
	 * refused (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG); without it
	 * a domain in two files is refused, naming both */
	DRLD_ENVOY_MERGE_DOMAINS = 2
};

/* Load every *.yaml and *.yml file of directory `dir` (not dot files),
 * making each rate_limit's limiter on `store` and its counters in
 * `stats`, as `flags` (DRLD_ENVOY_*) say. Returns 0 with a snapshot
 * holding one reference, or -1 with a message in msg (n bytes):
 * "FILE:LINE: KEY: problem". */
int drld_envoy_config_load(struct drld_envoy_config **out, const char *dir,
			   drl_store *store, unsigned flags,
			   struct drld_envoy_stats *stats, char *msg, size_t n);

/* A test's hook into drld_envoy_config_load() (NULL in drld): called
 * with DRLD_ENVOY_HOOK_READ and i after the load read the i-th file of
 * the directory (sorted), and with DRLD_ENVOY_HOOK_CHECK and i before it
 * looks at the i-th file again to see that nothing changed meanwhile. A
 * test changes the directory there, at exactly those moments
 * (tests/unit/test_envoy_config.c). */
enum { DRLD_ENVOY_HOOK_READ, DRLD_ENVOY_HOOK_CHECK };
extern void (*drld_envoy_load_hook)(int step, size_t i);

/* Drop a reference; the last frees the snapshot. NULL is a no-op. */
void drld_envoy_config_release(struct drld_envoy_config *c);

/* The domain called `name` (len bytes), or NULL. */
const struct drld_envoy_domain *drld_envoy_config_domain(
	const struct drld_envoy_config *c, const char *name, size_t len);

/* What a descriptor matched: the limit (NULL: none), and per entry
 * whether its store key uses the config's wildcard pattern instead of
 * its value (share_threshold), and what its metric name shows after the
 * key (mvalue: mlen bytes, NULL for nothing) when the name is built from
 * the request (by_request: value_to_metric on the path, or a
 * detailed_metric limit, which shows every value). */
struct drld_envoy_match {
	const struct drld_envoy_limit *limit;
	const char *shared[DRLD_ENVOY_DEPTH_MAX]; /* pattern, or NULL */
	const char *mvalue[DRLD_ENVOY_DEPTH_MAX];
	size_t mlen[DRLD_ENVOY_DEPTH_MAX];
	bool by_request;
};

/* Match the n entries (at most DRLD_ENVOY_DEPTH_MAX) of one descriptor
 * in domain d, as envoyproxy/ratelimit does (above). */
void drld_envoy_match(const struct drld_envoy_domain *d,
		      const struct drld_envoy_entry *e, size_t n,
		      struct drld_envoy_match *m);

/* Where the current snapshot lives: a slot (slot.h) of
 * drld_envoy_configs, cur NULL without --envoy-config. As config.h's. */
DRLD_SLOT_TYPED(drld_envoy, struct drld_envoy_config, drld_envoy_config_release)

#endif /* DRLD_ENVOY_CONFIG_H */
