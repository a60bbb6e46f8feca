/*
 * The loop adapters' tests (tests/async_loop.h), run by
 * test_async_libuv.c and test_async_libevent.c on a real loop, against
 * memory:// and a real redis-server (tx=lua; skipped when redis-server is
 * missing, except under CI=true).
 */
#include "async_loop.h"

#include "server_fixture.h"
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

static const async_loop *L;
static drl_server redis;
static int have_redis;

#define T0 INT64_C(1700000000000000)

enum { TOTAL = 1000, IN_FLIGHT = 64, LIMIT = 300 };

/* One run: TOTAL requests for one key at T0, IN_FLIGHT at a time, each
 * callback starting the next; the last stops the loop. */
typedef struct run {
	void *loop;
	drl_limiter *l;
	pthread_t loop_thread;
	int started, done, allowed, failed, off_thread;
	bool no_stop; /* the loop must return by itself */
} run;

static void on_decided(drl_async *a, int rc, const drl_result *r,
		       const drl_error *err, void *arg)
{
	(void)err;
	run *x = arg;
	x->done++;
	if (!pthread_equal(pthread_self(), x->loop_thread))
		x->off_thread++;
	if (rc)
		x->failed++;
	else
		x->allowed += r->allowed;
	if (x->started < TOTAL) {
		x->started++;
		if (drl_async_allow_at(a, x->l, "hot", 3, 1, T0, on_decided, x,
				       NULL) != 0)
			x->failed++;
	}
	if (x->done == TOTAL && !x->no_stop)
		L->stop(x->loop);
}

/* TOTAL requests through the adapter on uri: every callback on the
 * loop's thread, none failed, exactly LIMIT allowed, nothing pending. */
static void run_on(const char *uri, const char *prefix)
{
	drl_store *s = tu_store(uri);
	drl_limiter *l = tu_limiter(s, "sliding_log:300/1h", prefix);
	drl_async *a = NULL;
	drl_async_opts o = {.threads = 8};
	drl_error err = {0};
	if (drl_async_new(&a, &o, &err))
		fail_msg("drl_async_new: %s", err.message);
	run x = {.loop = L->make(), .l = l, .loop_thread = pthread_self()};
	void *h = NULL;
	if (L->attach(x.loop, a, &h, &err))
		fail_msg("%s attach: %s", L->name, err.message);
	for (; x.started < IN_FLIGHT; x.started++)
		assert_int_equal(drl_async_allow_at(a, l, "hot", 3, 1, T0,
						    on_decided, &x, NULL),
				 0);
	L->run(x.loop);
	L->detach(h);
	L->free(x.loop);
	assert_int_equal(x.done, TOTAL);
	assert_int_equal(x.off_thread, 0);
	assert_int_equal(x.failed, 0);
	assert_int_equal(x.allowed, LIMIT);
	assert_int_equal(drl_async_pending(a), 0);
	drl_async_free(a);
	drl_limiter_free(l);
	drl_store_free(s);
}

/* The Redis store's URI (tx=lua) in buf; skips the test without one. */
static void redis_uri(char *buf, size_t cap)
{
	if (!have_redis)
		skip();
	snprintf(buf, cap, "redis://127.0.0.1:%d?tx=lua&timeout_ms=%lld",
		 redis.port, (long long)tu_bound_ms(2000));
}

static void test_memory(void **state)
{
	(void)state;
	run_on("memory://", NULL);
}

static void test_redis(void **state)
{
	(void)state;
	char uri[128];
	redis_uri(uri, sizeof uri);
	run_on(uri, L->name);
}

/* ---- a loop that returns by itself -------------------------------------- */

/* fn(arg), failing the test (the process exits) when it has not returned
 * within a generous deadline: a loop kept alive while nothing is pending
 * never returns. */
typedef struct watchdog {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool returned;
	const char *what;
} watchdog;

static void *watchdog_main(void *p)
{
	watchdog *w = p;
	int64_t ms = tu_bound_ms(30000);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	pthread_mutex_lock(&w->mu);
	int rc = 0;
	while (!w->returned && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&w->cv, &w->mu, &ts);
	bool ok = w->returned;
	pthread_mutex_unlock(&w->mu);
	if (!ok) {
		fprintf(stderr, "%s: %s: did not return within %lld ms\n",
			L->name, w->what, (long long)ms);
		_exit(1);
	}
	return NULL;
}

