/*
 * One cell in one process: nthreads callers decide in a loop until the
 * deadline (the throughput phase), then, for a hot key, at one fixed time
 * until the quota is gone (the exactness phase). Callers start together
 * (barriers, and the parent's start time when forked), keep their own
 * tally (no lock, no allocation on the hot path), and are merged at the
 * end. With --async the callers are requests in flight on one loop
 * (bench/async.c) instead of threads.
 */
#include "shared.h"
#include "common/clock.h"

#include <drl/drl.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void bench_note_error(int *code, char *msg, int rc, const drl_error *err)
{
	if (*code != 0)
		return;
	*code = rc;
	/* the message cut to what fits after a code's name */
	snprintf(msg, MSG_MAX, "%s: %.170s", drl_err_name(rc),
		 err->message[0] ? err->message : drl_strerror(rc));
}

/* The first error of two tallies' kept: *code/msg unless it is none. */
static void keep_first(int *code, char *msg, int other, const char *other_msg)
{
	if (*code == 0 && other != 0) {
		*code = other;
		bench_copy_msg(msg, MSG_MAX, other_msg);
	}
}

void bench_tally_merge(tally *into, const tally *t)
{
	tl_hist_merge(&into->lat, &t->lat);
	into->calls += t->calls;
	into->allowed += t->allowed;
	into->errors += t->errors;
	keep_first(&into->first_err, into->first_msg, t->first_err,
		   t->first_msg);
	if (t->end_ns > into->end_ns)
		into->end_ns = t->end_ns;
	into->x_allowed += t->x_allowed;
	into->x_denied += t->x_denied;
	into->x_errors += t->x_errors;
	keep_first(&into->x_first_err, into->x_first_msg, t->x_first_err,
		   t->x_first_msg);
}

static void run_loop(worker *w)
{
	proc_ctx *p = w->p;
	tally *t = &w->t;
	const int64_t deadline = p->deadline_ns;
	const int64_t nkeys = p->cfg->keys;
	uint64_t rng = bench_rand_seed((uint64_t)(p->base_id + w->id), 1);
	char key[24];
	drl_result r;
	drl_error err;
	int64_t t1 = p->start_ns;

	err.message[0] = '\0';
	for (;;) {
		int64_t t0 = tl_mono_ns();
		if (t0 >= deadline)
			break;
		size_t klen = bench_pick_key(key, nkeys, &rng);
		int rc = drl_allow(p->lim, key, klen, 1, &r, &err);
		t1 = tl_mono_ns();
		tl_hist_add(&t->lat, t1 - t0);
		t->calls++;
		if (rc != 0) {
			t->errors++;
			bench_note_error(&t->first_err, t->first_msg, rc, &err);
		} else {
			t->allowed += r.allowed != 0;
		}
		if ((t->calls & 63) == 0)
			atomic_store_explicit(&w->progress, t->calls,
					      memory_order_relaxed);
	}
	t->end_ns = t1;
}

/* Decide at one fixed time until the shared count of admitted requests
 * reaches the capacity, then EXACT_TAIL more (all must be denied). */
