/*
 * The Redis store's shared, pipelined connections (auto-pipelining), see
 * backends/redis/internal.h. Which calls come here is the store's choice
 * (drl__redis_acquire_shared() in backends/redis/store.c).
 *
 * Calls that need no connection state of their own (scripts, counters,
 * GETs, TIME, DEL: everything but tx=watch's load/cas, and calls behind
 * ASKING) share a few connections, `pipelines=N` per store (default
 * DEFAULT_PIPELINES; 0: every call takes a pooled connection of its own,
 * as before). A call formats its commands (append_shared) and queues them
 * on a pipe. Whoever finds the pipe without a leader leads: it takes every
 * queued call, writes them all with one writev(), reads the replies in
 * order and hands each call its own; then it runs what was queued
 * meanwhile, up to LEAD_BATCHES batches, or passes the lead to the first
 * call queued (pipe_lead). A thread alone finds its pipe idle and makes
 * the same round trip as with a connection of its own; under
 * concurrency, calls that are ready together share one write and one
 * read, on both sides. A batch's waiting callers are woken by one ring
 * of the pipe's bell (backends/redis/bell.h), not a wake-up each.
 *
 * A started call (drl__redis_pipe_start: the async API's, through the
 * store's eval_start) has no thread waiting in it: it carries a
 * `complete` function instead, which the leader runs once the call's
 * replies are in (outside the lock). When such a call is to lead, the
 * pipe's I/O thread does (started with the first started call, one per
 * pipe, every signal blocked); blocking callers still lead their own
 * batches, and whoever leads finishes every call of the batch, waited-for
 * or started.
 *
 * Every call keeps its own deadline (timeout_ms from its start): a call
 * whose deadline passed before it was sent is refused unsent (DRL_ETIMEDOUT,
 * nothing ran), and the replies of each call are awaited until its own
 * deadline. A reply that does not come in time, an I/O error or a reply
 * hiredis cannot parse fails that call and every call after it in the
 * batch (their replies can no longer be told apart: the connection is
 * dropped, the next batch connects afresh). A call never gets another
 * call's reply: replies are matched by position, and a connection whose
 * position is lost is never read again.
 *
 * Lock order: a pipe's mu, then nothing (the leader does its I/O, and
 * runs completions, without it). Waiting calls yield their CPU a few
 * times (pipe_await), then sleep on the pipe's bell, each for its
 * batch's bit and its thread's (rreq.bells); the leader
 * marks each call done (rreq.state), then rings once for the batch after
 * the lock is released (a woken caller does not queue on the leader's
 * mutex), or rings one thread's bit to make its call lead (RREQ_LEAD).
 * Only the leader, bounded by deadlines, does I/O, so a waiting call
 * needs no timed wait.
 */
#include "bell.h"
#include "internal.h"
#include "thread.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

struct rpipe {
	pthread_mutex_t mu;
	conn *c; /* the shared connection; NULL: connect at the next batch */
	rreq *head, *tail; /* queued, not yet sent */
	uint64_t takes;    /* batches taken so far (under mu) */
	/* What waiting callers sleep on: rung once per batch finished (for
	 * its batch bit), and for one caller's thread bit when it is to
	 * lead (RREQ_LEAD). */
	drl__bell bell;
	_Atomic bool leading;
	_Atomic size_t queued;
	/* The pipe's I/O thread, started by the first started call (one
	 * with `complete`), which has no thread of its own to lead; guarded
	 * by mu. `io_lead`: the thread is to lead the pipe next. */
	pthread_cond_t io_cv;
	pthread_t io_thread;
	rstore *store;
	bool io_started, io_lead, io_stop;
};

void (*drl__redis_pipe_hook)(int event, size_t n);

/* Tell the test hook, if any. */
static void hook(int event, size_t n)
{
	if (drl__redis_pipe_hook)
		drl__redis_pipe_hook(event, n);
}

