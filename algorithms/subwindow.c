/*
 * subwindow: the window split into N sub-windows, counts summed.
 *
 * With trailing=1 the sub-window that just left the window still counts,
 * weighted by how much of it the sliding window still overlaps
 * (senderista/sliding-window-rate-limiter). This file is also the engine
 * of fixed_window (N=1) and sliding_window (N=1, trailing): one counter
 * per sub-window, named by its index floor(now / S), so a window's
 * identity is in its key and the TTL only cleans up.
 *
 * Exactness under contention: the current sub-window is incremented first
 * (atomically), then the estimate is checked and an over-limit increment is
 * refunded. Every admitted request's increment is seen by every later one,
 * so concurrent callers can never admit more than LIMIT at one instant.
 *
 * Counter groups. On a store that keeps counters in groups
 * (DRL_CAP_COUNTER_GROUPS: Redis, one hash per limit and user key) the
 * sub-windows are the fields of one record, named drl__key_grouped, when
 * trimming them stays cheap (group_plan). Fields have no TTL of their own,
 * so this file removes them: a decision that found its field absent (the
 * first of its sub-window) calls trim() with the fields whose flat keys'
 * TTLs would have run out by now, and the record's TTL (the one a flat key
 * of the current sub-window gets, plus the sub-windows the clock grace
 * spans: a client whose clock lags may set it after one ahead did). Field
 * j would have expired, as a flat key, at (j + n + 1) S + grace: with
 * K = ceil(grace / S), every j <= i - D, D = n + 1 + K, has, at any time
 * of sub-window i; trimmed: the W fields up to i - D, W = n + 1 + 3K,
 * which reach back to the previous first decision of a sub-window (a
 * record nobody wrote for longer than its TTL is gone as a whole), so no
 * field outlives that under any traffic, and none is removed before a
 * flat key would have expired. counter.lua does the same.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The counts the estimate at `now` is made of: c[0] is the current
 * sub-window, c[k] the one k back; c[N] is the trailing one. */
typedef struct counts {
	int64_t c[DRL_SUBWINDOWS_MAX + 1];
} counts;

/* floor(c * r / S): the trailing sub-window's weight with r µs of it still
 * inside the window. */
static int64_t weighted(int64_t c, int64_t r, int64_t s)
{
	return drl__i128_floor_div((drl__i128)c * r, s);
}

/* Estimate at offset e into the current sub-window. */
static int64_t estimate(const drl__limit *lim, const counts *k, int64_t e,
			int64_t s)
{
	int64_t n = lim->subwindows, sum = 0;
	for (int64_t j = 0; j < n; j++)
		sum += k->c[j];
	if (lim->trailing)
		sum += weighted(k->c[n], s - e, s);
	return sum;
}

/* Until the estimate is 0 with no more traffic. */
static int64_t reset_after(const drl__limit *lim, const counts *k, int64_t e,
			   int64_t s)
{
	int64_t n = lim->subwindows;
	int64_t last = lim->trailing ? n : n - 1;
	for (int64_t j = 0; j <= last; j++)
		if (k->c[j] > 0)
			return (n - j) * s - e + (lim->trailing ? s : 0);
	return 0;
}

/* The first moment, from offset e into the current sub-window, at which a
 * request of `cost` fits, with no other traffic. Walks forward sub-window
 * by sub-window: m sub-windows on, the m oldest have left the window and
 * c[n - m] is the trailing one, whose weight falls linearly. */
static int64_t retry_after(const drl__limit *lim, const counts *k, int64_t e,
			   int64_t s, int64_t cost)
{
	int64_t n = lim->subwindows, need = lim->limit - cost, full = 0;
	for (int64_t j = 0; j < n; j++)
		full += k->c[j];
	for (int64_t m = 0; m <= n; m++) {
		if (m > 0)
			full -= k->c[n - m];
		if (full > need)
			continue;
		int64_t start = m == 0 ? e : 0;
		int64_t base = m == 0 ? 0 : (s - e) + (m - 1) * s;
		int64_t old = lim->trailing ? k->c[n - m] : 0;
		if (old == 0)
			return base;
		/* the largest r with floor(old * r / s) <= need - full */
		int64_t rmax = drl__i128_ceil_div(
				       (drl__i128)(need - full + 1) * s, old) -
			       1;
		int64_t at = rmax >= s ? 0 : s - rmax;
		if (at < start)
			at = start;
		return base + (at - start);
	}
	return (s - e) + n * s; /* not reached: at m == n nothing is left */
}

