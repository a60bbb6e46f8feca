/*
 * The asynchronous API (<drl/async.h>) on every store and strategy:
 * memory://, a real redis-server with tx=lua and tx=watch, a real
 * memcached.
 *
 * - A sequence of requests started one at a time decides, field by field
 *   and code by code, what the same sequence decides through the blocking
 *   calls, for every algorithm, a policy, the near cache
 *   (block_on_exceed=), single requests and batches (with bad items).
 * - A hot key with hundreds of requests in flight admits exactly the limit.
 * - Every started request gets exactly one callback (counted): also when
 *   drl_async_free() runs with requests in flight (DRL_ECANCELED for those
 *   no worker began, which consumed nothing), and when the server dies
 *   under requests in flight; a callback may start new requests, and
 *   several threads may start requests at once.
 * - Failure policies (on_error=) and the breaker answer as in the
 *   blocking API on a store whose server is gone.
 * - Bad input is DRL_EINVAL at start, with no callback and nothing
 *   started; a full queue is DRL_EBUSY at start.
 *
 * Skips the server parts when a server binary is missing, except under
 * CI=true (fails).
 */
#include "async_check.h"
#include "server_fixture.h"
#include "testutil.h"

#include <drl/async.h>

#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <pthread.h>
#include <poll.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

static drl_server redis, mc;
static int have_redis, have_mc;

#define T0 ASYNC_T0

/* ---- helpers ------------------------------------------------------------ */

/* URI_AUTO: Redis's default, the counters by started plain commands
 * (INCRBY, PEXPIRE, MGET; a denial's give-back started from the I/O
 * thread), the others by their lean twins. */
enum { URI_MEMORY, URI_LUA, URI_WATCH, URI_MC, URI_AUTO, URI_COUNT };

static const char *const uri_names[URI_COUNT] = {"memory", "redis tx=lua",
						 "redis tx=watch", "memcached",
						 "redis tx=auto"};

/* The store URI `which`, or NULL when its server is not running. */
static const char *uri_of(int which, char *buf, size_t cap)
{
	switch (which) {
	case URI_MEMORY:
		return "memory://";
	case URI_LUA:
	case URI_WATCH:
	case URI_AUTO:
		if (!have_redis)
			return NULL;
		snprintf(buf, cap, "redis://127.0.0.1:%d?tx=%s&timeout_ms=%lld",
			 redis.port,
			 which == URI_LUA    ? "lua"
			 : which == URI_AUTO ? "auto"
					     : "watch",
			 (long long)tu_bound_ms(2000));
		return buf;
	case URI_MC:
		if (!have_mc)
			return NULL;
		snprintf(buf, cap, "memcached://127.0.0.1:%d?timeout_ms=%lld",
			 mc.port, (long long)tu_bound_ms(2000));
		return buf;
	}
	return NULL;
}

static drl_async *async_new(int threads, size_t queue)
{
	drl_async *a = NULL;
	drl_error err = {0};
	drl_async_opts o = {.threads = threads, .queue = queue};
	if (drl_async_new(&a, &o, &err))
		fail_msg("drl_async_new: %s", err.message);
	return a;
}

/* What most tests work on: a store of uri, a limiter of spec on it
 * (prefix may be NULL) and a context of `threads` workers and `queue`
 * places (0: the default); each fails the test when it cannot be made.
 * trio_free() frees the three (a context already freed: a NULL a). */
typedef struct trio {
	drl_store *s;
	drl_limiter *l;
	drl_async *a;
} trio;

static trio trio_open(const char *uri, const char *spec, const char *prefix,
		      int threads, size_t queue)
{
	trio t = {.s = tu_store(uri)};
	t.l = tu_limiter(t.s, spec, prefix);
	t.a = async_new(threads, queue);
	return t;
}

static void trio_free(trio *t)
{
	drl_async_free(t->a);
	drl_limiter_free(t->l);
	drl_store_free(t->s);
}

/* ---- async equals blocking ---------------------------------------------- */

static const char *const specs[] = {
	"fixed_window:5/1s",
	"sliding_window:5/1s",
	"subwindow:6/1200ms,subwindows=4,trailing=1",
	"token_bucket:3/1s,burst=7",
	"gcra:3/700ms,burst=4",
	"sliding_log:4/300ms",
	"sliding_log:4/1s;gcra:2/1s,burst=3",
	"fixed_window:3/1s;block_on_exceed=10s",
	"token_bucket:2/1s;shadow=1",
};
#define NSPECS (sizeof specs / sizeof specs[0])

/* fn(s, u, arg) on a store of each URI from URI_MEMORY to `last` whose
 * server runs (u indexes uri_names). */
static void each_store(int last, void (*fn)(drl_store *s, int u, void *arg),
		       void *arg)
{
	for (int u = 0; u <= last; u++) {
		char buf[192];
		const char *uri = uri_of(u, buf, sizeof buf);
		if (uri == NULL)
			continue;
		drl_store *s = tu_store(uri);
		fn(s, u, arg);
		drl_store_free(s);
	}
}

static void equals_on(drl_store *s, int u, void *a)
{
	for (size_t i = 0; i < NSPECS; i++) {
		char what[160];
		snprintf(what, sizeof what, "%s on %s", specs[i], uri_names[u]);
		async_check_equal(a, s, specs[i], what, (int)(u * 100 + i));
	}
}

static void test_equals_blocking(void **state)
{
	(void)state;
	drl_async *a = async_new(4, 0);
	each_store(URI_COUNT - 1, equals_on, a);
	assert_int_equal(drl_async_pending(a), 0);
	drl_async_free(a);
}

/* ---- a hot key ---------------------------------------------------------- */

static const char *const hot_specs[] = {TU_EVERY_ALGORITHM_100};

/* async_check_hot on a store for each of n specs (a limit of 100 each),
 * each limiter under its own prefix (tag, store, spec). */
typedef struct hot_run {
	drl_async *a;
	const char *const *specs;
	size_t n;
	const char *tag;
	bool real_clock;
} hot_run;

static void hot_on(drl_store *s, int u, void *arg)
{
	const hot_run *h = arg;
	for (size_t i = 0; i < h->n; i++) {
		char prefix[32], what[160];
		snprintf(prefix, sizeof prefix, "%s:%d:%zu:", h->tag, u, i);
		snprintf(what, sizeof what, "%s on %s", h->specs[i],
			 uri_names[u]);
		drl_limiter *l = tu_limiter(s, h->specs[i], prefix);
		async_check_hot(h->a, l, what, h->real_clock);
		drl_limiter_free(l);
	}
}

