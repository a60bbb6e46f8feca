/*
 * drl_allow_batch: many (key, cost) requests on one limiter at one time.
 *
 * The batched path: a limiter of one limit whose Lua twin the store runs
 * (drl__script_usable), on a store whose eval() takes many keys at once
 * (drl__has_batch: Redis tx=lua). The items go to the twin's batch variant
 * (algorithms/lua_batch.lua) in chunks of up to drl__batch_chunk() items,
 * one eval() each: the script decides the chunk's items in order, each by
 * the twin itself, with the arguments drl__script_args gives it, and
 * answers as the twin answers (drl__script_answer reads each item), or
 * with a failure kind for an item the twin failed on (that item's rc
 * only). Anything else (a policy, a store without batches, numbers too
 * large for the twin's doubles, no memory for a chunk) decides the items
 * one by one through the decision's own step (core/decision.c, which
 * calls this file for the script calls). Either way the decisions are
 * those of deciding the items one after the other at the batch's time.
 *
 * One script call per chunk, not per batch: a script blocks the whole
 * server while it runs, so a chunk is kept to about 1.5 ms of server time
 * (drl__batch_chunk: at most DRL__BATCH_CHUNK items, fewer heavy ones),
 * which still spreads the per-call overhead (a round trip, the command's
 * dispatch, the script's KEYS and ARGV) over enough items: measured on
 * token_bucket, chunks of 64 items already reach ~93% of the rate of
 * chunks of 1024, chunks of 256 ~97%, at 1.4 ms a call instead of 5.3.
 * All of a chunk's keys go to one script: on Redis Cluster they would have
 * to share a hash slot; DRL_CAP_BATCH says the store has one server (a
 * cluster store would group the items by slot first, which keeps each
 * key's items in order).
 *
 * With a near cache (block_on_exceed=, near_cache=; core/near.c) the items
 * whose key is blocked are denied locally first (path DRL_PATH_NEAR), the
 * others go to the store as above (the request's `skip` marks the local
 * ones), and the store's denials block their keys. Blocks are those from
 * before the batch: an item denied by the store does not block a later
 * item of the same batch, which the store then decides (the same way).
 */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Roughly how long one item keeps the server busy at worst, in µs
 * (measured on Redis 7.0 over loopback on a small VM; see
 * docs/performance.md): ~5 for the twin and its state's read and write
 * (token_bucket, gcra, a sliding log's entry written in place), one more
 * per counter key read (a sub-window, the previous window of a sliding
 * one), and for a large state about 1 µs per 4 KB of it: a sliding log's
 * twin rewrites its live entries (up to LIMIT of 16 bytes) once the
 * entries that left outnumber them, and a chunk's items may each be at
 * that point. */
static int64_t item_work(const drl__limit *lim)
{
	const drl__algorithm *a = lim->algo;
	size_t state = a->state_size ? a->state_size(lim) : a->state_len;
	return 5 + lim->subwindows + lim->trailing + (int64_t)state / 4096;
}

size_t drl__batch_chunk(const drl__limit *lim)
{
	int64_t n = DRL__BATCH_WORK / item_work(lim);
	if (n > DRL__BATCH_CHUNK)
		n = DRL__BATCH_CHUNK;
	return n < 1 ? 1 : (size_t)n;
}

/* One chunk: up to cap items' keys and arguments, and the script's
 * answers, in one allocation. */
typedef struct chunk {
	size_t cap, n;
	drl__key *keybuf; /* the store keys' bytes */
	drl_bytes *keys;
	/* nargs shared (drl__script_nargs, in room for DRL__SCRIPT_NARGS),
	 * then one cost per item */
	size_t nargs;
	int64_t *args;
	int64_t *out; /* DRL__SCRIPT_NOUT per item */
	size_t *item; /* which item entry j decides */
} chunk;

/* The bytes a chunk of cap items needs. */
static size_t chunk_size(size_t cap)
{
	chunk *c = NULL;
	return cap * (sizeof *c->keybuf + sizeof *c->keys + sizeof *c->args +
		      DRL__SCRIPT_NOUT * sizeof *c->out + sizeof *c->item) +
	       DRL__SCRIPT_NARGS * sizeof *c->args;
}

/* Carve a chunk of cap items out of p (chunk_size(cap) bytes, aligned as
 * malloc aligns). Largest alignment first. */
static void chunk_carve(chunk *c, char *p, size_t cap)
{
	c->cap = cap;
	c->n = 0;
	c->keybuf = (drl__key *)(void *)p;
	c->keys = (drl_bytes *)(void *)(c->keybuf + cap);
	c->args = (int64_t *)(void *)(c->keys + cap);
	c->out = c->args + DRL__SCRIPT_NARGS + cap;
	c->item = (size_t *)(void *)(c->out + cap * DRL__SCRIPT_NOUT);
}

/* A chunk of cap items in one malloc, which it returns for the caller to
 * free (NULL when out of memory). */
static void *chunk_new(chunk *c, size_t cap)
{
	char *p = malloc(chunk_size(cap));
	if (p != NULL)
		chunk_carve(c, p, cap);
	return p;
}

/* The batch script's answer for one item, out[0..DRL__SCRIPT_NOUT), into
 * the item: the twin's decision, or the failure kind it reports. */
static int item_answer(const drl__limit *lim, const int64_t *out, int64_t cost,
		       drl_result *res, drl_error *e)
{
	static const struct {
		int code;
		const char *what;
	} kinds[] = {
		[-DRL__BATCH_FAILED] = {DRL_ESTORE, "failed on the server"},
		[-DRL__BATCH_CORRUPT] = {DRL_ECORRUPT,
					 "found malformed state (ECORRUPT)"},
		[-DRL__BATCH_WRONGTYPE] = {DRL_ESTORE,
					   "met a key of another type "
					   "(WRONGTYPE)"},
		[-DRL__BATCH_OOM] = {DRL_ESTORE,
				     "was refused: the server is out of "
				     "memory (OOM)"},
		[-DRL__BATCH_ANSWER] = {DRL_ECORRUPT,
					"answered something that is not a "
					"decision"},
	};
	drl__undo undo; /* one limit: nothing to give back */
	/* the item's call as the twin saw it (its time does not matter to
	 * an answer: every field is relative to it) */
	drl__call call = {.cost = cost, .peek = cost == 0};
	if (out[0] >= 0 || out[0] < DRL__BATCH_ANSWER)
		return drl__twin_answer(lim, &call, out,
					lim->algo->lua_answer
						? lim->algo->lua_nout
						: DRL__SCRIPT_NOUT,
					res, &undo, e);
	return drl_error_set(e, kinds[-out[0]].code, "%s script %s",
			     lim->algo->lua->name, kinds[-out[0]].what);
}

/* The chunk's items of q answered from the batch script's out[] (rc 0),
 * or each failed with rc (detail ce). */
static void chunk_answer(drl__req *q, const chunk *c, const int64_t *out,
			 int rc, const drl_error *ce)
{
	const drl__limit *lim = &q->l->limits[0];
	drl_batch_item *items = q->items;
	for (size_t j = 0; j < c->n; j++) {
		size_t i = c->item[j];
		drl_error e = {0};
		int irc = rc;
		if (irc == 0) {
			memset(&items[i].result, 0, sizeof items[i].result);
			irc = item_answer(lim, &out[j * DRL__SCRIPT_NOUT],
					  items[i].cost, &items[i].result, &e);
		}
		if (irc)
			drl__req_fail(q, i, irc, rc ? ce : &e);
		else
			items[i].rc = 0;
	}
}

/* The answer of a chunk's script call: rc, or DRL_ECORRUPT when it did
 * not answer DRL__SCRIPT_NOUT values per item. */
static int chunk_checked(const drl__limit *lim, const chunk *c, int rc,
			 size_t nret, drl_error *ce)
{
	if (rc == 0 && nret != c->n * DRL__SCRIPT_NOUT)
		rc = drl_error_set(ce, DRL_ECORRUPT,
				   "%s script answered %zu values for %zu "
				   "items",
				   lim->algo->lua_batch->name, nret, c->n);
	return rc;
}

/* Decide the chunk's items with one eval() of the batch script; each item
 * gets its answer or its failure. After a chunk timed out (*gone holds
 * that), the later ones are not sent: they fail the same way at once, so a
 * batch waits for a server that does not answer about as long as one call
 * does. */
static void run_chunk(drl__req *q, chunk *c, drl_error *gone)
{
	const drl__limit *lim = &q->l->limits[0];
	drl_backend *b = q->l->store->backend;
	drl_error ce = *gone;
	size_t nret = 0;
	int rc = ce.code;
	if (rc == 0) {
		rc = b->eval(b, lim->algo->lua_batch, c->n, c->keys,
			     c->nargs + c->n, c->args, c->out,
			     c->n * DRL__SCRIPT_NOUT, &nret, &ce);
		rc = chunk_checked(lim, c, rc, nret, &ce);
		if (rc == DRL_ETIMEDOUT)
			*gone = ce;
	}
	chunk_answer(q, c, c->out, rc, &ce);
	c->n = 0;
}

/* Item i of q into chunk c (true), unless the near cache decided it or
 * it is bad input (that item's DRL_EINVAL). */
static bool chunk_add(drl__req *q, chunk *c, size_t i)
{
	drl_limiter *l = q->l;
	const drl__limit *lim = &l->limits[0];
	drl__stats *stats = &l->store->stats;
	drl_error e = {0};
	drl_batch_item *it = &q->items[i];
	if (q->skip != NULL && q->skip[i])
		return false;
	int rc = drl__request_check(it->key, it->keylen, it->cost, &e);
	if (rc) {
		drl__req_fail(q, i, rc, &e);
		return false;
	}
	const drl__key_id_buf *id = drl__req_id(q, i); /* begin made it */
	drl__keybase kb;
	drl__keybase_make_id(&kb, l->prefix, l->prefixlen, lim, id->bytes,
			     id->len, id->digest);
	c->keys[c->n] = drl__key_plain(&c->keybuf[c->n], &kb);
	c->args[c->nargs + c->n] = it->cost;
	c->item[c->n++] = i;
	DRL__COUNT(stats, decisions);
	DRL__COUNT(stats, scripts);
	return true;
}

/* The twin's arguments shared by every item of a chunk at now; cost and
 * peek are the script's to set per item (peek: cost == 0, as
 * drl_allow_at). */
static void chunk_args(const drl_limiter *l, chunk *c, int64_t now)
{
	drl__call shared = {.backend = l->store->backend, .now = now};
	drl__script_args(&l->limits[0], &shared, c->args);
	c->nargs = drl__script_nargs(&l->limits[0]);
}

int drl__batch_step(drl__req *q)
{
	size_t cap = drl__batch_chunk(&q->l->limits[0]);
	chunk c;
	void *mem = chunk_new(&c, cap < q->n ? cap : q->n);
	if (mem == NULL)
		return DRL_ENOMEM;
	chunk_args(q->l, &c, q->now);
	drl_error gone = {0};
	for (size_t i = 0; i < q->n; i++) {
		if (chunk_add(q, &c, i) && c.n == c.cap)
			run_chunk(q, &c, &gone);
	}
	if (c.n)
		run_chunk(q, &c, &gone);
	free(mem);
	return 0;
}

bool drl__batch_scripted(const drl_limiter *l, int64_t now)
{
	drl_backend *b = l->store->backend;
	drl__call probe = {.backend = b, .now = now};
	return l->nlimits == 1 && drl__has_batch(b) &&
	       l->limits[0].algo->lua_batch &&
	       drl__script_usable(&l->limits[0], &probe);
}

/* ---- a batch sent as one started call (the async API) --------------------- */

/* A started call's chunk, and whom to tell when it is over. */
typedef struct started {
	chunk c;
	drl__req *q;
	void (*done)(drl__req *q);
} started;

int drl__batch_start_alloc(drl__req *q)
{
	/* the struct, then the chunk at a multiple of 16 bytes, as malloc
	 * aligns */
	size_t ssize = (sizeof(started) + 15) & ~(size_t)15;
	char *mem = malloc(ssize + chunk_size(q->n));
	if (mem == NULL)
		return DRL_ENOMEM;
	started *st = (started *)(void *)mem;
	chunk_carve(&st->c, mem + ssize, q->n);
	st->q = q;
	q->chunk = st;
	return 0;
}

/* The chunk's call is over: its items are final; q's owner is told. */
static void started_end(started *st)
{
	drl__req *q = st->q;
	void (*done)(drl__req *) = st->done;
	q->chunk = NULL;
	free(st);
	done(q);
}

static void started_done(void *arg, int rc, const int64_t *out, size_t nret,
			 const drl_error *err)
{
	started *st = arg;
	drl_error ce = {0};
	if (rc && err)
		ce = *err;
	rc = chunk_checked(&st->q->l->limits[0], &st->c, rc, nret, &ce);
	chunk_answer(st->q, &st->c, out, rc, &ce);
	started_end(st);
}

void drl__batch_start(drl__req *q, void (*done)(drl__req *q))
{
	started *st = q->chunk;
	const drl__limit *lim = &q->l->limits[0];
	drl_backend *b = q->l->store->backend;
	st->done = done;
	chunk_args(q->l, &st->c, q->now);
	for (size_t i = 0; i < q->n; i++)
		chunk_add(q, &st->c, i);
	if (st->c.n == 0) { /* bad items only */
		started_end(st);
		return;
	}
	drl_error e = {0};
	int rc =
		b->eval_start(b, q->chan, lim->algo->lua_batch, st->c.n,
			      st->c.keys, st->c.nargs + st->c.n, st->c.args,
			      st->c.n * DRL__SCRIPT_NOUT, started_done, st, &e);
	if (rc) { /* nothing started: the chunk fails as a call would */
		chunk_answer(q, &st->c, st->c.out, rc, &e);
		started_end(st);
	}
}
