/*
 * The loop adapters' tests (tests/async_loop.h), run by
 * test_async_libuv.c and test_async_libevent.c on a real loop, against
 * memory:// and a real redis-server (tx=lua; skipped when redis-server is
 * missing, except under CI=true).
 */
#include "async_loop.h"

#include "server_fixture.h"
#include "testutil.h"

#include <pthread.h>

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
	if (x->done == TOTAL)
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

static void test_memory(void **state)
{
	(void)state;
	run_on("memory://", NULL);
}

static void test_redis(void **state)
{
	(void)state;
	if (!have_redis)
		skip();
	char uri[128];
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d?tx=lua&timeout_ms=%lld",
		 redis.port, (long long)tu_bound_ms(2000));
	run_on(uri, L->name);
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
	};
	return cmocka_run_group_tests_name(L->name, tests, setup, teardown);
}
