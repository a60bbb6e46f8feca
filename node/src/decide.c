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
 * them into rejections. On memory:// index.js calls decideNow() instead,
 * which decides at once (below).
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

void decision_fields(const drl_result *r, int64_t cost, double f[4])
{
	int64_t consumed = r->limit - r->remaining;
	/* A denial says when it could pass (retry_after); an admission
	 * when the limit is full again (reset_after). DRL_NEVER (the cost
	 * exceeds the limit's capacity): reset_after as well. */
	int64_t next = r->allowed || r->retry_after_us == DRL_NEVER
			       ? r->reset_after_us
			       : r->retry_after_us;
	f[0] = (double)(r->remaining < 0 ? 0 : r->remaining);
	f[1] = ms_of(next);
	f[2] = (double)(consumed < 0 ? 0 : consumed);
	f[3] = r->allowed && cost > 0 && consumed == cost;
}

/* RateLimiterRes(...fields) for result r of a request of `cost`. */
static napi_value make_res(napi_env env, addon *ad, const drl_result *r,
			   int64_t cost)
{
	napi_value ctor, argv[4], res = NULL;
	double f[4];
	decision_fields(r, cost, f);
	for (int i = 0; i < 3; i++)
		napi_create_double(env, f[i], &argv[i]);
	napi_get_boolean(env, f[3] != 0, &argv[3]);
	napi_get_reference_value(env, ad->res_class, &ctor);
	napi_new_instance(env, ctor, 4, argv, &res);
	return res;
}

/* Settle q's promise with the decision (rc, result, err). */
static void settle(napi_env env, decide_req *q, int rc,
		   const drl_result *result, const drl_error *err)
{
	napi_value v;
	addon *ad = q->ad;
	if (rc != 0) {
		napi_reject_deferred(env, q->deferred,
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
}

typedef struct outcome {
	decide_req *q;
	int rc;
	const drl_result *result;
	const drl_error *err;
} outcome;

static void settle_outcome(void *arg)
{
	outcome *o = arg;
	settle(o->q->ad->env, o->q, o->rc, o->result, o->err);
}

/* The decision's callback, in drl_async_process(): settle the promise in
 * a callback scope of its own, whose close runs the promise's reactions
 * now (loop.c says why). */
static void decided(drl_async *a, int rc, const drl_result *result,
		    const drl_error *err, void *arg)
{
	decide_req *q = arg;
	addon *ad = q->ad;
	(void)a;
	if (!ad->closing) {
		outcome o = {q, rc, result, err};
		with_callback_scope(ad, settle_outcome, &o);
	}
	lim_release(q->l);
	free(q);
}

/* The arguments of decide(): 0, or -1 with an error thrown. */
static int decide_args(napi_env env, napi_callback_info info, addon **ad,
		       lim **l, keybuf *k, int64_t *cost, bool *get)
{
	size_t argc = 4;
	napi_value argv[4];
	napi_get_cb_info(env, info, &argc, argv, NULL, (void **)ad);
	*get = false;
	*cost = 0;
	if ((*l = get_lim(env, argv[0])) == NULL || get_key(env, argv[1], k))
		return -1;
	napi_get_value_bool(env, argv[3], get);
	if (!*get && get_points(env, argv[2], "points", cost) != 0) {
		keybuf_free(k);
		return -1;
	}
	return 0;
}

/* decideNow(handle, key[, points]) -> undefined: consume() with
 * points, get() without; the result's fields in init()'s
 * Float64Array(5), out[4] 1 allowed, 0 denied, -1 (get: nothing used); a
 * bad argument or a store error throws. For memory:// only (index.js
 * asks lim.inproc): the store is this process's memory, so the blocking
 * call is a hash lookup under a shard's lock, no I/O, and deciding at
 * once costs less than a promise through the loop. One Node-API call
 * and no JS value made in C: the call and the key's first touch are what
 * a memory:// decision costs in Node besides libdrl's own path. */
napi_value js_decide_now(napi_env env, napi_callback_info info)
{
	size_t argc = 3;
	napi_value argv[3];
	addon *ad;
	lim *l;
	keybuf k;
	int64_t cost = 0;
	drl_result r;
	drl_error err = {0, {0}};
	napi_get_cb_info(env, info, &argc, argv, NULL, (void **)&ad);
	bool get = argc < 3;
	if ((l = get_lim(env, argv[0])) == NULL)
		return NULL;
	if (!l->inproc)
		return throw_drl(env, DRL_EINVAL, "decideNow: not memory://",
				 1);
	if (get_key(env, argv[1], &k) != 0)
		return NULL;
	if (!get && get_points(env, argv[2], "points", &cost) != 0) {
		keybuf_free(&k);
		return NULL;
	}
	int rc = drl_allow(l->limiter, k.bytes, k.len, cost, &r, &err);
	keybuf_free(&k);
	if (rc != 0)
		return throw_drl(env, rc, err.message, 0);
	decision_fields(&r, cost, ad->out);
	ad->out[4] = get && r.remaining >= r.limit ? -1 : r.allowed;
	return NULL;
}

/* decide(handle, key, points, get: boolean) -> Promise */
napi_value js_decide(napi_env env, napi_callback_info info)
{
	addon *ad;
	lim *l;
	keybuf k;
	int64_t cost;
	bool get;
	napi_value promise;
	if (decide_args(env, info, &ad, &l, &k, &cost, &get) != 0)
		return NULL;
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
	l->refs++; /* the request's, released by its callback */
	int rc = drl_async_allow(a, l->limiter, k.bytes, k.len, cost, decided,
				 q, &err);
	keybuf_free(&k);
	if (rc != 0) {
		/* No callback follows: settle here. */
		settle(env, q, rc, NULL, &err);
		lim_release(l);
		free(q);
	}
	return promise;
}
