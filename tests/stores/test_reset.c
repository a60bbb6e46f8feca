/*
 * drl_reset: a key decides as if never seen afterwards, on every limit of
 * a policy, on memory, Redis (tx=lua, tx=watch, clock=server) and
 * memcached (real servers, started here), for every algorithm; its
 * neighbours (other user keys sharing its bytes, prefixes sharing its hash
 * tag, other limits) are untouched; near cache blocks are dropped; bad
 * input and stores of an older vtable delete nothing. Redis Cluster:
 * tests/stores/test_ops_cluster.c.
 */
#include "ops_check.h"
#include "server_fixture.h"
#include "spy_backend.h"
#include "testutil.h"

static void reset_one(drl_store *a, drl_store *b, const char *name,
		      const char *spec)
{
	(void)b;
	ops_check_reset(a, name, spec);
}

static void test_every_store(void **state)
{
	(void)state;
	ops_every_store(reset_one);
}

/* drl_reset at the clock drl_allow uses: the real-time clock, or the
 * store's (clock=server). Limits with no window edge in sight (a day's
 * window: the test would have to straddle midnight UTC). */
static void reset_at_clock(const char *uri)
{
	static const char *const specs[] = {
		"token_bucket:3/1h", "sliding_log:3/1h", "fixed_window:3/1d",
		"sliding_window:3/1d;gcra:3/1h"};
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
		tu t = tu_open(uri, specs[i]);
		drl_result r;
		drl_error err = {0};
		for (int k = 0; k < 4; k++)
			assert_int_equal(drl_allow(t.lim, "k", 1, 1, &r, &err),
					 0);
		assert_int_equal(r.allowed, 0);
		assert_int_equal(drl_reset(t.lim, "k", 1, &err), 0);
		assert_int_equal(drl_allow(t.lim, "k", 1, 1, &r, &err), 0);
		assert_int_equal(r.allowed, 1);
		assert_int_equal(r.remaining, 2);
		tu_free(&t);
	}
}

static void test_real_clock(void **state)
{
	(void)state;
	char uris[OPS_URIS_MAX][OPS_URI_MAX];
	size_t nuris = ops_store_uris(uris);
	for (size_t u = 0; u < nuris; u++)
		reset_at_clock(uris[u]);
	const drl_server *redis = ops_redis();
	if (redis == NULL)
		return;
	char uri[OPS_URI_MAX];
	for (int lua = 0; lua < 2; lua++) {
		snprintf(uri, sizeof uri,
			 "redis://127.0.0.1:%d?tx=%s&clock=server", redis->port,
			 lua ? "lua" : "watch");
		reset_at_clock(uri);
	}
}

/* A store's denial repeated locally (block_on_exceed) is forgotten with
 * the key: the next request goes to the store and is allowed. */
static void test_near_cache(void **state)
{
	(void)state;
	tu t = tu_open("memory://", "fixed_window:2/1h;block_on_exceed=1h");
	int64_t now = INT64_C(1700000000) * SEC;
	assert_int_equal(tu_at(t.lim, "k", 1, now).allowed, 1);
	assert_int_equal(tu_at(t.lim, "k", 1, now).allowed, 1);
	assert_int_equal(tu_at(t.lim, "k", 1, now).path, DRL_PATH_STORE);
	drl_result r = tu_at(t.lim, "k", 1, now);
	assert_int_equal(r.allowed, 0);
	assert_int_equal(r.path, DRL_PATH_NEAR);
	assert_int_equal(drl_reset_at(t.lim, "k", 1, now, NULL), 0);
	r = tu_at(t.lim, "k", 1, now);
	assert_int_equal(r.allowed, 1);
	assert_int_equal(r.path, DRL_PATH_STORE);
	assert_int_equal(r.remaining, 1);

	/* the same on the real clock (blocks on the monotonic one) */
	drl_error err = {0};
	for (int k = 0; k < 4; k++)
		assert_int_equal(drl_allow(t.lim, "m", 1, 1, &r, &err), 0);
	assert_int_equal(r.path, DRL_PATH_NEAR);
	assert_int_equal(drl_reset(t.lim, "m", 1, &err), 0);
	assert_int_equal(drl_allow(t.lim, "m", 1, 1, &r, &err), 0);
	assert_int_equal(r.allowed, 1);
	assert_int_equal(r.path, DRL_PATH_STORE);
	assert_int_equal(tu_stats(t.store).near_denials, 2); /* one each */
	tu_free(&t);
}

/* on_error=local keeps a copy of the limits in this process: a reset
 * forgets the key there too, also while the store is away (the reset
 * then returns the store's error). */
