/*
 * consume()s made in one tick on a store whose decisions run on the
 * async context's workers (index.js sends memcached:// here; libmemcached
 * blocks, so each decision is a worker hand-off there and one back),
 * decided `chunk` at a time: index.js queues them and flushes the queue
 * once, from a microtask:
 *
 *   decideBatch(handle, keys, points, q, chunk)
 *
 * keys[i] and points[i] are the queue's items in call order (checked
 * here as decide() checks them: a bad one rejects its own item only,
 * with decide()'s message); q is the queue, given back to index.js's
 * settle(q, n, errs) with n items' outcomes in init()'s batch
 * Float64Array, 6 numbers a row: the item's index in the queue, a code
 * (1 allowed, 0 denied, 2 failed: errs[j] is row j's Error) and
 * RateLimiterRes's 4 fields (decide.c).
 *
 * The items are dealt into ceil(n / chunk) chunks, but at least
 * min(n, NODE_WORKERS) (addon.h), by a hash of their key, so all of a
 * key's items are in one chunk, in call order. Each
 * chunk is one drl_async_batch(): one worker decides its items one after
 * the other, as drl_allow_batch() does, and the chunk comes back in one
 * callback, where settle() runs on the JS thread in a callback scope
 * (loop.c says why). So a key's decisions of one tick are made in call
 * order (separate consume()s on the workers may be decided in any
 * order), and a chunk costs two hand-offs instead of two per decision.
 *
 * The price: a stalled server times out a chunk's items one after the
 * other, and the chunk settles when the last has. So once a chunk's store
 * calls fail (an error, or an on_error= decision), the limiter gives
 * each item a chunk of its own (its own timeout, as decide()'s; a key's
 * items then in any order) until a chunk is decided by the store again:
 * only the chunks in flight when the server stalled wait up to `chunk` x
 * timeout_ms (docs/node.md).
 */
#include "addon.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a started chunk needs in its callback. */
typedef struct chunk_req {
	addon *ad;
	lim *l;
	napi_ref q; /* the queue (index.js), for settle() */
	size_t n;
	uint32_t idx[]; /* item j is the queue's item idx[j] */
} chunk_req;

/* Items' keys, copied out of JS into one growing buffer. */
typedef struct arena {
	char *buf;
	size_t len, cap;
} arena;

static int arena_reserve(arena *a, size_t more)
{
	if (a->cap - a->len >= more)
		return 0;
	size_t cap = a->cap ? a->cap : 4096;
	while (cap - a->len < more)
		cap *= 2;
	char *b = realloc(a->buf, cap);
	if (b == NULL)
		return -1;
	a->buf = b;
	a->cap = cap;
	return 0;
}

/* Item i's key into the arena (its offset in *off, length in *len): 0,
 * or -1 with the JS error (thrown by get_key, then taken) in *error. */
static int item_key(napi_env env, napi_value v, arena *a, size_t *off,
		    size_t *len, napi_value *error)
{
	keybuf k;
	if (get_key(env, v, &k) != 0) {
		napi_get_and_clear_last_exception(env, error);
		return -1;
	}
	int rc = arena_reserve(a, k.len + 1);
	if (rc == 0) {
		memcpy(a->buf + a->len, k.bytes, k.len);
		*off = a->len;
		*len = k.len;
		a->len += k.len;
	} else {
		*error = make_drl_error(env, DRL_ENOMEM, "out of memory", 0);
	}
	keybuf_free(&k);
	return rc;
}

napi_value refused(napi_env env, lim *l, const char *key, size_t len,
		   int64_t cost)
{
	if (cost >= 0 && len > 0 && len <= DRL_KEY_MAX)
		return NULL;
	drl_result r;
	drl_error err = {0, {0}};
	int rc = drl_allow(l->limiter, key, len, cost, &r, &err);
	return rc == 0 ? NULL : make_drl_error(env, rc, err.message, 0);
}

/* Call settle(q, n, errs) for the rows in the batch array and errs. */
static void call_settle(napi_env env, addon *ad, napi_value q, size_t n,
			napi_value errs)
{
	napi_value fn, argv[3], recv;
	argv[0] = q;
	napi_create_uint32(env, (uint32_t)n, &argv[1]);
	argv[2] = errs;
	napi_get_reference_value(env, ad->settle, &fn);
	napi_get_undefined(env, &recv);
	napi_call_function(env, recv, fn, 3, argv, NULL);
}

/* Settle the queue's items idx[0..n) with the library's outcome: items
 * (rc and err as the batch gave them), or, items NULL, all failed with
 * rc and err. */
