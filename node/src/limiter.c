/*
 * Opening a limiter: open(uri, spec, prefix) returns a promise of a
 * limiter handle (an external tagged lim_tag). The spec is checked at
 * once, on a memory:// store (no I/O), so a bad spec throws a TypeError
 * with the library's message from the constructor; the store is then
 * opened, and the limiter made on it, on libuv's thread pool
 * (drl_store_open() connects to Redis or memcached: the JS thread never
 * waits for that). A bad URI rejects the promise with a TypeError, a
 * store that cannot be reached with an Error (.code DRL_EUNAVAILABLE...).
 */
#include "addon.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const napi_type_tag lim_tag = {0x6c696264726c6e6fULL, 0x64656c696d697431ULL};

typedef struct open_req {
	napi_async_work work;
	addon *ad;
	napi_deferred deferred;
	char *uri, *spec, *prefix;
	lim *l;
	int rc;
	drl_error err;
} open_req;

void lim_release(lim *l)
{
	if (l == NULL || --l->refs > 0)
		return;
	drl_limiter_free(l->limiter);
	drl_store_free(l->store);
	free(l);
}

/*
 * A handle is an external without a finalizer: index.js registers the
 * limiter object in a FinalizationRegistry, whose callback (JS, on the
 * JS thread, never during the environment's teardown) calls release().
 * A Node-API finalizer would run from Node 20's deferred finalizer
 * queue, which can be drained on an napi_env already freed at teardown
 * (node_napi_env__::DrainFinalizerQueue: a SIGSEGV at exit, about 1 run
 * in 25 of node/test/adjust.test.js). What is left at the end is
 * released by the environment's cleanup hook (lim_release_handles).
 */
static void handle_take(addon *ad, lim *l)
{
	l->next = ad->handles;
	if (l->next)
		l->next->pprev = &l->next;
	l->pprev = &ad->handles;
	ad->handles = l;
}

static void handle_drop(lim *l)
{
	if (l->pprev == NULL)
		return; /* released already */
	*l->pprev = l->next;
	if (l->next)
		l->next->pprev = l->pprev;
	l->next = NULL;
	l->pprev = NULL;
	lim_release(l);
}

void lim_release_handles(addon *ad)
{
	while (ad->handles != NULL)
		handle_drop(ad->handles);
}

napi_value js_release(napi_env env, napi_callback_info info)
{
	size_t argc = 1;
	napi_value argv[1];
	napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
	lim *l = argc == 1 ? get_lim(env, argv[0]) : NULL;
	if (l != NULL)
		handle_drop(l);
	return NULL;
}

/* On the thread pool: the blocking part. */
static void open_execute(napi_env env, void *data)
{
	open_req *r = data;
	(void)env;
	r->l = calloc(1, sizeof *r->l);
	if (r->l == NULL) {
		r->rc = DRL_ENOMEM;
		return;
	}
	r->l->refs = 1;
	r->l->inproc = r->uri[0] == '\0' || strncmp(r->uri, "memory:", 7) == 0;
	r->rc = drl_store_open(&r->l->store, r->uri, &r->err);
	if (r->rc == 0)
		r->rc = drl_limiter_new(&r->l->limiter, r->l->store, r->spec,
					r->prefix, &r->err);
	if (r->rc != 0) {
		lim_release(r->l);
		r->l = NULL;
	}
}

static void open_complete(napi_env env, napi_status status, void *data)
{
	open_req *r = data;
	napi_value v = NULL;
	if (status != napi_ok && r->rc == 0) {
		r->rc = DRL_EINTERNAL;
		snprintf(r->err.message, sizeof r->err.message,
			 "opening the store was cancelled");
	}
	if (r->rc == 0 &&
	    napi_create_external(env, r->l, NULL, NULL, &v) == napi_ok &&
	    napi_type_tag_object(env, v, &lim_tag) == napi_ok) {
		handle_take(r->ad, r->l); /* the handle's reference */
		r->l = NULL;
		napi_resolve_deferred(env, r->deferred, v);
	} else {
		if (r->rc == 0) {
			r->rc = DRL_EINTERNAL;
			snprintf(r->err.message, sizeof r->err.message,
				 "cannot make the limiter's handle");
		}
		napi_reject_deferred(
			env, r->deferred,
			make_drl_error(env, r->rc, r->err.message, 1));
	}
	lim_release(r->l);
	napi_delete_async_work(env, r->work);
	free(r->uri);
	free(r->spec);
	free(r->prefix);
	free(r);
}

/* The spec, checked on the memory store: 0, or -1 with a TypeError. */
static int check_spec(napi_env env, addon *ad, const char *spec,
		      const char *prefix)
{
	drl_error err = {0, {0}};
	drl_limiter *l = NULL;
	int rc = drl_limiter_new(&l, ad->check, spec, prefix, &err);
	drl_limiter_free(l);
	if (rc == 0)
		return 0;
	throw_drl(env, rc, err.message, 1);
	return -1;
}

/* open(uri: string, spec: string, prefix: string) -> Promise<handle> */
napi_value js_open(napi_env env, napi_callback_info info)
{
	size_t argc = 3;
	napi_value argv[3], promise, name;
	addon *ad = NULL;
	napi_get_cb_info(env, info, &argc, argv, NULL, (void **)&ad);
	open_req *r = calloc(1, sizeof *r);
	if (r == NULL)
		return throw_drl(env, DRL_ENOMEM, "out of memory", 0);
	r->ad = ad;
	if ((r->uri = get_string(env, argv[0], "store")) == NULL ||
	    (r->spec = get_string(env, argv[1], "spec")) == NULL ||
	    (r->prefix = get_string(env, argv[2], "keyPrefix")) == NULL ||
	    check_spec(env, ad, r->spec, r->prefix) != 0)
		goto fail;
	napi_create_string_utf8(env, "drl:open", NAPI_AUTO_LENGTH, &name);
	if (napi_create_promise(env, &r->deferred, &promise) != napi_ok ||
	    napi_create_async_work(env, NULL, name, open_execute, open_complete,
				   r, &r->work) != napi_ok ||
	    napi_queue_async_work(env, r->work) != napi_ok) {
		throw_drl(env, DRL_EINTERNAL, "cannot queue the store's open",
			  0);
		goto fail; /* leaks a created promise/work: never seen */
	}
	return promise;
fail:
	free(r->uri);
	free(r->spec);
	free(r->prefix);
	free(r);
	return NULL;
}
