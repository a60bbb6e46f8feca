/*
 * DRL.DECIDE's arguments and its decision, apart from Redis's API, so a
 * fuzzer or a test can drive the parser with bytes alone.
 */
#ifndef DRL_RM_DECIDE_H
#define DRL_RM_DECIDE_H

#include "internal.h"

/* The longest spec taken, in bytes (one limit: a few dozen in practice). */
#define DRL__RM_SPEC_MAX 256

/* One DRL.DECIDE, parsed: the limit, the key its state is under (the
 * store key the client would name: prefix, tag, user key), the time and
 * the cost. */
typedef struct drl__rm_request {
	drl__limit lim;
	drl__keybase kb;
	int64_t now;
	int64_t cost;
} drl__rm_request;

/* Parse DRL.DECIDE's four arguments (key, spec, now_us, cost; bytes and
 * lengths as Redis hands them) into *q: 0, or DRL_EINVAL with a message
 * naming the bad argument in err. Reads nothing past the lengths. */
int drl__rm_parse(drl__rm_request *q, const char *const arg[4],
		  const size_t len[4], drl_error *err);

/* Decide q against backend b (one step, atomic as b is): 0 and *res,
 * *undo_a (what the decision consumed, for a refund), or a negative
 * DRL_E* code with err set. */
int drl__rm_decide(const drl__rm_request *q, drl_backend *b, drl_result *res,
		   int64_t *undo_a, drl_error *err);

#endif