/* Counts as the estimate sees them: a negative one (a refund that outlived
 * its key) counts as 0; one beyond DRL__COUNT_MAX is not a libdrl count.
 * counter.lua does the same. */
static int check_counts(counts *k, size_t n, drl_error *err)
{
	for (size_t j = 0; j < n; j++) {
		if (k->c[j] > DRL__COUNT_MAX)
			return drl_error_set(err, DRL_ECORRUPT,
					     "counter in the store is out of "
					     "range: not a libdrl count");
		if (k->c[j] < 0)
			k->c[j] = 0;
	}
	return 0;
}

/* The most fields one trim() names (W above): beyond it (sub-windows far
 * shorter than the grace) the counters keep keys of their own. */
#define GROUP_TRIM_MAX 64

/* Counter groups for lim (see the top of the file): *k = K, *d = D,
 * *w = W. False: flat keys. */
static bool group_plan(const drl__limit *lim, int64_t *k, int64_t *d,
		       int64_t *w)
{
	int64_t n = lim->subwindows, s = lim->period_us / n;
	*k = DRL__TTL_GRACE_US / s + (DRL__TTL_GRACE_US % s != 0);
	*d = n + 1 + *k;
	*w = n + 1 + 3 * *k;
	return *w <= GROUP_TRIM_MAX;
}

bool drl__counter_grouped(const drl__limit *lim, const drl_backend *b)
{
	int64_t k, d, w;
	return b != NULL && drl__has_groups(b) && group_plan(lim, &k, &d, &w);
}

/* Where one decision's counters are and what it does with them: the
 * sub-window index i, the offset e into it, the sub-window length s, the
 * TTL of what it writes, and how many keys it reads. Shared by the
 * blocking and the started decision. */
typedef struct plan {
	int64_t s, i, e, ttl;
	size_t nkeys;
	bool consume;        /* increment (and maybe give back) vs only read */
	bool grouped;        /* the keys are fields of one group */
	int64_t dead, ntrim; /* grouped: trim fields dead-ntrim+1 .. dead */
} plan;

/* The keys a plan reads (keys[0] the current sub-window): on the stack
 * of the call that sends them (a store copies them when it starts a
 * call). */
typedef struct plan_keys {
	drl__key kbuf[DRL_SUBWINDOWS_MAX + 1];
	drl_bytes keys[DRL_SUBWINDOWS_MAX + 1];
} plan_keys;

/* p's group, once its s, i and flat ttl are known. */
static void plan_group(const drl__limit *lim, const drl_backend *b, plan *p)
{
	int64_t k, d, w;
	p->grouped = drl__counter_grouped(lim, b);
	if (p->grouped) {
		(void)group_plan(lim, &k, &d, &w);
		p->ttl += k * p->s;
		p->dead = p->i - d;
		p->ntrim = w;
	}
}

static void plan_make(const drl__limit *lim, const drl__call *call, plan *p,
		      plan_keys *pk)
{
	int64_t n = lim->subwindows;
	p->s = lim->period_us / n;
	p->i = call->now / p->s;
	p->e = call->now % p->s;
	p->ttl = (n + 1) * p->s - p->e + DRL__TTL_GRACE_US;
	p->nkeys = (size_t)n + (lim->trailing ? 1 : 0);
	p->consume = !call->peek && call->cost <= lim->limit;
	plan_group(lim, call->backend, p);
	for (size_t j = 0; j < p->nkeys; j++)
		pk->keys[j] =
			p->grouped ? drl__key_grouped(&pk->kbuf[j], call->key,
						      p->i - (int64_t)j)
				   : drl__key_indexed(&pk->kbuf[j], call->key,
						      p->i - (int64_t)j);
}

