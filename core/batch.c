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
 * one by one through drl_allow_at's own code. Either way the decisions are
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
 * others go to the store as above (`skip` marks the local ones), and the
 * store's denials block their keys. Blocks are those from before the
 * batch: an item denied by the store does not block a later item of the
 * same batch, which the store then decides (the same way).
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
	int64_t *args; /* DRL__SCRIPT_NARGS shared, then one cost per item */
	int64_t *out;  /* DRL__SCRIPT_NOUT per item */
	size_t *item;  /* which item entry j decides */
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

/* Item i failed with rc; *first is the lowest failed index so far, whose
 * detail err holds (the detail `d` when it is about rc). */
static void item_fail(drl_batch_item *items, size_t i, int rc,
		      const drl_error *d, drl_error *err, size_t *first)
{
	items[i].rc = rc;
	drl__result_deny(&items[i].result);
	if (i >= *first)
		return;
	*first = i;
	if (d != NULL && d->code == rc)
		drl_error_set(err, rc, "item %zu: %s", i, d->message);
	else
		drl_error_set(err, rc, "item %zu: %s", i, drl_strerror(rc));
}

/* Whether item i was decided by the near cache (skip may be NULL). */
static bool skipped(const bool *skip, size_t i)
{
	return skip != NULL && skip[i];
}

