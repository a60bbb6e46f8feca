/*
 * DRL.DECIDE key spec now_us cost: the parser of its arguments and the
 * decision, which is the algorithm's own decide() (its C step, or its
 * counters) against the store it is handed. Nothing of an algorithm is
 * written here: a new algorithm is decided by the module unchanged.
 */
#include "decide.h"

#include <string.h>

int drl__rm_parse(drl__rm_request *q, const char *const arg[4],
		  const size_t len[4], drl_error *err)
{
	memset(q, 0, sizeof *q);
	if (len[0] == 0 || len[0] > sizeof q->kb.buf)
		return drl_error_set(err, DRL_EINVAL,
				     "key is %zu bytes; expected 1..%zu",
				     len[0], sizeof q->kb.buf);
	if (len[1] == 0 || len[1] > DRL__RM_SPEC_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "spec is %zu bytes; expected 1..%d",
				     len[1], DRL__RM_SPEC_MAX);
	if (memchr(arg[1], ';', len[1]))
		return drl_error_set(err, DRL_EINVAL,
				     "spec: one limit per call (no ';')");
	int rc = drl__limit_parse(&q->lim, arg[1], len[1], err);
	if (rc)
		return rc;
	if (drl_parse_int(arg[2], len[2], 0, DRL_TIME_MAX_US, &q->now))
		return drl_error_set(err, DRL_EINVAL,
				     "now_us: expected an integer in "
				     "0..2^62 (microseconds since the epoch)");
	if (drl_parse_int(arg[3], len[3], 0, INT64_MAX, &q->cost))
		return drl_error_set(err, DRL_EINVAL,
				     "cost: expected an integer >= 0");
	q->peek = q->cost == 0; /* cost 0 reports the quota, as drl_allow */
	memcpy(q->kb.buf, arg[0], len[0]);
	q->kb.len = len[0];
	return 0;
}

int drl__rm_decide(const drl__rm_request *q, drl_backend *b, drl_result *res,
		   int64_t *undo_a, drl_error *err)
{
	drl__stats stats;
	memset(&stats, 0, sizeof stats);
	drl__call call = {.backend = b,
			  .key = &q->kb,
			  .now = q->now,
			  .cost = q->cost,
			  .peek = q->peek,
			  .err = err,
			  .stats = &stats};
	drl__undo undo = {0, 0};
	memset(res, 0, sizeof *res);
	int rc = q->lim.algo->decide(&q->lim, &call, res, &undo);
	*undo_a = undo.a;
	return rc;
}