/* The fields trim() removes for p (grouped), into keys[], their bytes in
 * one allocation (*buf, to free; rare: a first write of a sub-window).
 * 0: out of memory, nothing to trim. */
static size_t trim_keys(const plan *p, const drl__keybase *kb, char **buf,
			drl_bytes *keys)
{
	drl__key k;
	size_t each = kb->len + 22; /* '#', '-' and 20 digits */
	char *q = *buf = malloc(each * (size_t)p->ntrim);
	if (q == NULL)
		return 0;
	for (int64_t j = 0; j < p->ntrim; j++, q += each) {
		drl_bytes f = drl__key_grouped(&k, kb, p->dead - j);
		memcpy(q, f.data, f.len);
		keys[j] = (drl_bytes){q, f.len};
	}
	return (size_t)p->ntrim;
}

/* Whether a write of delta that left a grouped counter at v found it at
 * 0 or absent: the first of its sub-window (or one after refunds), which
 * trims the group and sets its TTL. */
static bool must_trim(const plan *p, int64_t v, int64_t delta)
{
	return p->grouped && v - delta <= 0;
}

/* trim() after a first write (best effort: a failure leaves dead fields
 * until a later first write's trim or the record's TTL). */
static void trim_group(drl_backend *b, const plan *p, const drl__keybase *kb)
{
	char *buf;
	drl_bytes keys[GROUP_TRIM_MAX];
	size_t n = trim_keys(p, kb, &buf, keys);
	if (n > 0)
		(void)b->trim(b, n, keys, p->ttl, NULL);
	free(buf);
}

/* The counts after our increment (k->c[0] is the current sub-window's
 * new value) as the estimate sees them. 0, or an error after which the
 * increment must be given back. */
static int added_counts(const plan *p, int64_t cost, counts *k, drl_error *err)
{
	/* what was there before us counts at least 0 */
	if (k->c[0] - cost < 0)
		k->c[0] = cost;
	return check_counts(k, p->nkeys, err);
}

/* The decision once the counts are known: *refund (consuming calls only)
 * when the increment went over the limit and must be given back, after
 * which refunded() finishes the denial. */
static void judge(const drl__limit *lim, const drl__call *call, const plan *p,
		  counts *k, drl_result *res, drl__undo *undo, bool *refund)
{
	int64_t cost = call->cost, limit = lim->limit;
	int64_t est = estimate(lim, k, p->e, p->s);
	*refund = false;
	if (p->consume && est <= limit) {
		undo->a = p->i;
		drl__result_fill(res, true, limit, limit - est,
				 reset_after(lim, k, p->e, p->s), 0);
		return;
	}
	if (p->consume) {
		*refund = true;
		return;
	}
	bool allowed = cost == 0 || (cost <= limit && est + cost <= limit);
	int64_t retry = cost > limit ? DRL_NEVER
				     : retry_after(lim, k, p->e, p->s, cost);
	drl__result_fill(res, allowed, limit, limit - est,
			 reset_after(lim, k, p->e, p->s), retry);
}

/* The denial of a consuming call whose increment went over the limit,
 * once it was given back: `v` is the counter after the refund (when
 * rc is 0). Should the refund fail, the quota stays taken: the safe
 * direction. */
static void refunded(const drl__limit *lim, const drl__call *call,
		     const plan *p, counts *k, int rc, int64_t v,
		     drl_result *res)
{
	if (rc == 0)
		k->c[0] = v < 0 ? 0 : v;
	else
		k->c[0] -= call->cost;
	int64_t est = estimate(lim, k, p->e, p->s);
	drl__result_fill(res, false, lim->limit, lim->limit - est,
			 reset_after(lim, k, p->e, p->s),
			 retry_after(lim, k, p->e, p->s, call->cost));
}

/* Add delta to one counter: add_read() of that key alone where the store
 * has it (no transaction), incr() otherwise; a grouped one that it found
 * absent trims its group (the record may be new, without a TTL). */
