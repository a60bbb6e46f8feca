/*
 * drl_async: decisions started from an event loop's thread, decided at
 * start, by a store call sent without waiting, or on worker threads the
 * context owns; delivered back on the loop's thread.
 *
 * A request is copied into a node at start and queued (todo). A worker
 * takes it, runs the rest of its decision, and moves it to the done list, making the eventfd readable when that list was empty.
 * drl_async_process() reads the eventfd first and takes the done list
 * second, so a request finished after the read keeps the fd readable:
 * none is ever left waiting unsignalled.
 *
 * Every request is one decision request (core/decision.c) begun at
 * start, on the caller's thread: a key the limiter's near cache blocks is
 * denied there (no store call) and goes to the done list at once: such
 * denials never wait behind store calls. The rest of the request runs on
 * a worker (the blocking call's steps: every rule of the blocking API
 * holds by construction), or is started:
 *
 * A single request that one store call decides, on a store that starts
 * such calls without waiting (Redis tx=lua with its shared connections),
 * and a batch that one call of the batch script decides, need no worker:
 * its call is started on the caller's thread (drl__req_start) and the
 * node moved to the done list by whichever thread finishes the store call
 * (`started` counts those in flight; drl_async_free() waits for them).
 * In fd mode, on a store with channels, the call goes through the
 * context's own channel of the store (core/async_io.c: req.chan) and the
 * thread in drl_async_process() finishes it: it reads the channels first
 * (their requests reach the done list without an eventfd signal), runs
 * the callbacks, then writes what they started, once.
 *
 * A request on a store inside the process (DRL_CAP_INPROC: memory://)
 * is decided at start, on the starting thread, by the blocking steps
 * (which never wait there), and goes to the done list: no worker, no
 * hand-over.
 *
 * Workers start lazily: node_queue() starts one when a request finds
 * none idle, up to the context's most; a context whose requests never
 * need one never has one.
 *
 * `pending` counts requests started whose callback has not begun; it is
 * the queue bound. Nodes are kept on a free list once made, so a steady
 * state allocates only for long keys and batches.
 *
 * `busy` is what a loop adapter keeps its loop alive for: requests
 * pending, or a drain whose done callback has not run. busy_update()
 * follows it under the lock and tells the adapter of each change, so the
 * adapter hears the changes in the order they happened.
 *
 * A drain (drl_async_drain) refuses new starts; drl_async_process() runs
 * its done callback once nothing is pending and no callback is running
 * (`running`: callbacks begun, not yet returned).
 */
#include "async_io.h"
#include "internal.h"

#include "drl/async.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Keys up to this many bytes are copied into the node itself. */
#define INLINE_KEY 128

enum kind { ONE, ONE_AT, BATCH, BATCH_AT };

typedef struct node {
	struct node *next;
	enum kind kind;
	drl_limiter *lim;
	int64_t now_us;
	void *arg;
	drl_async_cb cb;
	drl_async_batch_cb batch_cb;
	/* ONE, ONE_AT: the key (inline or malloc'd) and cost */
	const unsigned char *key;
	size_t keylen;
	int64_t cost;
	unsigned char *heap; /* malloc'd key or batch copy, or NULL */
	/* BATCH, BATCH_AT: items (and their keys) in heap */
	drl_batch_item *items;
	size_t n;
	/* outcome */
	int rc;
	drl_result result;
	drl_error err;
	/* the decision (core/decision.c); ONE, ONE_AT: its item */
	struct drl_async *ctx; /* a started store call's */
	drl_batch_item one;
	drl__req req;
	/* last: node_take() zeroes everything before it */
	unsigned char inline_key[INLINE_KEY];
} node;

/* A FIFO of nodes. */
typedef struct list {
	node *head, *tail;
} list;

