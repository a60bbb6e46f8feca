/*
 * DRL.POLICY: several limits of one request (a policy, `a;b`) decided
 * in one command. Each limit is one group of DRL.TWIN's arguments,
 * parsed by DRL.TWIN's parser; the decision is the core's own policy
 * step (core/policy.c), run against the server's keys while no other
 * client runs, so nobody sees a limit consumed that a later one denies.
 */
#include "decide.h"

#include <string.h>

int drl__rm_parse_policy(drl__rm_policy *p, size_t nargs,
			 const char *const *arg, const size_t *len,
			 drl_error *err)
{
	const size_t g = DRL__RM_POLICY_GROUP;
	p->n = 0;
	if (nargs == 0 || nargs % g != 0 || nargs / g > DRL_POLICY_LIMITS_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "%zu arguments; expected 1..%d groups of "
				     "%zu (key twin now cost LIMIT PERIOD "
				     "burst word trailing)",
				     nargs, DRL_POLICY_LIMITS_MAX, g);
	size_t n = nargs / g;
	for (size_t i = 0; i < n; i++) {
		const char *const *a = arg + i * g;
		const size_t *l = len + i * g;
		drl__rm_request *q = &p->q[i];
		int rc = drl__rm_parse_twin(q, a[0], l[0], a[1], l[1],
					    DRL__SCRIPT_NARGS, a + 2, l + 2,
					    err);
		if (rc && err) {
			char why[DRL_ERROR_MESSAGE_MAX];
			memcpy(why, err->message, sizeof why);
			why[sizeof why - 1] = '\0';
			return drl_error_set(err, rc, "limit %zu: %s", i + 1,
					     why);
		}
		if (rc)
			return rc;
		for (size_t j = 0; j < i; j++)
			if (q->kb.len == p->q[j].kb.len &&
			    memcmp(q->kb.buf, p->q[j].kb.buf, q->kb.len) == 0)
				return drl_error_set(err, DRL_EINVAL,
						     "limit %zu: the key of "
						     "limit %zu (each limit "
						     "has its own)",
						     i + 1, j + 1);
		if (i > 0 &&
		    (q->now != p->q[0].now || q->cost != p->q[0].cost ||
		     q->peek != p->q[0].peek))
			return drl_error_set(err, DRL_EINVAL,
					     "limit %zu: now and cost differ "
					     "from limit 1's (one request)",
					     i + 1);
	}
	p->n = n;
	return 0;
}

/* Limit i of the policy at arg, its key into *kb (core/policy.c). */
static const drl__limit *limit_at(void *arg, size_t i, drl__keybase *kb)
{
	const drl__rm_policy *p = arg;
	const drl__rm_request *q = &p->q[i];
	memcpy(kb->buf, q->kb.buf, q->kb.len);
	kb->len = q->kb.len;
	return &q->lim;
}

int drl__rm_decide_policy(const drl__rm_policy *p, drl_backend *b,
			  drl_result *res, drl_error *err)
{
	drl__stats stats;
	memset(&stats, 0, sizeof stats);
	drl__call call = {.backend = b,
			  .now = p->q[0].now,
			  .cost = p->q[0].cost,
			  .peek = p->q[0].peek,
			  .err = err,
			  .stats = &stats};
	drl__policy pol = {p->n, limit_at, (void *)p};
	memset(res, 0, sizeof *res);
	return drl__policy_step(&pol, &call, true, res);
}