static void bounded(void (*fn)(void *), void *arg, const char *what)
{
	watchdog w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
		      false, what};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, watchdog_main, &w), 0);
	fn(arg);
	pthread_mutex_lock(&w.mu);
	w.returned = true;
	pthread_cond_signal(&w.cv);
	pthread_mutex_unlock(&w.mu);
	pthread_join(t, NULL);
}

static drl_async *ctx_new(void)
{
	drl_async *a = NULL;
	drl_async_opts o = {.threads = 8};
	drl_error err = {0};
	if (drl_async_new(&a, &o, &err))
		fail_msg("drl_async_new: %s", err.message);
	return a;
}

static void *attach_or_fail(void *loop, drl_async *a)
{
	void *h = NULL;
	drl_error err = {0};
	if (L->attach(loop, a, &h, &err))
		fail_msg("%s attach: %s", L->name, err.message);
	return h;
}

/* One request's callback, counted. */
typedef struct one {
	int count, rc;
} one;

static void one_cb(drl_async *a, int rc, const drl_result *r,
		   const drl_error *err, void *arg)
{
	(void)a;
	(void)r;
	(void)err;
	one *o = arg;
	o->count++;
	o->rc = rc;
}

/* TOTAL requests through the adapter on uri, no stop(): the loop (run
 * with UV_RUN_DEFAULT, event_base_dispatch) returns by itself once the
 * last callback ran, nothing keeping it alive while the context is idle
 * (before the first start too); a start makes it busy again; then
 * drl_async_free() without a detach. */
static void idle_on(const char *uri, const char *prefix)
{
	drl_store *s = tu_store(uri);
	drl_limiter *l = tu_limiter(s, "sliding_log:300/1h", prefix);
	drl_async *a = ctx_new();
	run x = {.loop = L->make(),
		 .l = l,
		 .loop_thread = pthread_self(),
		 .no_stop = true};
	void *h = attach_or_fail(x.loop, a);
	assert_int_equal(L->alive(x.loop), 0);
	for (; x.started < IN_FLIGHT; x.started++)
		assert_int_equal(drl_async_allow_at(a, l, "hot", 3, 1, T0,
						    on_decided, &x, NULL),
				 0);
	assert_true(L->alive(x.loop));
	bounded(L->run, x.loop, "the loop after the last callback");
	assert_int_equal(x.done, TOTAL);
	assert_int_equal(x.off_thread, 0);
	assert_int_equal(x.failed, 0);
	assert_int_equal(x.allowed, LIMIT);
	assert_int_equal(drl_async_pending(a), 0);
	assert_int_equal(L->alive(x.loop), 0);
	one o = {0};
	assert_int_equal(
		drl_async_allow_at(a, l, "hot", 3, 1, T0, one_cb, &o, NULL), 0);
	assert_true(L->alive(x.loop));
	bounded(L->run, x.loop, "the loop after one more callback");
	assert_int_equal(o.count, 1);
	assert_int_equal(o.rc, 0);
	assert_int_equal(L->alive(x.loop), 0);
	(void)h; /* not detached: drl_async_free() does it */
	drl_async_free(a);
	bounded(L->free, x.loop, "closing the loop");
	drl_limiter_free(l);
	drl_store_free(s);
}

static void test_idle_memory(void **state)
{
	(void)state;
	idle_on("memory://", NULL);
}

static void test_idle_redis(void **state)
{
	(void)state;
	char uri[128];
	redis_uri(uri, sizeof uri);
	idle_on(uri, "idle:");
}

/* A start on another thread while the loop is idle and runs only for
 * something of the application's (hold): the adapter's handle is
 * referenced for it from the loop's thread, so the loop, once the hold
 * is released, still runs until that request's callback ran. Redis: the
 * decision takes a round trip, so the callback comes after the release
 * is seen. */
typedef struct far {
	drl_async *a;
	drl_limiter *l;
	void *token;
	one o;
	int rc;
} far;

