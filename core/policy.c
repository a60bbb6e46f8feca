/*
 * A policy's step: the limits of one request (`a;b`: several limits on one
 * key, all or nothing), decided in order. Each consumes as it allows;
 * when one denies, what the earlier ones consumed is refunded, and the
 * later ones are asked (consuming nothing) so retry_after is when every
 * limit allows. The answer: the allowing limit with the least left, or
 * the first that denies, widened.
 *
 * Written once and run in two places: by the core against any store
 * (core/decision.c), and inside the Redis module's DRL.POLICY against the
 * server's own keys (redis_module/), where the whole step is one command
 * no other client sees half of. A store that hands a policy to such a
 * server (DRL_CAP_POLICY, eval_policy) gets the calls here too.
 */
#include "internal.h"

#include <string.h>

/* Decide limit i of p (its key into *kb), counted in the store's
 * decisions unless quiet. */
static int decide_one(const drl__policy *p, size_t i, drl__call *call,
		      drl__keybase *kb, bool quiet, drl_result *r,
		      drl__undo *undo)
{
	const drl__limit *lim = p->limit(p->arg, i, kb);
	call->key = kb;
	if (!quiet)
		DRL__COUNT(call->stats, decisions);
	memset(r, 0, sizeof *r);
	int rc = lim->algo->decide(lim, call, r, undo);
	r->limit_index = (int)i;
	return rc;
}

/* Give back what limits [0, n) consumed. A refund that fails leaves quota
 * consumed: the safe direction (a later request may be denied early), so
 * the decision already made stands. */
static void refund_all(const drl__policy *p, size_t n, const drl__call *call,
		       const drl__undo *undo)
{
	drl__keybase kb;
	drl__call c = *call;
	c.peek = false;
	c.err = NULL; /* keep the caller's message: the error that matters */
	for (size_t i = 0; i < n; i++) {
		const drl__limit *lim = p->limit(p->arg, i, &kb);
		c.key = &kb;
		(void)lim->algo->refund(lim, &c, &undo[i]);
	}
}

void drl__policy_widen(drl_result *res, const drl_result *r)
{
	if (r->allowed || res->retry_after_us == DRL_NEVER)
		return;
	if (r->retry_after_us == DRL_NEVER ||
	    r->retry_after_us > res->retry_after_us)
		*res = *r;
}

/* After limit `denied` said no: ask the limits after it (without
 * consuming) so retry_after is the time when every limit would allow. */
static int widen_retry(const drl__policy *p, size_t denied, drl__call *call,
		       bool quiet, drl_result *res)
{
	drl__keybase kb;
	call->peek = true;
	for (size_t i = denied + 1; i < p->n; i++) {
		drl_result r;
		drl__undo undo;
		int rc = decide_one(p, i, call, &kb, quiet, &r, &undo);
		if (rc)
			return rc;
		drl__policy_widen(res, &r);
	}
	return 0;
}

bool drl__policy_calls_make(drl__policy_calls *pc, const drl__policy *p,
			    drl__call *call)
{
	if (p->n < 2 || p->n > DRL_POLICY_LIMITS_MAX ||
	    call->now == DRL__NOW_STORE || call->delta != 0)
		return false;
	pc->n = p->n;
	for (size_t i = 0; i < p->n; i++) {
		const drl__limit *lim = p->limit(p->arg, i, &pc->kb[i]);
		call->key = &pc->kb[i];
		if (!drl__script_usable(lim, call))
			return false;
		pc->keys[i] = drl__key_plain(&pc->k[i], &pc->kb[i]);
		drl__script_args(lim, call, pc->args[i]);
		pc->calls[i] = (drl_script_call){.script = lim->algo->lua,
						 .nkeys = 1,
						 .keys = &pc->keys[i],
						 .nargs = DRL__SCRIPT_NARGS,
						 .args = pc->args[i]};
	}
	return true;
}

int drl__policy_answer(const drl__policy *p, const int64_t *out, size_t nret,
		       drl_result *res, drl_error *err)
{
	if (nret != DRL__POLICY_NOUT || out[5] < 0 || out[5] >= (int64_t)p->n)
		return drl_error_set(err, DRL_ECORRUPT,
				     "a policy's answer of %zu values is not "
				     "a decision",
				     nret);
	drl__keybase kb;
	drl__undo undo;
	memset(res, 0, sizeof *res);
	int rc = drl__script_answer(p->limit(p->arg, (size_t)out[5], &kb), out,
				    DRL__SCRIPT_NOUT, res, &undo, err);
	res->limit_index = (int)out[5];
	return rc;
}

/* The policy in one call of a store that hands it to a server deciding
 * it whole (eval_policy): 1 when the store cannot now (nothing ran: the
 * caller decides limit by limit), else 0 or an error with *result set. */
static int by_store(const drl__policy *p, drl__call *call, bool quiet,
		    drl_result *result)
{
	drl_backend *b = call->backend;
	drl__policy_calls pc;
	if (!drl__has_policy(b) || !drl__policy_calls_make(&pc, p, call))
		return 1;
	int64_t out[DRL__POLICY_NOUT];
	size_t nret = 0;
	int rc = b->eval_policy(b, NULL, p->n, pc.calls, out, DRL__POLICY_NOUT,
				&nret, NULL, NULL, call->err);
	if (rc == DRL_ENOTSUP || rc == DRL_BACKEND_ESPLIT)
		return 1; /* nothing ran */
	if (!quiet)
		for (size_t i = 0; i < p->n; i++)
			DRL__COUNT(call->stats, decisions);
	DRL__COUNT(call->stats, scripts);
	if (rc)
		return rc;
	return drl__policy_answer(p, out, nret, result, call->err);
}

int drl__policy_step(const drl__policy *p, drl__call *call, bool quiet,
		     drl_result *result)
{
	bool peek = call->peek;
	int rc = by_store(p, call, quiet, result);
	if (rc != 1)
		return rc;
	drl__undo undo[DRL_POLICY_LIMITS_MAX];
	drl__keybase kb;
	drl_result best = {0}, r;
	for (size_t i = 0; i < p->n; i++) {
		call->peek = peek;
		rc = decide_one(p, i, call, &kb, quiet, &r, &undo[i]);
		if (rc == 0 && r.allowed) {
			if (i == 0 || r.remaining < best.remaining)
				best = r;
			continue;
		}
		if (!peek) /* a peek consumed nothing */
			refund_all(p, i, call, undo);
		if (rc == 0)
			rc = widen_retry(p, i, call, quiet, &r);
		if (rc == 0)
			*result = r;
		return rc;
	}
	*result = best;
	return 0;
}