struct drl_async {
	pthread_mutex_t mu;
	pthread_cond_t work; /* todo has a node, or stopping */
	list todo;           /* started, not yet taken by a worker */
	list done;           /* decided, callback not yet begun */
	node *spare;         /* free nodes */
	size_t nspare;
	size_t pending;      /* started, callback not yet begun */
	size_t started;      /* in a started store call (no worker) */
	pthread_cond_t idle; /* started reached 0 while stopping */
	size_t queue;        /* the bound on pending */
	size_t write_parts;  /* drl_async_write_parts (the loop's thread) */
	bool stopping;
	int efd;
	drl__aio io; /* drl_async_fd() and the channels (core/async_io.c) */
	void (*notify)(void *); /* instead of the fd (drl_async_notify) */
	void *notify_arg;
	size_t nthreads;    /* started so far */
	size_t maxthreads;  /* the most (0: DRL_ASYNC_THREADS_NONE) */
	size_t waiting;     /* workers waiting for work */
	pthread_t *threads; /* maxthreads slots */
	size_t running;     /* callbacks begun, not yet returned */
	bool busy;          /* pending, or a drain's done callback due */
	bool has_adapter;
	drl_async_adapter adapter; /* drl_async_set_adapter */
	bool draining;             /* drl_async_drain() was called */
	bool drain_taken;          /* its done callback has begun */
	bool drained;              /* ... and returned */
	drl_async_drained_cb drain_cb;
	void *drain_arg;
};

/* Follow `busy` after pending or the drain changed (a->mu held), and
 * tell the adapter when it changed. */
static void busy_update(drl_async *a)
{
	bool busy = a->pending > 0 || (a->draining && !a->drained);
	if (busy == a->busy)
		return;
	a->busy = busy;
	if (a->adapter.busy)
		a->adapter.busy(a->adapter.arg, busy);
}

static void push(list *l, node *n)
{
	n->next = NULL;
	if (l->tail)
		l->tail->next = n;
	else
		l->head = n;
	l->tail = n;
}

static node *pop(list *l)
{
	node *n = l->head;
	if (n) {
		l->head = n->next;
		if (l->head == NULL)
			l->tail = NULL;
	}
	return n;
}

/* Make the fd readable (a failed write can only mean the counter is
 * full, which is readable too), or call the notify hook instead. */
static void signal_fd(drl_async *a)
{
	if (a->notify) {
		a->notify(a->notify_arg);
		return;
	}
	uint64_t one = 1;
	ssize_t w = write(a->efd, &one, sizeof one);
	(void)w;
}

/* n's decision is over: a single request's outcome is its item's (a
 * batch's call itself succeeded: its items say the rest). */
static void outcome(node *n)
{
	if (n->kind == ONE || n->kind == ONE_AT) {
		n->rc = n->one.rc;
		n->result = n->one.result;
	}
}

/* The rest of n's decision (begun at start), blocking. */
static void run(node *n)
{
	drl__req_run(&n->req);
	outcome(n);
}

/* Hand a decided node to the done list (a->mu not held); the fd is made
 * readable when the list was empty, outside the lock. */
static void node_done(drl_async *a, node *n)
{
	pthread_mutex_lock(&a->mu);
	bool was_empty = a->done.head == NULL;
	push(&a->done, n);
	pthread_mutex_unlock(&a->mu);
	if (was_empty)
		signal_fd(a);
}

/* A worker: take a node, decide it, hand it to the done list; until the
 * context stops (drl_async_free cancels what is left in todo). */
static void *worker(void *p)
{
	drl__thread_name("drl-async");
	drl_async *a = p;
	pthread_mutex_lock(&a->mu);
	for (;;) {
		node *n = pop(&a->todo);
		if (n == NULL) {
			if (a->stopping)
				break;
			a->waiting++;
			pthread_cond_wait(&a->work, &a->mu);
			a->waiting--;
			continue;
		}
		pthread_mutex_unlock(&a->mu);
		run(n);
		node_done(a, n);
		pthread_mutex_lock(&a->mu);
	}
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

/* Release a node whose callback has run (a->mu held). */
static void recycle(drl_async *a, node *n)
{
	free(n->heap);
	n->heap = NULL;
	if (a->nspare >= a->queue) {
		free(n);
		return;
	}
	n->next = a->spare;
	a->spare = n;
	a->nspare++;
}

static void free_nodes(node *n)
{
	while (n) {
		node *next = n->next;
		free(n->heap);
		free(n);
		n = next;
	}
}

static int opts_check(const drl_async_opts *o, size_t *threads, size_t *queue,
		      drl_error *err)
{
	*threads = DRL_ASYNC_THREADS_DEFAULT;
	*queue = DRL_ASYNC_QUEUE_DEFAULT;
	if (o == NULL)
		return 0;
	if ((o->threads < 0 && o->threads != DRL_ASYNC_THREADS_NONE) ||
	    o->threads > DRL_ASYNC_THREADS_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_async_new: threads %d is outside "
				     "1..%d (0: the default; "
				     "DRL_ASYNC_THREADS_NONE: none)",
				     o->threads, DRL_ASYNC_THREADS_MAX);
	if (o->queue > DRL_ASYNC_QUEUE_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_async_new: queue %zu is outside "
				     "1..%d (0: the default)",
				     o->queue, DRL_ASYNC_QUEUE_MAX);
	if (o->threads == DRL_ASYNC_THREADS_NONE)
		*threads = 0;
	else if (o->threads)
		*threads = (size_t)o->threads;
	if (o->queue)
		*queue = o->queue;
	return 0;
}

/* Start one more worker, with every signal blocked (the caller's mask
 * is restored); a->mu held. false when it could not be started. */
static bool start_worker(drl_async *a)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	bool ok =
		pthread_create(&a->threads[a->nthreads], NULL, worker, a) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ok)
		a->nthreads++;
	return ok;
}