static void *far_main(void *p)
{
	far *f = p;
	f->rc = drl_async_allow_at(f->a, f->l, "far", 3, 1, T0, one_cb, &f->o,
				   NULL);
	L->release(f->token);
	return NULL;
}

static void test_start_from_thread(void **state)
{
	(void)state;
	if (L->hold == NULL)
		skip();
	char uri[128];
	redis_uri(uri, sizeof uri);
	drl_store *s = tu_store(uri);
	drl_limiter *l = tu_limiter(s, "fixed_window:5/1h", "far:");
	drl_async *a = ctx_new();
	void *loop = L->make();
	void *h = attach_or_fail(loop, a);
	far f = {.a = a, .l = l, .token = L->hold(loop)};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, far_main, &f), 0);
	bounded(L->run, loop, "the loop after a start on another thread");
	pthread_join(t, NULL);
	assert_int_equal(f.rc, 0);
	assert_int_equal(f.o.count, 1);
	assert_int_equal(f.o.rc, 0);
	L->detach(h);
	drl_async_free(a);
	bounded(L->free, loop, "closing the loop");
	drl_limiter_free(l);
	drl_store_free(s);
}

/* drl_async_free() with the adapter attached and requests waiting (the
 * loop kept alive for them): every callback runs in it, the adapter is
 * cleaned up (its handle closed, its memory freed: ASan and valgrind
 * see a leak otherwise; libuv's uv_loop_close() fails on a handle left
 * open), and nothing keeps the loop alive. */
static void test_free_attached(void **state)
{
	(void)state;
	drl_store *s = tu_store("memory://");
	drl_limiter *l = tu_limiter(s, "fixed_window:5/1h", NULL);
	drl_async *a = ctx_new();
	void *loop = L->make();
	(void)attach_or_fail(loop, a);
	one o = {0};
	for (int i = 0; i < 10; i++)
		assert_int_equal(drl_async_allow_at(a, l, "k", 1, 1, T0, one_cb,
						    &o, NULL),
				 0);
	assert_true(L->alive(loop));
	drl_async_free(a);
	assert_int_equal(o.count, 10);
	bounded(L->free, loop, "closing the loop");
	drl_limiter_free(l);
	drl_store_free(s);
}

/* ---- a poll error ----------------------------------------------------- */

static void count_drained(drl_async *a, void *arg)
{
	(void)a;
	(*(int *)arg)++;
}

/* The context's descriptor replaced by a pipe's write end whose reader is
 * gone (the poll reports POLLERR, as for a broken descriptor), a drain
 * making the context busy (the loop watches it): the error reaches the
 * error callback once (DRL_EUNAVAILABLE) and the loop returns, the
 * adapter watching no more; drl_async_free() then cleans up and the
 * drain's done callback has run exactly once. */
static void test_poll_error(void **state)
{
	(void)state;
	void (*old)(int) = signal(SIGPIPE, SIG_IGN); /* writes to the pipe */
	drl_async *a = ctx_new();
	int p[2];
	assert_int_equal(pipe(p), 0);
	close(p[0]);
	assert_true(dup2(p[1], drl_async_fd(a)) >= 0);
	close(p[1]);
	void *loop = L->make();
	void *h = attach_or_fail(loop, a);
	loop_error e = {0};
	L->on_error(h, &e);
	int drained = 0;
	assert_int_equal(drl_async_drain(a, count_drained, &drained, NULL), 0);
	bounded(L->run, loop, "the loop after a poll error");
	assert_int_equal(e.count, 1);
	assert_int_equal(e.err.code, DRL_EUNAVAILABLE);
	if (strstr(e.err.message, "stopped watching") == NULL)
		fail_msg("message: %s", e.err.message);
	drl_async_free(a);
	assert_int_equal(drained, 1);
	assert_int_equal(e.count, 1);
	bounded(L->free, loop, "closing the loop");
	signal(SIGPIPE, old);
}

/* ---- a drain ------------------------------------------------------------ */

/* IN_FLIGHT requests, then a drain: each callback's start is refused
 * (DRL_ECANCELED), every request is decided, the done callback runs once,
 * after the last callback, and the loop returns by itself after it. */
