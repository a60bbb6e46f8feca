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
	bool peek; /* decide, consume nothing, write nothing */
} drl__rm_request;

/* Parse DRL.DECIDE's four arguments (key, spec, now_us, cost; bytes and
 * lengths as Redis hands them) into *q: 0, or DRL_EINVAL with a message
 * naming the bad argument in err. Reads nothing past the lengths. */
int drl__rm_parse(drl__rm_request *q, const char *const arg[4],
		  const size_t len[4], drl_error *err);

/* DRL.TWIN's arguments: the key, a Lua twin's name (drl_script.name:
 * "counter", "token_bucket", "gcra", "sliding_log") and the integers the
 * core sends that twin (drl__script_args: now, cost or a peek's -1 - cost,
 * LIMIT, PERIOD, then burst, sub-windows or the change rules, then the
 * trailing flag), nargs of them, into *q: the limit is rebuilt as the
 * spec those numbers say and parsed as any spec is. 0, or DRL_EINVAL
 * naming the bad argument (drl_adjust's eighth argument and the store's
 * clock, now = -1, are refused: not done yet). A limit taken is kept in
 * a small cache under the exact bytes that said it, and the same bytes
 * get a copy of it: the answer is what parsing answers. Not thread-safe
 * (the cache): one thread calls it, Redis's main thread. */
int drl__rm_parse_twin(drl__rm_request *q, const char *key, size_t keylen,
		       const char *twin, size_t twinlen, size_t nargs,
		       const char *const *arg, const size_t *len,
		       drl_error *err);

/* Empty drl__rm_parse_twin's cache (the next calls parse everything). */
void drl__rm_twin_cache_clear(void);

/* Decide q against backend b (one step, atomic as b is): 0 and *res,
 * *undo_a (what the decision consumed, for a refund), or a negative
 * DRL_E* code with err set. */
int drl__rm_decide(const drl__rm_request *q, drl_backend *b, drl_result *res,
		   int64_t *undo_a, drl_error *err);

/* DRL.POLICY's arguments: per limit one group of DRL__RM_POLICY_GROUP
 * (its key, its twin's name and the DRL__SCRIPT_NARGS integers
 * DRL.TWIN takes), 1 to DRL_POLICY_LIMITS_MAX groups. */
#define DRL__RM_POLICY_GROUP (2 + DRL__SCRIPT_NARGS)

/* A policy of several limits on one request: q[i] is limit i (its key,
 * limit, and the request's time and cost, the same in every q[i]). */
typedef struct drl__rm_policy {
	size_t n;
	drl__rm_request q[DRL_POLICY_LIMITS_MAX];
} drl__rm_policy;

/* Parse DRL.POLICY's nargs arguments (after the command's name) into
 * *p: each group by drl__rm_parse_twin, as DRL.TWIN parses its
 * arguments; then every limit's time, cost and peek must be the first's
 * (one request), and no two limits may name one key. 0, or DRL_EINVAL
 * naming the group and what is wrong.
 * Reads nothing past the lengths; looks at no argument when nargs is
 * not a whole number of groups (or too many). Not thread-safe (the
 * twin cache). */
int drl__rm_parse_policy(drl__rm_policy *p, size_t nargs,
			 const char *const *arg, const size_t *len,
			 drl_error *err);

/* Decide p against backend b as the core decides a policy
 * (drl__policy_step: in order, refunds, widened), atomic as b is: 0 and
 * *res (limit_index: the limit it reports), or a negative DRL_E* code
 * with err set. */
int drl__rm_decide_policy(const drl__rm_policy *p, drl_backend *b,
			  drl_result *res, drl_error *err);

#endif
