/*
 * drld's config file (JSON; docs/drld.md, "Config file"):
 *
 *   {"store": "redis://127.0.0.1:6379",            optional
 *    "rules": {"NAME": {"limit": "SPEC",            required
 *                       "key": "TEMPLATE",          default "{key}"
 *                       "on_error": "deny|allow|local",     optional
 *                       "shadow": true|false,               optional
 *                       "limits_from": {...}}},             optional
 *    "protect": [{"prefix": "/api/", "rule": "NAME"}]}
 *
 * limits_from gives the rule a limit per key (docs/drld.md, "Limits per
 * key"): the spec for the value of the template "by" (default: the
 * rule's key) from a map file, {"map": "FILE"} (a JSON object of value
 * to spec, read again with the config), or from a Redis hash,
 * {"redis": "URI", "hash": "NAME", "ttl_ms": N, "max_keys": N} (the
 * library's resolver, include/drl/resolver.h); "limit" is the default,
 * for a value with no spec. Each spec gets the rule's on_error and
 * shadow and counts behind the rule's prefix, so a key whose spec changes
 * keeps its count.
 *
 * A config is loaded into an immutable, reference-counted snapshot: every
 * field is checked (unknown fields, names, specs through drl_limiter_new,
 * templates, protect entries) and each rule gets its limiter on the
 * shared store. A request holds a reference from start to end; a SIGHUP
 * reload swaps a new snapshot in, and the old one is freed by whoever
 * drops its last reference (docs/drld.md, "Reload").
 */
#ifndef DRLD_CONFIG_H
#define DRLD_CONFIG_H

#include <drl/drl.h>

#include <stdbool.h>

#include "limit.h"
#include "metrics.h"
#include "slot.h"
#include "template.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

/* Most rules and protect entries in one config. */
#define DRLD_RULES_MAX 256
#define DRLD_PROTECT_MAX 256
/* Longest protected prefix. */
#define DRLD_PREFIX_MAX 1024
/* Longest config error message. */
#define DRLD_CONFIG_MSG_MAX 768

struct drld_per_key; /* config.c's: limits_from */

struct drld_rule {
	char name[DRLD_RULE_NAME_MAX + 1];
	struct drld_template *key;
	struct drld_limit limit;      /* the default with limits_from */
	struct drld_per_key *per_key; /* NULL: one limit for every key */
};

/* Most distinct specs one rule's limits_from makes limiters of: a map's
 * beyond it is refused at load; a Redis hash's beyond it decide by the
 * rule's default limit. */
#define DRLD_RULE_SPECS_MAX 64

struct drld_protect {
	char *prefix;
	size_t len;
	const struct drld_rule *rule;
};

struct drld_config {
	atomic_size_t refs;
	char *store;             /* the file's "store", or NULL */
	struct drld_rule *rules; /* sorted by name */
	size_t nrules;
	struct drld_protect *protect; /* longest prefix first */
	size_t nprotect;
};

/* Read the config file at `path` as JSON and return its "store" (a
 * malloc'd copy, NULL when absent) in *store, for opening the store
 * before the rules are built. Returns 0, or -1 with msg filled. */
int drld_config_peek_store(const char *path, char **store, char *msg, size_t n);

/* Load the config file at `path` into a snapshot holding one reference,
 * with each rule's limiter on `store` counting into `metrics`. Each
 * rule's keys are behind a prefix of its own, "drld:rule:NAME:", on every
 * store: a rule's state is named by the rule, not by its limit (a counter
 * keeps counting when the limit changes, docs/algorithms.md), so two
 * rules never count into one key; drld's memory store also bounds keys
 * per prefix (DRLD_LIMIT_PREFIX_MAX). path NULL
 * gives an empty config (no rules). Returns 0, or -1 with a message in
 * msg (n bytes) that names the file, the rule or entry, and the problem. */
int drld_config_load(struct drld_config **out, const char *path,
		     drl_store *store, struct drld_metrics *metrics, char *msg,
		     size_t n);

/* Drop a reference; the last one frees the snapshot and its limiters.
 * NULL is a no-op. */
void drld_config_release(struct drld_config *c);

/* The rule called `name`, or NULL. */
const struct drld_rule *drld_config_rule(const struct drld_config *c,
					 const char *name);
/* The limit rule r decides request p by: with limits_from, the spec of
 * p's value of "by" (its default when there is none, or it cannot be
 * had: the source failed, a bad spec, DRLD_RULE_SPECS_MAX reached);
 * else the rule's own. Never NULL; valid while the snapshot is held. */
const struct drld_limit *drld_rule_limit(const struct drld_rule *r,
					 const struct drld_request_parts *p);
/* The rule protecting `path` (the longest matching prefix), or NULL. */
const struct drld_rule *drld_config_protects(const struct drld_config *c,
					     const char *path);

/* Where the current snapshot lives: a slot (slot.h) of drld_configs.
 * drld_config_slot_init(s, c) starts it with c (taking over c's
 * reference); drld_config_acquire(s) is a new reference to the current
 * snapshot, to release when done; drld_config_swap(s, c) makes c (and its
 * reference) current and drops the old snapshot's, so it is freed when
 * its last request finishes; drld_config_slot_fini(s) drops the slot's
 * reference and destroys the lock. */
DRLD_SLOT_TYPED(drld_config, struct drld_config, drld_config_release)

#endif /* DRLD_CONFIG_H */