int drl_async_new(drl_async **out, const drl_async_opts *opts, drl_error *err)
{
	size_t nthreads, queue;
	if (out == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_async_new: NULL out");
	*out = NULL;
	int rc = opts_check(opts, &nthreads, &queue, err);
	if (rc)
		return rc;
	drl_async *a = calloc(1, sizeof *a);
	if (a == NULL)
		return drl_error_set(err, DRL_ENOMEM, "drl_async_new");
	a->queue = queue;
	a->write_parts = DRL_ASYNC_WRITE_PARTS_DEFAULT;
	a->maxthreads = nthreads;
	a->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	a->threads = calloc(nthreads ? nthreads : 1, sizeof *a->threads);
	if (a->efd < 0 || a->threads == NULL) {
		if (a->efd >= 0)
			close(a->efd);
		free(a->threads);
		free(a);
		return drl_error_set(err, DRL_ENOMEM,
				     "drl_async_new: no eventfd or memory");
	}
	if (drl__aio_init(&a->io, a->efd) != 0) {
		close(a->efd);
		free(a->threads);
		free(a);
		return drl_error_set(err, DRL_ENOMEM,
				     "drl_async_new: no epoll or timerfd");
	}
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->work, NULL);
	pthread_cond_init(&a->idle, NULL);
	*out = a;
	return 0;
}

/* The context whose callback this thread is running, or NULL: so that
 * drl_async_process() from one of its own callbacks is refused. */
static _Thread_local drl_async *delivering;
/* The context whose drl_async_process() this thread is in (starts leave
 * their writes to it: a few a round, see write_every), and the one
 * whose channels it is reading (their requests need no eventfd signal:
 * the done list is taken after). */
static _Thread_local drl_async *processing;
static _Thread_local drl_async *reaping;

/* Run n's callback. */
static void deliver(drl_async *a, node *n)
{
	drl_async *outer = delivering;
	delivering = a;
	if (n->kind == BATCH || n->kind == BATCH_AT)
		n->batch_cb(a, n->rc, n->items, n->n, &n->err, n->arg);
	else
		n->cb(a, n->rc, &n->result, &n->err, n->arg);
	delivering = outer;
}

/* Within drl_async_process(), the requests the callbacks start go out
 * in write_parts writes a round when many are in flight (one every
 * pending / write_parts callbacks, at least 2 apart), not in one at the
 * round's end. One write a round makes the loop and the server take
 * turns: the server idles while the loop runs the round's callbacks, and
 * the loop idles while the server decides what they started (measured:
 * one context switch a round, each side busy half the time). Written in
 * parts, the server decides the first part while the loop runs the
 * callbacks of the next. docs/performance.md ("The loop writes in
 * parts") has the sweep this comes from, on one connection: a write
 * every 2 or 3 callbacks doubled the rate at 16 in flight, every 6
 * gained nothing there, a write after every callback lost; a fifth of
 * what is in flight (DRL_ASYNC_WRITE_PARTS_DEFAULT) was best or near it
 * at 16, 32 and 64 in flight, and changed nothing at 1 to 4. That holds
 * for callbacks as cheap as the server's decision; a loop whose callbacks
 * cost more (JavaScript) saves CPU with fewer parts where it is the busy
 * side, and loses rate where it is not (drl_async_write_parts). */
static size_t write_every(const drl_async *a, size_t pending)
{
	size_t k = pending / a->write_parts;
	return k < 2 ? 2 : k;
}

int drl_async_write_parts(drl_async *a, int parts)
{
	if (a == NULL || parts < 1 || parts > DRL_ASYNC_WRITE_PARTS_MAX)
		return DRL_EINVAL;
	a->write_parts = (size_t)parts;
	return 0;
}

