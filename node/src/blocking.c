/*
 * delete() (drl_reset) and penalty()/reward() (drl_adjust): blocking
 * calls, run on libuv's thread pool (napi_create_async_work), so the JS
 * thread never waits for a store; the promise settles on the JS thread.
 * The request holds a reference to its limiter until it completes, and
 * its own copy of the key.
 */
#include "addon.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* drl_adjust() came with issue 41: a libdrl from before it has none. A
 * weak reference is NULL then, and penalty()/reward() say DRL_ENOTSUP
 * (addon_has_adjust()), so one addon source builds and loads with both. */
int drl_adjust(drl_limiter *limiter, const void *key, size_t keylen,
	       int64_t delta, drl_result *result, drl_error *err);
#pragma weak drl_adjust

int addon_has_adjust(void)
{
	return drl_adjust != NULL;
}

typedef struct block_req {
	napi_async_work work;
	napi_deferred deferred;
	addon *ad;
	lim *l;
	int adjust;    /* 0: reset; 1: adjust by delta */
	int64_t delta; /* adjust: units to consume (> 0) or give back */
	int rc;
	drl_result result;
	drl_error err;
	size_t keylen;
	char key[]; /* keylen bytes */
} block_req;

static void block_execute(napi_env env, void *data)
{
	block_req *r = data;
	(void)env;
	if (!r->adjust) {
		r->rc = drl_reset(r->l->limiter, r->key, r->keylen, &r->err);
		return;
	}
	if (!addon_has_adjust()) {
		r->rc = DRL_ENOTSUP;
		snprintf(r->err.message, sizeof r->err.message,
			 "penalty/reward need drl_adjust(), not in this "
			 "libdrl (%s)",
			 drl_version());
		return;
	}
	r->rc = drl_adjust(r->l->limiter, r->key, r->keylen, r->delta,
			   &r->result, &r->err);
}

/* RateLimiterRes-shaped: the quota after the adjustment. */
static napi_value adjust_res(napi_env env, addon *ad, const drl_result *r)
{
	napi_value ctor, argv[4], res = NULL;
	int64_t consumed = r->limit - r->remaining;
	napi_create_double(env, (double)(r->remaining < 0 ? 0 : r->remaining),
			   &argv[0]);
	napi_create_double(env,
			   r->reset_after_us <= 0
				   ? 0
				   : (double)((r->reset_after_us + 999) / 1000),
			   &argv[1]);
	napi_create_double(env, (double)(consumed < 0 ? 0 : consumed),
			   &argv[2]);
	napi_get_boolean(env, false, &argv[3]);
	napi_get_reference_value(env, ad->res_class, &ctor);
	napi_new_instance(env, ctor, 4, argv, &res);
	return res;
}

static void block_complete(napi_env env, napi_status status, void *data)
{
	block_req *r = data;
	napi_value v;
	if (status != napi_ok && r->rc == 0) {
		r->rc = DRL_ECANCELED;
		snprintf(r->err.message, sizeof r->err.message,
			 "the call was cancelled");
	}
	if (r->rc != 0)
		napi_reject_deferred(
			env, r->deferred,
			make_drl_error(env, r->rc, r->err.message, 0));
	else if (r->adjust)
		napi_resolve_deferred(env, r->deferred,
				      adjust_res(env, r->ad, &r->result));
	else {
		napi_get_boolean(env, true, &v);
		napi_resolve_deferred(env, r->deferred, v);
	}
	napi_delete_async_work(env, r->work);
	lim_release(r->l);
	free(r);
}

/* Queue r (its fields set); returns the promise, or NULL with an error
 * thrown (r freed). */
static napi_value queue(napi_env env, block_req *r, const char *what)
{
	napi_value promise, name;
	napi_create_string_utf8(env, what, NAPI_AUTO_LENGTH, &name);
	if (napi_create_promise(env, &r->deferred, &promise) != napi_ok ||
	    napi_create_async_work(env, NULL, name, block_execute,
				   block_complete, r, &r->work) != napi_ok ||
	    napi_queue_async_work(env, r->work) != napi_ok) {
		free(r);
		return throw_drl(env, DRL_EINTERNAL, "cannot queue the call",
				 0);
	}
	r->l->refs++;
	return promise;
}

/* A request for the limiter and key of argv[0..1]; NULL with an error
 * thrown. */
static block_req *new_req(napi_env env, addon *ad, napi_value *argv)
{
	keybuf k;
	lim *l = get_lim(env, argv[0]);
	if (l == NULL || get_key(env, argv[1], &k) != 0)
		return NULL;
	block_req *r = calloc(1, sizeof *r + k.len + 1);
	if (r == NULL) {
		keybuf_free(&k);
		throw_drl(env, DRL_ENOMEM, "out of memory", 0);
		return NULL;
	}
	r->ad = ad;
	r->l = l;
	r->keylen = k.len;
	if (k.len > 0)
		memcpy(r->key, k.bytes, k.len);
	keybuf_free(&k);
	return r;
}

/* reset(handle, key) -> Promise<true> */
napi_value js_reset(napi_env env, napi_callback_info info)
{
	size_t argc = 2;
	napi_value argv[2];
	addon *ad = NULL;
	napi_get_cb_info(env, info, &argc, argv, NULL, (void **)&ad);
	block_req *r = new_req(env, ad, argv);
	return r ? queue(env, r, "drl:reset") : NULL;
}

/* adjust(handle, key, points, sign) -> Promise<RateLimiterRes>: the
 * key's delta is sign < 0 ? -points : points (reward, penalty). */
napi_value js_adjust(napi_env env, napi_callback_info info)
{
	size_t argc = 4;
	napi_value argv[4];
	addon *ad = NULL;
	int64_t delta = 0;
	int32_t sign = 1;
	napi_get_cb_info(env, info, &argc, argv, NULL, (void **)&ad);
	if (get_points(env, argv[2], "points", &delta) != 0)
		return NULL;
	/* points checked as the caller gave them (0..2^53-1; a negative one
	 * is passed on by get_points), negated after for reward(): no
	 * overflow, and a message names their number, not reward's delta
	 * (drl_adjust's own would). Bad input: DRL_EINVAL, as get_points. */
	if (delta < 0 || delta > DRL_LIMIT_MAX) {
		char msg[96];
		if (delta < 0)
			snprintf(msg, sizeof msg, "points %lld is negative",
				 (long long)delta);
		else
			snprintf(msg, sizeof msg,
				 "points %lld is above %lld (the most one "
				 "penalty or reward moves)",
				 (long long)delta, (long long)DRL_LIMIT_MAX);
		return throw_drl(env, DRL_EINVAL, msg, 0);
	}
	napi_get_value_int32(env, argv[3], &sign);
	if (sign < 0)
		delta = -delta;
	block_req *r = new_req(env, ad, argv);
	if (r == NULL)
		return NULL;
	r->adjust = 1;
	r->delta = delta;
	return queue(env, r, "drl:adjust");
}