static int add_one(drl_backend *b, const plan *p, const drl__keybase *kb,
		   drl_bytes key, int64_t delta, int64_t *v, drl_error *err)
{
	int rc = drl__has_add_read(b)
			 ? b->add_read(b, 1, &key, delta, p->ttl, v, err)
			 : b->incr(b, key, delta, p->ttl, v, err);
	if (rc == 0 && must_trim(p, *v, delta))
		trim_group(b, p, kb);
	return rc;
}

/* The counts of a consuming call: our increment, then the reads of the
 * other sub-windows (one round trip with add_read, two otherwise). On an
 * error, *made says whether the increment is known to have been made
 * (then it must be given back). add_read's failure leaves that unknown:
 * it is not given back, since giving back an increment that was never
 * made would admit beyond the limit; one that stays costs at most this
 * sub-window's `cost` of quota, the safe direction. */
static int add_and_read(drl_backend *b, const plan *p, const plan_keys *pk,
			int64_t cost, counts *k, bool *made, drl_error *err)
{
	*made = false;
	if (drl__has_add_read(b))
		return b->add_read(b, p->nkeys, pk->keys, cost, p->ttl, k->c,
				   err);
	int rc = b->incr(b, pk->keys[0], cost, p->ttl, &k->c[0], err);
	if (rc)
		return rc;
	*made = true;
	if (p->nkeys > 1)
		rc = b->get_many(b, p->nkeys - 1, pk->keys + 1, k->c + 1, err);
	return rc;
}

/* Whether a decision of call goes by add_read (the store prefers it to
 * the twin, and the time is known before the call). */
static bool add_read_usable(const drl__call *call)
{
	return drl__has_add_read(call->backend) && call->now != DRL__NOW_STORE;
}

int drl__counter_decide(const drl__limit *lim, const drl__call *call,
			drl_result *res, drl__undo *undo)
{
	drl_backend *b = call->backend;
	counts k; /* only c[0..nkeys) is used: filled below */
	plan p;
	bool refund;
	int rc;

	plan_keys pk;
	plan_make(lim, call, &p, &pk);
	if (!add_read_usable(call) && drl__script_usable(lim, call)) {
		/* grouped: the twin's one key is the group's */
		rc = drl__script_decide(lim, call, p.grouped ? 0 : p.nkeys,
					pk.keys, res, undo);
		if (rc != DRL_BACKEND_ESPLIT)
			return rc;
	}
	if (!p.consume) {
		rc = b->get_many(b, p.nkeys, pk.keys, k.c, call->err);
		if (rc == 0)
			rc = check_counts(&k, p.nkeys, call->err);
		if (rc)
			return rc;
		judge(lim, call, &p, &k, res, undo, &refund);
		return 0;
	}
	bool made;
	rc = add_and_read(b, &p, &pk, call->cost, &k, &made, call->err);
	if (rc && !made)
		return rc;
	if ((rc == 0 || made) && must_trim(&p, k.c[0], call->cost))
		trim_group(b, &p, call->key);
	if (rc == 0)
		rc = added_counts(&p, call->cost, &k, call->err);
	if (rc == 0)
		judge(lim, call, &p, &k, res, undo, &refund);
	if (rc == 0 && !refund)
		return 0;
	int64_t v;
	int rrc = add_one(b, &p, call->key, pk.keys[0], -call->cost, &v, NULL);
	if (rc)
		return rc;
	refunded(lim, call, &p, &k, rrc, v, res);
	return 0;
}

/* ---- a decision started, not waited for (the async API) --------------- */

/* One started decision: a copy of its call, its plan, the current
 * sub-window's key (its other keys went to the store, which copied them),
 * its counts, and the error that a give-back carries to the end. */
typedef struct started {
	const drl__limit *lim;
	drl__call call;
	plan p;
	drl__key k0; /* the current sub-window's key, for a give-back */
	drl_bytes key0;
	counts k;
	int rc; /* of the counts, when an increment is given back for it */
	drl_error err;
	drl__decided_fn done;
	void *arg;
} started;