/* Deliver the nodes from n on (taken off the context), in order: each
 * leaves `pending` (and counts in `running`) as its callback begins and
 * is released after it (one lock per node: the previous node's release
 * with the next one's leaving). */
static int deliver_all(drl_async *a, node *n)
{
	int count = 0;
	size_t every = 0, since = 0;
	node *prev = NULL;
	for (; n; count++) {
		node *next = n->next;
		pthread_mutex_lock(&a->mu);
		if (prev) {
			recycle(a, prev);
			a->running--;
		}
		if (every == 0)
			every = write_every(a, a->pending);
		a->pending--;
		a->running++;
		busy_update(a);
		pthread_mutex_unlock(&a->mu);
		deliver(a, n);
		prev = n;
		n = next;
		if (n && processing == a && ++since >= every) {
			since = 0;
			drl__aio_flush(&a->io);
		}
	}
	if (prev) {
		pthread_mutex_lock(&a->mu);
		recycle(a, prev);
		a->running--;
		pthread_mutex_unlock(&a->mu);
	}
	return count;
}

/* Run the drain's done callback when it is due: a drain began, nothing
 * is pending, no callback runs, and it has not begun (or, `force`, from
 * drl_async_free(): whatever is left). Once: the first caller takes it. */
static void drain_finish(drl_async *a, bool force)
{
	pthread_mutex_lock(&a->mu);
	bool due = a->draining && !a->drain_taken &&
		   (force || (a->pending == 0 && a->running == 0));
	if (due)
		a->drain_taken = true;
	pthread_mutex_unlock(&a->mu);
	if (!due)
		return;
	drl_async *outer = delivering;
	delivering = a;
	a->drain_cb(a, a->drain_arg);
	delivering = outer;
	pthread_mutex_lock(&a->mu);
	a->drained = true;
	busy_update(a);
	pthread_mutex_unlock(&a->mu);
}

/* n canceled before a worker began it: its outcome is DRL_ECANCELED. */
static void cancel(node *n)
{
	drl__req_drop(&n->req);
	n->rc = drl_error_set(&n->err, DRL_ECANCELED,
			      "request canceled: drl_async_free() before a "
			      "worker began it");
	drl__result_deny(&n->result);
	for (size_t i = 0; i < n->n; i++) {
		n->items[i].rc = DRL_ECANCELED;
		memset(&n->items[i].result, 0, sizeof n->items[i].result);
	}
}

void drl_async_free(drl_async *a)
{
	if (a == NULL)
		return;
	pthread_mutex_lock(&a->mu);
	a->stopping = true;
	list canceled = a->todo;
	a->todo = (list){0};
	pthread_cond_broadcast(&a->work);
	size_t nthreads = a->nthreads; /* no more start once stopping */
	pthread_mutex_unlock(&a->mu);
	for (size_t i = 0; i < nthreads; i++)
		pthread_join(a->threads[i], NULL);
	/* Requests in a started store call end by the store's timeout: on
	 * a channel, driven here (its deadlines ring the timerfd); on the
	 * store's I/O thread, waited for. */
	drl_async *outer = reaping;
	reaping = a;
	for (int ms; (ms = drl__aio_wait_ms(&a->io)) >= 0;) {
		drl__aio_reap(&a->io, ms);
		drl__aio_flush(&a->io);
	}
	reaping = outer;
	pthread_mutex_lock(&a->mu);
	while (a->started > 0)
		pthread_cond_wait(&a->idle, &a->mu);
	pthread_mutex_unlock(&a->mu);
	/* A start that raced with the flag queued after the workers left. */
	for (node *n; (n = pop(&a->todo)) != NULL;)
		push(&canceled, n);
	for (node *n = canceled.head; n; n = n->next)
		cancel(n);
	/* Decided first (in the order they finished), then the canceled
	 * ones (in the order they were started). */
	node *done = a->done.head;
	a->done = (list){0};
	deliver_all(a, done);
	deliver_all(a, canceled.head);
	drain_finish(a, true);
	/* The adapter is unhooked first: its cleanup may free what its busy
	 * hook touches. */
	pthread_mutex_lock(&a->mu);
	drl_async_adapter ad = a->adapter;
	bool had = a->has_adapter;
	a->adapter = (drl_async_adapter){0};
	a->has_adapter = false;
	pthread_mutex_unlock(&a->mu);
	if (had && ad.cleanup)
		ad.cleanup(ad.arg);
	drl__aio_free(&a->io);
	free_nodes(a->spare);
	pthread_cond_destroy(&a->idle);
	pthread_cond_destroy(&a->work);
	pthread_mutex_destroy(&a->mu);
	close(a->efd);
	free(a->threads);
	free(a);
}

