/*
 * The module: one addon state per environment (the main thread and each
 * worker_thread load the addon once each), its exports, and its cleanup
 * when the environment ends. index.js is the public API; these exports
 * are its private helpers:
 *   open(uri, spec, prefix)       -> Promise<handle>        (limiter.c)
 *   decide(handle, key, pts, get, id) -> undefined; settleOne(id, ...)
 *                                 settles index.js's promise (decide.c)
 *   decideNow(handle, key[, pts]) -> undefined, the outcome in
 *                                 init's Float64Array(5) (memory://
 *                                 only; decide.c)
 *   decideNowMany(handle, ...keys) -> undefined | errs: a tick's
 *                                 memory:// consume()s, points in and
 *                                 outcomes out in init's batch array
 *                                 (decide.c)
 *   reset(handle, key)            -> Promise<true>          (blocking.c)
 *   adjust(handle, key, points, sign) -> Promise<RateLimiterRes> (blocking.c)
 *   direct(handle)                -> whether decisions need no worker
 *                                 (drl_async_direct; batch.c)
 *   decideBatch(handle, keys, points, q, chunk)  consume()s of one
 *                                 tick; settle() gets them (batch.c)
 *   init(RateLimiterRes, Float64Array(5), Float64Array(6 * N), settle,
 *        settleOne)
 *   release(handle)               (limiter.c: FinalizationRegistry)
 *   hasAdjust, version
 */
#include "addon.h"

#include <stdlib.h>

/* The async cleanup hook is done: the loop calls none of this addon's
 * code any more. */
static void hook_done(void *hook)
{
	napi_remove_async_cleanup_hook(hook);
}

/* The environment is ending: settle nothing more in JS, stop the async
 * context (its callbacks run now and only free their requests), free
 * what the addon holds. An async cleanup hook, not a plain one: Node
 * tears the environment down (and unloads an addon that only a
 * worker_thread loaded) once `hook` is removed, and the loop adapter's
 * handles close on the loop's next iteration, in close callbacks that
 * are this addon's code: removed from the last of them (hook_done). With
 * a plain hook a terminated worker_thread's loop ran them after the
 * unload: a SIGSEGV (node/test/worker.test.js). `ad` is not touched
 * after this returns: the instance data's finalizer may free it before
 * the handles have closed. */
static void cleanup(napi_async_cleanup_hook_handle hook, void *arg)
{
	addon *ad = arg;
	ad->closing = 1;
	int on_loop = addon_async_free(ad, hook_done, hook);
	lim_release_handles(ad);
	drl_store_free(ad->check);
	ad->check = NULL;
	if (ad->actx != NULL)
		napi_async_destroy(ad->env, ad->actx);
	ad->actx = NULL;
	napi_ref *refs[] = {&ad->res_class, &ad->out_ref,    &ad->bout_ref,
			    &ad->settle,    &ad->settle_one, &ad->resource};
	for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
		if (*refs[i] != NULL)
			napi_delete_reference(ad->env, *refs[i]);
		*refs[i] = NULL;
	}
	if (!on_loop) /* nothing to wait for */
		napi_remove_async_cleanup_hook(hook);
}

static void finalize(napi_env env, void *data, void *hint)
{
	(void)env;
	(void)hint;
	free(data);
}

/* A Float64Array of at least `min` numbers: its data, or NULL. */
static double *f64(napi_env env, napi_value v, size_t min, size_t *len)
{
	napi_typedarray_type type;
	void *data = NULL;
	if (napi_get_typedarray_info(env, v, &type, len, &data, NULL, NULL) !=
		    napi_ok ||
	    type != napi_float64_array || *len < min)
		return NULL;
	return data;
}

/* Keep v in *ref, replacing what it held. */
static void keep(napi_env env, napi_ref *ref, napi_value v)
{
	if (*ref != NULL)
		napi_delete_reference(env, *ref);
	napi_create_reference(env, v, 1, ref);
}