/* Which pipe a thread tries first: threads spread over the pipes. */
static _Atomic unsigned pipe_next_hint;
static _Thread_local unsigned pipe_hint;
static _Thread_local bool pipe_hinted;

/* A waiting call's bells (rreq.bells): bit (batch number & 3) for the
 * batch it goes out in (a ring for a batch may wake a caller of the
 * batch four later: it checks its state and sleeps again), and one of
 * the bits 4..31 for its thread (threads share one bit 28 apart). */
#define BATCH_BELLS 0xfu
static _Atomic unsigned pipe_next_slot;
static _Thread_local uint32_t pipe_slot_bell;

static uint32_t thread_bell(void)
{
	if (pipe_slot_bell == 0)
		pipe_slot_bell =
			1u << (4 + atomic_fetch_add(&pipe_next_slot, 1) % 28);
	return pipe_slot_bell;
}

/* The pipe for a call: the first without a leader from this thread's
 * own, else the one with the fewest calls queued. */
static rpipe *pipe_pick(rstore *s)
{
	if (!pipe_hinted) {
		pipe_hint = atomic_fetch_add(&pipe_next_hint, 1);
		pipe_hinted = true;
	}
	rpipe *best = NULL;
	size_t best_queued = SIZE_MAX;
	for (size_t i = 0; i < s->npipes; i++) {
		rpipe *p = &s->pipes[(pipe_hint + i) % s->npipes];
		if (!atomic_load_explicit(&p->leading, memory_order_relaxed))
			return p;
		size_t q =
			atomic_load_explicit(&p->queued, memory_order_relaxed);
		if (q < best_queued) {
			best = p;
			best_queued = q;
		}
	}
	return best;
}

/* Fail request q with code and the message of `from` (or a fresh one). */
static void req_fail(rreq *q, const drl_error *from)
{
	q->rc = from->code;
	q->err = *from;
}

/* Write the batch's requests (those with rc 0) on c (writev(), or TLS
 * records: drl__redis_writev), by the first one's deadline. 0, or an error in *e (c broken). */
static int pipe_write(rstore *s, conn *c, rreq *batch, drl_error *e)
{
	struct iovec iov[64];
	rreq *q = batch;
	size_t skip = 0; /* bytes of q already written */
	while (q) {
		int n = 0;
		rreq *it = q;
		for (; it && n < 64; it = it->next) {
			if (it->rc)
				continue;
			size_t off = it == q ? skip : 0;
			iov[n].iov_base = (char *)it->buf + off;
			iov[n].iov_len = it->len - off;
			n++;
		}
		if (n == 0)
			return 0;
		ssize_t w = drl__redis_writev(c, iov, n);
		if (w < 0)
			return drl__redis_io_error(s, c, q->what, e);
		if (w == 0) {
			int rdy = drl__redis_wait_ready(c, c->want);
			if (rdy == 0)
				return drl__redis_timeout_error(s, c, q->what,
								e);
			if (rdy < 0) {
				c->broken = true;
				drl__redis_trouble(s);
				return drl_error_set(e, DRL_EUNAVAILABLE,
						     "redis %s: %s: poll: %s",
						     s->where, q->what,
						     strerror(errno));
			}
			continue;
		}
		/* Advance past what was written. */
		size_t left = (size_t)w;
		while (q) {
			if (q->rc) {
				q = q->next;
				continue;
			}
			size_t rest = q->len - skip;
			if (left < rest) {
				skip += left;
				break;
			}
			left -= rest;
			skip = 0;
			q = q->next;
		}
	}
	return 0;
}

/* Read each live request's replies in order, each by its own deadline.
 * On the first failure that request and all after it fail with it. */