static void exact_loop(worker *w)
{
	proc_ctx *p = w->p;
	tally *t = &w->t;
	const uint64_t cap = (uint64_t)p->x_capacity;
	drl_result r;
	drl_error err;
	int tail = 0;

	err.message[0] = '\0';
	while (tl_mono_ns() < p->deadline_ns) {
		int rc = drl_allow_at(p->xlim, "x", 1, 1, p->cfg->exact_now_us,
				      &r, &err);
		if (rc != 0) {
			t->x_errors++;
			bench_note_error(&t->x_first_err, t->x_first_msg, rc,
					 &err);
		} else if (r.allowed) {
			t->x_allowed++;
			atomic_fetch_add_explicit(p->x_total, 1,
						  memory_order_relaxed);
		} else {
			t->x_denied++;
		}
		if (atomic_load_explicit(p->x_total, memory_order_relaxed) >=
			    cap &&
		    ++tail >= EXACT_TAIL)
			break;
	}
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	proc_ctx *p = w->p;

	if (p->cfg->async_workers > 0) {
		/* caller 0 runs the loop for all; the others only keep the
		 * phase's barriers */
		pthread_barrier_wait(&p->ready);
		pthread_barrier_wait(&p->go);
		if (w->id == 0)
			bench_async_loop(w, p->phase == PHASE_EXACT);
		atomic_fetch_add(&p->done, 1);
		return NULL;
	}

	if (p->phase == PHASE_RUN) {
		/* Warm up on a key of its own: connections, scripts. */
		char key[24];
		size_t klen = (size_t)snprintf(key, sizeof key, "w%d",
					       p->base_id + w->id);
		drl_result r;
		(void)drl_allow(p->lim, key, klen, 1, &r, NULL);
	}
	pthread_barrier_wait(&p->ready);
	pthread_barrier_wait(&p->go);
	if (p->phase == PHASE_RUN)
		run_loop(w);
	else
		exact_loop(w);
	atomic_fetch_add(&p->done, 1);
	return NULL;
}

/* All callers of this process are ready: agree on the start time (with
 * the parent when there is one). */
static int64_t sync_start(proc_ctx *p)
{
	int64_t start;
	char ready = 'R';

	if (p->to_parent < 0)
		return tl_mono_ns();
	if (write(p->to_parent, &ready, 1) != 1 ||
	    read(p->from_parent, &start, sizeof start) != sizeof start)
		return tl_mono_ns() - INT64_C(1000000000000); /* over: stop */
	return start;
}

void bench_progress_line(const cell_cfg *cfg, double elapsed, double total,
			 uint64_t calls)
{
	if (calls)
		fprintf(stderr, "\r\033[K%s  %.1f/%.1f s  %" PRIu64 " calls",
			cfg->label, elapsed, total, calls);
	else
		fprintf(stderr, "\r\033[K%s  %.1f/%.1f s", cfg->label, elapsed,
			total);
}

/* Run one phase with p->nthreads callers (none when the phase's limiter
 * could not be made: the phase then only synchronizes). */
