/*
 * The circuit breaker's state machine and the on_error policies, step by
 * step, on a store whose server can be switched off: a user store
 * (drl_store_from_backend, the public vtable) that forwards to the memory
 * store, or fails every call with DRL_EUNAVAILABLE / DRL_ESTORE while
 * `down` says so, counting the calls that reach it. (The same behaviour on
 * real Redis and memcached servers is tests/stores/test_faults.c; this one pins
 * each transition at a known step.)
 */
#include "testutil.h"

#include "internal.h"
#include "backends/memory.h"

#include <time.h>

typedef struct flaky {
	drl_backend parent;
	drl_backend *inner; /* the memory store */
	int down;           /* 0 up, else the code every call fails with */
	long calls;         /* calls that reached this store */
} flaky;

#define FLAKY(b) ((flaky *)(b))

static int fail_if_down(flaky *f, drl_error *err)
{
	f->calls++;
	if (f->down)
		return drl_error_set(err, f->down, "flaky store is down");
	return 0;
}

static void f_destroy(drl_backend *b)
{
	FLAKY(b)->inner->destroy(FLAKY(b)->inner);
	free(b);
}

static int f_incr(drl_backend *b, drl_bytes key, int64_t delta, int64_t ttl,
		  int64_t *value, drl_error *err)
{
	int rc = fail_if_down(FLAKY(b), err);
	drl_backend *in = FLAKY(b)->inner;
	return rc ? rc : in->incr(in, key, delta, ttl, value, err);
}

static int f_get_many(drl_backend *b, size_t n, const drl_bytes *keys,
		      int64_t *values, drl_error *err)
{
	int rc = fail_if_down(FLAKY(b), err);
	drl_backend *in = FLAKY(b)->inner;
	return rc ? rc : in->get_many(in, n, keys, values, err);
}

static int f_load(drl_backend *b, drl_bytes key, void *buf, size_t cap,
		  size_t *len, uint64_t *version, drl_error *err)
{
	int rc = fail_if_down(FLAKY(b), err);
	drl_backend *in = FLAKY(b)->inner;
	return rc ? rc : in->load(in, key, buf, cap, len, version, err);
}

static int f_cas(drl_backend *b, drl_bytes key, const void *blob, size_t len,
		 uint64_t version, int64_t ttl, drl_error *err)
{
	int rc = fail_if_down(FLAKY(b), err);
	drl_backend *in = FLAKY(b)->inner;
	return rc ? rc : in->cas(in, key, blob, len, version, ttl, err);
}

static drl_store *open_flaky(flaky **out)
{
	flaky *f = calloc(1, sizeof *f);
	drl__uri u;
	drl_error err = {0};
	assert_non_null(f);
	assert_int_equal(drl__uri_parse(&u, "memory://", &err), 0);
	assert_int_equal(drl__memory_open(&f->inner, &u, &err), 0);
	drl__uri_clear(&u);
	f->parent = (drl_backend){.version = DRL_BACKEND_VERSION,
				  .caps = DRL_CAP_COUNTER | DRL_CAP_CAS,
				  .name = "flaky",
				  .destroy = f_destroy,
				  .incr = f_incr,
				  .get_many = f_get_many,
				  .load = f_load,
				  .cas = f_cas};
	drl_store *s;
	assert_int_equal(drl_store_from_backend(&s, &f->parent, &err), 0);
	*out = f;
	return s;
}

static int ask(drl_limiter *l, drl_result *r, drl_error *e)
{
	return drl_allow(l, "k", 1, 1, r, e);
}

/* Closed -> 5 unreachable calls -> open (refused unsent) -> after the
 * open period one probe -> it fails: open for twice as long -> the store
 * is back: the next probe closes it. The default periods (100 ms doubling
 * to 2 s) times tu_slowdown(), so that "still open" is checked well inside
 * a period; each wait lasts until the period has surely passed, measured
 * from the call that started it. */