static void pipe_read(rstore *s, conn *c, rreq *batch)
{
	drl_error e = {0};
	int rc = 0;
	for (rreq *q = batch; q; q = q->next) {
		if (q->rc)
			continue;
		if (rc) {
			req_fail(q, &e);
			continue;
		}
		c->deadline = q->deadline;
		for (size_t i = 0; i < q->n; i++) {
			void *p = NULL;
			rc = drl__redis_get_reply(s, c, &p, q->what, &e);
			if (rc) {
				drl__redis_free_replies(q->r, i);
				req_fail(q, &e);
				break;
			}
			q->r[i] = p;
		}
	}
}

/* tx=auto: the batch's calls whose command depends on the connection
 * (rreq.form) formatted for c, whose server is asked first (once per
 * connection) when one of them is there. A call that cannot be formatted
 * fails unsent; 0, or the probe's failure (c broken, nothing sent). */
static int pipe_form(rstore *s, conn *c, rreq *batch, drl_error *e)
{
	bool asked = false;
	for (rreq *q = batch; q; q = q->next) {
		if (q->rc || q->form == NULL)
			continue;
		if (!asked && drl__redis_conn_probe(s, c, e) != 0)
			return -1;
		asked = true;
		drl_error fe = {0};
		if (q->form(s, q, c->twin == TWIN_YES, &fe) != 0) {
			req_fail(q, &fe);
			q->unsent = true;
		}
	}
	return 0;
}

/* Run one batch on the pipe's connection *cp (opened here when NULL;
 * freed and set NULL when it broke). Each request ends with rc and, on
 * success, its replies. */
static void pipe_run(rstore *s, conn **cp, rreq *batch)
{
	drl_error e = {0};
	rreq *first = NULL;
	struct timespec now; /* as the calls' deadlines (internal.h) */
	clock_gettime(CLOCK_MONOTONIC, &now);
	for (rreq *q = batch; q; q = q->next) {
		if (now.tv_sec > q->deadline.tv_sec ||
		    (now.tv_sec == q->deadline.tv_sec &&
		     now.tv_nsec >= q->deadline.tv_nsec)) {
			drl_error_set(&e, DRL_ETIMEDOUT,
				      "redis %s: %s: not sent within "
				      "timeout_ms=%" PRId64,
				      s->where, q->what, s->timeout_ms);
			req_fail(q, &e);
		} else if (first == NULL) {
			first = q;
		}
	}
	if (first == NULL)
		return;
	conn *c = *cp;
	if (c && drl__redis_conn_stale(c)) {
		drl__redis_conn_free(c);
		c = NULL;
	}
	if (c == NULL &&
	    drl__redis_conn_open(s, &c, &first->deadline, &e) != 0) {
		for (rreq *q = first; q; q = q->next)
			if (q->rc == 0) {
				req_fail(q, &e);
				q->unsent = true;
			}
		*cp = NULL;
		return;
	}
	pipe_guard g;
	drl__redis_sigpipe_block(&g);
	c->deadline = first->deadline;
	if (pipe_form(s, c, first, &e) != 0) {
		for (rreq *q = first; q; q = q->next)
			if (q->rc == 0) {
				req_fail(q, &e);
				q->unsent = true;
			}
	} else if (pipe_write(s, c, first, &e) != 0) {
		for (rreq *q = first; q; q = q->next)
			if (q->rc == 0)
				req_fail(q, &e);
	} else {
		size_t n = 0;
		for (rreq *q = first; q; q = q->next)
			n += q->rc == 0;
		hook(DRL__PIPE_SENT, n);
		pipe_read(s, c, first);
	}
	drl__redis_sigpipe_restore(&g, c->broken);
	if (c->broken) {
		drl__redis_conn_free(c);
		c = NULL;
	} else {
		c->idle_since = drl__redis_coarse_ms();
	}
	*cp = c;
}

/* Take every call queued on p (p->mu held). */
static rreq *pipe_take(rpipe *p)
{
	rreq *batch = p->head;
	size_t taken = 0;
	for (rreq *it = batch; it; it = it->next)
		taken++;
	p->head = p->tail = NULL;
	if (batch)
		p->takes++;
	atomic_fetch_sub_explicit(&p->queued, taken, memory_order_relaxed);
	return batch;
}