/* HOT requests for one key at one instant, all in flight at once on 16
 * workers (the cas stores' contention included): exactly 100 allowed. */
static void test_hot_key_exact(void **state)
{
	(void)state;
	hot_run h = {.a = async_new(16, 0),
		     .specs = hot_specs,
		     .n = sizeof hot_specs / sizeof hot_specs[0],
		     .tag = "hot"};
	each_store(URI_COUNT - 1, hot_on, &h);
	drl_async_free(h.a);
}

/* The same at the real-time clock (drl_async_allow), limits whose
 * windows do not move within the test, on memory:// and Redis tx=lua. */
static void test_hot_key_real_clock(void **state)
{
	(void)state;
	static const char *const sp[] = {"token_bucket:100/1d", "gcra:100/1d",
					 "sliding_log:100/1d"};
	hot_run h = {.a = async_new(16, 0),
		     .specs = sp,
		     .n = 3,
		     .tag = "hotr",
		     .real_clock = true};
	each_store(URI_LUA, hot_on, &h);
	drl_async_free(h.a);
}

/* ---- exactly one callback ----------------------------------------------- */

typedef struct tally {
	int count, ok, allowed, canceled, failed;
	int other; /* an rc none of the above */
} tally;

static void tally_cb(drl_async *a, int rc, const drl_result *r,
		     const drl_error *err, void *arg)
{
	(void)a;
	tally *t = arg;
	t->count++;
	if (rc == 0) {
		t->ok++;
		t->allowed += r->allowed;
	} else if (rc == DRL_ECANCELED) {
		t->canceled++;
		assert_int_equal(r->allowed, 0);
		assert_int_equal(err->code, DRL_ECANCELED);
	} else if (rc == DRL_ETIMEDOUT || rc == DRL_EUNAVAILABLE ||
		   rc == DRL_ESTORE) {
		t->failed++;
	} else {
		t->other++;
	}
}

static void tally_batch_cb(drl_async *a, int rc, const drl_batch_item *items,
			   size_t n, const drl_error *err, void *arg)
{
	(void)err;
	for (size_t i = 0; i < n; i++)
		tally_cb(a, rc == DRL_ECANCELED ? rc : items[i].rc,
			 &items[i].result, err, arg);
}

/* n requests for "k" at T0 on tr, each tallied in t; every start must
 * succeed. */
static void start_tallied(trio *tr, tally *t, int n)
{
	for (int i = 0; i < n; i++) {
		drl_error err = {0};
		if (drl_async_allow_at(tr->a, tr->l, "k", 1, 1, T0, tally_cb, t,
				       &err))
			fail_msg("start %d of %d: %s", i, n, err.message);
	}
}

/* drl_async_free with 600 single requests and 20 batches of 10 in flight
 * on the memory store: 800 callbacks, each a decision or DRL_ECANCELED,
 * all run before drl_async_free returns; the canceled ones consumed
 * nothing (what is left of the quota is the limit minus those allowed). */
static void test_free_in_flight_memory(void **state)
{
	(void)state;
	trio tr = trio_open("memory://", "fixed_window:500/1h", NULL, 2, 0);
	tally t = {0};
	start_tallied(&tr, &t, 600);
	drl_batch_item items[10];
	for (int i = 0; i < 10; i++)
		items[i] = (drl_batch_item){.key = "k", .keylen = 1, .cost = 1};
	for (int i = 0; i < 20; i++)
		assert_int_equal(drl_async_batch_at(tr.a, tr.l, items, 10, T0,
						    tally_batch_cb, &t, NULL),
				 0);
	drl_async_free(tr.a);
	tr.a = NULL;
	assert_int_equal(t.count, 800);
	assert_int_equal(t.ok + t.canceled, 800);
	assert_int_equal(t.other + t.failed, 0);
	drl_result r = tu_at(tr.l, "k", 0, T0);
	assert_int_equal(r.remaining, 500 - t.allowed);
	trio_free(&tr);
}

/* A Redis tx=lua store (timeout_ms `tms`), a limiter, a context of
 * `threads` workers, and `n` requests started while redis-server is
 * stopped (SIGSTOP): the workers are inside store calls that cannot
 * finish, the other requests wait for a worker; their outcomes tallied
 * in *t. Skips the test without redis-server. */
static trio stuck_start(tally *t, int64_t tms, int threads, int n,
			const char *opts)
{
	DRL_FIXTURE_NEED(have_redis);
	char uri[200];
	snprintf(uri, sizeof uri,
		 "redis://127.0.0.1:%d?tx=lua&timeout_ms=%lld%s", redis.port,
		 (long long)tms, opts);
	trio x = trio_open(uri, "token_bucket:1000/1s", "stuck:", threads, 0);
	*t = (tally){0};
	assert_int_equal(drl_fixture_pause(&redis), 0);
	for (int i = 0; i < n; i++)
		assert_int_equal(
			drl_async_allow(x.a, x.l, "k", 1, 1, tally_cb, t, NULL),
			0);
	return x;
}

/* 50 requests started on a context of one worker while redis-server is
 * stopped, then drl_async_free(): all 50 callbacks run before it returns,
 * each with its own outcome; the tally is returned. */
static tally free_while_stuck(const char *opts)
{
	tally t;
	trio x = stuck_start(&t, tu_bound_ms(100), 1, 50, opts);
	drl_async_free(x.a);
	x.a = NULL;
	assert_int_equal(drl_fixture_resume(&redis), 0);
	trio_free(&x);
	assert_int_equal(t.count, 50);
	assert_int_equal(t.other, 0);
	return t;
}

/* A store without shared connections (pipelines=0): every request needs
 * the worker, which is stuck in its store call: that request gets its
 * own outcome (a timeout), every other one DRL_ECANCELED. */
static void test_free_while_stuck(void **state)
{
	(void)state;
	tally t = free_while_stuck("&pipelines=0");
	assert_true(t.canceled >= 49);
	assert_int_equal(t.canceled + t.failed + t.ok, 50);
}

/* On the shared connections every request is in a started store call
 * (none waits for the one worker): each gets its own outcome, a timeout,
 * none is canceled; drl_async_free() waited for them. */
static void test_free_while_stuck_started(void **state)
{
	(void)state;
	tally t = free_while_stuck("");
	assert_int_equal(t.canceled, 0);
	assert_int_equal(t.failed, 50);
}

