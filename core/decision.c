/*
 * A decision's steps, written once. Every request a limiter decides
 * (drl_allow, drl_allow_at, each item of a batch, the async API's
 * requests), every reset and the near cache's peeks go through them, as
 * one request (drl__req: libuv's fs request is the model) run inline, on
 * an async worker, or started without waiting:
 *
 *   begin  checks; the near cache's denials (no store call); each user
 *          key's id, a long key hashed here, once per decision
 *   enter  the store's breaker, and the time the store decides at
 *   step   the limits (core/policy.c): each consumes as it allows; when
 *          one denies, what the earlier ones consumed is refunded, and
 *          the later ones are asked (consuming nothing) so retry_after is
 *          when every limit allows. A batch's items go to the batch
 *          script in chunks (core/batch.c) or through this step one by
 *          one.
 *   start  instead of step: the store call sent without waiting (one
 *          limit: the algorithm's own started call, or its twin)
 *   end    breaker leave, the on_error fallback (core/failure.c says
 *          what each policy does), near cache record, shadow answer
 *
 * So a denied request consumes nothing, and concurrent callers can only
 * ever be denied too often for an instant (while a refund is in flight),
 * never admitted too often. A new policy option is written here, once.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Kept out of line: what a decision of the memory store (a few hundred
 * instructions in all) does not run, so its own steps stay lean. */
#define COLD __attribute__((noinline, cold))

static size_t begin_near(drl__req *q, drl__near *near);

/* ---- step: the limits ----------------------------------------------- */

/* A limiter's limits for the user key id, as core/policy.c takes them. */
typedef struct limits_of {
	const drl_limiter *l;
	const drl__key_id_buf *id;
} limits_of;

static const drl__limit *limit_at(void *arg, size_t i, drl__keybase *kb)
{
	const limits_of *o = arg;
	const drl__limit *lim = &o->l->limits[i];
	drl__keybase_make_id(kb, o->l->prefix, o->l->prefixlen, lim,
			     o->id->bytes, o->id->len, o->id->digest);
	return lim;
}

/* The step: cost on every limit of l at now (explicit, or
 * DRL__NOW_STORE) for the user key id; cost 0 peeks (consumes nothing),
 * and so does the near cache's sync (`sync`, not counted in decisions).
 * *result as drl_allow_at() fills it (drl__policy_step). */
static int step(drl_limiter *l, const drl__key_id_buf *id, int64_t cost,
		int64_t now, bool sync, drl_result *result, drl_error *err)
{
	drl__call call = {
		.backend = l->store->backend,
		.now = now,
		.cost = cost,
		.peek = sync || cost == 0,
		.err = err,
		.stats = &l->store->stats,
	};
	limits_of o = {l, id};
	drl__policy p = {l->nlimits, limit_at, &o};
	return drl__policy_step(&p, &call, sync, result);
}

/* Item i of q through the step (a request of one: its id is q->one's;
 * it was checked before it began: drl_allow's and the async API's
 * checks). */
static void step_item(drl__req *q, size_t i)
{
	drl_batch_item *it = &q->items[i];
	drl_error e, *d = q->err;
	int rc = 0;
	if (q->kind != DRL__REQ_ONE) { /* a batch item: its own detail */
		e.code = 0;
		e.message[0] = '\0';
		d = &e;
		rc = drl__request_check(it->key, it->keylen, it->cost, d);
	}
	if (rc == 0)
		rc = step(q->l, drl__req_id(q, i), it->cost, q->now, false,
			  &it->result, d);
	if (rc)
		drl__req_fail(q, i, rc, d);
	else
		it->rc = 0;
}

/* ---- reset's step: every limit's keys deleted -------------------------- */

/* Everything one reset deletes: every limit's keys for the user key. */
typedef struct reset_keys {
	drl__key kbuf[DRL_POLICY_LIMITS_MAX * DRL__LIMIT_KEYS_MAX];
	drl_bytes keys[DRL_POLICY_LIMITS_MAX * DRL__LIMIT_KEYS_MAX];
	size_t n;
} reset_keys;