/* Finish a batch's calls: run a started call's completion, mark a
 * waiting call done, then ring once for every waiting caller of the
 * batch (a woken caller may return and free its rreq at once, a
 * completion may free its own or queue it again: read `next` and `bells`
 * first). No lock held. */
static void pipe_finish(rstore *s, rpipe *p, rreq *batch)
{
	uint32_t ring = 0;
	size_t n = 0;
	for (rreq *it = batch; it; it = it->next)
		n++;
	hook(DRL__PIPE_FINISH, n);
	for (rreq *it = batch; it;) {
		rreq *nx = it->next;
		if (it->complete) {
			it->next = NULL;
			it->complete(s, it);
		} else {
			ring |= it->bells & BATCH_BELLS;
			atomic_store_explicit(&it->state, RREQ_DONE,
					      memory_order_release);
		}
		it = nx;
	}
	if (ring)
		drl__bell_ring(&p->bell, ring);
}

/* Make waiting call q (asleep in pipe_await) lead next. */
static void pipe_pass(rpipe *p, rreq *q)
{
	uint32_t bit = q->bells & ~BATCH_BELLS;
	hook(DRL__PIPE_PASS, 0);
	atomic_store_explicit(&q->state, RREQ_LEAD, memory_order_release);
	drl__bell_ring(&p->bell, bit);
}

/*
 * Lead pipe p: take every queued call and run them as one batch, then
 * finish them (their owners wake in pipe_await, all at one ring). While
 * calls are queued again, go on with the next batch, up to LEAD_BATCHES
 * in all: the thread already on a CPU carries on, instead of a woken one
 * that has yet to be scheduled (on a busy machine that costs milliseconds
 * per batch). The leader's own call is in its first batch, so its caller
 * waits at most LEAD_BATCHES - 1 round trips longer. After that the
 * first queued call leads, or the pipe goes idle.
 *
 * One batch at a time: writing the next batch before waking the last
 * one's callers (so that Redis works while they get a CPU) was measured
 * and lost on the 2-core machine of docs/performance.md (16 threads:
 * -9 % decisions/s, +5 % client CPU a decision): its batches are half as
 * big, and every batch costs a write, a poll, a read and a ring here and
 * a read and a write in Redis. So did the leader spinning on its socket
 * (poll with no wait) for 20 or 60 µs before it sleeps: -6 % and -19 %
 * decisions/s, the CPU it burns is what the woken callers and Redis need.
 */
#define LEAD_BATCHES DRL__PIPE_LEAD_BATCHES
static void pipe_lead(rstore *s, rpipe *p)
{
	pthread_mutex_lock(&p->mu);
	for (int round = 0;; round++) {
		rreq *batch = pipe_take(p);
		conn *c = p->c;
		p->c = NULL;
		pthread_mutex_unlock(&p->mu);
		pipe_run(s, &c, batch);
		pthread_mutex_lock(&p->mu);
		p->c = c;
		rreq *next_leader = NULL;
		bool again = p->head != NULL && round + 1 < LEAD_BATCHES;
		if (p->head && !again)
			next_leader = p->head;
		else if (!p->head)
			atomic_store_explicit(&p->leading, false,
					      memory_order_relaxed);
		bool io_wake = next_leader && next_leader->complete;
		if (io_wake) /* a started call leads through the I/O thread */
			p->io_lead = true;
		pthread_mutex_unlock(&p->mu);
		if (io_wake)
			pthread_cond_signal(&p->io_cv);
		else if (next_leader)
			pipe_pass(p, next_leader);
		pipe_finish(s, p, batch);
		if (!again)
			return;
		pthread_mutex_lock(&p->mu);
	}
}

/* Queue q on p (p->mu held): true when p had no leader, and the caller
 * is now to see that it gets one. */
