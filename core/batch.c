/*
 * drl_allow_batch: many (key, cost) requests on one limiter at one time.
 *
 * The batched path: a limiter of one limit whose Lua twin the store runs
 * (drl__script_usable), on a store that runs scripts in batches
 * (drl__has_batch: Redis tx=lua). Every item's key and twin arguments are
 * built here exactly as drl__script_decide builds them (drl__script_args),
 * the store runs all the calls in one pipelined round trip, and each answer
 * is read as drl__script_decide reads one (drl__script_answer). Anything
 * else (a policy, a store without batches, numbers too large for the twin's
 * doubles, no memory for the batch) decides the items one by one through
 * drl_allow_at's own code. Either way the decisions are those of deciding
 * the items one after the other at the batch's time.
 */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* What one batched call needs, n of each, in one allocation. */
typedef struct batch_mem {
	drl__key *keybuf; /* the store keys' bytes */
	drl_bytes *keys;
	int64_t *args; /* DRL__SCRIPT_NARGS per call */
	int64_t *out;  /* DRL__SCRIPT_NOUT per call */
	size_t *nrets;
	size_t *item; /* which item call j decides */
	int *rcs;
} batch_mem;

/* Carve n calls' arrays out of one malloc (NULL when out of memory; the
 * caller frees m->keybuf). Largest alignment first. */
static void *batch_mem_new(batch_mem *m, size_t n)
{
	size_t size = n * (sizeof *m->keybuf + sizeof *m->keys +
			   DRL__SCRIPT_NARGS * sizeof *m->args +
			   DRL__SCRIPT_NOUT * sizeof *m->out +
			   sizeof *m->nrets + sizeof *m->item + sizeof *m->rcs);
	char *p = malloc(size);
	if (p == NULL)
		return NULL;
	m->keybuf = (drl__key *)(void *)p;
	m->keys = (drl_bytes *)(void *)(m->keybuf + n);
	m->args = (int64_t *)(void *)(m->keys + n);
	m->out = m->args + n * DRL__SCRIPT_NARGS;
	m->nrets = (size_t *)(void *)(m->out + n * DRL__SCRIPT_NOUT);
	m->item = m->nrets + n;
	m->rcs = (int *)(void *)(m->item + n);
	return p;
}

/* Item i failed with rc; *first is the lowest failed index so far, whose
 * detail err holds (the detail `d` when it is about rc). */
static void item_fail(drl_batch_item *items, size_t i, int rc,
		      const drl_error *d, drl_error *err, size_t *first)
{
	items[i].rc = rc;
	memset(&items[i].result, 0, sizeof items[i].result);
	if (i >= *first)
		return;
	*first = i;
	if (d != NULL && d->code == rc)
		drl_error_set(err, rc, "item %zu: %s", i, d->message);
	else
		drl_error_set(err, rc, "item %zu: %s", i, drl_strerror(rc));
}

/* Every item through the single-request path. */
static void decide_each(drl_limiter *l, drl_batch_item *items, size_t n,
			int64_t now, drl_error *err, size_t *first)
{
	for (size_t i = 0; i < n; i++) {
		drl_error e = {0};
		drl_batch_item *it = &items[i];
		int rc = drl__limiter_decide(l, it->key, it->keylen, it->cost,
					     now, &it->result, &e);
		if (rc)
			item_fail(items, i, rc, &e, err, first);
		else
			it->rc = 0;
	}
}

/* The batched path (see the top). DRL_ENOMEM, with no item touched, when
 * there is no memory for it: the caller then decides one by one. */
static int decide_batched(drl_limiter *l, drl_batch_item *items, size_t n,
			  int64_t now, drl_error *err, size_t *first)
{
	const drl__limit *lim = &l->limits[0];
	drl_backend *b = l->store->backend;
	drl__stats *stats = &l->store->stats;
	batch_mem m;
	void *mem = batch_mem_new(&m, n);
	if (mem == NULL)
		return DRL_ENOMEM;

	size_t calls = 0;
	for (size_t i = 0; i < n; i++) {
		drl_error e = {0};
		drl_batch_item *it = &items[i];
		int rc = drl__request_check(it->key, it->keylen, it->cost, &e);
		if (rc) {
			item_fail(items, i, rc, &e, err, first);
			continue;
		}
		drl__call call = {
			.backend = b,
			.now = now,
			.cost = it->cost,
			.peek = it->cost == 0,
			.stats = stats,
		};
		drl__keybase kb;
		drl__keybase_make(&kb, l->prefix, l->prefixlen, lim, it->key,
				  it->keylen);
		m.keys[calls] = drl__key_plain(&m.keybuf[calls], &kb);
		drl__script_args(lim, &call,
				 &m.args[calls * DRL__SCRIPT_NARGS]);
		m.item[calls] = i;
		DRL__COUNT(stats, decisions);
		DRL__COUNT(stats, scripts);
		calls++;
	}

	drl_error be = {0};
	int rc = calls == 0
			 ? 0
			 : b->eval_batch(b, lim->algo->lua, calls, m.keys,
					 DRL__SCRIPT_NARGS, m.args, m.out,
					 DRL__SCRIPT_NOUT, m.nrets, m.rcs, &be);
	for (size_t j = 0; j < calls; j++) {
		size_t i = m.item[j];
		drl_batch_item *it = &items[i];
		drl_error e = {0};
		drl__undo undo; /* one limit: nothing to give back */
		int crc = rc ? rc : m.rcs[j];
		const drl_error *d = &be;
		if (crc == 0) {
			memset(&it->result, 0, sizeof it->result);
			crc = drl__script_answer(
				lim, &m.out[j * DRL__SCRIPT_NOUT], m.nrets[j],
				&it->result, &undo, &e);
			d = &e;
		}
		if (crc)
			item_fail(items, i, crc, d, err, first);
		else
			it->rc = 0;
	}
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

/* Decide every item at `now` (checked, or DRL__NOW_STORE). */
static void decide(drl_limiter *l, drl_batch_item *items, size_t n, int64_t now,
		   drl_error *err)
{
	size_t first = SIZE_MAX;
	drl_backend *b = l->store->backend;
	drl__call probe = {.backend = b, .now = now};
	if (l->nlimits == 1 && drl__has_batch(b) &&
	    drl__script_usable(&l->limits[0], &probe) &&
	    decide_batched(l, items, n, now, err, &first) == 0)
		return;
	decide_each(l, items, n, now, err, &first);
}

int drl_allow_batch_at(drl_limiter *l, drl_batch_item *items, size_t n,
		       int64_t now_us, drl_error *err)
{
	int rc = check_call(l, items, n, err);
	if (rc == 0)
		rc = drl__time_check(now_us, err);
	if (rc)
		return rc;
	decide(l, items, n, now_us, err);
	return 0;
}

int drl_allow_batch(drl_limiter *l, drl_batch_item *items, size_t n,
		    drl_error *err)
{
	int rc = check_call(l, items, n, err);
	if (rc)
		return rc;
	drl_error e = {0};
	int64_t now;
	rc = drl__limiter_now(l, &now, &e);
	if (rc) {
		/* No time to decide at (the store's clock failed): every
		 * item fails as drl_allow() would. */
		size_t first = SIZE_MAX;
		for (size_t i = 0; i < n; i++)
			item_fail(items, i, rc, &e, err, &first);
		return 0;
	}
	decide(l, items, n, now, err);
	return 0;
}