static void run_phase(proc_ctx *p, int phase, int64_t length_ns)
{
	int n = p->nthreads;
	bool active = phase == PHASE_RUN ? p->lim != NULL : p->xlim != NULL;
	pthread_t *th = NULL;
	int started = 0;

	p->phase = phase;
	atomic_store(&p->done, 0);
	if (active) {
		th = calloc((size_t)n, sizeof *th);
		if (th == NULL ||
		    pthread_barrier_init(&p->ready, NULL, (unsigned)n + 1) ||
		    pthread_barrier_init(&p->go, NULL, (unsigned)n + 1)) {
			free(th);
			th = NULL;
			active = false;
		}
	}
	if (active) {
		for (started = 0; started < n; started++)
			if (pthread_create(&th[started], NULL, worker_main,
					   &p->w[started]) != 0)
				break;
		if (started < n) {
			/* The started ones wait at a barrier that can never
			 * fill: nothing sane is left to do. */
			fprintf(stderr, "drl bench: cannot start %d threads\n",
				n);
			abort();
		}
		pthread_barrier_wait(&p->ready);
	}
	/* Every caller is ready (connected, warmed up): the server's figures
	 * start here, before the start time is fixed. */
	bool measure = active && phase == PHASE_RUN && p->srv != NULL;
	if (measure)
		bench_srv_begin(p->srv, p->cfg->store);
	int64_t start = sync_start(p);
	p->start_ns = start;
	p->deadline_ns = start + length_ns;
	if (!active)
		return;
	pthread_barrier_wait(&p->go);
	while (atomic_load(&p->done) < n) {
		int64_t now = tl_mono_ns();
		if (p->cfg->progress && p->to_parent < 0) {
			uint64_t calls = 0;
			for (int i = 0; i < n; i++)
				calls += atomic_load_explicit(
					&p->w[i].progress,
					memory_order_relaxed);
			bench_progress_line(p->cfg, (double)(now - start) / 1e9,
					    (double)length_ns / 1e9, calls);
		}
		tl_sleep_ns(INT64_C(100000000));
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	if (measure)
		bench_srv_end(p->srv);
	pthread_barrier_destroy(&p->ready);
	pthread_barrier_destroy(&p->go);
	free(th);
}

static void stats_delta(drl_store_stats *d, const drl_store_stats *a,
			const drl_store_stats *b)
{
	d->decisions = b->decisions - a->decisions;
	d->cas_attempts = b->cas_attempts - a->cas_attempts;
	d->cas_conflicts = b->cas_conflicts - a->cas_conflicts;
	d->cas_exhausted = b->cas_exhausted - a->cas_exhausted;
	d->scripts = b->scripts - a->scripts;
}

/* One process's share of a cell: open the store, run the throughput phase
 * and (hot key) the exactness phase, report into *res. Always goes
 * through both synchronizations, even after a failure, so the processes
 * of a cell stay in step. */
void bench_run_proc(proc_ctx *p, proc_result *res)
{
	const cell_cfg *cfg = p->cfg;
	drl_store *store = NULL;
	drl_error err = {0};
	drl_store_stats before = {0}, after = {0};
	int rc;

	memset(res, 0, sizeof *res);
	res->x_capacity = -1;
	p->w = aligned_alloc(64, sizeof(worker) * (size_t)p->nthreads);
	if (p->w == NULL) {
		res->open_rc = DRL_ENOMEM;
		bench_copy_msg(res->open_msg, MSG_MAX, "out of memory");
	} else {
		memset(p->w, 0, sizeof(worker) * (size_t)p->nthreads);
		for (int i = 0; i < p->nthreads; i++) {
			p->w[i].p = p;
			p->w[i].id = i;
		}
	}
	if (p->w != NULL &&
	    ((rc = drl_store_open(&store, cfg->store, &err)) != 0 ||
	     (rc = drl_limiter_new(&p->lim, store, cfg->spec, cfg->prefix,
				   &err)) != 0)) {
		res->open_rc = rc;
		bench_copy_msg(res->open_msg, MSG_MAX, err.message);
	}
	if (p->lim != NULL && cfg->xspec != NULL) {
		char xprefix[80];
		snprintf(xprefix, sizeof xprefix, "%sx:", cfg->prefix);
		err.message[0] = '\0';
		rc = drl_limiter_new(&p->xlim, store, cfg->xspec, xprefix,
				     &err);
		if (rc != 0) {
			res->x_rc = rc;
			bench_copy_msg(res->x_msg, MSG_MAX, err.message);
		}
	}

	if (store)
		drl_store_stats_get(store, &before);
	run_phase(p, PHASE_RUN, cfg->duration_ns);
	res->start_ns = p->start_ns;
	if (store) {
		drl_store_stats_get(store, &after);
		stats_delta(&res->d, &before, &after);
	}

	if (cfg->xspec != NULL) {
		if (p->xlim != NULL) {
			/* cost 0: the quota at that time, consuming nothing */
			drl_result r;
			err.message[0] = '\0';
			rc = drl_allow_at(p->xlim, "x", 1, 0, cfg->exact_now_us,
					  &r, &err);
			if (rc != 0) {
				res->x_rc = rc;
				bench_copy_msg(res->x_msg, MSG_MAX,
					       err.message);
				drl_limiter_free(p->xlim);
				p->xlim = NULL;
			} else {
				p->x_capacity = r.remaining;
				res->x_capacity = r.remaining;
			}
		}
		run_phase(p, PHASE_EXACT, cfg->exact_cap_ns);
	}

	if (p->w != NULL)
		for (int i = 0; i < p->nthreads; i++)
			bench_tally_merge(&res->t, &p->w[i].t);
	if (res->t.end_ns < res->start_ns)
		res->t.end_ns = res->start_ns;
	drl_limiter_free(p->xlim);
	drl_limiter_free(p->lim);
	drl_store_free(store);
	free(p->w);
	p->w = NULL;
}
