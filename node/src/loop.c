/*
 * The environment's drl_async context on Node's own libuv loop
 * (napi_get_uv_event_loop + drl_libuv_attach): decisions started from JS
 * finish on the JS thread, with no thread-pool hop, and the JS thread
 * never waits for a store.
 *
 * The adapter's poll callback runs drl_async_process(), whose callbacks
 * resolve promises. Code called by libuv (not by JS) must open a handle
 * scope and a callback scope, or the promises' reactions would wait for
 * some later JS callback. Each decision's callback opens its own
 * (with_callback_scope, from decide.c), so the reactions (an awaiting
 * caller's next consume()) run inside drl_async_process(): the requests
 * they start go out together in one write at its end, rather than one
 * write each after it. The poll handle's callback is replaced by
 * on_poll(), which adds the handle scope around the adapter's own.
 */
#include <drl/adapters/libuv.h>

#include "addon.h"

#include <stdio.h>

/* The environment whose loop runs on this thread (one JS thread per
 * environment: the main thread or a worker_thread). */
static _Thread_local addon *tl_addon;

static void on_poll(uv_poll_t *poll, int status, int events)
{
	addon *ad = tl_addon;
	napi_handle_scope hs;
	if (ad == NULL || ad->closing ||
	    napi_open_handle_scope(ad->env, &hs) != napi_ok) {
		drl_libuv__on_poll(poll, status, events);
		return;
	}
	drl_libuv__on_poll(poll, status, events);
	napi_close_handle_scope(ad->env, hs);
}

void with_callback_scope(addon *ad, void (*fn)(void *), void *arg)
{
	napi_env env = ad->env;
	napi_handle_scope hs;
	napi_callback_scope cs;
	napi_value resource;
	if (napi_open_handle_scope(env, &hs) != napi_ok) {
		fn(arg);
		return;
	}
	napi_get_reference_value(env, ad->resource, &resource);
	if (napi_open_callback_scope(env, resource, ad->actx, &cs) != napi_ok) {
		fn(arg);
		napi_close_handle_scope(env, hs);
		return;
	}
	fn(arg);
	napi_close_callback_scope(env, cs);
	napi_close_handle_scope(env, hs);
}

/* Poll errors (the descriptor was closed behind the context's back):
 * pending requests stay in the context; say so on stderr, since no JS
 * caller can be told (their promises settle at drl_async_free()). */
static void on_poll_error(drl_libuv *h, const drl_error *err, void *arg)
{
	(void)h;
	(void)arg;
	fprintf(stderr, "libdrl node addon: %s\n", err->message);
}

drl_async *addon_async(napi_env env, addon *ad)
{
	if (ad->async != NULL)
		return ad->async;
	uv_loop_t *loop = NULL;
	if (napi_get_uv_event_loop(env, &loop) != napi_ok || loop == NULL) {
		throw_drl(env, DRL_EINTERNAL,
			  "no libuv loop for this "
			  "environment (napi_get_uv_event_loop)",
			  0);
		return NULL;
	}
	/* A queue as deep as the library allows: a full queue rejects
	 * (DRL_EBUSY), and a Node server may have many requests waiting. */
	drl_async_opts opts = {NODE_WORKERS, 65536};
	drl_error err = {0, {0}};
	drl_async *a = NULL;
	int rc = drl_async_new(&a, &opts, &err);
	/* The requests a round's callbacks start go out in NODE_WRITE_PARTS
	 * writes a round (addon.h), fewer than a C loop's. */
	if (rc == 0)
		rc = drl_async_write_parts(a, NODE_WRITE_PARTS);
	if (rc == 0)
		rc = drl_libuv_attach(&ad->uv, loop, a, &err);
	if (rc != 0) {
		drl_async_free(a);
		throw_drl(env, rc, err.message, 0);
		return NULL;
	}
	drl_libuv_on_error(ad->uv, on_poll_error, NULL);
	/* Same events, our callback: it wraps the adapter's (above). */
	uv_poll_start(&ad->uv->poll, UV_READABLE, on_poll);
	tl_addon = ad;
	ad->async = a;
	return a;
}

int addon_async_free(addon *ad, void (*closed)(void *arg), void *arg)
{
	int on_loop = ad->uv != NULL;
	if (on_loop)
		drl_libuv_on_closed(ad->uv, closed, arg);
	drl_async_free(ad->async); /* detaches ad->uv: closes its handles */
	ad->async = NULL;
	ad->uv = NULL;
	if (tl_addon == ad)
		tl_addon = NULL;
	return on_loop;
}