/* Every item through the single-request path. */
static void decide_each(drl_limiter *l, drl_batch_item *items, size_t n,
			int64_t now, drl_error *err, size_t *first,
			const bool *skip)
{
	for (size_t i = 0; i < n; i++) {
		drl_error e = {0};
		drl_batch_item *it = &items[i];
		if (skipped(skip, i))
			continue;
		int rc = drl__limiter_decide(l, it->key, it->keylen, it->cost,
					     now, &it->result, &e);
		if (rc)
			item_fail(items, i, rc, &e, err, first);
		else
			it->rc = 0;
	}
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

/* The chunk's items answered from the batch script's out[] (rc 0), or
 * each failed with rc (detail ce). */
static void chunk_answer(const drl__limit *lim, const chunk *c,
			 const int64_t *out, drl_batch_item *items, int rc,
			 const drl_error *ce, drl_error *err, size_t *first)
{
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
			item_fail(items, i, irc, rc ? ce : &e, err, first);
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
static void run_chunk(const drl__limit *lim, drl_backend *b, chunk *c,
		      drl_batch_item *items, drl_error *gone, drl_error *err,
		      size_t *first)
{
	drl_error ce = *gone;
	size_t nret = 0;
	int rc = ce.code;
	if (rc == 0) {
		rc = b->eval(b, lim->algo->lua_batch, c->n, c->keys,
			     DRL__SCRIPT_NARGS + c->n, c->args, c->out,
			     c->n * DRL__SCRIPT_NOUT, &nret, &ce);
		rc = chunk_checked(lim, c, rc, nret, &ce);
		if (rc == DRL_ETIMEDOUT)
			*gone = ce;
	}
	chunk_answer(lim, c, c->out, items, rc, &ce, err, first);
	c->n = 0;
}

/* Item i into chunk c (true), unless the near cache decided it or it is
 * bad input (that item's DRL_EINVAL). */
static bool chunk_add(drl_limiter *l, chunk *c, drl_batch_item *items, size_t i,
		      drl_error *err, size_t *first, const bool *skip)
{
	const drl__limit *lim = &l->limits[0];
	drl__stats *stats = &l->store->stats;
	drl_error e = {0};
	drl_batch_item *it = &items[i];
	if (skipped(skip, i))
		return false;
	int rc = drl__request_check(it->key, it->keylen, it->cost, &e);
	if (rc) {
		item_fail(items, i, rc, &e, err, first);
		return false;
	}
	drl__keybase kb;
	drl__keybase_make(&kb, l->prefix, l->prefixlen, lim, it->key,
			  it->keylen);
	c->keys[c->n] = drl__key_plain(&c->keybuf[c->n], &kb);
	c->args[DRL__SCRIPT_NARGS + c->n] = it->cost;
	c->item[c->n++] = i;
	DRL__COUNT(stats, decisions);
	DRL__COUNT(stats, scripts);
	return true;
}

/* The batched path (see the top). DRL_ENOMEM, with no item touched, when
 * there is no memory for it: the caller then decides one by one. */
static int decide_batched(drl_limiter *l, drl_batch_item *items, size_t n,
			  int64_t now, drl_error *err, size_t *first,
			  const bool *skip)
{
	const drl__limit *lim = &l->limits[0];
	drl_backend *b = l->store->backend;
	size_t cap = drl__batch_chunk(lim);
	chunk c;
	void *mem = chunk_new(&c, cap < n ? cap : n);
	if (mem == NULL)
		return DRL_ENOMEM;

	/* The twin's arguments shared by every item; cost and peek are the
	 * script's to set per item (peek: cost == 0, as drl_allow_at). */
	drl__call shared = {.backend = b, .now = now};
	drl__script_args(lim, &shared, c.args);
	drl_error gone = {0};
	for (size_t i = 0; i < n; i++) {
		if (chunk_add(l, &c, items, i, err, first, skip) &&
		    c.n == c.cap)
			run_chunk(lim, b, &c, items, &gone, err, first);
	}
	if (c.n)
		run_chunk(lim, b, &c, items, &gone, err, first);
	free(mem);
	return 0;
}

/* DRL_EINVAL for a call that cannot run at all. */
static int check_call(const drl_limiter *l, const drl_batch_item *items,
		      size_t n, drl_error *err)
{
	if (l == NULL || items == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_allow_batch: NULL %s",
				     l == NULL ? "limiter" : "items");
	if (n == 0 || n > DRL_BATCH_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "a batch of %zu items is outside 1..%d", n,
				     DRL_BATCH_MAX);
	return 0;
}

/* Decide every item at `now` (checked, or DRL__NOW_STORE) on the store. */
static void decide_on_store(drl_limiter *l, drl_batch_item *items, size_t n,
			    int64_t now, drl_error *err, size_t *first,
			    const bool *skip)
{
	drl_backend *b = l->store->backend;
	drl__call probe = {.backend = b, .now = now};
	if (l->nlimits == 1 && drl__has_batch(b) &&
	    l->limits[0].algo->lua_batch &&
	    drl__script_usable(&l->limits[0], &probe) &&
	    decide_batched(l, items, n, now, err, first, skip) == 0)
		return;
	decide_each(l, items, n, now, err, first, skip);
}

/* The batch's outcome for the breaker: an item's unreachable error first,
 * else its first store failure, else 0. */
static int store_outcome(const drl_batch_item *items, size_t n)
{
	int any = 0;
	for (size_t i = 0; i < n; i++) {
		if (drl__is_unreachable(items[i].rc))
			return items[i].rc;
		if (any == 0 && drl__is_store_failure(items[i].rc))
			any = items[i].rc;
	}
	return any;
}

/* No store decision at all (breaker open, or the store's clock failed
 * with rc, detail e): every item fails as drl_allow() would, a bad key or
 * cost with its own DRL_EINVAL (bad input is never a store error). */
static void fail_all(drl_batch_item *items, size_t n, int rc,
		     const drl_error *e, drl_error *err, size_t *first,
		     const bool *skip)
{
	for (size_t i = 0; i < n; i++) {
		drl_error ie = {0};
		drl_batch_item *it = &items[i];
		if (skipped(skip, i))
			continue;
		int irc =
			drl__request_check(it->key, it->keylen, it->cost, &ie);
		if (irc)
			item_fail(items, i, irc, &ie, err, first);
		else
			item_fail(items, i, rc, e, err, first);
	}
}

/* The items the near cache denies: skip[i] set, rc 0, the local denial.
 * Returns how many are left for the store (bad items among them: the
 * store path refuses those, as without a cache). */
static size_t near_deny(drl_limiter *l, drl_batch_item *items, size_t n,
			int base, int64_t t, bool *skip)
{
	size_t left = 0;
	for (size_t i = 0; i < n; i++) {
		drl_batch_item *it = &items[i];
		drl__near_req q;
		skip[i] = false;
		if (it->cost <= 0 ||
		    drl__request_check(it->key, it->keylen, it->cost, NULL)) {
			left++;
			continue;
		}
		drl__near_req_make(l->near, &q, it->key, it->keylen, base, t);
		skip[i] = drl__near_check(l->near, &q, it->cost, &it->result);
		if (skip[i]) {
			it->rc = 0;
			DRL__COUNT(&l->store->stats, near_denials);
		} else {
			left++;
		}
	}
	return left;
}

/* The store's own decisions of the items it was asked: denials block. */
static void near_learn(drl_limiter *l, drl_batch_item *items, size_t n,
		       int base, int64_t t, const bool *skip)
{
	for (size_t i = 0; i < n; i++) {
		drl_batch_item *it = &items[i];
		drl__near_req q;
		if (skip[i] || it->rc != 0 || it->cost <= 0 ||
		    it->result.path != DRL_PATH_STORE)
			continue;
		drl__near_req_make(l->near, &q, it->key, it->keylen, base, t);
		drl__near_record(l->near, &q, it->cost, &it->result);
	}
}

/* After the store step (rc: no store decision at all, detail e): the
 * failed items fail, the store's denials block their keys, and each item
 * the store failed for is decided by the on_error policy. */
static void settle(drl_limiter *l, drl_batch_item *items, size_t n, int64_t now,
		   int rc, const drl_error *e, drl_error *err, size_t *first,
		   const bool *skip, int base, int64_t t)
{
	if (rc)
		fail_all(items, n, rc, e, err, first, skip);
	else if (skip != NULL)
		near_learn(l, items, n, base, t, skip);
	if (l->on_error == DRL__ON_ERROR_RETURN)
		return;
	for (size_t i = 0; i < n; i++) {
		drl_batch_item *it = &items[i];
		if (drl__is_store_failure(it->rc) &&
		    drl__fallback(l, it->key, it->keylen, it->cost, now,
				  &it->result, NULL) == 0)
			it->rc = 0;
	}
}

/* Decide every item at `now` (checked, DRL__NOW_STORE, or DRL__NOW_READ)
 * as drl_allow() would: the near cache first, then behind the breaker (one
 * call for the batch), and each item the store failed for decided by the
 * on_error policy. */
static void decide(drl_limiter *l, drl_batch_item *items, size_t n, int64_t now,
		   drl_error *err)
{
	size_t first = SIZE_MAX;
	drl_error e = {0};
	bool probe, skip_buf[DRL_BATCH_MAX], *skip = NULL;
	int base = 0;
	int64_t t = 0;
	if (l->near != NULL) {
		drl__near_now(now, &base, &t);
		skip = skip_buf;
		if (near_deny(l, items, n, base, t, skip) == 0)
			return; /* every item denied here: no store call */
	}
	int rc = drl__breaker_enter(l->store, &probe, &e);
	if (rc == 0) {
		if (now == DRL__NOW_READ)
			rc = drl__limiter_now(l, &now, &e);
		if (rc == 0)
			decide_on_store(l, items, n, now, err, &first, skip);
		drl__breaker_leave(l->store, probe,
				   rc ? rc : store_outcome(items, n));
	}
	settle(l, items, n, now, rc, &e, err, &first, skip, base, t);
}

/* Each decided item answered as drl_allow() answers it (would_allow;
 * shadow=1). */
static void answer_items(drl_limiter *l, drl_batch_item *items, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (items[i].rc == 0)
			drl__shadow_answer(l, &items[i].result);
}

static void decide_answer(drl_limiter *l, drl_batch_item *items, size_t n,
			  int64_t now, drl_error *err)
{
	decide(l, items, n, now, err);
	answer_items(l, items, n);
}

int drl_allow_batch_at(drl_limiter *l, drl_batch_item *items, size_t n,
		       int64_t now_us, drl_error *err)
{
	int rc = check_call(l, items, n, err);
	if (rc == 0)
		rc = drl__time_check(now_us, err);
	if (rc)
		return rc;
	decide_answer(l, items, n, now_us, err);
	return 0;
}

int drl_allow_batch(drl_limiter *l, drl_batch_item *items, size_t n,
		    drl_error *err)
{
	int rc = check_call(l, items, n, err);
	if (rc)
		return rc;
	decide_answer(l, items, n, DRL__NOW_READ, err);
	return 0;
}

/* ---- a batch decided around one started call (the async API) ----------- */

/* Whether l decides a checked batch of n items at now_us (explicit, or
 * DRL__NOW_READ) with one started call of the batch script: what
 * decide_on_store() would send as one chunk, on a store that starts calls
 * (DRL_CAP_EVAL_START); *now is the time it decides at then. */
bool drl__batch_started_usable(const drl_limiter *l, size_t n, int64_t now_us,
			       int64_t *now)
{
	drl_backend *b = l->store->backend;
	return l->nlimits == 1 && drl__has_batch(b) &&
	       l->limits[0].algo->lua_batch &&
	       n <= drl__batch_chunk(&l->limits[0]) &&
	       drl__started_usable(l, now_us, now);
}

/* What a started batch keeps between begin and its store call's end. */
struct drl__batch_run {
	drl__batch_started *d;
	chunk c;
	size_t first;
	bool probe;
	bool *skip; /* NULL without a near cache */
	int base;
	int64_t t;
};

/* The store step is over (rc: no store decision at all, detail e): the
 * rest of decide() and decide_answer(), then the owner is told. */
static void started_end(struct drl__batch_run *r, bool entered, int rc,
			const drl_error *e, void *mem)
{
	drl__batch_started *d = r->d;
	drl_limiter *l = d->l;
	if (entered)
		drl__breaker_leave(l->store, r->probe,
				   rc ? rc : store_outcome(d->items, d->n));
	settle(l, d->items, d->n, d->now, rc, e, d->err, &r->first, r->skip,
	       r->base, r->t);
	answer_items(l, d->items, d->n);
	free(mem); /* r and the chunk */
	d->finished(d->arg);
}

static void started_done(void *arg, int rc, const int64_t *out, size_t nret,
			 const drl_error *err)
{
	struct drl__batch_run *r = arg;
	drl__batch_started *d = r->d;
	drl_error ce = {0};
	if (rc && err)
		ce = *err;
	rc = chunk_checked(&d->l->limits[0], &r->c, rc, nret, &ce);
	chunk_answer(&d->l->limits[0], &r->c, out, d->items, rc, &ce, d->err,
		     &r->first);
	started_end(r, true, 0, NULL, r);
}

int drl__batch_started_begin(drl__batch_started *d)
{
	drl_limiter *l = d->l;
	const drl__limit *lim = &l->limits[0];
	drl_backend *b = l->store->backend;
	size_t n = d->n;
	/* r, the chunk (n items at most) and skip[] in one allocation; the
	 * chunk at a multiple of 16 bytes, as malloc aligns */
	size_t rsize = (sizeof(struct drl__batch_run) + 15) & ~(size_t)15;
	size_t csize = chunk_size(n);
	char *mem = malloc(rsize + csize + n * sizeof(bool));
	if (mem == NULL)
		return DRL_ENOMEM;
	struct drl__batch_run *r = (struct drl__batch_run *)(void *)mem;
	memset(r, 0, sizeof *r);
	r->d = d;
	r->first = SIZE_MAX;
	chunk_carve(&r->c, mem + rsize, n);
	if (l->near != NULL) {
		r->skip = (bool *)(void *)(mem + rsize + csize);
		drl__near_now(d->near_now, &r->base, &r->t);
		if (near_deny(l, d->items, n, r->base, r->t, r->skip) == 0) {
			started_end(r, false, 0, NULL, mem);
			return 0; /* every item denied here: no store call */
		}
	}
	drl_error e = {0};
	int rc = drl__breaker_enter(l->store, &r->probe, &e);
	if (rc) {
		started_end(r, false, rc, &e, mem);
		return 0;
	}
	drl__call shared = {.backend = b, .now = d->now};
	drl__script_args(lim, &shared, r->c.args);
	for (size_t i = 0; i < n; i++)
		chunk_add(l, &r->c, d->items, i, d->err, &r->first, r->skip);
	if (r->c.n == 0) { /* bad items only */
		started_end(r, true, 0, NULL, mem);
		return 0;
	}
	rc = b->eval_start(b, lim->algo->lua_batch, r->c.n, r->c.keys,
			   DRL__SCRIPT_NARGS + r->c.n, r->c.args,
			   r->c.n * DRL__SCRIPT_NOUT, started_done, r, &e);
	if (rc) { /* nothing started: the chunk fails as a call would */
		chunk_answer(lim, &r->c, r->c.out, d->items, rc, &e, d->err,
			     &r->first);
		started_end(r, true, 0, NULL, mem);
	}
	return 0;
}