/* Batches too: 20 batches of 10 (one call of the batch script each) on a
 * context of one worker while the server is stopped: every item of every
 * batch gets its own outcome, a timeout, none canceled; one batch on a
 * policy of two limits (decided item by item: a worker) is canceled. */
static void test_free_while_stuck_started_batches(void **state)
{
	(void)state;
	tally t;
	trio x = stuck_start(&t, tu_bound_ms(100), 1, 0, "");
	drl_limiter *two = tu_limiter(x.s,
				      "fixed_window:5/1s;sliding_window:"
				      "50/1m",
				      "stuck2:");
	drl_batch_item items[10];
	for (int i = 0; i < 10; i++)
		items[i] = (drl_batch_item){.key = "k", .keylen = 1, .cost = 1};
	tally two_t = {0};
	/* the policy's batch first: the one worker takes it and is stuck */
	assert_int_equal(drl_async_batch(x.a, two, items, 10, tally_batch_cb,
					 &two_t, NULL),
			 0);
	assert_int_equal(drl_async_batch(x.a, two, items, 10, tally_batch_cb,
					 &two_t, NULL),
			 0);
	for (int i = 0; i < 20; i++)
		assert_int_equal(drl_async_batch(x.a, x.l, items, 10,
						 tally_batch_cb, &t, NULL),
				 0);
	drl_async_free(x.a);
	x.a = NULL;
	assert_int_equal(drl_fixture_resume(&redis), 0);
	assert_int_equal(t.count, 200);
	assert_int_equal(t.canceled, 0);
	assert_int_equal(t.failed, 200);
	assert_int_equal(two_t.count, 20);
	assert_true(two_t.canceled >= 10); /* the second waited: canceled */
	drl_limiter_free(two);
	trio_free(&x);
}

/* redis-server killed with 64 requests in flight on 8 workers (stopped
 * first, so the workers are inside store calls): each gets exactly one
 * callback, a store failure; the context then decides again once the
 * server is back. */
static void test_server_dies_in_flight(void **state)
{
	(void)state;
	tally t;
	trio x = stuck_start(&t, tu_bound_ms(2000), 8, 64, "");
	drl_fixture_kill(&redis);
	async_process_until(x.a, &t.count, 64);
	assert_int_equal(t.failed, 64);
	assert_int_equal(drl_fixture_restart(&redis), 0);
	async_one o = {0};
	int64_t end = tu_mono_ms() + tu_bound_ms(5000);
	do { /* the breaker may be open for a moment */
		o.count = 0;
		assert_int_equal(drl_async_allow(x.a, x.l, "k", 1, 1,
						 async_one_cb, &o, NULL),
				 0);
		async_process_until(x.a, &o.count, 1);
	} while (o.rc != 0 && tu_mono_ms() < end);
	assert_int_equal(o.rc, 0);
	assert_int_equal(o.result.allowed, 1);
	trio_free(&x);
}

/* A key the near cache blocks is denied at start, without a worker: while
 * the context's one worker waits on a stopped redis-server (timeout_ms
 * far longer than the test), 20 requests for the blocked key get their
 * callbacks, denied by the near cache; the worker's request completes
 * once the server runs again. */
static void test_near_denial_without_worker(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have_redis);
	char uri[160];
	snprintf(uri, sizeof uri,
		 "redis://127.0.0.1:%d?tx=lua&timeout_ms=3600000", redis.port);
	trio tr = trio_open(uri, "fixed_window:2/1h;block_on_exceed=1h",
			    "nf:", 1, 0);
	for (int i = 0; i < 3; i++) /* the third is denied: a block */
		assert_int_equal(tu_at(tr.l, "k", 1, T0).allowed, i < 2);
	assert_int_equal(drl_fixture_pause(&redis), 0);
	async_one slow = {0}, last = {0};
	assert_int_equal(drl_async_allow_at(tr.a, tr.l, "other", 5, 1, T0,
					    async_one_cb, &slow, NULL),
			 0);
	tally t = {0};
	for (int i = 0; i < 19; i++)
		assert_int_equal(drl_async_allow_at(tr.a, tr.l, "k", 1, 1,
						    T0 + SEC, tally_cb, &t,
						    NULL),
				 0);
	assert_int_equal(drl_async_allow_at(tr.a, tr.l, "k", 1, 1, T0 + SEC,
					    async_one_cb, &last, NULL),
			 0);
	async_process_until(tr.a, &t.count, 19);
	async_process_until(tr.a, &last.count, 1);
	assert_int_equal(t.ok, 19);
	assert_int_equal(t.allowed, 0);
	assert_int_equal(last.rc, 0);
	assert_int_equal(last.result.path, DRL_PATH_NEAR);
	assert_int_equal(slow.count, 0); /* its server is stopped */
	assert_int_equal(tu_stats(tr.s).near_denials, 20);
	assert_int_equal(drl_fixture_resume(&redis), 0);
	async_process_until(tr.a, &slow.count, 1);
	assert_int_equal(slow.rc, 0);
	assert_int_equal(slow.result.allowed, 1);
	trio_free(&tr);
}

/* A callback that starts the next request, CHAIN times, and one batch
 * on the way: every request gets its callback, the last on a later
 * drl_async_process than the first. */
typedef struct chain {
	drl_limiter *l;
	int count, batches, left;
	int batch_rc; /* what the batch's start returned */
} chain;

static void chain_batch_cb(drl_async *a, int rc, const drl_batch_item *items,
			   size_t n, const drl_error *err, void *arg)
{
	(void)a;
	(void)items;
	(void)err;
	chain *c = arg;
	assert_int_equal(rc, 0);
	assert_int_equal(n, 2);
	c->batches++;
	c->count++;
}

static void chain_cb(drl_async *a, int rc, const drl_result *r,
		     const drl_error *err, void *arg)
{
	(void)err;
	chain *c = arg;
	assert_int_equal(rc, 0);
	assert_int_equal(r->allowed, 1);
	assert_int_equal(drl_async_process(a), DRL_EINVAL); /* reentry */
	c->count++;
	if (c->left == 0)
		return;
	c->left--;
	assert_int_equal(drl_async_allow_at(a, c->l, "chain", 5, 1, T0,
					    chain_cb, c, NULL),
			 0);
	if (c->left == 50) {
		drl_batch_item it[2] = {{.key = "b", .keylen = 1, .cost = 1},
					{.key = "b", .keylen = 1, .cost = 1}};
		c->batch_rc = drl_async_batch_at(a, c->l, it, 2, T0,
						 chain_batch_cb, c, NULL);
	}
}