static void test_breaker_cycle(void **state)
{
	(void)state;
	flaky *f;
	drl_store *s = open_flaky(&f);
	const int64_t period = tu_bound_ms(100) * MS;
	drl__breaker_init(&s->breaker, 5, period, 20 * period);
	drl_limiter *l;
	drl_result r;
	drl_error e = {0};
	drl_store_stats st;
	assert_int_equal(
		drl_limiter_new(&l, s, "fixed_window:100/1h", NULL, &e), 0);
	assert_int_equal(ask(l, &r, &e), 0);
	assert_int_equal(f->calls, 1);

	f->down = DRL_EUNAVAILABLE;
	int64_t opened = 0;
	for (int i = 0; i < 5; i++) {
		opened = tu_mono_us();
		assert_int_equal(ask(l, &r, &e), DRL_EUNAVAILABLE);
		assert_int_equal(r.allowed, 0);
		assert_non_null(strstr(e.message, "flaky store is down"));
	}
	int64_t open_until = tu_mono_us() + period;
	assert_int_equal(f->calls, 6);
	/* Open: refused without a call, saying so. */
	for (int i = 0; i < 50; i++) {
		assert_int_equal(ask(l, &r, &e), DRL_EUNAVAILABLE);
		assert_int_equal(r.allowed, 0);
	}
	assert_true(tu_mono_us() < opened + period); /* else: slowdown */
	assert_int_equal(f->calls, 6);
	assert_non_null(strstr(e.message, "circuit open"));
	drl_store_stats_get(s, &st);
	assert_int_equal(st.breaker_opens, 1);
	assert_int_equal(st.breaker_rejects, 50);
	assert_int_equal(st.store_failures, 5);

	/* After the period: one probe, which fails; open again for twice
	 * as long. */
	tu_sleep_until_us(open_until);
	int64_t probed = tu_mono_us();
	assert_int_equal(ask(l, &r, &e), DRL_EUNAVAILABLE);
	open_until = tu_mono_us() + 2 * period;
	assert_int_equal(f->calls, 7);
	assert_int_equal(ask(l, &r, &e), DRL_EUNAVAILABLE);
	assert_true(tu_mono_us() < probed + 2 * period); /* else: slowdown */
	assert_int_equal(f->calls, 7);                   /* still open */
	assert_non_null(strstr(e.message, "circuit open"));

	/* The store is back; the next probe closes the breaker. */
	f->down = 0;
	tu_sleep_until_us(open_until);
	assert_int_equal(ask(l, &r, &e), 0);
	assert_int_equal(r.allowed, 1);
	assert_int_equal(f->calls, 8);
	for (int i = 0; i < 10; i++)
		assert_int_equal(ask(l, &r, &e), 0);
	assert_int_equal(f->calls, 18);
	drl_store_stats_get(s, &st);
	assert_int_equal(st.breaker_opens, 2);
	drl_limiter_free(l);
	drl_store_free(s);
}

/* Error replies (DRL_ESTORE: the server is there) never open the breaker,
 * and neither do errors of the caller's (bad input). */
static void test_error_replies_keep_it_closed(void **state)
{
	(void)state;
	flaky *f;
	drl_store *s = open_flaky(&f);
	drl_limiter *l;
	drl_result r;
	drl_error e = {0};
	assert_int_equal(drl_limiter_new(&l, s, "gcra:100/1h", NULL, &e), 0);
	f->down = DRL_ESTORE;
	for (int i = 0; i < 20; i++)
		assert_int_equal(ask(l, &r, &e), DRL_ESTORE);
	assert_int_equal(f->calls, 20);
	f->down = 0;
	for (int i = 0; i < 20; i++)
		assert_int_equal(drl_allow(l, "", 0, 1, &r, &e), DRL_EINVAL);
	assert_int_equal(ask(l, &r, &e), 0);
	drl_store_stats st;
	drl_store_stats_get(s, &st);
	assert_int_equal(st.breaker_opens, 0);
	assert_int_equal(st.store_failures, 20);
	drl_limiter_free(l);
	drl_store_free(s);
}

/* Each policy on a store that is down, with the breaker closed (the first
 * failures) and open; bad input is refused under every policy, never
 * allowed. */
