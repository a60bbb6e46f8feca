/*
 * A limiter as drld serves it: the library's limiter, the name its HTTP
 * headers use, the RateLimit-Policy value worked out once from its spec,
 * and the counters its decisions go to. Rules (config.h) and ad-hoc limits
 * (adhoc.h) both are one.
 *
 * Headers follow draft-ietf-httpapi-ratelimit-headers-10 (docs/drld.md,
 * "Headers"), written by tools/common/ratelimit.c (shared with nginx/).
 */
#ifndef DRLD_LIMIT_H
#define DRLD_LIMIT_H

#include <drl/drl.h>

#include "common/ratelimit.h"
#include "metrics.h"

#include <stddef.h>

/* Longest header values (tools/common/ratelimit.h writes them). */
#define DRLD_POLICY_HEADER_MAX TL_POLICY_HEADER_MAX
#define DRLD_RATELIMIT_HEADER_MAX TL_RATELIMIT_HEADER_MAX

struct drld_limit {
	drl_limiter *lim;
	char name[DRLD_RULE_NAME_MAX + 1]; /* in the headers */
	int nlimits;                       /* limits in its policy */
	/* RateLimit-Policy value; "" when the spec could not be read for
	 * it (the header is left out then) */
	char policy[DRLD_POLICY_HEADER_MAX];
	struct drld_rule_stats *stats; /* borrowed from the metrics */
};

/* Make l's limiter on `store` from `spec` with key prefix `prefix` (NULL:
 * the default, so a program using the library with the same store, spec
 * and key shares the limit), named `name` in headers, counting into
 * `stats`. Returns 0, or a DRL_E* code with `err` filled (DRL_EINVAL: a
 * bad spec). */
int drld_limit_init(struct drld_limit *l, drl_store *store, const char *spec,
		    const char *prefix, const char *name,
		    struct drld_rule_stats *stats, drl_error *err);
/* Free l's limiter (l itself is the caller's). */
void drld_limit_fini(struct drld_limit *l);

/* The RateLimit value for decision r of l into buf (n bytes): the limit
 * that decided, what remains of it, and t: seconds until the request can
 * be allowed when denied (also a denial shadow=1 answered allowed: the
 * header describes the shadowed limit), until full quota when allowed
 * (rounded up). */
void drld_limit_ratelimit(const struct drld_limit *l, const drl_result *r,
			  char *buf, size_t n);

#endif /* DRLD_LIMIT_H */