/* A started trim's end: nothing to do (best effort, as trim_group). */
static void trimmed(void *arg, int rc, const int64_t *out, size_t nret,
		    const drl_error *err)
{
	(void)arg, (void)rc, (void)out, (void)nret, (void)err;
}

/* trim_group() without waiting, for the started decision st whose write of
 * delta left its counter at v. */
static void start_trim(started *st, int64_t v, int64_t delta)
{
	drl_backend *b = st->call.backend;
	if (!must_trim(&st->p, v, delta) || b->trim_start == NULL)
		return;
	drl__keybase kb; /* the group: key0 up to its '#' */
	size_t len = st->key0.len;
	while (len > 0 && st->k0.buf[len - 1] != '#')
		len--;
	kb.len = len ? len - 1 : 0;
	memcpy(kb.buf, st->k0.buf, kb.len);
	char *buf;
	drl_bytes keys[GROUP_TRIM_MAX];
	size_t n = trim_keys(&st->p, &kb, &buf, keys);
	if (n > 0) /* the store copies the keys */
		(void)b->trim_start(b, st->call.chan, n, keys, st->p.ttl,
				    trimmed, NULL, NULL);
	free(buf);
}

static void started_end(started *st, int rc, const drl_result *res,
			const drl_error *err)
{
	st->done(st->arg, rc, res, err);
	free(st);
}

/* The give-back is done (or failed: the quota stays taken). */
static void give_back_done(void *arg, int rc, const int64_t *out, size_t nret,
			   const drl_error *err)
{
	started *st = arg;
	drl_result res = {0};
	(void)err;
	if (st->rc) {
		started_end(st, st->rc, NULL, &st->err);
		return;
	}
	rc = rc == 0 && nret < 1 ? DRL_ESTORE : rc;
	if (rc == 0)
		start_trim(st, out[0], -st->call.cost);
	refunded(st->lim, &st->call, &st->p, &st->k, rc, rc ? 0 : out[0], &res);
	started_end(st, 0, &res, NULL);
}

/* The increment and the reads are in: decide, or give back first. */
static void added_done(void *arg, int rc, const int64_t *out, size_t nret,
		       const drl_error *err)
{
	started *st = arg;
	drl_backend *b = st->call.backend;
	drl_result res = {0};
	drl__undo undo;
	bool refund = false;
	if (rc == 0 && nret != st->p.nkeys)
		rc = drl_error_set(&st->err, DRL_EINTERNAL,
				   "add_read answered %zu values", nret);
	if (rc) { /* whether the increment was made is unknown: kept */
		started_end(st, rc, NULL, err ? err : &st->err);
		return;
	}
	memcpy(st->k.c, out, nret * sizeof *out);
	start_trim(st, out[0], st->call.cost);
	st->rc = added_counts(&st->p, st->call.cost, &st->k, &st->err);
	if (st->rc == 0)
		judge(st->lim, &st->call, &st->p, &st->k, &res, &undo, &refund);
	if (st->rc == 0 && !refund) {
		started_end(st, 0, &res, NULL);
		return;
	}
	if (b->add_read_start(b, st->call.chan, 1, &st->key0, -st->call.cost,
			      st->p.ttl, give_back_done, st, NULL) != 0)
		give_back_done(st, DRL_ESTORE, NULL, 0, NULL);
}

bool drl__counter_startable(const drl__limit *lim, const drl__call *call)
{
	/* A decision that consumes nothing (a cost of 0, or beyond the
	 * limit) only reads: the twin, started, does that (start() says
	 * DRL_ENOTSUP), so it must be able to run; on a store with no
	 * script (drl__chan_only) an add_read_start() by 0 reads instead. */
	drl_backend *b = call->backend;
	return add_read_usable(call) && b->add_read_start != NULL &&
	       (drl__chan_only(b) ||
		(b->version >= 5 && (b->caps & DRL_CAP_EVAL_START) &&
		 b->eval_start != NULL && drl__script_usable(lim, call)));
}