static void settle(napi_env env, addon *ad, napi_value q, const uint32_t *idx,
		   size_t n, const drl_batch_item *items, int rc,
		   const drl_error *err)
{
	double *f = ad->bout;
	napi_value errs;
	napi_create_array(env, &errs);
	for (size_t j = 0; j < n; j++, f += 6) {
		int irc = items && items[j].rc ? items[j].rc : rc;
		f[0] = idx[j];
		if (irc == 0) {
			f[1] = items[j].result.allowed;
			decision_fields(&items[j].result, items[j].cost, f + 2);
			continue;
		}
		/* err describes the first item that failed; the others of
		 * the same code (a store that failed fails them all alike)
		 * get its message, any other the code's text. */
		const char *msg = err != NULL && err->code == irc
					  ? err->message
					  : drl_strerror(irc);
		f[1] = 2;
		napi_set_element(env, errs, (uint32_t)j,
				 make_drl_error(env, irc, msg, 0));
	}
	call_settle(env, ad, q, n, errs);
}

typedef struct done_args {
	chunk_req *c;
	int rc;
	const drl_batch_item *items;
	size_t n;
	const drl_error *err;
} done_args;

static void settle_done(void *arg)
{
	done_args *d = arg;
	chunk_req *c = d->c;
	napi_value q;
	napi_get_reference_value(c->ad->env, c->q, &q);
	settle(c->ad->env, c->ad, q, c->idx, c->n,
	       d->n == c->n ? d->items : NULL, d->rc, d->err);
}

/* Whether a batch's outcome says the store failed: an item's error, or
 * a decision of the on_error= policy rather than of the store. */
static int troubled(int rc, const drl_batch_item *items, size_t n)
{
	if (rc != 0)
		return 1;
	for (size_t j = 0; j < n; j++)
		if (items[j].rc != 0 ||
		    (items[j].result.path != DRL_PATH_STORE &&
		     items[j].result.path != DRL_PATH_NEAR))
			return 1;
	return 0;
}

static void chunk_done(drl_async *a, int rc, const drl_batch_item *items,
		       size_t n, const drl_error *err, void *arg)
{
	chunk_req *c = arg;
	addon *ad = c->ad;
	(void)a;
	c->l->trouble = troubled(rc, items, n);
	if (!ad->closing) {
		done_args d = {c, rc, items, n, err};
		with_callback_scope(ad, settle_done, &d);
		napi_delete_reference(ad->env, c->q);
	}
	lim_release(c->l);
	free(c);
}

/* Start the chunk items[0..n) (the queue's items idx[0..n)): 0, or the
 * start's error code with err set. */
static int start_chunk(napi_env env, addon *ad, lim *l, napi_value q,
		       const drl_batch_item *items, const uint32_t *idx,
		       size_t n, drl_error *err)
{
	drl_async *a = addon_async(env, ad);
	chunk_req *c = a ? malloc(sizeof *c + n * sizeof *idx) : NULL;
	if (c == NULL) {
		napi_value e;
		if (a == NULL) /* addon_async() threw: taken, said in err */
			napi_get_and_clear_last_exception(env, &e);
		snprintf(err->message, sizeof err->message, "%s",
			 a ? "out of memory" : "no async context");
		return a ? DRL_ENOMEM : DRL_EINTERNAL;
	}
	c->ad = ad;
	c->l = l;
	c->n = n;
	memcpy(c->idx, idx, n * sizeof *idx);
	napi_create_reference(env, q, 1, &c->q);
	l->refs++; /* the chunk's, released in chunk_done() */
	int rc = drl_async_batch(a, l->limiter, items, n, chunk_done, c, err);
	if (rc != 0) {
		napi_delete_reference(env, c->q);
		lim_release(l);
		free(c);
	}
	return rc;
}

/* FNV-1a of a key's bytes: which chunk its items go to. */
static uint32_t key_hash(const char *p, size_t n)
{
	uint32_t h = 2166136261u;
	while (n--)
		h = (h ^ (unsigned char)*p++) * 16777619u;
	return h;
}

/* decideBatch's working arrays for n items: the items, their copy
 * grouped by chunk (part), each key's offset in the arena, each part's
 * item index, each item's chunk, and the chunks' starts (n + 2). */
typedef struct batch_bufs {
	drl_batch_item *items, *part;
	size_t *koff;
	uint32_t *idx, *which, *start;
} batch_bufs;

static void batch_bufs_free(batch_bufs *bb)
{
	free(bb->items);
	free(bb->part);
	free(bb->koff);
	free(bb->idx);
	free(bb->which);
	free(bb->start);
}

/* 0, or -1 (out of memory, nothing held). */
static int batch_bufs_new(batch_bufs *bb, size_t n)
{
	bb->items = calloc(n, sizeof *bb->items);
	bb->part = calloc(n, sizeof *bb->part);
	bb->koff = calloc(n, sizeof *bb->koff);
	bb->idx = calloc(n, sizeof *bb->idx);
	bb->which = calloc(n, sizeof *bb->which);
	bb->start = calloc(n + 2, sizeof *bb->start);
	if (bb->items && bb->part && bb->koff && bb->idx && bb->which &&
	    bb->start)
		return 0;
	batch_bufs_free(bb);
	return -1;
}

