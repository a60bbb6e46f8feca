/*
 * drl_adjust: penalty (+delta) and reward (-delta) on a user key, on every
 * limit of a limiter (include/drl/drl.h has the contract).
 *
 * The layers split the work as for a decision: each algorithm moves its
 * own state by delta (drl__algorithm.adjust: the counter engine by its
 * counter commands or its twin, the optimistic-state ones by their
 * adjust_step or their twin's adjust mode), through the store's existing
 * methods; the core runs it as a request (core/decision.c: behind the
 * store's breaker, at the decision's time) and answers a peek of cost 1.
 * No store learns about adjusting, no algorithm about a store.
 */
#include "internal.h"

int drl__adjust_twin(const drl__limit *lim, const drl__call *call,
		     size_t nderived, const drl_bytes *derived, drl_result *res,
		     drl__call *c)
{
	drl__undo undo;
	if (drl__script_usable(lim, call)) {
		/* the twin's adjust mode: atomic on the server */
		int rc = drl__script_decide(lim, call, nderived, derived, res,
					    &undo);
		if (rc != DRL_BACKEND_ESPLIT)
			return rc;
	}
	*c = *call;
	int rc = drl__call_now(call, &c->now);
	return rc ? rc : 1;
}

/* Checked arguments: the request's steps (core/decision.c). */
static int adjust(drl_limiter *l, const void *key, size_t keylen, int64_t delta,
		  int64_t now_us, drl_result *result, drl_error *err)
{
	drl_batch_item it = {.key = key, .keylen = keylen, .cost = delta};
	drl__req q;
	drl__req_init(&q, DRL__REQ_ADJUST, l, &it, 1, now_us, err);
	drl__req_decide(&q);
	*result = it.result;
	return it.rc;
}

/* drl_adjust_at's checks but the time's: DRL_EINVAL, nothing changed;
 * *result (when there is one) is a denial from here on. */
static int check(drl_limiter *l, const void *key, size_t keylen, int64_t delta,
		 drl_result *result, drl_error *err)
{
	if (result != NULL)
		drl__result_deny(result);
	if (l == NULL || result == NULL)
		return drl_error_set(err, DRL_EINVAL, "drl_adjust: NULL %s",
				     l == NULL ? "limiter" : "result");
	return drl__adjust_check("drl_adjust", key, keylen, delta, err);
}

int drl_adjust_at(drl_limiter *l, const void *key, size_t keylen, int64_t delta,
		  int64_t now_us, drl_result *result, drl_error *err)
{
	int rc = check(l, key, keylen, delta, result, err);
	if (rc == 0)
		rc = drl__time_check(now_us, err);
	return rc ? rc : adjust(l, key, keylen, delta, now_us, result, err);
}

int drl_adjust(drl_limiter *l, const void *key, size_t keylen, int64_t delta,
	       drl_result *result, drl_error *err)
{
	int rc = check(l, key, keylen, delta, result, err);
	return rc ? rc
		  : adjust(l, key, keylen, delta, DRL__NOW_READ, result, err);
}