/* The keys of every limit of l for the user key id, as of `now`. */
static void collect(const drl_limiter *l, const drl__key_id_buf *id,
		    int64_t now, reset_keys *rk)
{
	rk->n = 0;
	for (size_t i = 0; i < l->nlimits; i++) {
		const drl__limit *lim = &l->limits[i];
		drl__keybase kb;
		drl__keybase_make_id(&kb, l->prefix, l->prefixlen, lim,
				     id->bytes, id->len, id->digest);
		if (lim->algo->keys == NULL) {
			rk->keys[rk->n] = drl__key_plain(&rk->kbuf[rk->n], &kb);
			rk->n++;
			continue;
		}
		rk->n += lim->algo->keys(lim, &kb, now, rk->kbuf + rk->n,
					 rk->keys + rk->n);
	}
}

/* Delete l's keys for the user key id on l's store (drl_backend.del). */
static int reset_step(drl_limiter *l, const drl__key_id_buf *id, int64_t now,
		      drl_error *err)
{
	drl_backend *b = l->store->backend;
	reset_keys *rk = malloc(sizeof *rk);
	if (rk == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	collect(l, id, now, rk);
	int rc = b->del(b, rk->n, rk->keys, err);
	free(rk);
	return rc;
}

/* ---- adjust's step: every limit's state moved ---------------------------- */

/* delta on every limit of l for the user key id at now (explicit, or
 * DRL__NOW_STORE); *result the peek of cost 1 after it, combined over the
 * limits as step() combines a decision's. delta 0 changes nothing: the
 * limits are only asked. */
static int adjust_step(drl_limiter *l, const drl__key_id_buf *id, int64_t delta,
		       int64_t now, drl_result *result, drl_error *err)
{
	drl__call call = {
		.backend = l->store->backend,
		.now = now,
		.cost = 1,
		.peek = true,
		.delta = delta,
		.err = err,
		.stats = &l->store->stats,
	};
	drl__keybase kb;
	drl_result best = {0}, r;
	bool denied = false;
	for (size_t i = 0; i < l->nlimits; i++) {
		drl__limit *lim = &l->limits[i];
		drl__undo undo;
		int rc;
		drl__keybase_make_id(&kb, l->prefix, l->prefixlen, lim,
				     id->bytes, id->len, id->digest);
		call.key = &kb;
		memset(&r, 0, sizeof r);
		if (delta == 0)
			rc = lim->algo->decide(lim, &call, &r, &undo);
		else if (lim->algo->adjust == NULL)
			rc = drl_error_set(err, DRL_ENOTSUP,
					   "drl_adjust: %s cannot adjust",
					   lim->algo->name);
		else
			rc = lim->algo->adjust(lim, &call, &r);
		if (rc)
			return rc;
		r.limit_index = (int)i;
		if (denied) {
			drl__policy_widen(&best, &r);
		} else if (!r.allowed) {
			best = r;
			denied = true;
		} else if (i == 0 || r.remaining < best.remaining) {
			best = r;
		}
	}
	*result = best;
	return 0;
}

/* ---- begin ------------------------------------------------------------- */

/* A batch's begin: every checked item's id (nq[i]); with a near cache,
 * the items whose key is blocked get the local denial (skip[i], rc 0).
 * Returns how many are left for the store (bad items among them: the
 * store path refuses those). */
static COLD size_t begin_batch(drl__req *q)
{
	drl__near *near = q->l->near;
	size_t left = 0;
	int base = 0;
	int64_t t = 0;
	size_t skips = near != NULL ? q->n : 0;
	q->mem = calloc(1, q->n * sizeof *q->nq + skips);
	if (q->mem == NULL) {
		q->rc = drl_error_set(&q->e, DRL_ENOMEM, "out of memory");
		return q->n;
	}
	q->nq = q->mem;
	q->skip = skips ? (bool *)(void *)(q->nq + q->n) : NULL;
	if (near != NULL)
		drl__near_now(q->now_us, &base, &t);
	for (size_t i = 0; i < q->n; i++) {
		drl_batch_item *it = &q->items[i];
		drl__near_req *nr = &q->nq[i];
		left++;
		if (drl__request_check(it->key, it->keylen, it->cost, NULL))
			continue;
		if (near == NULL) {
			drl__key_id(it->key, it->keylen, &nr->id);
			continue;
		}
		drl__near_req_make(near, nr, it->key, it->keylen, base, t);
		if (it->cost > 0 &&
		    drl__near_check(near, nr, it->cost, &it->result)) {
			q->skip[i] = true;
			it->rc = 0;
			DRL__COUNT(&q->l->store->stats, near_denials);
			left--;
		}
	}
	return left;
}

size_t drl__req_begin(drl__req *q)
{
	drl__near *near = q->l->near;
	drl_batch_item *it = &q->items[0];
	q->first = SIZE_MAX;
	q->left = q->n;
	q->now = q->now_us;
	if (q->kind == DRL__REQ_BATCH)
		return q->left = begin_batch(q);
	if (near == NULL || (q->kind == DRL__REQ_ONE && it->cost == 0)) {
		drl__key_id(it->key, it->keylen, &q->one.id);
		return q->left;
	}
	return q->left = begin_near(q, near);
}

/* Begin's near cache step for a request of one key (near is l's). */
static COLD size_t begin_near(drl__req *q, drl__near *near)
{
	drl_batch_item *it = &q->items[0];
	int base;
	int64_t t;
	drl__near_now(q->now_us, &base, &t);
	drl__near_req_make(near, &q->one, it->key, it->keylen, base, t);
	if (q->kind == DRL__REQ_ONE &&
	    drl__near_check(near, &q->one, it->cost, &it->result)) {
		DRL__COUNT(&q->l->store->stats, near_denials);
		it->rc = 0;
		return 0;
	}
	return q->left;
}

/* ---- enter ------------------------------------------------------------- */

/* Whether every limit of the policy runs as a Lua twin that reads the
 * store's clock itself, so no separate round trip for the time is needed. */
static bool twins_read_clock(const drl_limiter *l)
{
	drl__call probe = {.backend = l->store->backend, .now = DRL__NOW_STORE};
	for (size_t i = 0; i < l->nlimits; i++)
		if (!drl__script_usable(&l->limits[i], &probe))
			return false;
	return true;
}

/* The time q is decided at: now_us when explicit; else the real-time
 * clock, or with a store clock DRL__NOW_STORE when every limit's twin
 * reads it itself, else the store's time (one round trip, which may
 * fail). A reset needs a time: the store's, or the real-time clock. */
static int read_now(const drl__req *q, int64_t *now, drl_error *err)
{
	drl_backend *b = q->l->store->backend;
	*now = q->now_us;
	if (q->now_us != DRL__NOW_READ)
		return 0;
	if (!(b->caps & DRL_CAP_CLOCK) ||
	    (q->kind == DRL__REQ_RESET && b->now == NULL)) {
		*now = drl_now_us();
		return 0;
	}
	if (q->kind != DRL__REQ_RESET && twins_read_clock(q->l)) {
		*now = DRL__NOW_STORE;
		return 0;
	}
	return b->now(b, now, err);
}

/* The breaker, and (read: the time is not known yet) the time: 0, or
 * q->rc when the store cannot be asked (detail in *d). */
static int enter(drl__req *q, bool read, drl_error *d)
{
	q->rc = drl__breaker_enter(q->l->store, &q->probe, d);
	q->entered = q->rc == 0;
	if (q->rc == 0 && read)
		q->rc = read_now(q, &q->now, d);
	return q->rc;
}

/* Where q's errors that are not one item's go. */
static drl_error *detail(drl__req *q)
{
	return q->kind == DRL__REQ_BATCH ? &q->e : q->err;
}

/* ---- end --------------------------------------------------------------- */

/* The on_error policy's decision for item i after the store failed with
 * a store failure (drl__is_store_failure); err keeps the store's error. */
static COLD int fallback(drl__req *q, size_t i, drl_error *err)
{
	drl_limiter *l = q->l;
	drl_batch_item *it = &q->items[i];
	drl_result *result = &it->result;
	const drl__limit *lim = &l->limits[0];
	drl__result_deny(result);
	/* the capacity reported on the policy paths: the first limit's */
	result->limit = lim->burst ? lim->burst : lim->limit;
	switch (l->on_error) {
	case DRL__ON_ERROR_DENY:
		result->retry_after_us = drl__breaker_retry_us(l->store);
		result->path = DRL_PATH_FAIL_CLOSED;
		break;
	case DRL__ON_ERROR_ALLOW:
		result->allowed = 1;
		result->path = DRL_PATH_FAIL_OPEN;
		break;
	case DRL__ON_ERROR_LOCAL: {
		int64_t now = q->now < 0 ? drl_now_us() : q->now;
		drl_error local_err;
		int rc = step(l->local, drl__req_id(q, i), it->cost, now, false,
			      result, &local_err);
		if (rc) {
			drl__result_deny(result);
			return drl_error_set(err, rc, "on_error=local: %s",
					     local_err.message);
		}
		result->path = DRL_PATH_LOCAL;
		break;
	}
	case DRL__ON_ERROR_RETURN:
	default:
		return DRL_EINTERNAL; /* checked first */
	}
	DRL__COUNT(&l->store->stats, fallbacks);
	return 0;
}

/* The answer of item i, decided with rc 0: would_allow is the decision,
 * and under shadow=1 a denial is answered allowed (and counted in
 * shadow_denials). Everything else stays the decision's. */
static void shadow_answer(drl_limiter *l, drl_result *r)
{
	r->would_allow = r->allowed;
	if (!l->shadow || r->allowed)
		return;
	r->allowed = 1;
	DRL__COUNT(&l->store->stats, shadow_denials);
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

/* Whether item i was decided at begin (near cache). */
static bool skipped(const drl__req *q, size_t i)
{
	return q->skip != NULL && q->skip[i];
}

/* No store decision at all (q->rc: the breaker, the clock, no memory):
 * every item left fails so, a bad key or cost with its own DRL_EINVAL
 * (bad input is never a store error). */
static COLD void fail_left(drl__req *q)
{
	for (size_t i = 0; i < q->n; i++) {
		drl_error ie = {0};
		drl_batch_item *it = &q->items[i];
		if (skipped(q, i))
			continue;
		if (q->kind == DRL__REQ_BATCH &&
		    drl__request_check(it->key, it->keylen, it->cost, &ie))
			drl__req_fail(q, i, ie.code, &ie);
		else
			drl__req_fail(q, i, q->rc, detail(q));
	}
}

/* The end of item i (its step is over): the on_error policy for a store
 * failure, the near cache learns from the store's own decision, and a
 * decided item is answered. */
static void end_item(drl__req *q, size_t i)
{
	drl_limiter *l = q->l;
	drl_batch_item *it = &q->items[i];
	if (drl__is_store_failure(it->rc) &&
	    l->on_error != DRL__ON_ERROR_RETURN) {
		drl_error *err = q->kind == DRL__REQ_ONE ? q->err : NULL;
		it->rc = fallback(q, i, err);
		if (it->rc)
			drl__result_deny(&it->result);
	}
	if (it->rc != 0)
		return;
	if (l->near != NULL && it->cost > 0 && !skipped(q, i) &&
	    it->result.path == DRL_PATH_STORE)
		drl__near_record(l->near,
				 q->kind == DRL__REQ_BATCH ? &q->nq[i]
							   : &q->one,
				 it->cost, &it->result);
	shadow_answer(l, &it->result);
}

void drl__req_end(drl__req *q)
{
	drl_limiter *l = q->l;
	if (q->entered)
		drl__breaker_leave(l->store, q->probe,
				   q->rc ? q->rc
					 : store_outcome(q->items, q->n));
	if (q->rc)
		fail_left(q);
	if (q->kind == DRL__REQ_RESET || q->kind == DRL__REQ_ADJUST) {
		/* a reward may lift a block; a penalty's denials are the
		 * store's to say: either way the key's block goes */
		if (q->rc == 0 && q->items[0].rc == 0 && l->near != NULL)
			drl__near_forget(l->near, &q->one);
		if (q->kind == DRL__REQ_ADJUST && q->items[0].rc == 0)
			shadow_answer(l, &q->items[0].result);
	} else {
		for (size_t i = 0; i < q->n; i++)
			end_item(q, i);
	}
	drl__req_drop(q);
	if (q->finished)
		q->finished(q->arg);
}

void drl__req_drop(drl__req *q)
{
	if (q->mem == NULL)
		return;
	free(q->mem);
	q->mem = NULL;
	q->nq = NULL;
	q->skip = NULL;
}

/* ---- run: enter, step, end on this thread -------------------------------- */

/* A reset: l's on_error=local copy first (it decides while the store is
 * away, so it forgets the key even when the store's delete then fails),
 * then l's store. */
static COLD void reset_run(drl__req *q)
{
	drl_limiter *l = q->l;
	drl_batch_item *it = &q->items[0];
	drl_backend *b = l->store->backend;
	if (l->local != NULL) {
		drl__req lq;
		drl__req_init(&lq, DRL__REQ_RESET, l->local, it, 1, q->now_us,
			      q->err);
		drl__req_decide(&lq);
		if (it->rc) {
			drl__req_end(q); /* no store call: the local error */
			return;
		}
	}
	if (b->version < 4 || b->del == NULL)
		drl__req_fail(q, 0,
			      drl_error_set(q->err, DRL_ENOTSUP,
					    "drl_reset: store \"%s\" (vtable "
					    "version %d) cannot delete keys "
					    "(del(), vtable version 4)",
					    b->name ? b->name : "?",
					    b->version),
			      q->err);
	else if (enter(q, true, q->err) == 0)
		it->rc = reset_step(l, &q->one.id, q->now, q->err);
	drl__req_end(q);
}

/* An adjustment: enter, every limit's state moved, end (no on_error
 * fallback: nothing was decided for the caller to act on). */
static COLD void adjust_run(drl__req *q)
{
	drl_batch_item *it = &q->items[0];
	if (enter(q, true, q->err) == 0) {
		it->rc = adjust_step(q->l, &q->one.id, it->cost, q->now,
				     &it->result, q->err);
		if (it->rc)
			drl__req_fail(q, 0, it->rc, q->err);
	}
	drl__req_end(q);
}

void drl__req_run(drl__req *q)
{
	if (q->kind == DRL__REQ_RESET) {
		reset_run(q);
		return;
	}
	if (q->kind == DRL__REQ_ADJUST) {
		adjust_run(q);
		return;
	}
	if (q->left > 0 && q->rc == 0 && enter(q, true, detail(q)) == 0) {
		if (q->kind == DRL__REQ_ONE ||
		    !drl__batch_scripted(q->l, q->now) ||
		    drl__batch_step(q) != 0)
			for (size_t i = 0; i < q->n; i++)
				if (!skipped(q, i))
					step_item(q, i);
	}
	drl__req_end(q);
}

void drl__req_decide(drl__req *q)
{
	drl__req_begin(q);
	drl__req_run(q);
}

bool drl__req_peek(drl_limiter *l, const drl__key_id_buf *id, int64_t cost,
		   int *rc, drl_result *result, drl_error *err)
{
	drl__req q;
	drl__req_init(&q, DRL__REQ_ONE, l, NULL, 0, DRL__NOW_READ, err);
	*rc = enter(&q, true, err);
	if (!q.entered)
		return false;
	if (*rc == 0)
		*rc = step(l, id, cost, q.now, true, result, err);
	drl__breaker_leave(l->store, q.probe, *rc);
	return true;
}

/* ---- start: the store call sent without waiting ---------------------------- */

/* Whether q, a decision of a policy of several limits, is started as
 * one call of a store that hands it to a server deciding it whole
 * (eval_policy, started): every limit's twin runs at the time it is decided
 * at (*now: explicit, or the local clock; not a store's clock). */
static bool policy_startable(const drl__req *q, int64_t *now)
{
	drl_limiter *l = q->l;
	drl_backend *b = l->store->backend;
	if (q->kind != DRL__REQ_ONE || !drl__starts_policy(b) ||
	    l->nlimits > DRL_POLICY_LIMITS_MAX)
		return false;
	int64_t t = q->now_us;
	if (t == DRL__NOW_READ) {
		if (b->caps & DRL_CAP_CLOCK)
			return false;
		t = drl_now_us();
	}
	drl__call probe = {.backend = b, .now = t};
	for (size_t i = 0; i < l->nlimits; i++)
		if (!drl__script_usable(&l->limits[i], &probe))
			return false;
	*now = t;
	return true;
}

bool drl__req_startable(drl__req *q, const char **why)
{
	drl_limiter *l = q->l;
	drl_backend *b = l->store->backend;
	const char *no = NULL, *w;
	int64_t t;
	if (l->nlimits != 1 && policy_startable(q, &t)) {
		if (why)
			*why = "sent at start as one call deciding the whole "
			       "policy (a started eval_policy: Redis "
			       "tx=module's DRL.POLICY), finished by the "
			       "thread in drl_async_process() on a store with "
			       "channels, else by the store's I/O thread";
		q->now = t;
		return true;
	}
	if (q->kind == DRL__REQ_ADJUST)
		no = "an adjustment is made on a worker (its own steps, not "
		     "a decision's started call)";
	else if (l->nlimits != 1)
		no = "a policy of several limits is decided on a worker (a "
		     "denial gives back the others: more store calls), "
		     "unless the store starts it as one call (Redis "
		     "tx=module)";
	else if (b->caps & DRL_CAP_DECLARED_KEYS) /* first: no eval_start */
		no = "Redis Cluster's calls may need ASKING, which shared "
		     "connections never send: a worker decides";
	else if (drl__chan_only(b) && q->no_chan)
		no = "the store starts calls only on the context's own "
		     "connection (memcached), which drl_async_notify() "
		     "turns off: a worker decides";
	else if (!drl__chan_only(b) &&
		 (b->version < 5 || !(b->caps & DRL_CAP_EVAL_START) ||
		  !b->eval_start))
		no = "the store sends no call without waiting (tx=watch, "
		     "pipelines=0, memcached with channels=0, a store of your "
		     "own): a worker decides";
	else if (q->kind == DRL__REQ_BATCH &&
		 (!drl__has_batch(b) || !l->limits[0].algo->lua_batch ||
		  q->n > drl__batch_chunk(&l->limits[0])))
		no = "a batch is sent at start only as one call of the batch "
		     "script: a worker decides";
	if (no) {
		if (why)
			*why = no;
		return false;
	}
	const drl__limit *lim = &l->limits[0];
	drl__call probe = {.backend = b, .now = q->now_us};
	if (q->now_us == DRL__NOW_READ)
		/* As read_now: the twin reads the store's clock, or the
		 * store has none and the local one decides. */
		probe.now = (b->caps & DRL_CAP_CLOCK) ? DRL__NOW_STORE
						      : drl_now_us();
	bool ok = true;
	/* Who finishes it: the loop's thread on a store with channels (in
	 * fd mode, core/async_io.c), else the store's I/O thread. */
	bool chan = b->version >= 7 && (b->caps & DRL_CAP_CHANNEL);
	if (q->kind == DRL__REQ_ONE && lim->algo->startable &&
	    lim->algo->startable(lim, &probe)) {
		w = chan ? "sent at start without a script (counter commands: "
			   "Redis tx=auto's, memcached's) on the context's own "
			   "connection, "
			   "finished by the thread in drl_async_process() "
			   "(with drl_async_notify(): by the store's I/O "
			   "thread)"
			 : "sent at start without a script (tx=auto's counter "
			   "commands), finished by the store's I/O thread (a "
			   "store without channels: TLS, Sentinel)";
	} else if (drl__chan_only(b)) {
		w = "the store has no started call for this algorithm's "
		    "state (memcached: token_bucket, gcra, sliding_log use "
		    "gets/cas), nor a script: a worker decides";
		ok = false;
	} else if (drl__script_usable(lim, &probe)) {
		w = chan ? "sent at start as the algorithm's server-side "
			   "script on the context's own connection, finished "
			   "by the thread in drl_async_process() (with "
			   "drl_async_notify(): by the store's I/O thread)"
			 : "sent at start as the algorithm's server-side "
			   "script, finished by the store's I/O thread (a "
			   "store without channels: TLS, Sentinel)";
	} else {
		w = !lim->lua_ok ? "the limit's numbers (max(LIMIT, burst) x "
				   "PERIOD in us) pass 2^52, which the "
				   "server's doubles cannot hold exactly: a "
				   "worker decides by the exact C step"
				 : "the time is past what the server's doubles "
				   "hold exactly: a worker decides";
		ok = false;
	}
	if (why)
		*why = w;
	if (ok)
		q->now = probe.now;
	return ok;
}

/* The algorithm's own started decision of q's one item is over. */
static void decided(void *arg, int rc, const drl_result *res,
		    const drl_error *err)
{
	drl__req *q = arg;
	drl_batch_item *it = &q->items[0];
	if (rc == 0) {
		it->result = *res;
		if (q->l->nlimits == 1)
			it->result.limit_index = 0;
		it->rc = 0;
	} else {
		if (q->err && err)
			*q->err = *err;
		drl__req_fail(q, 0, rc, q->err);
	}
	drl__req_end(q);
}

/* eval_start()'s outcome for q's one item: the twin's answer, or the
 * store's error. */
static void script_done(void *arg, int rc, const int64_t *out, size_t nret,
			const drl_error *err)
{
	drl__req *q = arg;
	drl_batch_item *it = &q->items[0];
	drl_result res;
	if (rc == 0) {
		drl__undo undo; /* one limit: nothing to refund */
		/* the answer's length says its form (drl__twin_answer) */
		drl__call call = {.backend = q->l->store->backend,
				  .now = q->now,
				  .cost = it->cost,
				  .peek = it->cost == 0};
		memset(&res, 0, sizeof res);
		rc = drl__twin_answer(&q->l->limits[0], &call, out, nret, &res,
				      &undo, q->err);
		err = NULL; /* the detail is in q->err */
	}
	decided(q, rc, &res, err);
}

/* A started eval_policy()'s outcome for q: the policy's answer, or the
 * store's error. */
static void policy_done(void *arg, int rc, const int64_t *out, size_t nret,
			const drl_error *err)
{
	drl__req *q = arg;
	drl_result res;
	if (rc == 0) {
		limits_of o = {q->l, &q->one.id};
		drl__policy p = {q->l->nlimits, limit_at, &o};
		rc = drl__policy_answer(&p, out, nret, &res, q->err);
		err = NULL; /* the detail is in q->err */
	}
	decided(q, rc, &res, err);
}

/* The call of q's one item (started: on q's channel). */
static drl__call started_call(const drl__req *q)
{
	const drl_batch_item *it = &q->items[0];
	return (drl__call){
		.backend = q->l->store->backend,
		.chan = q->chan,
		.now = q->now,
		.cost = it->cost,
		.peek = it->cost == 0,
		.err = q->err,
		.stats = &q->l->store->stats,
	};
}

/* Start q, a decision of a policy drl__req_startable took, as one call
 * of the store (eval_policy, started). */
static void start_policy(drl__req *q)
{
	drl_limiter *l = q->l;
	drl_backend *b = l->store->backend;
	drl__call call = started_call(q);
	limits_of o = {l, &q->one.id};
	drl__policy p = {l->nlimits, limit_at, &o};
	drl__policy_calls *pc = malloc(sizeof *pc); /* ~8 kB: not on a
						      loop's stack */
	int rc;
	if (q->err)
		q->err->code = 0;
	if (pc == NULL)
		rc = drl_error_set(q->err, DRL_ENOMEM, "out of memory");
	else if (!drl__policy_calls_make(pc, &p, &call))
		rc = drl_error_set(q->err, DRL_EINTERNAL,
				   "a started policy the store cannot send");
	else
		rc = 1;
	if (rc == 1) {
		/* counted first: q may end before the start returns */
		for (size_t i = 0; i < l->nlimits; i++)
			DRL__COUNT(call.stats, decisions);
		DRL__COUNT(call.stats, scripts);
		rc = b->eval_policy(b, q->chan, pc->n, pc->calls, NULL,
				    DRL__POLICY_NOUT, NULL, policy_done, q,
				    q->err);
	}
	free(pc);
	if (rc)
		decided(q, rc, NULL, NULL);
}

/* Start q's one item: the algorithm's own started call first (counters:
 * no script), the twin for what it does not take. */
static void start_one(drl__req *q)
{
	if (q->l->nlimits > 1) {
		start_policy(q);
		return;
	}
	drl_limiter *l = q->l;
	drl__limit *lim = &l->limits[0];
	drl_backend *b = l->store->backend;
	drl__call call = started_call(q);
	drl__keybase kb;
	drl__key k;
	drl__keybase_make_id(&kb, l->prefix, l->prefixlen, lim, q->one.id.bytes,
			     q->one.id.len, q->one.id.digest);
	call.key = &kb;
	DRL__COUNT(call.stats, decisions);
	int rc = DRL_ENOTSUP;
	if (q->err)
		q->err->code = 0;
	if (lim->algo->start && lim->algo->startable(lim, &call))
		rc = lim->algo->start(lim, &call, decided, q);
	if (rc == DRL_ENOTSUP && !b->eval_start)
		rc = drl_error_set(q->err, DRL_EINTERNAL,
				   "a started decision the store cannot send");
	if (rc != DRL_ENOTSUP) {
		/* The store's own message when it gave one (a Sentinel store
		 * with no master known says so); ours only when none did. */
		if (rc && (q->err == NULL || q->err->code != rc))
			drl_error_set(q->err, rc, "could not start a decision");
		if (rc)
			decided(q, rc, NULL, NULL);
		return;
	}
	drl_bytes key = drl__key_plain(&k, &kb);
	int64_t args[DRL__SCRIPT_NARGS];
	drl__script_args(lim, &call, args);
	DRL__COUNT(call.stats, scripts);
	rc = b->eval_start(b, q->chan, lim->algo->lua, 1, &key,
			   drl__script_nargs(lim), args, DRL__SCRIPT_NOUT,
			   script_done, q, q->err);
	if (rc)
		decided(q, rc, NULL, NULL);
}

int drl__req_start(drl__req *q)
{
	if (q->kind == DRL__REQ_BATCH && drl__batch_start_alloc(q) != 0)
		return DRL_ENOMEM;
	if (q->rc != 0 || enter(q, false, detail(q)) != 0) {
		free(q->chunk);
		q->chunk = NULL;
		drl__req_end(q);
	} else if (q->kind == DRL__REQ_BATCH) {
		drl__batch_start(q, drl__req_end);
	} else {
		start_one(q);
	}
	return 0;
}