/* direct(handle): whether the limiter's consume()s are decided without
 * a worker (drl_async_direct: memcached's counters on its channel, on
 * Node's loop); false: they go to workers, where batches pay. */
napi_value js_direct(napi_env env, napi_callback_info info)
{
	size_t argc = 1;
	napi_value argv[1], out;
	lim *l;
	napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
	if ((l = get_lim(env, argv[0])) == NULL)
		return NULL;
	napi_get_boolean(env, drl_async_direct(l->limiter) == 1, &out);
	return out;
}

/* decideBatch(handle, keys, points, q, chunk) */
napi_value js_decide_batch(napi_env env, napi_callback_info info)
{
	size_t argc = 5;
	napi_value argv[5], errs;
	addon *ad;
	uint32_t n = 0, chunk = 1;
	lim *l;
	napi_get_cb_info(env, info, &argc, argv, NULL, (void **)&ad);
	if ((l = get_lim(env, argv[0])) == NULL)
		return NULL;
	napi_get_array_length(env, argv[1], &n);
	napi_get_value_uint32(env, argv[4], &chunk);
	if (n == 0 || n > ad->bout_items || chunk == 0)
		return throw_drl(env, DRL_EINVAL, "decideBatch: bad batch", 1);

	batch_bufs bb;
	if (batch_bufs_new(&bb, n) != 0)
		return throw_drl(env, DRL_ENOMEM, "out of memory", 0);
	drl_batch_item *items = bb.items, *part = bb.part;
	size_t *koff = bb.koff;
	uint32_t *idx = bb.idx, *which = bb.which, *start = bb.start;
	arena ar = {0};

	/* The items; the bad ones settled at once. */
	size_t nbad = 0;
	napi_create_array(env, &errs);
	for (uint32_t i = 0; i < n; i++) {
		napi_value kv, pv, bad = NULL;
		napi_get_element(env, argv[1], i, &kv);
		napi_get_element(env, argv[2], i, &pv);
		if (get_points(env, pv, "points", &items[i].cost) != 0)
			napi_get_and_clear_last_exception(env, &bad);
		else if (item_key(env, kv, &ar, &koff[i], &items[i].keylen,
				  &bad) == 0)
			bad = refused(env, l, ar.buf + koff[i], items[i].keylen,
				      items[i].cost);
		if (bad == NULL)
			continue;
		items[i].keylen = 0; /* not decided */
		ad->bout[6 * nbad] = i;
		ad->bout[6 * nbad + 1] = 2;
		napi_set_element(env, errs, (uint32_t)nbad++, bad);
	}
	if (nbad)
		call_settle(env, ad, argv[3], nbad, errs);

	/* The good ones into ceil(n / chunk) chunks by key, but at least
	 * min(n, NODE_WORKERS): each chunk's round trips are made one after
	 * the other on one worker, so fewer chunks than workers would leave
	 * workers idle that would have decided an item each (16 in flight in
	 * one chunk ran at half the rate of 16 apart). While the store fails,
	 * each item alone: its own timeout. Each chunk's items in call
	 * order: part[start[c]..start[c + 1]) is chunk c. */
	uint32_t nch = (n - 1) / chunk + 1;
	if (nch < NODE_WORKERS)
		nch = n < NODE_WORKERS ? n : NODE_WORKERS;
	if (l->trouble)
		nch = n;
	for (uint32_t i = 0; i < n; i++) {
		if (items[i].keylen == 0)
			continue;
		items[i].key = ar.buf + koff[i];
		which[i] =
			l->trouble
				? i
				: key_hash(items[i].key, items[i].keylen) % nch;
		start[which[i] + 2]++;
	}
	for (uint32_t c = 2; c <= nch; c++)
		start[c] += start[c - 1];
	for (uint32_t i = 0; i < n; i++) {
		if (items[i].keylen == 0)
			continue;
		uint32_t j = start[which[i] + 1]++;
		idx[j] = i;
		part[j] = items[i];
	}
	for (uint32_t c = 0; c < nch; c++) {
		size_t m = start[c + 1] - start[c];
		drl_error err = {0, {0}};
		int rc = m ? start_chunk(env, ad, l, argv[3], part + start[c],
					 idx + start[c], m, &err)
			   : 0;
		if (rc != 0) { /* not started: every item fails */
			err.code = rc;
			settle(env, ad, argv[3], idx + start[c], m, NULL, rc,
			       &err);
		}
	}
	batch_bufs_free(&bb);
	free(ar.buf);
	return NULL;
}