static void test_on_error_local(void **state)
{
	(void)state;
	ops_spied s = ops_spied_open("fixed_window:1/1h;on_error=local");
	int64_t now = INT64_C(1700000000) * SEC;
	spy_fail(s.sp, DRL_EUNAVAILABLE);
	drl_result r = tu_at(s.l, "k", 1, now);
	assert_int_equal(r.path, DRL_PATH_LOCAL);
	assert_int_equal(tu_at(s.l, "k", 1, now).allowed, 0);
	spy_fail(s.sp, 0);
	assert_int_equal(drl_reset_at(s.l, "k", 1, now, NULL), 0);
	spy_fail(s.sp, DRL_EUNAVAILABLE);
	r = tu_at(s.l, "k", 1, now);
	assert_int_equal(r.path, DRL_PATH_LOCAL);
	assert_int_equal(r.allowed, 1);
	/* with the store away: the store's error, the local copy reset */
	assert_int_equal(tu_at(s.l, "k", 1, now).allowed, 0);
	drl_error err = {0};
	assert_int_equal(drl_reset_at(s.l, "k", 1, now, &err),
			 DRL_EUNAVAILABLE);
	assert_int_equal(tu_at(s.l, "k", 1, now).allowed, 1);
	ops_spied_free(&s);
}

/* A reset is one del() of every key of the policy (Redis: one DEL, atomic
 * on the server), and nothing else: no read, no clock. */
static void test_one_delete(void **state)
{
	(void)state;
	char uris[OPS_URIS_MAX][OPS_URI_MAX];
	size_t nuris = ops_store_uris(uris);
	const char *spec = "sliding_window:5/1m;subwindow:6/1m,subwindows=4;"
			   "gcra:3/40s";
	int64_t now = INT64_C(1700000000) * SEC;
	for (size_t u = 0; u < nuris; u++) {
		spy *sp;
		drl_store *st = spy_open(uris[u], &sp);
		drl_limiter *l;
		assert_int_equal(drl_limiter_new(&l, st, spec, "one:", NULL),
				 0);
		for (int i = 0; i < 4; i++)
			(void)tu_at(l, "k", 1, now);
		assert_int_equal(tu_at(l, "k", 1, now).allowed, 0);
		spy_reset(sp);
		assert_int_equal(drl_reset_at(l, "k", 1, now, NULL), 0);
		spy_counts c = spy_get(sp);
		if (c.del != 1 || spy_total(sp) != 1)
			fail_msg("%s: %lu del() calls, %lu calls in all",
				 uris[u], c.del, spy_total(sp));
		assert_int_equal(tu_at(l, "k", 1, now).remaining, 2);
		drl_limiter_free(l);
		drl_store_free(st);
	}
}

/* Bad arguments: DRL_EINVAL naming them, and no call reaches the store. */
static void test_bad_input(void **state)
{
	(void)state;
	ops_spied s = ops_spied_open("fixed_window:1/1h");
	drl_limiter *l = s.l;
	int64_t now = INT64_C(1700000000) * SEC;
	assert_int_equal(tu_at(l, "k", 1, now).allowed, 1);
	spy_reset(s.sp);
	static const struct {
		int null_limiter, null_key;
		size_t keylen;
		int64_t now;
		const char *msg;
	} rows[] = {
		{1, 0, 1, 0, "NULL limiter"},
		{0, 1, 1, 0, "NULL key"},
		{0, 0, 0, 0, "key length 0"},
		{0, 0, DRL_KEY_MAX + 1, 0, "key length 1048577"},
		{0, 0, 1, -1, "time -1"},
		{0, 0, 1, DRL_TIME_MAX_US + 1, "outside"},
	};
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		drl_error err = {0};
		int rc = drl_reset_at(rows[i].null_limiter ? NULL : l,
				      rows[i].null_key ? NULL : "k",
				      rows[i].keylen,
				      rows[i].now ? rows[i].now : now, &err);
		assert_int_equal(rc, DRL_EINVAL);
		assert_int_equal(err.code, DRL_EINVAL);
		if (strstr(err.message, rows[i].msg) == NULL)
			fail_msg("row %zu: \"%s\" lacks \"%s\"", i, err.message,
				 rows[i].msg);
	}
	assert_int_equal(drl_reset(NULL, "k", 1, NULL), DRL_EINVAL);
	assert_int_equal(drl_reset(l, "k", 0, NULL), DRL_EINVAL);
	assert_int_equal(spy_total(s.sp), 0);
	/* nothing was deleted: the key is still spent */
	assert_int_equal(tu_at(l, "k", 1, now).allowed, 0);
	ops_spied_free(&s);
}

/* A store written for vtable version 3 has no del(): DRL_ENOTSUP with a
 * message that says why, its slot never read, nothing called. */
static void test_old_store(void **state)
{
	(void)state;
	ops_spied s = ops_spied_open("token_bucket:1/1h");
	spy_set_version(s.sp, 3);
	int64_t now = INT64_C(1700000000) * SEC;
	assert_int_equal(tu_at(s.l, "k", 1, now).allowed, 1);
	spy_reset(s.sp);
	drl_error err = {0};
	assert_int_equal(drl_reset_at(s.l, "k", 1, now, &err), DRL_ENOTSUP);
	assert_non_null(strstr(err.message, "vtable version 3"));
	assert_int_equal(spy_total(s.sp), 0);
	assert_int_equal(tu_at(s.l, "k", 1, now).allowed, 0);
	ops_spied_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_store),
		cmocka_unit_test(test_real_clock),
		cmocka_unit_test(test_near_cache),
		cmocka_unit_test(test_on_error_local),
		cmocka_unit_test(test_one_delete),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_old_store),
	};
	return cmocka_run_group_tests(tests, ops_servers_start,
				      ops_servers_stop);
}
