/*
 * consume() and get(): one decision through the async API
 * (drl_async_allow on the environment's context, on Node's loop). The
 * promise is index.js's, made around decide(handle, key, points, get,
 * id); the decision's callback settles it on the JS thread through
 * init()'s settleOne(id, code, err), the result's fields in init()'s
 * Float64Array (no promise, reference or object made in C):
 *   consume: resolves a RateLimiterRes when allowed, rejects with one when
 *            denied, rejects with an Error (the library's message, .code
 *            its name) when the store failed;
 *   get:     a cost-0 decision (consumes nothing): resolves a
 *            RateLimiterRes, or null when the key's quota is full (RLF's
 *            "no record").
 * Start errors (bad key or points, a full queue) throw, and settle
 * nothing; index.js turns them into rejections. On memory:// index.js calls decideNow() instead,
 * which decides at once (below).
 */
#include "addon.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct decide_req {
	uint32_t id; /* index.js's slot for the promise's functions */
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

/* Settle q's promise with the decision (rc, result, err): settleOne(id,
 * code, err), code 1 allowed and 0 denied (the fields in ad->out, read
 * by settleOne before it returns), 3 get() with nothing used (null), 2
 * failed (err, an Error). A throw from settleOne is reported as an
 * uncaught exception. */
static void settle(napi_env env, decide_req *q, int rc,
		   const drl_result *result, const drl_error *err)
{
	addon *ad = q->ad;
	napi_value fn, recv, argv[3], exc;
	int code;
	if (rc != 0) {
		code = 2;
		argv[2] = make_drl_error(env, rc, err->message, 0);
	} else {
		code = q->get && result->remaining >= result->limit
			       ? 3
			       : result->allowed;
		decision_fields(result, q->cost, ad->out);
		napi_get_undefined(env, &argv[2]);
	}
	napi_create_uint32(env, q->id, &argv[0]);
	napi_create_int32(env, code, &argv[1]);
	napi_get_reference_value(env, ad->settle_one, &fn);
	napi_get_undefined(env, &recv);
	if (napi_call_function(env, recv, fn, 3, argv, NULL) ==
		    napi_pending_exception &&
	    napi_get_and_clear_last_exception(env, &exc) == napi_ok)
		napi_fatal_exception(env, exc);
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
		       lim **l, keybuf *k, int64_t *cost, bool *get,
		       uint32_t *id)
{
	size_t argc = 5;
	napi_value argv[5];
	napi_get_cb_info(env, info, &argc, argv, NULL, (void **)ad);
	*get = false;
	*cost = 0;
	if (argc < 5 || napi_get_value_uint32(env, argv[4], id) != napi_ok) {
		napi_throw_type_error(env, "DRL_EINVAL", "decide: no slot id");
		return -1;
	}
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

/* decide(handle, key, points, get: boolean, id) -> undefined: starts
 * the decision, settled by settleOne(id, ...) (settle() above); a bad
 * argument or a start that fails throws, and nothing is settled. */
napi_value js_decide(napi_env env, napi_callback_info info)
{
	addon *ad;
	lim *l;
	keybuf k;
	int64_t cost;
	bool get;
	uint32_t id = 0;
	if (decide_args(env, info, &ad, &l, &k, &cost, &get, &id) != 0)
		return NULL;
	drl_async *a = addon_async(env, ad);
	decide_req *q = a ? malloc(sizeof *q) : NULL;
	if (q == NULL) {
		keybuf_free(&k);
		return a ? throw_drl(env, DRL_ENOMEM, "out of memory", 0)
			 : NULL;
	}
	q->id = id;
	q->ad = ad;
	q->l = l;
	q->cost = cost;
	q->get = get;
	drl_error err = {0, {0}};
	l->refs++; /* the request's, released by its callback */
	int rc = drl_async_allow(a, l->limiter, k.bytes, k.len, cost, decided,
				 q, &err);
	keybuf_free(&k);
	if (rc != 0) {
		/* No callback follows. */
		lim_release(l);
		free(q);
		return throw_drl(env, rc, err.message, 0);
	}
	return NULL;
}

/* Item i's Error into errs (made at the first) and its row's code 2. */
static void fail_item(napi_env env, napi_value *errs, double *f, uint32_t i,
		      napi_value e)
{
	if (*errs == NULL)
		napi_create_array(env, errs);
	napi_set_element(env, *errs, i, e);
	f[1] = 2;
}

/* decideNowMany()'s items live on the stack up to this many. */
#define NOW_MANY_STACK 64

/* The items of one decideNowMany(): up to n of them, with each one's
 * queue index (idx) and its key's bytes (kb); on the stack up to
 * NOW_MANY_STACK. */
typedef struct now_items {
	drl_batch_item *items;
	uint32_t *idx;
	keybuf *kb;
	size_t m; /* the good ones so far */
	napi_value errs;
	drl_batch_item stack_items[NOW_MANY_STACK];
	uint32_t stack_idx[NOW_MANY_STACK];
} now_items;

/* Room for n items: 0, or -1 when out of memory (nothing held). */
static int now_items_init(now_items *t, size_t n, keybuf *stack_kb)
{
	t->m = 0;
	t->errs = NULL;
	t->items = t->stack_items;
	t->idx = t->stack_idx;
	t->kb = stack_kb;
	if (n <= NOW_MANY_STACK)
		return 0;
	t->items = malloc(n * sizeof *t->items);
	t->idx = malloc(n * sizeof *t->idx);
	t->kb = malloc(n * sizeof *t->kb);
	if (t->items && t->idx && t->kb)
		return 0;
	free(t->items);
	free(t->idx);
	free(t->kb);
	return -1;
}

static void now_items_free(now_items *t)
{
	for (size_t j = 0; j < t->m; j++)
		if (t->kb[j].owned != NULL) /* a long key's */
			keybuf_free(&t->kb[j]);
	if (t->items == t->stack_items)
		return;
	free(t->items);
	free(t->idx);
	free(t->kb);
}

/* Item i (row i of the batch array: its points in the first number),
 * of key[0..len): into t, or failed at once (its row's code 2, its
 * Error in t->errs) with a lone call's message. */
static void now_item(napi_env env, addon *ad, lim *l, now_items *t, uint32_t i,
		     const char *key, size_t len)
{
	double *f = ad->bout + 6 * (size_t)i;
	napi_value bad = NULL;
	int64_t cost = 0;
	if (points_of(env, f[0], "points", &cost) != 0)
		napi_get_and_clear_last_exception(env, &bad);
	else
		bad = refused(env, l, key, len, cost);
	if (bad != NULL) {
		fail_item(env, &t->errs, f, i, bad);
		return;
	}
	/* The inputs only: the result is drl_allow_batch()'s to write
	 * (zeroing it would be a rep stos an item). */
	drl_batch_item *it = &t->items[t->m];
	it->key = key;
	it->keylen = len;
	it->cost = cost;
	it->rc = 0;
	t->idx[t->m++] = i;
}

/* Decide t's good items by one drl_allow_batch() and write each one's
 * row: its code (1 allowed, 0 denied, 2 failed: its Error in t->errs)
 * and RateLimiterRes's fields. */
static void now_decide(napi_env env, addon *ad, lim *l, now_items *t)
{
	drl_batch_item *items = t->items;
	drl_error err = {0, {0}};
	int rc = t->m ? drl_allow_batch(l->limiter, items, t->m, &err) : 0;
	for (uint32_t j = 0; j < t->m; j++) {
		double *f = ad->bout + 6 * (size_t)t->idx[j];
		int irc = rc ? rc : items[j].rc;
		if (irc == 0) {
			f[1] = items[j].result.allowed;
			decision_fields(&items[j].result, items[j].cost, f + 2);
			continue;
		}
		/* err describes the first item that failed; the others of
		 * its code (the store failed them alike) get its message. */
		fail_item(env, &t->errs, f, t->idx[j],
			  make_drl_error(env, irc,
					 err.code == irc ? err.message
							 : drl_strerror(irc),
					 0));
	}
}

/* The limiter of a decideNowMany() of n items:
 * NULL with an error thrown unless it is memory:// and n fits. */
static lim *now_lim(napi_env env, addon *ad, napi_value h, size_t n,
		    const char *what)
{
	char msg[64];
	lim *l = get_lim(env, h);
	if (l == NULL)
		return NULL;
	if (l->inproc && n > 0 && n <= ad->bout_items)
		return l;
	snprintf(msg, sizeof msg, "%s: %s", what,
		 l->inproc ? "bad batch" : "not memory://");
	throw_drl(env, DRL_EINVAL, msg, 1);
	return NULL;
}

/* decideNowMany(handle, ...keys) -> undefined, or errs: the memory://
 * consume()s of one tick (index.js queues them and calls this once, from
 * a microtask), decided now in call order by one drl_allow_batch(): the
 * decisions of drl_allow() on each in turn, at one time. Row i of
 * init()'s batch Float64Array (6 numbers a row) is item i: index.js
 * writes its points in the row's first number (a Number: index.js checked
 * the type); this writes its code (1 allowed, 0 denied, 2 failed) in the
 * second and RateLimiterRes's 4 fields in the rest. A bad key or points,
 * or a store error, fails its own item only, with the Error a lone
 * decideNow() would throw, in errs[i] (errs made at the first failure).
 * One call for a tick's items keeps libdrl's path in the CPU's caches,
 * which the JS heap evicts between lone calls. A bad handle or n throws. */
napi_value js_decide_now_many(napi_env env, napi_callback_info info)
{
	size_t argc = NOW_MANY_STACK + 1;
	napi_value stack_argv[NOW_MANY_STACK + 1], *argv = stack_argv;
	keybuf stack_kb[NOW_MANY_STACK];
	now_items t;
	addon *ad;
	lim *l;
	napi_get_cb_info(env, info, &argc, argv, NULL, (void **)&ad);
	size_t n = argc ? argc - 1 : 0;
	if ((l = now_lim(env, ad, argv[0], n, "decideNowMany")) == NULL)
		return NULL;
	if (n > NOW_MANY_STACK) { /* more than fit: all of them, on the heap */
		argv = malloc((n + 1) * sizeof *argv);
		if (argv == NULL)
			return throw_drl(env, DRL_ENOMEM, "out of memory", 0);
		argc = n + 1;
		napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
	}
	if (now_items_init(&t, n, stack_kb) != 0) {
		if (argv != stack_argv)
			free(argv);
		return throw_drl(env, DRL_ENOMEM, "out of memory", 0);
	}
	for (uint32_t i = 0; i < n; i++) {
		keybuf *k = &t.kb[t.m];
		size_t m = t.m;
		napi_value bad;
		if (get_key(env, argv[i + 1], k) != 0) {
			napi_get_and_clear_last_exception(env, &bad);
			fail_item(env, &t.errs, ad->bout + 6 * (size_t)i, i,
				  bad);
			continue;
		}
		now_item(env, ad, l, &t, i, k->bytes, k->len);
		if (t.m == m) /* failed: its key is let go now */
			keybuf_free(k);
	}
	now_decide(env, ad, l, &t);
	napi_value errs = t.errs;
	now_items_free(&t);
	if (argv != stack_argv)
		free(argv);
	return errs;
}