/* The reads of a started decision that consumes nothing are in: judge. */
static void read_done(void *arg, int rc, const int64_t *out, size_t nret,
		      const drl_error *err)
{
	started *st = arg;
	drl_result res = {0};
	drl__undo undo;
	bool refund;
	if (rc == 0 && nret != st->p.nkeys)
		rc = drl_error_set(&st->err, DRL_EINTERNAL,
				   "add_read answered %zu values", nret);
	if (rc == 0) {
		memcpy(st->k.c, out, nret * sizeof *out);
		rc = check_counts(&st->k, st->p.nkeys, &st->err);
	}
	if (rc) {
		started_end(st, rc, NULL, err ? err : &st->err);
		return;
	}
	judge(st->lim, &st->call, &st->p, &st->k, &res, &undo, &refund);
	started_end(st, 0, &res, NULL);
}

int drl__counter_start(const drl__limit *lim, const drl__call *call,
		       drl__decided_fn done, void *arg)
{
	drl_backend *b = call->backend;
	bool reads = call->peek || call->cost > lim->limit;
	if (!add_read_usable(call) || b->add_read_start == NULL ||
	    (reads && !drl__chan_only(b)))
		return DRL_ENOTSUP;
	started *st = calloc(1, sizeof *st);
	if (st == NULL)
		return DRL_ENOMEM;
	st->lim = lim;
	st->call = *call;
	st->call.key = NULL; /* the keys are built here, copied by the store */
	st->call.err = NULL;
	st->done = done;
	st->arg = arg;
	plan_keys pk;
	plan_make(lim, call, &st->p, &pk);
	memcpy(st->k0.buf, pk.keys[0].data, pk.keys[0].len);
	st->k0.len = pk.keys[0].len;
	st->key0 = (drl_bytes){st->k0.buf, st->k0.len};
	int rc = b->add_read_start(
		b, call->chan, st->p.nkeys, pk.keys, reads ? 0 : call->cost,
		st->p.ttl, reads ? read_done : added_done, st, call->err);
	if (rc)
		free(st);
	return rc;
}

int drl__counter_refund(const drl__limit *lim, const drl__call *call,
			const drl__undo *undo)
{
	drl_backend *b = call->backend;
	int64_t n = lim->subwindows, s = lim->period_us / n;
	/* with the store's clock unread, the longest TTL the key can need */
	int64_t e = call->now == DRL__NOW_STORE ? 0 : call->now % s;
	plan p = {.s = s, .i = undo->a};
	p.ttl = (n + 1) * s - e + DRL__TTL_GRACE_US;
	plan_group(lim, b, &p);
	drl__key kbuf;
	int64_t v;
	drl_bytes key = p.grouped ? drl__key_grouped(&kbuf, call->key, p.i)
				  : drl__key_indexed(&kbuf, call->key, p.i);
	return add_one(b, &p, call->key, key, -call->cost, &v, call->err);
}

/* ---- drl_adjust ---------------------------------------------------------- */

/* A penalty by counter commands: call->delta added to the current
 * sub-window, then what took it beyond 2 x LIMIT given back (all of it
 * when it was there already), as a denied decision gives its increment
 * back. A give-back that fails leaves more used: the safe direction. */
static int penalize(const drl__limit *lim, const drl__call *call, const plan *p,
		    const plan_keys *pk)
{
	drl_backend *b = call->backend;
	int64_t d = call->delta, cap = drl__adjust_cap(lim), v;
	int rc = add_one(b, p, call->key, pk->keys[0], d, &v, call->err);
	if (rc == 0 && v > cap)
		(void)add_one(b, p, call->key, pk->keys[0],
			      -drl__min64(d, v - cap), &v, NULL);
	return rc;
}

/* A reward by counter commands: -call->delta taken from the sub-windows
 * newest first (the trailing one last), each at most what it was read
 * holding; a counter a concurrent reward took below 0 meanwhile gets
 * back what went below (never below 0 once each call is over). */