static void test_callback_starts_requests(void **state)
{
	(void)state;
	trio tr = trio_open("memory://", "fixed_window:1000/1h", NULL, 2,
			    1); /* one place: the chain needs no more */
	chain c = {.l = tr.l, .left = 100};
	assert_int_equal(drl_async_allow_at(tr.a, tr.l, "chain", 5, 1, T0,
					    chain_cb, &c, NULL),
			 DRL_OK);
	/* queue 1 counts requests whose callback has not begun: the chain's
	 * next start fits, the batch in its callback does not */
	async_process_until(tr.a, &c.count, 101);
	assert_int_equal(c.batch_rc, DRL_EBUSY);
	assert_int_equal(c.batches, 0);
	drl_async_free(tr.a);

	tr.a = async_new(2, 0);
	c = (chain){.l = tr.l, .left = 100};
	assert_int_equal(drl_async_allow_at(tr.a, tr.l, "chain", 5, 1, T0,
					    chain_cb, &c, NULL),
			 DRL_OK);
	async_process_until(tr.a, &c.count, 102);
	assert_int_equal(c.batch_rc, 0);
	assert_int_equal(c.batches, 1);
	assert_int_equal(drl_async_pending(tr.a), 0);
	trio_free(&tr);
}

/* Threads that start requests while the test's thread processes: every
 * request gets its callback, on the processing thread. */
enum { STARTERS = 4, PER_STARTER = 250 };

typedef struct starter {
	drl_async *a;
	drl_limiter *l;
	tally *t;
	int rc; /* the first start that failed, or 0 */
} starter;

static void *starter_main(void *p)
{
	starter *s = p;
	for (int i = 0; i < PER_STARTER && s->rc == 0; i++)
		s->rc = drl_async_allow_at(s->a, s->l, "many", 4, 1, T0,
					   tally_cb, s->t, NULL);
	return NULL;
}

static void test_starts_from_threads(void **state)
{
	(void)state;
	trio tr = trio_open("memory://", "gcra:700/1h", NULL, 4, 0);
	tally t = {0}; /* written by callbacks: this thread only */
	starter st[STARTERS];
	pthread_t th[STARTERS];
	for (int i = 0; i < STARTERS; i++) {
		st[i] = (starter){.a = tr.a, .l = tr.l, .t = &t};
		assert_int_equal(
			pthread_create(&th[i], NULL, starter_main, &st[i]), 0);
	}
	async_process_until(tr.a, &t.count, STARTERS * PER_STARTER);
	for (int i = 0; i < STARTERS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(st[i].rc, 0);
	}
	assert_int_equal(t.ok, STARTERS * PER_STARTER);
	assert_int_equal(t.allowed, 700);
	assert_int_equal(drl_async_pending(tr.a), 0);
	trio_free(&tr);
}

/* ---- failures, bad input, a full queue ---------------------------------- */

/* A loopback port nothing listens on. */
static int closed_port(void)
{
	int port = drl_fixture_free_port();
	assert_true(port > 0);
	return port;
}

/* End msg before the breaker's "next try in N ms" (time-dependent). */
static void cut_next_try(char *msg)
{
	char *p = strstr(msg, "next try in");
	if (p != NULL)
		*p = '\0';
}

/* On a Redis store whose server does not exist, each on_error policy
 * answers through the context what it answers through drl_allow_at, and
 * the breaker opens after the same number of calls (an open period
 * longer than the test, so it stays open): a store each, same sequence. */
static void test_failure_policies(void **state)
{
	(void)state;
	static const char *const sp[] = {
		"fixed_window:3/1s",
		"fixed_window:3/1s;on_error=deny",
		"fixed_window:3/1s;on_error=allow",
		"fixed_window:3/1s;on_error=local",
	};
	char uri[192];
	snprintf(uri, sizeof uri,
		 "redis://127.0.0.1:%d?connect=lazy&breaker_failures=3&"
		 "breaker_open_ms=600000&breaker_max_ms=600000",
		 closed_port());
	drl_async *a = async_new(2, 0);
	for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) {
		drl_store *sa = tu_store(uri), *sb = tu_store(uri);
		drl_limiter *la = tu_limiter(sa, sp[i], NULL);
		drl_limiter *lb = tu_limiter(sb, sp[i], NULL);
		for (int step = 0; step < 8; step++) {
			int64_t now = T0 + step * 100 * MS;
			async_one o = {0};
			assert_int_equal(drl_async_allow_at(a, la, "k", 1, 1,
							    now, async_one_cb,
							    &o, NULL),
					 0);
			async_process_until(a, &o.count, 1);
			drl_result r;
			drl_error eb = {0};
			int rc = drl_allow_at(lb, "k", 1, 1, now, &r, &eb);
			if (r.path == DRL_PATH_FAIL_CLOSED &&
			    o.result.path == r.path) {
				/* the breaker's time left, on the real
				 * monotonic clock: read at two moments */
				assert_in_range(o.result.retry_after_us, 1,
						600 * SEC);
				assert_in_range(r.retry_after_us, 1, 600 * SEC);
				o.result.retry_after_us = r.retry_after_us;
			}
			/* "circuit open ...; next try in N ms": the same
			 * time left, read at two moments */
			cut_next_try(o.err.message);
			cut_next_try(eb.message);
			async_same(o.rc, &o.result, &o.err, rc, &r, &eb, sp[i],
				   step);
		}
		drl_store_stats st_a = tu_stats(sa), st_b = tu_stats(sb);
		assert_int_equal(st_a.breaker_opens, 1);
		assert_int_equal(st_a.breaker_opens, st_b.breaker_opens);
		assert_int_equal(st_a.breaker_rejects, st_b.breaker_rejects);
		assert_int_equal(st_a.fallbacks, st_b.fallbacks);
		drl_limiter_free(la);
		drl_limiter_free(lb);
		drl_store_free(sa);
		drl_store_free(sb);
	}
	drl_async_free(a);
}

static void never_cb(drl_async *a, int rc, const drl_result *r,
		     const drl_error *err, void *arg)
{
	(void)a;
	(void)rc;
	(void)r;
	(void)err;
	(void)arg;
	fail_msg("a request that did not start got a callback");
}