typedef struct drain_run {
	drl_limiter *l;
	int done, decided, refused, drained, drained_after;
} drain_run;

static void drain_decided(drl_async *a, int rc, const drl_result *r,
			  const drl_error *err, void *arg)
{
	(void)r;
	(void)err;
	drain_run *x = arg;
	x->done++;
	x->decided += rc == 0;
	x->refused += drl_async_allow_at(a, x->l, "d", 1, 1, T0, drain_decided,
					 x, NULL) == DRL_ECANCELED;
}

static void drain_done(drl_async *a, void *arg)
{
	(void)a;
	drain_run *x = arg;
	x->drained++;
	x->drained_after = x->done;
}

static void drain_on(const char *uri, const char *prefix)
{
	drl_store *s = tu_store(uri);
	drl_limiter *l = tu_limiter(s, "fixed_window:1000/1h", prefix);
	drl_async *a = ctx_new();
	void *loop = L->make();
	void *h = attach_or_fail(loop, a);
	drain_run x = {.l = l};
	for (int i = 0; i < IN_FLIGHT; i++)
		assert_int_equal(drl_async_allow_at(a, l, "d", 1, 1, T0,
						    drain_decided, &x, NULL),
				 0);
	assert_int_equal(drl_async_drain(a, drain_done, &x, NULL), 0);
	drl_error err = {0};
	assert_int_equal(drl_async_allow_at(a, l, "d", 1, 1, T0, drain_decided,
					    &x, &err),
			 DRL_ECANCELED);
	assert_non_null(strstr(err.message, "drl_async_drain"));
	bounded(L->run, loop, "the loop after a drain");
	assert_int_equal(x.done, IN_FLIGHT);
	assert_int_equal(x.decided, IN_FLIGHT);
	assert_int_equal(x.refused, IN_FLIGHT);
	assert_int_equal(x.drained, 1);
	assert_int_equal(x.drained_after, IN_FLIGHT);
	assert_int_equal(drl_async_pending(a), 0);
	assert_int_equal(L->alive(loop), 0);
	L->detach(h);
	drl_async_free(a); /* detached: no cleanup of the adapter again */
	assert_int_equal(x.drained, 1);
	bounded(L->free, loop, "closing the loop");
	drl_result r;
	assert_int_equal(drl_allow_at(l, "d", 1, 0, T0, &r, NULL), 0);
	assert_int_equal(r.remaining, 1000 - IN_FLIGHT);
	drl_limiter_free(l);
	drl_store_free(s);
}

static void test_drain_memory(void **state)
{
	(void)state;
	drain_on("memory://", NULL);
}

static void test_drain_redis(void **state)
{
	(void)state;
	char uri[128];
	redis_uri(uri, sizeof uri);
	drain_on(uri, "drain:");
}

static void test_attach_null(void **state)
{
	(void)state;
	drl_async *a = NULL;
	drl_error err = {0};
	assert_int_equal(drl_async_new(&a, NULL, &err), 0);
	assert_int_equal(L->attach_null(a, &err), DRL_EINVAL);
	assert_int_equal(err.code, DRL_EINVAL);
	assert_non_null(strstr(err.message, "NULL argument"));
	drl_async_free(a);
}

static int setup(void **state)
{
	(void)state;
	int rc = drl_fixture_redis_start(&redis, NULL);
	if (rc < 0)
		return -1;
	have_redis = rc == 0;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (have_redis)
		drl_fixture_stop(&redis);
	return 0;
}

int async_loop_main(const async_loop *loop)
{
	L = loop;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_memory),
		cmocka_unit_test(test_redis),
		cmocka_unit_test(test_attach_null),
		cmocka_unit_test(test_idle_memory),
		cmocka_unit_test(test_idle_redis),
		cmocka_unit_test(test_start_from_thread),
		cmocka_unit_test(test_free_attached),
		cmocka_unit_test(test_poll_error),
		cmocka_unit_test(test_drain_memory),
		cmocka_unit_test(test_drain_redis),
	};
	return cmocka_run_group_tests_name(L->name, tests, setup, teardown);
}
