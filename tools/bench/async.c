/*
 * --async: a process's callers are requests kept in flight on one event
 * loop (drl_async_allow on a context of --async worker threads), run by
 * caller 0's thread; the accounting is the threads' (bench/runner.c):
 * latency is start to callback.
 */
#include "shared.h"
#include "common/clock.h"

#include <drl/async.h>
#include <drl/drl.h>

#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>

/* --async: a process's callers are requests in flight on one loop,
 * decided by a drl_async context; caller 0's thread runs the loop. */
typedef struct aloop {
	worker *w;
	drl_async *a;
	uint64_t rng;
	int inflight, tail;
	bool exact;
} aloop;

/* One request in flight: when it started. */
typedef struct aslot {
	aloop *lp;
	int64_t t0;
} aslot;

static void async_start(aslot *s, int64_t t0);

/* A decision of the throughput phase: run_loop's accounting. Returns
 * the time it ended (the clock is read once a decision: a loop's
 * decisions are cheap enough for clock reads to show). */
static int64_t async_run_done(aloop *lp, int64_t t0, int rc,
			      const drl_result *r, const drl_error *err)
{
	tally *t = &lp->w->t;
	int64_t t1 = tl_mono_ns();
	tl_hist_add(&t->lat, t1 - t0);
	t->calls++;
	t->end_ns = t1;
	if (rc != 0) {
		t->errors++;
		bench_note_error(&t->first_err, t->first_msg, rc, err);
	} else {
		t->allowed += r->allowed != 0;
	}
	if ((t->calls & 63) == 0)
		atomic_store_explicit(&lp->w->progress, t->calls,
				      memory_order_relaxed);
	return t1;
}

/* A decision of the exactness phase: exact_loop's accounting; whether
 * the phase goes on. */
static bool async_exact_done(aloop *lp, int rc, const drl_result *r,
			     const drl_error *err)
{
	proc_ctx *p = lp->w->p;
	tally *t = &lp->w->t;
	if (rc != 0) {
		t->x_errors++;
		bench_note_error(&t->x_first_err, t->x_first_msg, rc, err);
	} else if (r->allowed) {
		t->x_allowed++;
		atomic_fetch_add_explicit(p->x_total, 1, memory_order_relaxed);
	} else {
		t->x_denied++;
	}
	return !(atomic_load_explicit(p->x_total, memory_order_relaxed) >=
			 (uint64_t)p->x_capacity &&
		 ++lp->tail >= EXACT_TAIL);
}

static void async_done(drl_async *a, int rc, const drl_result *r,
		       const drl_error *err, void *arg)
{
	(void)a;
	aslot *s = arg;
	aloop *lp = s->lp;
	bool more = true;
	int64_t now;
	if (lp->exact) {
		more = async_exact_done(lp, rc, r, err);
		now = tl_mono_ns();
	} else {
		now = async_run_done(lp, s->t0, rc, r, err);
	}
	lp->inflight--;
	if (more && now < lp->w->p->deadline_ns)
		async_start(s, now); /* it starts when the last one ended */
}

/* Start slot s's next request; t0: now. */
static void async_start(aslot *s, int64_t t0)
{
	aloop *lp = s->lp;
	proc_ctx *p = lp->w->p;
	drl_error err = {0};
	int rc;
	s->t0 = t0;
	if (lp->exact) {
		rc = drl_async_allow_at(lp->a, p->xlim, "x", 1, 1,
					p->cfg->exact_now_us, async_done, s,
					&err);
	} else {
		char key[24];
		size_t klen = bench_pick_key(key, p->cfg->keys, &lp->rng);
		rc = drl_async_allow(lp->a, p->lim, key, klen, 1, async_done, s,
				     &err);
	}
	if (rc == 0) {
		lp->inflight++;
		return;
	}
	/* not started: a failed call, and this place retires */
	drl_result r = {0};
	if (lp->exact)
		(void)async_exact_done(lp, rc, &r, &err);
	else
		(void)async_run_done(lp, s->t0, rc, &r, &err);
}

/* Keep p->nthreads requests in flight until the phase ends; then wait
 * for the last callbacks. */
void bench_async_loop(worker *w, bool exact)
{
	proc_ctx *p = w->p;
	drl_async_opts o = {.threads = p->cfg->async_workers};
	drl_error err = {0};
	aloop lp = {.w = w,
		    .rng = bench_rand_seed((uint64_t)p->base_id, 1),
		    .exact = exact};
	int rc = drl_async_new(&lp.a, &o, &err);
	if (rc != 0) {
		bench_note_error(exact ? &w->t.x_first_err : &w->t.first_err,
				 exact ? w->t.x_first_msg : w->t.first_msg, rc,
				 &err);
		return;
	}
	aslot *slots = calloc((size_t)p->nthreads, sizeof *slots);
	for (int i = 0; slots && i < p->nthreads; i++) {
		slots[i].lp = &lp;
		async_start(&slots[i], tl_mono_ns());
	}
	struct pollfd pfd = {.fd = drl_async_fd(lp.a), .events = POLLIN};
	while (lp.inflight > 0) {
		poll(&pfd, 1, 100);
		drl_async_process(lp.a);
	}
	drl_async_free(lp.a);
	free(slots);
}