int drl_async_notify(drl_async *a, void (*notify)(void *arg), void *arg)
{
	if (a == NULL)
		return DRL_EINVAL;
	a->notify = notify;
	a->notify_arg = arg;
	/* No loop polls the channels: started calls keep the store's
	 * I/O thread (set before the first start). */
	a->io.off = notify != NULL;
	return 0;
}

int drl_async_fd(const drl_async *a)
{
	return a ? a->io.epfd : -1;
}

size_t drl_async_pending(const drl_async *a)
{
	if (a == NULL)
		return 0;
	drl_async *m = (drl_async *)a; /* the lock is not the value */
	pthread_mutex_lock(&m->mu);
	size_t n = m->pending;
	pthread_mutex_unlock(&m->mu);
	return n;
}

int drl_async_process(drl_async *a)
{
	if (a == NULL || delivering == a)
		return DRL_EINVAL; /* none, or from its own callback */
	drl_async *outer = processing, *outer_reap = reaping;
	processing = a;
	/* The eventfd is read first (when epfd says it was signalled) and
	 * the done list taken second, so a request finished after the read
	 * keeps the fd readable; the channels' replies are read (and their
	 * requests decided) before the list is taken too. */
	reaping = a;
	drl__aio_reap(&a->io, 0);
	reaping = outer_reap;
	pthread_mutex_lock(&a->mu);
	node *done = a->done.head;
	a->done = (list){0};
	pthread_mutex_unlock(&a->mu);
	int ran = deliver_all(a, done);
	drain_finish(a, false);
	/* What the last part of the callbacks started, and give-backs. */
	drl__aio_flush(&a->io);
	processing = outer;
	return ran;
}

