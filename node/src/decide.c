/*
 * consume() and get(): one decision through the async API
 * (drl_async_allow on the environment's context, on Node's loop). The
 * promise settles in the decision's callback, on the JS thread:
 *   consume: resolves a RateLimiterRes when allowed, rejects with one when
 *            denied, rejects with an Error (the library's message, .code
 *            its name) when the store failed;
 *   get:     a cost-0 decision (consumes nothing): resolves a
 *            RateLimiterRes, or null when the key's quota is full (RLF's
 *            "no record").
 * Start errors (bad key or points, a full queue) throw; index.js turns
 * them into rejections.
 */
#include "addon.h"

#include <stdlib.h>

typedef struct decide_req {
	napi_deferred deferred;
	addon *ad;
	lim *l;
	int64_t cost;
	int get;
} decide_req;

/* ceil(us / 1000) for a non-negative us, else 0. */
static double ms_of(int64_t us)
{
	return us <= 0 ? 0 : (double)((us + 999) / 1000);
}

/* RateLimiterRes(remainingPoints, msBeforeNext, consumedPoints,
 * isFirstInDuration) for result r of a request of `cost`. */
static napi_value make_res(napi_env env, addon *ad, const drl_result *r,
			   int64_t cost)
{
	napi_value ctor, argv[4], res = NULL;
	int64_t consumed = r->limit - r->remaining;
	/* A denial says when it could pass (retry_after); an admission
	 * when the limit is full again (reset_after). DRL_NEVER (the cost
	 * exceeds the limit's capacity): reset_after as well. */
	int64_t next = r->allowed || r->retry_after_us == DRL_NEVER
			       ? r->reset_after_us
			       : r->retry_after_us;
	napi_create_double(env, (double)(r->remaining < 0 ? 0 : r->remaining),
			   &argv[0]);
	napi_create_double(env, ms_of(next), &argv[1]);
	napi_create_double(env, (double)(consumed < 0 ? 0 : consumed),
			   &argv[2]);
	napi_get_boolean(env, r->allowed && cost > 0 && consumed == cost,
			 &argv[3]);
	napi_get_reference_value(env, ad->res_class, &ctor);
	napi_new_instance(env, ctor, 4, argv, &res);
	return res;
}

static void decided(drl_async *a, int rc, const drl_result *result,
		    const drl_error *err, void *arg)
{
	decide_req *q = arg;
	addon *ad = q->ad;
	(void)a;
	if (!ad->closing) {
		napi_env env = ad->env;
		napi_handle_scope hs;
		napi_value v;
		napi_open_handle_scope(env, &hs);
		if (rc != 0) {
			napi_reject_deferred(
				env, q->deferred,
				make_drl_error(env, rc, err->message, 0));
		} else if (q->get && result->remaining >= result->limit) {
			napi_get_null(env, &v);
			napi_resolve_deferred(env, q->deferred, v);
		} else {
			v = make_res(env, ad, result, q->cost);
			if (result->allowed)
				napi_resolve_deferred(env, q->deferred, v);
			else
				napi_reject_deferred(env, q->deferred, v);
		}
		napi_close_handle_scope(env, hs);
	}
	lim_release(q->l);
	free(q);
}

/* decide(handle, key, points, get: boolean) -> Promise */
napi_value js_decide(napi_env env, napi_callback_info info)
{
	size_t argc = 4;
	napi_value argv[4], promise;
	addon *ad = NULL;
	bool get = false;
	keybuf k;
	int64_t cost = 0;
	napi_get_cb_info(env, info, &argc, argv, NULL, (void **)&ad);
	lim *l = get_lim(env, argv[0]);
	if (l == NULL || get_key(env, argv[1], &k) != 0)
		return NULL;
	napi_get_value_bool(env, argv[3], &get);
	if (!get && get_points(env, argv[2], "points", &cost) != 0) {
		keybuf_free(&k);
		return NULL;
	}
	drl_async *a = addon_async(env, ad);
	decide_req *q = a ? calloc(1, sizeof *q) : NULL;
	if (q == NULL) {
		keybuf_free(&k);
		return a ? throw_drl(env, DRL_ENOMEM, "out of memory", 0)
			 : NULL;
	}
	q->ad = ad;
	q->l = l;
	q->cost = cost;
	q->get = get;
	drl_error err = {0, {0}};
	napi_create_promise(env, &q->deferred, &promise);
	int rc = drl_async_allow(a, l->limiter, k.bytes, k.len, cost, decided,
				 q, &err);
	keybuf_free(&k);
	if (rc != 0) {
		/* No callback follows: settle here, as a throw. */
		napi_value e = make_drl_error(env, rc, err.message, 0);
		napi_reject_deferred(env, q->deferred, e);
		free(q);
		return promise;
	}
	l->refs++;
	return promise;
}