static bool pipe_queue(rpipe *p, rreq *q)
{
	q->next = NULL;
	atomic_store_explicit(&q->state, RREQ_WAITING, memory_order_relaxed);
	q->bells = 1u << ((p->takes + 1) & 3);
	if (!q->complete)
		q->bells |= thread_bell();
	if (p->tail)
		p->tail->next = q;
	else
		p->head = q;
	p->tail = q;
	atomic_fetch_add_explicit(&p->queued, 1, memory_order_relaxed);
	bool lead = !atomic_load_explicit(&p->leading, memory_order_relaxed);
	if (lead)
		atomic_store_explicit(&p->leading, true, memory_order_relaxed);
	else
		hook(DRL__PIPE_QUEUED, 1);
	return lead;
}

/*
 * Sleep until waiting call q is done or is to lead: its state.
 *
 * It first gives its CPU away DRL__PIPE_AWAIT_YIELDS times
 * (sched_yield(), its state checked in between), and sleeps on the bell
 * only if the call is still waiting then. A thread that sleeps costs a
 * futex wait, a wake-up and a trip through the scheduler: on the 2-core
 * machine of docs/performance.md, 16 blocking threads spent ~7.6 µs of
 * CPU a decision, mostly there, and the server idled between batches.
 * Yielding lets the threads woken by the last batch, the leader and
 * Redis run, and most calls are done before their yields run out: 16
 * threads on one pipe, 98-118k -> 158-161k decisions/s (0, 2, 4, 8 and
 * 16 yields measured; "Blocking callers yield before they sleep" there).
 * With nothing else to run, a yield returns at once: a call answered
 * late burns at most DRL__PIPE_AWAIT_YIELDS system calls before it
 * sleeps as before. (Linux's CFS gives a yielding thread's turn to
 * another runnable one; POSIX leaves SCHED_OTHER's yield unspecified,
 * and a system where it does nothing only spins that long.)
 */
static int pipe_await(rpipe *p, rreq *q)
{
	int yields = 0;
	for (; yields < DRL__PIPE_AWAIT_YIELDS; yields++) {
		int st = atomic_load_explicit(&q->state, memory_order_acquire);
		if (st != RREQ_WAITING)
			return st;
		sched_yield();
	}
	hook(DRL__PIPE_SLEEP, (size_t)yields);
	for (;;) {
		uint32_t seen = drl__bell_peek(&p->bell);
		int st = atomic_load_explicit(&q->state, memory_order_acquire);
		if (st != RREQ_WAITING)
			return st;
		drl__bell_wait(&p->bell, seen, q->bells);
	}
}

/*
 * Send the commands queued on `proxy` (n of them) on one of s's shared
 * connections, together with other threads' calls, and read their n
 * replies into r[] by the proxy's deadline. As collect(): on failure
 * nothing is left in r[] and the error is set.
 */
int drl__redis_pipe_call(rstore *s, conn *proxy, size_t n, redisReply **r,
			 const char *what, drl_error *err)
{
	if (n == 0)
		return 0;
	/* The call's time starts when its first commands are ready to go
	 * (formatting a megabyte key is not the server's time), and covers
	 * every round trip of the call (a NOSCRIPT's second one too). */
	if (proxy->deadline.tv_sec == 0 && proxy->deadline.tv_nsec == 0)
		proxy->deadline = drl__redis_deadline_in(s->timeout_ms);
	rreq q = {.buf = proxy->qbuf,
		  .len = proxy->qlen,
		  .n = n,
		  .r = r,
		  .deadline = proxy->deadline,
		  .what = what,
		  .form = proxy->form,
		  .form_arg = proxy->form_arg};
	rpipe *p = pipe_pick(s);
	pthread_mutex_lock(&p->mu);
	bool lead = pipe_queue(p, &q);
	pthread_mutex_unlock(&p->mu);
	if (!lead)
		lead = pipe_await(p, &q) == RREQ_LEAD;
	if (lead)
		pipe_lead(s, p);
	if (q.rc && err)
		*err = q.err;
	return q.unsent ? drl__redis_unsent_mark(s, q.rc) : q.rc;
}