int drl_async_set_adapter(drl_async *a, const drl_async_adapter *adapter,
			  drl_error *err)
{
	if (a == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_async_set_adapter: NULL context");
	pthread_mutex_lock(&a->mu);
	if (adapter && a->has_adapter) {
		pthread_mutex_unlock(&a->mu);
		return drl_error_set(err, DRL_EBUSY,
				     "drl_async_set_adapter: a loop adapter is "
				     "attached to this context already");
	}
	a->has_adapter = adapter != NULL;
	a->adapter = adapter ? *adapter : (drl_async_adapter){0};
	if (a->adapter.busy)
		a->adapter.busy(a->adapter.arg, a->busy);
	pthread_mutex_unlock(&a->mu);
	return 0;
}

int drl_async_drain(drl_async *a, drl_async_drained_cb done, void *arg,
		    drl_error *err)
{
	if (a == NULL || done == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_async_drain: NULL %s",
				     a == NULL ? "context" : "callback");
	pthread_mutex_lock(&a->mu);
	int rc = 0;
	if (a->stopping)
		rc = drl_error_set(err, DRL_ECANCELED,
				   "drl_async_drain: drl_async_free() has "
				   "begun");
	else if (a->draining)
		rc = drl_error_set(err, DRL_EINVAL,
				   "drl_async_drain: a drain has begun "
				   "already");
	if (rc) {
		pthread_mutex_unlock(&a->mu);
		return rc;
	}
	a->draining = true;
	a->drain_cb = done;
	a->drain_arg = arg;
	busy_update(a);
	/* Nothing pending: no request will make the fd readable, so this
	 * does, for drl_async_process() to run done. */
	if (a->pending == 0)
		signal_fd(a);
	pthread_mutex_unlock(&a->mu);
	return 0;
}

/* ---- starting requests ---------------------------------------------------- */

/* What every start checks: 0, or its error (nothing started). */
static int start_check(drl_async *a, drl_limiter *l, bool have_cb,
		       const char *fn, drl_error *err)
{
	if (a == NULL || l == NULL || !have_cb)
		return drl_error_set(err, DRL_EINVAL, "%s: NULL %s", fn,
				     a == NULL   ? "context"
				     : l == NULL ? "limiter"
						 : "callback");
	return 0;
}

/* A node for a new request, counted in pending; NULL with the error in
 * *rc when the context is full, stopping, or out of memory. */
static node *node_take(drl_async *a, int *rc, drl_error *err)
{
	node *n = NULL;
	pthread_mutex_lock(&a->mu);
	if (a->stopping) {
		*rc = drl_error_set(err, DRL_ECANCELED,
				    "drl_async_free() has begun: no new "
				    "requests");
	} else if (a->draining) {
		*rc = drl_error_set(err, DRL_ECANCELED,
				    "drl_async_drain() has begun: no new "
				    "requests");
	} else if (a->pending >= a->queue) {
		*rc = drl_error_set(err, DRL_EBUSY,
				    "%zu requests in flight: the context's "
				    "queue is full",
				    a->pending);
	} else if (a->spare) {
		n = a->spare;
		a->spare = n->next;
		a->nspare--;
	} else if ((n = malloc(sizeof *n)) == NULL) {
		*rc = drl_error_set(err, DRL_ENOMEM, "no memory for a request");
	}
	if (n) {
		a->pending++;
		busy_update(a);
	}
	pthread_mutex_unlock(&a->mu);
	if (n)
		memset(n, 0, offsetof(node, inline_key));
	return n;
}

/* Give back a node taken but not queued. */
static void node_drop(drl_async *a, node *n)
{
	pthread_mutex_lock(&a->mu);
	a->pending--;
	busy_update(a);
	recycle(a, n);
	pthread_mutex_unlock(&a->mu);
}

/* Queue a filled node for the workers, starting one when none is idle
 * and the context may have more. 0, or (nothing queued, the node the
 * caller's) DRL_ENOTSUP for a context without workers, DRL_ENOMEM when
 * the first worker cannot be started. */
static int node_queue(drl_async *a, node *n, drl_error *err)
{
	pthread_mutex_lock(&a->mu);
	if (a->maxthreads == 0) {
		pthread_mutex_unlock(&a->mu);
		return drl_error_set(err, DRL_ENOTSUP,
				     "this request needs a worker thread and "
				     "the context has none "
				     "(DRL_ASYNC_THREADS_NONE; see "
				     "drl_async_direct())");
	}
	if (a->waiting == 0 && a->nthreads < a->maxthreads && !a->stopping &&
	    !start_worker(a) && a->nthreads == 0) {
		pthread_mutex_unlock(&a->mu);
		return drl_error_set(err, DRL_ENOMEM,
				     "cannot start a worker thread");
	}
	push(&a->todo, n);
	pthread_mutex_unlock(&a->mu);
	pthread_cond_signal(&a->work);
	return 0;
}

/* Decide n at start, on this thread (a store inside the process: the
 * blocking call never waits), and hand it to the done list. */
static void decide_now(drl_async *a, node *n)
{
	run(n);
	node_done(a, n);
}

/* A started store call of n is over: n goes to the done list. All of it
 * under the lock, the fd too: once `started` is 0, drl_async_free() may
 * free the context, so nothing of it is touched after the unlock. */
static void store_call_finished(void *arg)
{
	node *n = arg;
	drl_async *a = n->ctx;
	outcome(n);
	bool quiet = reaping == a; /* the list is taken after the reading */
	pthread_mutex_lock(&a->mu);
	bool was_empty = a->done.head == NULL;
	push(&a->done, n);
	if (was_empty && !quiet)
		signal_fd(a);
	if (--a->started == 0 && a->stopping)
		pthread_cond_broadcast(&a->idle);
	pthread_mutex_unlock(&a->mu);
}

/* n is about to go to a started store call: counted in `started` (until
 * store_call_finished), so that drl_async_free() waits for it. */
static void started_add(drl_async *a, node *n)
{
	n->ctx = a;
	pthread_mutex_lock(&a->mu);
	a->started++;
	pthread_mutex_unlock(&a->mu);
}

/* Start n's store call (begun, startable). 0, and n is not touched
 * after: it may be done, and even delivered, before this returns;
 * DRL_ENOMEM: nothing was done, n is the caller's again. */
static int start_store_call(drl_async *a, node *n)
{
	n->req.finished = store_call_finished;
	n->req.arg = n;
	n->req.chan = drl__aio_channel(&a->io, n->lim->store);
	bool flush = n->req.chan != NULL && processing != a;
	started_add(a, n);
	/* A channel is driven by one thread at a time (its chan_ calls and
	 * the done callbacks inside chan_process() run under io.mu): a start
	 * from any other thread (drld's HTTP threads), or from a callback
	 * while another thread starts, queues on it under the same lock.
	 * Never held with a->mu (io.mu comes first: chan_process() finishes
	 * requests, which takes a->mu). */
	bool chan = n->req.chan != NULL; /* n may be done once started */
	if (chan)
		pthread_mutex_lock(&a->io.mu);
	int rc = drl__req_start(&n->req);
	if (chan)
		pthread_mutex_unlock(&a->io.mu);
	/* Outside drl_async_process() the call goes out now; inside, with
	 * the others at its end. (n is not touched: it may be done.) */
	if (rc == 0 && flush)
		drl__aio_flush(&a->io);
	if (rc != 0) {
		n->req.finished = NULL;
		pthread_mutex_lock(&a->mu);
		if (--a->started == 0 && a->stopping)
			pthread_cond_broadcast(&a->idle);
		pthread_mutex_unlock(&a->mu);
	}
	return rc;
}

/* n's request (filled) begun and then decided at start (every item
 * decided by the near cache, or a store inside the process), started, or
 * queued for a worker: 0, or (nothing queued, n dropped) the error. */
bool drl__async_force_worker;

static int node_go(drl_async *a, node *n, drl_error *err)
{
	int rc = 0;
	bool worker = drl__async_force_worker;
	n->req.no_chan = a->io.off; /* drl__chan_only stores: a worker */
	if (drl__req_begin(&n->req) == 0) {
		drl__req_end(&n->req);
		outcome(n);
		node_done(a, n);
	} else if (!worker && drl__is_inproc(n->lim->store->backend)) {
		decide_now(a, n);
	} else if ((worker || !drl__req_startable(&n->req, NULL) ||
		    start_store_call(a, n) != 0) &&
		   (rc = node_queue(a, n, err)) != 0) {
		drl__req_drop(&n->req);
		node_drop(a, n);
	}
	return rc;
}

/* A request of one key: a decision of `cost` (DRL__REQ_ONE), or an
 * adjustment by it (DRL__REQ_ADJUST). */
static int start_one(drl_async *a, drl_limiter *l, drl__req_kind rk,
		     const void *key, size_t keylen, int64_t cost,
		     int64_t now_us, enum kind kind, drl_async_cb cb, void *arg,
		     drl_error *err)
{
	bool adjust = rk == DRL__REQ_ADJUST;
	int rc = start_check(a, l, cb != NULL,
			     adjust ? "drl_async_adjust" : "drl_async_allow",
			     err);
	if (rc == 0)
		rc = adjust ? drl__adjust_check("drl_async_adjust", key, keylen,
						cost, err)
			    : drl__request_check(key, keylen, cost, err);
	if (rc == 0 && kind == ONE_AT)
		rc = drl__time_check(now_us, err);
	if (rc)
		return rc;
	node *n = node_take(a, &rc, err);
	if (n == NULL)
		return rc;
	unsigned char *copy = n->inline_key;
	if (keylen > INLINE_KEY && (copy = n->heap = malloc(keylen)) == NULL) {
		node_drop(a, n);
		return drl_error_set(err, DRL_ENOMEM, "no memory for a key");
	}
	memcpy(copy, key, keylen);
	n->kind = kind;
	n->lim = l;
	n->now_us = now_us;
	n->arg = arg;
	n->cb = cb;
	n->key = copy;
	n->keylen = keylen;
	n->cost = cost;
	/* The request's id may point at the key: the node's copy, which
	 * lives as long as the request. */
	n->one = (drl_batch_item){.key = copy, .keylen = keylen, .cost = cost};
	drl__req_init(&n->req, rk, l, &n->one, 1,
		      kind == ONE ? DRL__NOW_READ : now_us, &n->err);
	return node_go(a, n, err);
}

int drl_async_path(const drl_limiter *limiter, const char **why)
{
	const char *w = "no limiter";
	int direct = 0;
	if (limiter != NULL && drl__is_inproc(limiter->store->backend)) {
		w = "decided at start on the starting thread (a store inside "
		    "the process)";
		direct = 1;
	} else if (limiter != NULL) {
		drl__req q;
		drl__req_init(&q, DRL__REQ_ONE, (drl_limiter *)limiter, NULL, 1,
			      DRL__NOW_READ, NULL); /* only read */
		direct = drl__req_startable(&q, &w);
	}
	if (why)
		*why = w;
	return direct;
}

int drl_async_direct(const drl_limiter *limiter)
{
	return drl_async_path(limiter, NULL);
}

int drl_async_allow(drl_async *a, drl_limiter *limiter, const void *key,
		    size_t keylen, int64_t cost, drl_async_cb cb, void *arg,
		    drl_error *err)
{
	return start_one(a, limiter, DRL__REQ_ONE, key, keylen, cost, 0, ONE,
			 cb, arg, err);
}

int drl_async_allow_at(drl_async *a, drl_limiter *limiter, const void *key,
		       size_t keylen, int64_t cost, int64_t now_us,
		       drl_async_cb cb, void *arg, drl_error *err)
{
	return start_one(a, limiter, DRL__REQ_ONE, key, keylen, cost, now_us,
			 ONE_AT, cb, arg, err);
}

int drl_async_adjust(drl_async *a, drl_limiter *limiter, const void *key,
		     size_t keylen, int64_t delta, drl_async_cb cb, void *arg,
		     drl_error *err)
{
	return start_one(a, limiter, DRL__REQ_ADJUST, key, keylen, delta, 0,
			 ONE, cb, arg, err);
}

int drl_async_adjust_at(drl_async *a, drl_limiter *limiter, const void *key,
			size_t keylen, int64_t delta, int64_t now_us,
			drl_async_cb cb, void *arg, drl_error *err)
{
	return start_one(a, limiter, DRL__REQ_ADJUST, key, keylen, delta,
			 now_us, ONE_AT, cb, arg, err);
}

/* Whether item it's key is copied: one the blocking call will read. A bad
 * one keeps its length and gets a non-NULL pointer that is never read
 * (or NULL, as given), so the blocking call rejects it with its own
 * message. */
static bool key_copied(const drl_batch_item *it)
{
	return it->key != NULL && it->keylen >= 1 && it->keylen <= DRL_KEY_MAX;
}

/* Copy items[0..n) and their keys into one allocation: n->heap. */
static int copy_items(node *n, const drl_batch_item *items, size_t count,
		      drl_error *err)
{
	size_t bytes = count * sizeof *items;
	for (size_t i = 0; i < count; i++)
		if (key_copied(&items[i]))
			bytes += items[i].keylen;
	n->heap = malloc(bytes);
	if (n->heap == NULL)
		return drl_error_set(err, DRL_ENOMEM,
				     "no memory to copy %zu items", count);
	n->items = (drl_batch_item *)(void *)n->heap;
	unsigned char *k = n->heap + count * sizeof *items;
	for (size_t i = 0; i < count; i++) {
		const drl_batch_item *it = &items[i];
		n->items[i] =
			(drl_batch_item){.key = it->key == NULL ? NULL : k,
					 .keylen = it->keylen,
					 .cost = it->cost};
		if (key_copied(it)) {
			memcpy(k, it->key, it->keylen);
			k += it->keylen;
		}
	}
	n->n = count;
	return 0;
}

static int start_batch(drl_async *a, drl_limiter *l,
		       const drl_batch_item *items, size_t count,
		       int64_t now_us, enum kind kind, drl_async_batch_cb cb,
		       void *arg, drl_error *err)
{
	int rc = start_check(a, l, cb != NULL, "drl_async_batch", err);
	if (rc)
		return rc;
	if (items == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_async_batch: NULL items");
	if (count == 0 || count > DRL_BATCH_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_async_batch: a batch of %zu items is "
				     "outside 1..%d",
				     count, DRL_BATCH_MAX);
	if (kind == BATCH_AT && (rc = drl__time_check(now_us, err)) != 0)
		return rc;
	node *n = node_take(a, &rc, err);
	if (n == NULL)
		return rc;
	n->kind = kind;
	n->lim = l;
	n->now_us = now_us;
	n->arg = arg;
	n->batch_cb = cb;
	if ((rc = copy_items(n, items, count, err)) != 0) {
		node_drop(a, n);
		return rc;
	}
	drl__req_init(&n->req, DRL__REQ_BATCH, l, n->items, n->n,
		      kind == BATCH ? DRL__NOW_READ : now_us, &n->err);
	return node_go(a, n, err);
}

int drl_async_batch(drl_async *a, drl_limiter *limiter,
		    const drl_batch_item *items, size_t n,
		    drl_async_batch_cb cb, void *arg, drl_error *err)
{
	return start_batch(a, limiter, items, n, 0, BATCH, cb, arg, err);
}

int drl_async_batch_at(drl_async *a, drl_limiter *limiter,
		       const drl_batch_item *items, size_t n, int64_t now_us,
		       drl_async_batch_cb cb, void *arg, drl_error *err)
{
	return start_batch(a, limiter, items, n, now_us, BATCH_AT, cb, arg,
			   err);
}