static int reward(const drl__call *call, const plan *p, const plan_keys *pk)
{
	drl_backend *b = call->backend;
	counts k;
	int rc = b->get_many(b, p->nkeys, pk->keys, k.c, call->err);
	if (rc == 0)
		rc = check_counts(&k, p->nkeys, call->err);
	int64_t r = -call->delta;
	for (size_t j = 0; rc == 0 && j < p->nkeys && r > 0; j++) {
		int64_t take = drl__min64(r, k.c[j]), v;
		if (take <= 0)
			continue;
		rc = add_one(b, p, call->key, pk->keys[j], -take, &v,
			     call->err);
		if (rc == 0 && v < 0)
			(void)add_one(b, p, call->key, pk->keys[j],
				      drl__min64(take, -v), &v, NULL);
		r -= take;
	}
	return rc;
}

int drl__counter_adjust(const drl__limit *lim, const drl__call *call,
			drl_result *res)
{
	drl__undo undo;
	plan p;
	plan_keys pk;
	plan_make(lim, call, &p, &pk);
	drl__call c;
	int rc = drl__adjust_twin(lim, call, p.grouped ? 0 : p.nkeys, pk.keys,
				  res, &c);
	if (rc != 1)
		return rc;
	plan_make(lim, &c, &p, &pk);
	rc = c.delta > 0 ? penalize(lim, &c, &p, &pk) : reward(&c, &p, &pk);
	if (rc)
		return rc;
	c.delta = 0; /* then the peek of cost 1 */
	return drl__counter_decide(lim, &c, res, &undo);
}

/* The sub-windows a decision at t reads are floor(t / S) - j for j in
 * [0, nkeys); a reset at `now` removes those of every t within one
 * sub-window of now (clients whose clocks differ by up to S, or a reset
 * that races a window edge): indexes i - nkeys .. i + 1. Older windows are
 * read by no decision at now or later, and their TTL removes them. Last,
 * the group that holds them all on a store with counter groups (its own
 * key, the base: the whole record goes), whatever the store: a store
 * without groups has no such key. */
size_t drl__counter_keys(const drl__limit *lim, const drl__keybase *kb,
			 int64_t now, drl__key *kbuf, drl_bytes *keys)
{
	int64_t s = lim->period_us / lim->subwindows;
	int64_t i = now / s;
	int64_t nkeys = lim->subwindows + (lim->trailing ? 1 : 0);
	size_t n = 0;
	for (int64_t j = i + 1; j >= i - nkeys; j--, n++)
		keys[n] = drl__key_indexed(&kbuf[n], kb, j);
	keys[n] = drl__key_plain(&kbuf[n], kb);
	return n + 1;
}

static int option(drl__limit *lim, const char *key, const char *value,
		  drl_error *err)
{
	int64_t v;
	size_t len = strlen(value);
	if (strcmp(key, "subwindows") == 0) {
		if (drl_parse_int(value, len, 1, DRL_SUBWINDOWS_MAX, &v))
			return drl_error_set(err, DRL_EINVAL,
					     "subwindows=%s must be from 1 to "
					     "%d",
					     value, DRL_SUBWINDOWS_MAX);
		lim->subwindows = v;
		return 0;
	}
	if (strcmp(key, "trailing") == 0) {
		if (drl_parse_int(value, len, 0, 1, &v))
			return drl_error_set(err, DRL_EINVAL,
					     "trailing=%s must be 0 or 1",
					     value);
		lim->trailing = (int)v;
		return 0;
	}
	return drl_error_set(err, DRL_EINVAL,
			     "unknown option \"%s\" for subwindow (expected "
			     "subwindows, trailing)",
			     key);
}

#define DEFAULT_SUBWINDOWS 10

static int finish(drl__limit *lim, drl_error *err)
{
	if (lim->subwindows == 0)
		lim->subwindows = DEFAULT_SUBWINDOWS;
	if (lim->period_us % lim->subwindows != 0)
		return drl_error_set(err, DRL_EINVAL,
				     "PERIOD (%lld us) is not a whole number "
				     "of microseconds per sub-window when "
				     "split into %lld",
				     (long long)lim->period_us,
				     (long long)lim->subwindows);
	return 0;
}

const drl__algorithm drl__subwindow = {
	.name = "subwindow",
	.tag = "sub",
	.option = option,
	.finish = finish,
	DRL__COUNTER_ENGINE,
};