/*
 * A pipe's I/O thread: it leads the pipe whenever a started call is to
 * lead (io_lead), since such a call has no thread of its own; blocking
 * callers still lead their own batches. It sleeps otherwise, and ends
 * once told to stop with nothing left to lead. Every signal is blocked in
 * it (as in the library's other threads).
 */
static void *pipe_io(void *arg)
{
	(void)pthread_setname_np(pthread_self(), "drl-redis-io");
	rpipe *p = arg;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		if (p->io_lead) {
			p->io_lead = false;
			pthread_mutex_unlock(&p->mu);
			pipe_lead(p->store, p);
			pthread_mutex_lock(&p->mu);
		} else if (p->io_stop) {
			break;
		} else {
			pthread_cond_wait(&p->io_cv, &p->mu);
		}
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* Start p's I/O thread (p->mu held) unless it runs: 0, or -1. */
static int pipe_io_start(rpipe *p)
{
	if (p->io_started)
		return 0;
	if (drl__redis_thread_start(&p->io_thread, pipe_io, p) != 0)
		return -1;
	p->io_started = true;
	return 0;
}

int drl__redis_pipe_start(rstore *s, rreq *q, drl_error *err)
{
	rpipe *p = pipe_pick(s);
	pthread_mutex_lock(&p->mu);
	if (pipe_io_start(p) != 0) {
		pthread_mutex_unlock(&p->mu);
		return drl_error_set(err, DRL_ENOMEM,
				     "redis %s: cannot start an I/O thread",
				     s->where);
	}
	bool lead = pipe_queue(p, q);
	if (lead)
		p->io_lead = true;
	pthread_mutex_unlock(&p->mu);
	if (lead)
		pthread_cond_signal(&p->io_cv);
	return 0;
}

/* Make s's pipes (s->npipes of them); -1 when out of memory. */
int drl__redis_pipes_init(rstore *s)
{
	if (s->npipes == 0)
		return 0;
	s->pipes = calloc(s->npipes, sizeof *s->pipes);
	if (s->pipes == NULL)
		return -1;
	for (size_t i = 0; i < s->npipes; i++) {
		rpipe *p = &s->pipes[i];
		bool mu_ok = pthread_mutex_init(&p->mu, NULL) == 0;
		if (!mu_ok || pthread_cond_init(&p->io_cv, NULL) != 0) {
			if (mu_ok)
				pthread_mutex_destroy(&p->mu);
			while (i-- > 0) {
				pthread_cond_destroy(&s->pipes[i].io_cv);
				pthread_mutex_destroy(&s->pipes[i].mu);
			}
			free(s->pipes);
			s->pipes = NULL;
			return -1;
		}
		p->store = s;
		atomic_init(&p->leading, false);
		atomic_init(&p->queued, 0);
		atomic_init(&p->bell.word, 0);
	}
	return 0;
}

/* Free s's pipes and their connections (no call may be waited for; a
 * started call still queued is led to its end first, by its deadline). */
void drl__redis_pipes_free(rstore *s)
{
	for (size_t i = 0; s->pipes && i < s->npipes; i++) {
		rpipe *p = &s->pipes[i];
		pthread_mutex_lock(&p->mu);
		bool started = p->io_started;
		p->io_stop = true;
		pthread_mutex_unlock(&p->mu);
		if (started) {
			pthread_cond_signal(&p->io_cv);
			pthread_join(p->io_thread, NULL);
		}
		drl__redis_conn_free(p->c);
		pthread_cond_destroy(&p->io_cv);
		pthread_mutex_destroy(&p->mu);
	}
	free(s->pipes);
	s->pipes = NULL;
}
