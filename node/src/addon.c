/*
 * The module: one addon state per environment (the main thread and each
 * worker_thread load the addon once each), its exports, and its cleanup
 * when the environment ends. index.js is the public API; these exports
 * are its private helpers:
 *   open(uri, spec, prefix)       -> Promise<handle>        (limiter.c)
 *   decide(handle, key, pts, get) -> Promise<RateLimiterRes> (decide.c)
 *   decideNow(handle, key, pts, get) -> 1|0|-1, fields in init's array
 *                                 (memory:// only; decide.c)
 *   reset(handle, key)            -> Promise<true>          (blocking.c)
 *   adjust(handle, key, delta)    -> Promise<RateLimiterRes> (blocking.c)
 *   init(RateLimiterRes, Float64Array(4))
 *   release(handle)               (limiter.c: FinalizationRegistry)
 *   hasAdjust, version
 */
#include "addon.h"

#include <stdlib.h>

/* The environment is ending: settle nothing more in JS, stop the async
 * context (its callbacks run now and only free their requests), free
 * what the addon holds. */
static void cleanup(void *arg)
{
	addon *ad = arg;
	ad->closing = 1;
	drl_async_free(ad->async);
	ad->async = NULL;
	lim_release_handles(ad);
	drl_store_free(ad->check);
	ad->check = NULL;
	if (ad->actx != NULL)
		napi_async_destroy(ad->env, ad->actx);
	ad->actx = NULL;
	napi_ref *refs[] = {&ad->res_class, &ad->out_ref, &ad->resource};
	for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
		if (*refs[i] != NULL)
			napi_delete_reference(ad->env, *refs[i]);
		*refs[i] = NULL;
	}
}

static void finalize(napi_env env, void *data, void *hint)
{
	(void)env;
	(void)hint;
	free(data);
}

/* init(RateLimiterRes, Float64Array(4)): the class results are
 * instances of, and where decideNow() writes its result's fields. */
static napi_value js_init(napi_env env, napi_callback_info info)
{
	size_t argc = 2, len = 0;
	napi_value argv[2], resource, name;
	addon *ad = NULL;
	napi_typedarray_type type;
	void *data = NULL;
	napi_get_cb_info(env, info, &argc, argv, NULL, (void **)&ad);
	if (argc < 2 ||
	    napi_get_typedarray_info(env, argv[1], &type, &len, &data, NULL,
				     NULL) != napi_ok ||
	    type != napi_float64_array || len < 4)
		return throw_drl(env, DRL_EINVAL,
				 "init(RateLimiterRes, Float64Array(4))", 1);
	if (ad->res_class != NULL)
		napi_delete_reference(env, ad->res_class);
	if (ad->out_ref != NULL)
		napi_delete_reference(env, ad->out_ref);
	napi_create_reference(env, argv[0], 1, &ad->res_class);
	napi_create_reference(env, argv[1], 1, &ad->out_ref);
	ad->out = data;
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
	napi_add_env_cleanup_hook(env, cleanup, ad);

	napi_property_descriptor fns[] = {
		{"open", NULL, js_open, NULL, NULL, NULL, napi_default, ad},
		{"decide", NULL, js_decide, NULL, NULL, NULL, napi_default, ad},
		{"decideNow", NULL, js_decide_now, NULL, NULL, NULL,
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