/* init(RateLimiterRes, Float64Array(5), Float64Array(6 * N), settle,
 * settleOne): the class results are instances of, where decideNow() and
 * decide()'s settleOne write a result's fields, where decideBatch()
 * writes up to N items' outcomes, the function that settles them
 * (batch.c), and the one that settles a decide() (decide.c). */
static napi_value js_init(napi_env env, napi_callback_info info)
{
	size_t argc = 5, len = 0, blen = 0;
	napi_value argv[5], resource, name;
	addon *ad = NULL;
	napi_valuetype t = napi_undefined, t1 = napi_undefined;
	napi_get_cb_info(env, info, &argc, argv, NULL, (void **)&ad);
	double *out = argc >= 5 ? f64(env, argv[1], 5, &len) : NULL;
	double *bout = out ? f64(env, argv[2], 6, &blen) : NULL;
	if (bout != NULL) {
		napi_typeof(env, argv[3], &t);
		napi_typeof(env, argv[4], &t1);
	}
	if (t != napi_function || t1 != napi_function)
		return throw_drl(env, DRL_EINVAL,
				 "init(RateLimiterRes, Float64Array(5), "
				 "Float64Array(6 * N), settle, settleOne)",
				 1);
	keep(env, &ad->res_class, argv[0]);
	keep(env, &ad->out_ref, argv[1]);
	keep(env, &ad->bout_ref, argv[2]);
	keep(env, &ad->settle, argv[3]);
	keep(env, &ad->settle_one, argv[4]);
	ad->out = out;
	ad->bout = bout;
	ad->bout_items =
		(uint32_t)(blen / 6 > DRL_BATCH_MAX ? DRL_BATCH_MAX : blen / 6);
	if (ad->actx == NULL) {
		napi_create_object(env, &resource);
		napi_create_string_utf8(env, "drl:decision", NAPI_AUTO_LENGTH,
					&name);
		napi_create_reference(env, resource, 1, &ad->resource);
		napi_async_init(env, resource, name, &ad->actx);
	}
	return NULL;
}

static napi_value init_module(napi_env env, napi_value exports)
{
	addon *ad = calloc(1, sizeof *ad);
	drl_error err = {0, {0}};
	if (ad == NULL)
		return throw_drl(env, DRL_ENOMEM, "out of memory", 0);
	ad->env = env;
	int rc = drl_store_open(&ad->check, "memory://", &err);
	if (rc != 0) {
		free(ad);
		return throw_drl(env, rc, err.message, 0);
	}
	napi_set_instance_data(env, ad, finalize, NULL);
	napi_add_async_cleanup_hook(env, cleanup, ad, NULL);

	napi_property_descriptor fns[] = {
		{"open", NULL, js_open, NULL, NULL, NULL, napi_default, ad},
		{"decide", NULL, js_decide, NULL, NULL, NULL, napi_default, ad},
		{"decideNow", NULL, js_decide_now, NULL, NULL, NULL,
		 napi_default, ad},
		{"decideNowMany", NULL, js_decide_now_many, NULL, NULL, NULL,
		 napi_default, ad},
		{"direct", NULL, js_direct, NULL, NULL, NULL, napi_default, ad},
		{"decideBatch", NULL, js_decide_batch, NULL, NULL, NULL,
		 napi_default, ad},
		{"reset", NULL, js_reset, NULL, NULL, NULL, napi_default, ad},
		{"adjust", NULL, js_adjust, NULL, NULL, NULL, napi_default, ad},
		{"init", NULL, js_init, NULL, NULL, NULL, napi_default, ad},
		{"release", NULL, js_release, NULL, NULL, NULL, napi_default,
		 ad},
	};
	napi_define_properties(env, exports, sizeof fns / sizeof fns[0], fns);
	napi_value v;
	napi_get_boolean(env, addon_has_adjust(), &v);
	napi_set_named_property(env, exports, "hasAdjust", v);
	napi_create_string_utf8(env, drl_version(), NAPI_AUTO_LENGTH, &v);
	napi_set_named_property(env, exports, "version", v);
	return exports;
}

/* The macro defines exported functions without prototypes. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
NAPI_MODULE_INIT()
{
	return init_module(env, exports);
}
#pragma GCC diagnostic pop
