/*
 * The HTTP front's handlers (check.c) and what they answer: a drld_reply,
 * which http.c turns into the HTTP response. They read the state both
 * fronts share (drld.h).
 */
#ifndef DRLD_CHECK_H
#define DRLD_CHECK_H

#include "drld.h"
#include "limit.h"
#include "template.h"

#include <stddef.h>

/* What a handler answers; http.c turns it into the HTTP response. */
struct drld_reply {
	unsigned status;
	const char *type; /* Content-Type */
	char body[2048];
	size_t len;
	char policy[DRLD_POLICY_HEADER_MAX];       /* RateLimit-Policy, or "" */
	char ratelimit[DRLD_RATELIMIT_HEADER_MAX]; /* RateLimit, or "" */
	char retry_after[24];                      /* Retry-After, or "" */
	const char *allow;                         /* Allow (405), or NULL */
};

/* Answer POST /v1/check with the body[0..len) under config c: a decision
 * (200), or 400/404/500/503 with {"error": ...} (docs/drld.md, "API").
 * `parts` are the request's, for rules' key templates. */
void drld_check(struct drld *d, const struct drld_config *c, const char *body,
		size_t len, const struct drld_request_parts *parts,
		struct drld_reply *out);

/* drld_check() without blocking, through the async context `as`: when
 * the request's limit decides without a worker (drl_async_direct()),
 * suspend(arg) is called, the decision started, and done(arg) is called
 * once *out holds the answer (on the context's loop thread, or before
 * this returns when the start failed); returns 1. Otherwise *out is
 * answered here, as drld_check() answers it, neither hook is called, and
 * it returns 0. */
int drld_check_start(struct drld *d, drl_async *as, const struct drld_config *c,
		     const char *body, size_t len,
		     const struct drld_request_parts *parts,
		     struct drld_reply *out, void (*suspend)(void *arg),
		     void (*done)(void *arg), void *arg);

/* Answer POST /v1/reset with the body[0..len) under config c (the body
 * of /v1/check; its cost is read and ignored): the key forgotten on the
 * limit (drl_reset) and 200 {"reset": true}, or 400/404/500/501 (a store
 * that cannot delete)/503 with {"error": ...}, nothing deleted. */
void drld_reset(struct drld *d, const struct drld_config *c, const char *body,
		size_t len, const struct drld_request_parts *parts,
		struct drld_reply *out);

/* Answer a request to a path that `rule` protects, as a reverse proxy
 * would: 200 "ok" (standing in for the upstream) when allowed, 429 when
 * denied, 503 when the store failed and the rule has no on_error. */
void drld_protect(struct drld *d, const struct drld_rule *rule,
		  const struct drld_request_parts *parts,
		  struct drld_reply *out);

/* Fill out with `status` and the JSON body {"error": MESSAGE}, the
 * printf-style message escaped. */
void drld_reply_error(struct drld_reply *out, unsigned status, const char *fmt,
		      ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 3, 4)))
#endif
	;

/* Fill out with `status` and a text/plain body. */
void drld_reply_text(struct drld_reply *out, unsigned status, const char *text);

#endif /* DRLD_CHECK_H */