static void test_policies(void **state)
{
	(void)state;
	flaky *f;
	drl_store *s = open_flaky(&f);
	drl_limiter *deny, *allow, *local;
	drl_result r;
	drl_error e = {0};
	assert_int_equal(drl_limiter_new(&deny, s,
					 "token_bucket:3/1h;on_error=deny",
					 NULL, &e),
			 0);
	assert_int_equal(drl_limiter_new(&allow, s,
					 "on_error=allow;token_bucket:3/1h",
					 NULL, &e),
			 0);
	assert_int_equal(drl_limiter_new(&local, s,
					 "token_bucket:3/1h;fixed_window:2/1h;"
					 "on_error=local",
					 NULL, &e),
			 0);
	f->down = DRL_ETIMEDOUT;
	for (int i = 0; i < 10; i++) { /* closed, then open */
		memset(&r, 0x55, sizeof r);
		assert_int_equal(ask(deny, &r, &e), 0);
		assert_int_equal(r.allowed, 0);
		assert_int_equal(r.path, DRL_PATH_FAIL_CLOSED);
		assert_int_equal(r.limit, 3);
		assert_true(r.retry_after_us > 0);
		/* the store's error, then the breaker's once 5 calls of
		 * the three limiters failed (i = 1) */
		assert_int_equal(e.code,
				 i < 2 ? DRL_ETIMEDOUT : DRL_EUNAVAILABLE);

		assert_int_equal(ask(allow, &r, &e), 0);
		assert_int_equal(r.allowed, 1);
		assert_int_equal(r.path, DRL_PATH_FAIL_OPEN);
		assert_int_equal(r.remaining, 0);

		/* The local limits: the tighter one (2 per hour) holds. */
		assert_int_equal(ask(local, &r, &e), 0);
		assert_int_equal(r.path, DRL_PATH_LOCAL);
		assert_int_equal(r.allowed, i < 2);
		if (i >= 2)
			assert_int_equal(r.limit_index, 1);

		for (int j = 0; j < 3; j++) {
			drl_limiter *l = j == 0 ? deny : j == 1 ? allow : local;
			memset(&r, 0x55, sizeof r);
			assert_int_equal(drl_allow(l, NULL, 1, 1, &r, &e),
					 DRL_EINVAL);
			assert_int_equal(r.allowed, 0);
			assert_int_equal(drl_allow(l, "k", 1, -1, &r, &e),
					 DRL_EINVAL);
			assert_int_equal(r.allowed, 0);
		}
	}
	drl_store_stats st;
	drl_store_stats_get(s, &st);
	assert_int_equal(st.fallbacks, 30);
	drl_limiter_free(deny);
	drl_limiter_free(allow);
	drl_limiter_free(local);
	drl_store_free(s);
}

/* Batches go through the same breaker and policy, per item. */
static void test_batch_policy(void **state)
{
	(void)state;
	flaky *f;
	drl_store *s = open_flaky(&f);
	drl_limiter *deny;
	drl_error e = {0};
	assert_int_equal(drl_limiter_new(&deny, s,
					 "fixed_window:3/1h;on_error=deny",
					 NULL, &e),
			 0);
	f->down = DRL_EUNAVAILABLE;
	drl_batch_item it[3] = {{.key = "a", .keylen = 1, .cost = 1},
				{.key = "b", .keylen = 0, .cost = 1},
				{.key = "c", .keylen = 1, .cost = 1}};
	assert_int_equal(drl_allow_batch(deny, it, 3, &e), 0);
	assert_int_equal(it[0].rc, 0);
	assert_int_equal(it[0].result.path, DRL_PATH_FAIL_CLOSED);
	assert_int_equal(it[1].rc, DRL_EINVAL); /* bad input stays bad */
	assert_int_equal(it[1].result.allowed, 0);
	assert_int_equal(it[2].rc, 0);
	assert_int_equal(it[2].result.allowed, 0);
	drl_limiter_free(deny);
	drl_store_free(s);
}

/* The URI options: a store-wide breaker can be tuned or turned off, and
 * nonsense is refused. */
static void test_options(void **state)
{
	(void)state;
	drl_store *s = (drl_store *)&s;
	drl_error e = {0};
	assert_int_equal(drl_store_open(&s,
					"memory://?breaker_failures=0&"
					"breaker_open_ms=10&breaker_max_ms=20",
					&e),
			 0);
	drl_store_free(s);
	static const char *const bad[] = {
		"memory://?breaker_failures=-1",
		"memory://?breaker_open_ms=0",
		"memory://?breaker_open_ms=500&breaker_max_ms=100",
		"memory://?breaker_max_ms=x",
		"memory://?breaker_failures=1&breaker_failures=2",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		s = (drl_store *)&s;
		assert_int_equal(drl_store_open(&s, bad[i], &e), DRL_EINVAL);
		assert_null(s);
		assert_non_null(strstr(e.message, "breaker"));
	}
}

/* drl_mono_us() (what the breaker's open periods are measured on) is
 * CLOCK_MONOTONIC in µs: it lies between two direct reads of that clock,
 * and never goes back. */
static void test_mono_clock(void **state)
{
	(void)state;
	struct timespec a, b;
	int64_t last = 0;
	for (int i = 0; i < 1000; i++) {
		clock_gettime(CLOCK_MONOTONIC, &a);
		int64_t t = drl_mono_us();
		clock_gettime(CLOCK_MONOTONIC, &b);
		assert_true(t >=
			    (int64_t)a.tv_sec * 1000000 + a.tv_nsec / 1000);
		assert_true(t <=
			    (int64_t)b.tv_sec * 1000000 + b.tv_nsec / 1000);
		assert_true(t >= last);
		last = t;
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mono_clock),
		cmocka_unit_test(test_breaker_cycle),
		cmocka_unit_test(test_error_replies_keep_it_closed),
		cmocka_unit_test(test_policies),
		cmocka_unit_test(test_batch_policy),
		cmocka_unit_test(test_options),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
