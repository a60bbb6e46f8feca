/*
 * The IETF RateLimit header values of draft-ietf-httpapi-ratelimit-headers-10,
 * as drld and the nginx module (nginx/) send them (docs/drld.md, "Headers"):
 *   RateLimit-Policy: "NAME";q=LIMIT;w=PERIOD_SECONDS
 *   RateLimit: "NAME";r=REMAINING;t=SECONDS
 * A policy of several limits lists each as "NAME.I" (I its 0-based index
 * in the spec), and RateLimit names the one that decided. One piece of
 * code, so the two integrations can never send different headers.
 */
#ifndef TL_RATELIMIT_H
#define TL_RATELIMIT_H

#include <drl/drl.h>

#include <stddef.h>

/* Longest RateLimit-Policy value: DRL_POLICY_LIMITS_MAX items of a name
 * (up to 64 bytes), an index and two numbers. */
#define TL_POLICY_HEADER_MAX 1024
/* Longest RateLimit value: one item. */
#define TL_RATELIMIT_HEADER_MAX 160

/* The RateLimit-Policy value of a limiter named `name` made from `spec`
 * (a spec drl_limiter_new() accepted) into buf (n bytes): one item per
 * limit segment (segments holding ':'; options such as on_error=deny do
 * not). Returns the number of limits in the spec; buf is "" when it could
 * not be read for the header or does not fit (leave the header out). */
int tl_ratelimit_policy(char *buf, size_t n, const char *name,
			const char *spec);

/* The RateLimit value for decision r of a limiter named `name` whose
 * spec has `nlimits` limits, into buf (n bytes): the limit that decided,
 * what remains of it, and t: seconds until the request can be allowed
 * when denied (also a denial shadow=1 answered allowed: the header
 * describes the shadowed limit), until full quota when allowed (rounded
 * up). */
void tl_ratelimit_value(char *buf, size_t n, const char *name, int nlimits,
			const drl_result *r);

/* Whether decision r carries a limit's numbers for the RateLimit header
 * (the store, the near cache or on_error=local decided; fail_open and
 * fail_closed carry none). */
int tl_ratelimit_has_numbers(const drl_result *r);

#endif /* TL_RATELIMIT_H */