static void never_batch_cb(drl_async *a, int rc, const drl_batch_item *items,
			   size_t n, const drl_error *err, void *arg)
{
	never_cb(a, rc, NULL, err, arg);
	(void)items;
	(void)n;
}

#define EXPECT_EINVAL(call, text)                                              \
	do {                                                                   \
		drl_error e_ = {0};                                            \
		drl_error *err = &e_;                                          \
		assert_int_equal((call), DRL_EINVAL);                          \
		assert_int_equal(e_.code, DRL_EINVAL);                         \
		if (strstr(e_.message, (text)) == NULL)                        \
			fail_msg("message \"%s\" lacks \"%s\"", e_.message,    \
				 (text));                                      \
	} while (0)

/* drl_async_direct() says which limiters the async API decides without a
 * worker: memory:// (at start, any policy), one limit on Redis tx=auto or
 * tx=lua with shared connections; not a policy of two, nor pipelines=0,
 * tx=watch or NULL. */
static void test_direct(void **state)
{
	(void)state;
	assert_int_equal(drl_async_direct(NULL), 0);
	drl_store *mem = tu_store("memory://");
	drl_limiter *ml =
		tu_limiter(mem, "fixed_window:5/1s;sliding_window:50/1m", "d:");
	assert_int_equal(drl_async_direct(ml), 1);
	drl_limiter_free(ml);
	drl_store_free(mem);
	DRL_FIXTURE_NEED(have_redis);
	static const struct {
		const char *opts, *spec;
		int direct;
	} cases[] = {
		{"tx=lua", "fixed_window:5/1s", 1},
		{"tx=auto", "fixed_window:5/1s", 1},
		{"pipelines=1", "subwindow:100/1m,subwindows=6", 1},
		{"tx=auto", "gcra:3/700ms,burst=4", 1},
		/* no exact twin for a cost of 0: a worker */
		{"tx=auto", "fixed_window:100000000/1h", 0},
		{"tx=auto&pipelines=0", "fixed_window:5/1s", 0},
		{"tx=lua", "token_bucket:3/1s,burst=7;block_on_exceed=1s", 1},
		{"tx=lua&clock=server", "gcra:3/700ms,burst=4", 1},
		{"tx=lua", "fixed_window:5/1s;sliding_window:50/1m", 0},
		{"tx=lua&pipelines=0", "fixed_window:5/1s", 0},
		{"tx=watch", "fixed_window:5/1s", 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char uri[200];
		snprintf(uri, sizeof uri, "redis://127.0.0.1:%d?%s", redis.port,
			 cases[i].opts);
		drl_store *s = tu_store(uri);
		drl_limiter *l = tu_limiter(s, cases[i].spec, "d:");
		const char *why = NULL;
		if (drl_async_direct(l) != cases[i].direct ||
		    drl_async_path(l, &why) != cases[i].direct)
			fail_msg("%s on %s: direct %d", cases[i].spec, uri,
				 !cases[i].direct);
		/* the reason says which path, and why not the direct one */
		assert_non_null(why);
		if (strstr(cases[i].spec, "100000000/1h"))
			assert_non_null(strstr(why, "2^52"));
		else if (strchr(cases[i].spec, ';') &&
			 !strstr(cases[i].spec, "block_on_exceed"))
			assert_non_null(strstr(why, "several limits"));
		else if (cases[i].direct)
			assert_non_null(strstr(why, "sent at start"));
		drl_limiter_free(l);
		drl_store_free(s);
	}
}

/* ---- drl_async_notify ----------------------------------------------------- */

/* The notify hook's calls, counted. */
static atomic_int notified;

static void count_notify(void *arg)
{
	assert_ptr_equal(arg, &notified);
	atomic_fetch_add(&notified, 1);
}

/* Whether a's fd is readable now. */
static bool fd_readable(drl_async *a)
{
	struct pollfd p = {.fd = drl_async_fd(a), .events = POLLIN};
	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* With a notify hook, on every store: each request finished while none
 * waited calls the hook instead of making the fd readable (the fd stays
 * quiet), and drl_async_process() then runs its callback; a burst of
 * requests calls it at most once per request, and every callback runs
 * by processing each time it is called. Started-without-a-worker calls
 * (Redis tx=lua) notify from the store's I/O thread, the others from a
 * worker. */
/* The threads of this process, from /proc/self/task. */
static int thread_count(void)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	if (d == NULL)
		fail_msg("/proc/self/task: %s", strerror(errno));
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* memory:// is decided at start on the starting thread: the callback
 * waits for drl_async_process() at once, and the context starts no
 * worker for it (workers start when a request first needs one). With
 * DRL_ASYNC_THREADS_NONE a request that needs a worker is refused and
 * changes nothing; one that needs none is decided. */
static void test_decided_at_start(void **state)
{
	(void)state;
	drl_store *s = tu_store("memory://");
	drl_limiter *l = tu_limiter(s, "fixed_window:2/1h;gcra:5/1h", "m:");
	int before = thread_count();
	drl_async *a = async_new(0, 0);
	for (int i = 0; i < 3; i++) {
		async_one o = {0};
		assert_int_equal(drl_async_allow(a, l, "k", 1, 1, async_one_cb,
						 &o, NULL),
				 0);
		assert_true(fd_readable(a));
		assert_int_equal(drl_async_process(a), 1);
		assert_int_equal(o.count, 1);
		assert_int_equal(o.rc, 0);
		assert_int_equal(o.result.allowed, i < 2);
	}
	assert_int_equal(thread_count(), before);
	drl_async_free(a);
	drl_limiter_free(l);
	drl_store_free(s);

	drl_async_opts none = {.threads = DRL_ASYNC_THREADS_NONE};
	drl_error err = {0};
	assert_int_equal(drl_async_new(&a, &none, &err), 0);
	s = tu_store("memory://");
	l = tu_limiter(s, "fixed_window:2/1h", "m:");
	async_one o = {0};
	assert_int_equal(
		drl_async_allow(a, l, "k", 1, 1, async_one_cb, &o, NULL), 0);
	assert_int_equal(drl_async_process(a), 1);
	assert_true(o.result.allowed);
	drl_limiter_free(l);
	drl_store_free(s);
	if (have_redis) {
		char uri[160];
		snprintf(uri, sizeof uri, "redis://127.0.0.1:%d?tx=watch",
			 redis.port);
		s = tu_store(uri);
		l = tu_limiter(s, "fixed_window:2/1h", "none:");
		assert_int_equal(drl_async_allow(a, l, "k", 1, 1, async_one_cb,
						 &o, &err),
				 DRL_ENOTSUP);
		assert_non_null(strstr(err.message, "worker"));
		assert_int_equal(drl_async_pending(a), 0);
		drl_result r;
		assert_int_equal(drl_allow(l, "k", 1, 0, &r, NULL), 0);
		assert_int_equal(r.remaining, 2); /* nothing was consumed */
		drl_limiter_free(l);
		drl_store_free(s);
	}
	assert_int_equal(thread_count(), before);
	drl_async_free(a);
}

static void test_notify(void **state)
{
	(void)state;
	assert_int_equal(drl_async_notify(NULL, count_notify, &notified),
			 DRL_EINVAL);
	for (int u = 0; u < URI_COUNT; u++) {
		char buf[192];
		const char *uri = uri_of(u, buf, sizeof buf);
		if (uri == NULL)
			continue;
		trio tr = trio_open(uri, "fixed_window:1000/1h", "n:", 4, 0);
		atomic_store(&notified, 0);
		assert_int_equal(
			drl_async_notify(tr.a, count_notify, &notified), 0);
		for (int i = 0; i < 5; i++) {
			async_one o = {0};
			assert_int_equal(drl_async_allow(tr.a, tr.l, "k", 1, 1,
							 async_one_cb, &o,
							 NULL),
					 0);
			if (!TU_WAIT_FOR(atomic_load(&notified) == i + 1,
					 tu_bound_ms(5000)))
				fail_msg("%s: request %d: notify called %d "
					 "times",
					 uri_names[u], i,
					 atomic_load(&notified));
			assert_false(fd_readable(tr.a));
			assert_int_equal(drl_async_process(tr.a), 1);
			assert_int_equal(o.count, 1);
			assert_int_equal(o.rc, 0);
			assert_true(o.result.allowed);
		}
		/* a burst: process whenever notified, until all are in */
		enum { BURST = 40 };
		async_one burst[BURST] = {{0}};
		atomic_store(&notified, 0);
		for (int i = 0; i < BURST; i++)
			assert_int_equal(drl_async_allow(tr.a, tr.l, "k", 1, 1,
							 async_one_cb,
							 &burst[i], NULL),
					 0);
		int seen = 0, ran = 0;
		int64_t end = tu_mono_ms() + tu_bound_ms(10000);
		while (ran < BURST && tu_mono_ms() < end) {
			if (atomic_load(&notified) == seen) {
				tu_sleep_ms(1);
				continue;
			}
			seen = atomic_load(&notified);
			ran += drl_async_process(tr.a);
		}
		assert_int_equal(ran, BURST);
		assert_true(seen >= 1 && seen <= BURST);
		for (int i = 0; i < BURST; i++)
			assert_int_equal(burst[i].count, 1);
		assert_false(fd_readable(tr.a));
		assert_int_equal(drl_async_pending(tr.a), 0);
		trio_free(&tr);
	}
}

/* Bad input: DRL_EINVAL naming the bad part, nothing started, no
 * callback; the messages of drl_allow's checks. */
static void test_bad_input(void **state)
{
	(void)state;
	trio tr = trio_open("memory://", "fixed_window:5/1s", NULL, 1, 0);
	drl_batch_item it = {.key = "k", .keylen = 1, .cost = 1};

	EXPECT_EINVAL(
		drl_async_allow(NULL, tr.l, "k", 1, 1, never_cb, NULL, err),
		"NULL context");
	EXPECT_EINVAL(
		drl_async_allow(tr.a, NULL, "k", 1, 1, never_cb, NULL, err),
		"NULL limiter");
	EXPECT_EINVAL(drl_async_allow(tr.a, tr.l, "k", 1, 1, NULL, NULL, err),
		      "NULL callback");
	EXPECT_EINVAL(
		drl_async_allow(tr.a, tr.l, "k", 1, -1, never_cb, NULL, err),
		"cost -1 is negative");
	EXPECT_EINVAL(
		drl_async_allow(tr.a, tr.l, NULL, 1, 1, never_cb, NULL, err),
		"NULL key");
	EXPECT_EINVAL(
		drl_async_allow(tr.a, tr.l, "k", 0, 1, never_cb, NULL, err),
		"key length 0");
	EXPECT_EINVAL(drl_async_allow(tr.a, tr.l, "k", DRL_KEY_MAX + 1, 1,
				      never_cb, NULL, err),
		      "key length");
	EXPECT_EINVAL(drl_async_allow_at(tr.a, tr.l, "k", 1, 1, -1, never_cb,
					 NULL, err),
		      "outside 0..2^62");
	EXPECT_EINVAL(
		drl_async_batch(tr.a, tr.l, NULL, 1, never_batch_cb, NULL, err),
		"NULL items");
	EXPECT_EINVAL(
		drl_async_batch(tr.a, tr.l, &it, 0, never_batch_cb, NULL, err),
		"outside 1..4096");
	EXPECT_EINVAL(drl_async_batch(tr.a, tr.l, &it, DRL_BATCH_MAX + 1,
				      never_batch_cb, NULL, err),
		      "outside 1..4096");
	EXPECT_EINVAL(drl_async_batch(tr.a, tr.l, &it, 1, NULL, NULL, err),
		      "NULL callback");
	EXPECT_EINVAL(
		drl_async_batch(tr.a, NULL, &it, 1, never_batch_cb, NULL, err),
		"NULL limiter");
	EXPECT_EINVAL(drl_async_batch_at(tr.a, tr.l, &it, 1,
					 DRL_TIME_MAX_US + 1, never_batch_cb,
					 NULL, err),
		      "outside 0..2^62");
	assert_int_equal(drl_async_pending(tr.a), 0);
	assert_int_equal(drl_async_process(tr.a), 0);

	drl_async *none = (drl_async *)&it;
	drl_async_opts o = {.threads = -2};
	EXPECT_EINVAL(drl_async_new(&none, &o, err), "threads -2");
	assert_null(none);
	o = (drl_async_opts){.threads = DRL_ASYNC_THREADS_MAX + 1};
	EXPECT_EINVAL(drl_async_new(&none, &o, err), "threads 257");
	o = (drl_async_opts){.queue = DRL_ASYNC_QUEUE_MAX + 1};
	EXPECT_EINVAL(drl_async_new(&none, &o, err), "queue");
	EXPECT_EINVAL(drl_async_new(NULL, NULL, err), "NULL out");
	assert_int_equal(drl_async_process(NULL), DRL_EINVAL);
	assert_int_equal(drl_async_fd(NULL), -1);
	assert_int_equal(drl_async_pending(NULL), 0);
	drl_async_free(NULL);
	/* nothing was decided */
	drl_result r = tu_at(tr.l, "k", 0, T0);
	assert_int_equal(r.remaining, 5);
	trio_free(&tr);
}

/* A single start and a batch start on tr both return rc (the single's
 * message holds `says`): neither starts anything. */
static void starts_refused(trio *tr, int rc, const char *says)
{
	drl_error err = {0};
	assert_int_equal(drl_async_allow_at(tr->a, tr->l, "k", 1, 1, T0,
					    never_cb, NULL, &err),
			 rc);
	if (strstr(err.message, says) == NULL)
		fail_msg("\"%s\" does not say \"%s\"", err.message, says);
	drl_batch_item it = {.key = "k", .keylen = 1, .cost = 1};
	assert_int_equal(drl_async_batch_at(tr->a, tr->l, &it, 1, T0,
					    never_batch_cb, NULL, NULL),
			 rc);
}

/* queue=4: four requests whose callbacks have not run fill it (decided
 * or not); the fifth start is DRL_EBUSY and starts nothing; once their
 * callbacks ran, starts succeed again. */
static void test_queue_full(void **state)
{
	(void)state;
	trio tr = trio_open("memory://", "fixed_window:100/1h", NULL, 2, 4);
	tally t = {0};
	start_tallied(&tr, &t, 4);
	starts_refused(&tr, DRL_EBUSY, "queue is full");
	assert_int_equal(drl_async_pending(tr.a), 4);
	async_process_until(tr.a, &t.count, 4);
	assert_int_equal(drl_async_pending(tr.a), 0);
	start_tallied(&tr, &t, 1);
	async_process_until(tr.a, &t.count, 5);
	assert_int_equal(t.allowed, 5);
	drl_async_free(tr.a);
	tr.a = NULL;
	drl_result r = tu_at(tr.l, "k", 0, T0);
	assert_int_equal(r.remaining, 95);
	trio_free(&tr);
}

/* A start from a callback run by drl_async_free is DRL_ECANCELED;
 * drl_async_process from a callback of its own context is DRL_EINVAL. */
typedef struct restart {
	drl_limiter *l;
	int count, rc;
	int process_rc; /* drl_async_process from the callback */
} restart;

static void restart_cb(drl_async *a, int rc, const drl_result *r,
		       const drl_error *err, void *arg)
{
	(void)rc;
	(void)r;
	(void)err;
	restart *x = arg;
	x->count++;
	x->rc = drl_async_allow_at(a, x->l, "k", 1, 1, T0, never_cb, NULL,
				   NULL);
	x->process_rc = drl_async_process(a);
}

static void test_start_during_free(void **state)
{
	(void)state;
	trio tr = trio_open("memory://", "fixed_window:100/1h", NULL, 1, 0);
	restart x = {.l = tr.l};
	assert_int_equal(drl_async_allow_at(tr.a, tr.l, "k", 1, 1, T0,
					    restart_cb, &x, NULL),
			 0);
	drl_async_free(tr.a);
	tr.a = NULL;
	assert_int_equal(x.count, 1);
	assert_int_equal(x.rc, DRL_ECANCELED);
	assert_int_equal(x.process_rc, DRL_EINVAL);
	trio_free(&tr);
}

/* ---- drl_async_drain ------------------------------------------------------ */

/* A drain's done callback: counted, with the callbacks run before it. */
typedef struct drained {
	int count;
	int after; /* tally count when it ran */
	tally *t;
} drained;

static void drained_cb(drl_async *a, void *arg)
{
	drained *d = arg;
	d->count++;
	d->after = d->t->count;
	/* a callback's rules: no process from it, starts refused */
	assert_int_equal(drl_async_process(a), DRL_EINVAL);
}

/* memory://: a drain with three requests waiting refuses every start
 * (singles and batches, DRL_ECANCELED naming the drain) and a second
 * drain; the three are decided as usual and done runs once, from
 * drl_async_process(), after the last of them, never again. A drain with
 * nothing pending runs done from the next drl_async_process() (the fd is
 * made readable for it), not inside drl_async_drain(). */
static void test_drain(void **state)
{
	(void)state;
	trio tr = trio_open("memory://", "fixed_window:100/1h", NULL, 2, 0);
	tally t = {0};
	drained d = {.t = &t};
	start_tallied(&tr, &t, 3);
	drl_error err = {0};
	assert_int_equal(drl_async_drain(NULL, drained_cb, &d, &err),
			 DRL_EINVAL);
	assert_int_equal(drl_async_drain(tr.a, NULL, &d, &err), DRL_EINVAL);
	assert_int_equal(drl_async_drain(tr.a, drained_cb, &d, &err), 0);
	assert_int_equal(drl_async_drain(tr.a, drained_cb, &d, &err),
			 DRL_EINVAL);
	assert_non_null(strstr(err.message, "already"));
	starts_refused(&tr, DRL_ECANCELED, "drl_async_drain() has begun");
	assert_int_equal(d.count, 0);
	async_process_until(tr.a, &d.count, 1);
	assert_int_equal(t.count, 3);
	assert_int_equal(t.allowed, 3);
	assert_int_equal(d.after, 3);
	assert_int_equal(drl_async_pending(tr.a), 0);
	assert_int_equal(drl_async_process(tr.a), 0);
	assert_false(fd_readable(tr.a));
	drl_async_free(tr.a);
	assert_int_equal(d.count, 1);

	tr.a = async_new(2, 0);
	d = (drained){.t = &t};
	assert_int_equal(drl_async_drain(tr.a, drained_cb, &d, NULL), 0);
	assert_int_equal(d.count, 0);
	assert_true(fd_readable(tr.a));
	assert_int_equal(drl_async_process(tr.a), 0);
	assert_int_equal(d.count, 1);
	assert_false(fd_readable(tr.a));
	drl_async_free(tr.a);
	tr.a = NULL;
	assert_int_equal(d.count, 1);
	drl_result r = tu_at(tr.l, "k", 0, T0);
	assert_int_equal(r.remaining, 97);
	trio_free(&tr);
}

/* A drain with requests that wait for the context's one worker behind a
 * stopped redis-server (pipelines=0: each needs the worker): unlike
 * drl_async_free(), the drain cancels none; once the server runs again
 * every one is decided, and done runs once, after the last callback. */
static void test_drain_stuck(void **state)
{
	(void)state;
	tally t;
	trio x = stuck_start(&t, tu_bound_ms(5000), 1, 20, "&pipelines=0");
	drained d = {.t = &t};
	assert_int_equal(drl_async_drain(x.a, drained_cb, &d, NULL), 0);
	assert_int_equal(
		drl_async_allow(x.a, x.l, "k", 1, 1, never_cb, NULL, NULL),
		DRL_ECANCELED);
	assert_int_equal(drl_fixture_resume(&redis), 0);
	async_process_until(x.a, &d.count, 1);
	assert_int_equal(t.count, 20);
	assert_int_equal(t.ok, 20);
	assert_int_equal(t.allowed, 20);
	assert_int_equal(d.after, 20);
	trio_free(&x);
	assert_int_equal(d.count, 1);
}

/* drl_async_free() during a drain whose requests are not all decided:
 * free's usual rules (a request no worker began is DRL_ECANCELED), every
 * callback runs, then done, once, last of all, on the freeing thread. */
static void test_free_during_drain(void **state)
{
	(void)state;
	tally t;
	trio x = stuck_start(&t, tu_bound_ms(100), 1, 10, "&pipelines=0");
	drained d = {.t = &t};
	assert_int_equal(drl_async_drain(x.a, drained_cb, &d, NULL), 0);
	drl_async_free(x.a);
	x.a = NULL;
	assert_int_equal(drl_fixture_resume(&redis), 0);
	assert_int_equal(t.count, 10);
	assert_true(t.canceled >= 9);
	assert_int_equal(d.count, 1);
	assert_int_equal(d.after, 10);
	trio_free(&x);
}

/* ---- drl_async_set_adapter ------------------------------------------------ */

/* What a fake adapter heard: every busy change in order, the cleanup. */
typedef struct hooks {
	char seq[64]; /* '1' busy, '0' idle, 'c' cleanup */
	int n;
	int cleanup_after; /* callbacks run when cleanup came */
	tally *t;
} hooks;

static void hooks_busy(void *arg, int busy)
{
	hooks *h = arg;
	if (h->n < (int)sizeof h->seq - 1)
		h->seq[h->n++] = busy ? '1' : '0';
}

static void hooks_cleanup(void *arg)
{
	hooks *h = arg;
	h->seq[h->n++] = 'c';
	h->cleanup_after = h->t->count;
}

/* The busy hook follows "requests pending or a drain's done due", from
 * the state at attach on, each change once and in order; a second
 * adapter is DRL_EBUSY; a detached one hears nothing more; the cleanup
 * hook runs once, from drl_async_free(), after every callback. */
static void test_adapter_hooks(void **state)
{
	(void)state;
	trio tr = trio_open("memory://", "fixed_window:100/1h", NULL, 2, 0);
	tally t = {0};
	hooks h = {.t = &t}, other = {.t = &t};
	drl_async_adapter ad = {hooks_busy, hooks_cleanup, &h};
	drl_async_adapter ad2 = {hooks_busy, hooks_cleanup, &other};
	drl_error err = {0};
	assert_int_equal(drl_async_set_adapter(NULL, &ad, &err), DRL_EINVAL);
	assert_int_equal(drl_async_set_adapter(tr.a, &ad, &err), 0);
	assert_int_equal(drl_async_set_adapter(tr.a, &ad2, &err), DRL_EBUSY);
	assert_non_null(strstr(err.message, "attached"));
	assert_int_equal(other.n, 0);
	start_tallied(&tr, &t, 2);
	async_process_until(tr.a, &t.count, 2);
	start_tallied(&tr, &t, 1);
	async_process_until(tr.a, &t.count, 3);
	assert_string_equal(h.seq, "01010");
	/* detached: nothing more; another may attach */
	assert_int_equal(drl_async_set_adapter(tr.a, NULL, &err), 0);
	start_tallied(&tr, &t, 1);
	assert_string_equal(h.seq, "01010");
	assert_int_equal(drl_async_set_adapter(tr.a, &ad2, &err), 0);
	assert_string_equal(other.seq, "1"); /* the state at attach */
	async_process_until(tr.a, &t.count, 4);
	drained d = {.t = &t};
	assert_int_equal(drl_async_drain(tr.a, drained_cb, &d, NULL), 0);
	assert_int_equal(drl_async_process(tr.a), 0);
	assert_int_equal(d.count, 1);
	assert_string_equal(other.seq, "1010");
	drl_async_free(tr.a);
	assert_string_equal(other.seq, "1010c");
	assert_string_equal(h.seq, "01010");

	/* free with requests waiting: their callbacks, then the cleanup */
	tr.a = async_new(2, 0);
	hooks f = {.t = &t};
	drl_async_adapter adf = {hooks_busy, hooks_cleanup, &f};
	assert_int_equal(drl_async_set_adapter(tr.a, &adf, NULL), 0);
	t = (tally){0};
	start_tallied(&tr, &t, 5);
	drl_async_free(tr.a);
	tr.a = NULL;
	assert_string_equal(f.seq, "010c");
	assert_int_equal(f.cleanup_after, 5);
	trio_free(&tr);
}

DRL_FIXTURE_PAIR_GROUP(redis, have_redis, mc, have_mc)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_equals_blocking),
		cmocka_unit_test(test_hot_key_exact),
		cmocka_unit_test(test_hot_key_real_clock),
		cmocka_unit_test(test_free_in_flight_memory),
		cmocka_unit_test(test_free_while_stuck),
		cmocka_unit_test(test_free_while_stuck_started),
		cmocka_unit_test(test_free_while_stuck_started_batches),
		cmocka_unit_test(test_server_dies_in_flight),
		cmocka_unit_test(test_near_denial_without_worker),
		cmocka_unit_test(test_callback_starts_requests),
		cmocka_unit_test(test_starts_from_threads),
		cmocka_unit_test(test_failure_policies),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_direct),
		cmocka_unit_test(test_decided_at_start),
		cmocka_unit_test(test_notify),
		cmocka_unit_test(test_queue_full),
		cmocka_unit_test(test_start_during_free),
		cmocka_unit_test(test_drain),
		cmocka_unit_test(test_drain_stuck),
		cmocka_unit_test(test_free_during_drain),
		cmocka_unit_test(test_adapter_hooks),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
