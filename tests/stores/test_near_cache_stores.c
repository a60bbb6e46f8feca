/*
 * The near cache (block_on_exceed=, near_cache=) on real servers, started
 * here: Redis (tx=lua, tx=watch, clock=server) and memcached. (Its
 * exactness, the cross-process hot-key test with the cache on, is in
 * tests/stores/test_cross_process.c.)
 *
 * - The sync thread against a server: a key another client exhausted is
 *   denied locally; after the server is flushed, the local blocks end
 *   within their cap (1 s for near_cache alone) and the key is admitted
 *   again.
 * - Batches on the batched script path: blocked items decided locally,
 *   one script call for the others.
 */
#include "server_fixture.h"

#include "internal.h"

#include "testutil.h" /* after internal.h: tu_wait_blocked */

#include <hiredis/hiredis.h>
#include <time.h>

static drl_server redis_srv, mc_srv;
static int have_redis, have_mc;

static void redis_uri(char *buf, size_t cap, const char *query)
{
	snprintf(buf, cap, "redis://127.0.0.1:%d?%s", redis_srv.port, query);
}

/* ---- the sync thread ------------------------------------------------------ */

static drl_result decide(drl_limiter *l, const char *key)
{
	drl_result r;
	drl_error err = {0};
	if (drl_allow(l, key, strlen(key), 1, &r, &err))
		fail_msg("drl_allow: %s", err.message);
	return r;
}

/* A exhausts a key (its own store, its own connections: another process
 * as far as B can tell) that B used; B's thread learns it. */
static void sync_learns(const char *uri, const char *prefix)
{
	drl_store *sa = tu_store(uri), *sb = tu_store(uri);
	drl_limiter *a = tu_limiter(sa, "gcra:5/1d", prefix);
	drl_limiter *b = tu_limiter(
		sb, "gcra:5/1d;near_cache=1;near_cache_sync=50ms", prefix);
	for (int i = 0; i < 3; i++) /* down to half: the thread peeks it */
		assert_int_equal(decide(b, "k").path, DRL_PATH_STORE);
	for (int i = 0; i < 2; i++)
		assert_int_equal(decide(a, "k").allowed, 1);
	assert_int_equal(decide(a, "k").allowed, 0);
	tu_wait_blocked(b, "k"); /* B's thread learnt it */
	drl_result r = decide(b, "k");
	printf("  %s: B's next decision path %d after %llu syncs\n", uri,
	       r.path, (unsigned long long)tu_stats(sb).near_syncs);
	assert_int_equal(r.path, DRL_PATH_NEAR);
	assert_int_equal(r.allowed, 0);
	drl_limiter_free(a);
	drl_limiter_free(b);
	drl_store_free(sa);
	drl_store_free(sb);
}

static void test_sync_learns(void **state)
{
	(void)state;
	if (getenv("DRL_VALGRIND"))
		skip(); /* the thread's timing: see test_near_cache.c */
	char uri[128];
	if (have_redis) {
		redis_uri(uri, sizeof uri, "tx=lua");
		sync_learns(uri, "ncs1:");
		redis_uri(uri, sizeof uri, "tx=watch&clock=server");
		sync_learns(uri, "ncs2:");
	}
	if (have_mc) {
		snprintf(uri, sizeof uri, "memcached://127.0.0.1:%d",
			 mc_srv.port);
		sync_learns(uri, "ncs3:");
	}
}

/* A blocked key is admitted again within the cap after the server lost
 * its state (FLUSHALL: as a restart would): the price of the cache is on
 * the denial side and bounded. */
static void test_flush_ends_blocks(void **state)
{
	(void)state;
	if (!have_redis || getenv("DRL_VALGRIND"))
		skip(); /* a deadline: see test_near_cache.c */
	char uri[128];
	redis_uri(uri, sizeof uri, "tx=lua");
	drl_store *s = tu_store(uri);
	drl_limiter *l = tu_limiter(
		s, "fixed_window:3/1d;near_cache=1;near_cache_sync=20ms",
		"ncf:");
	for (int i = 0; i < 4; i++)
		decide(l, "k");
	assert_int_equal(decide(l, "k").path, DRL_PATH_NEAR);
	struct timeval tv = {5, 0};
	redisContext *c =
		redisConnectWithTimeout("127.0.0.1", redis_srv.port, tv);
	assert_true(c != NULL && c->err == 0);
	redisReply *rep = redisCommand(c, "FLUSHALL");
	assert_non_null(rep);
	freeReplyObject(rep);
	redisFree(c);
	int64_t t0 = drl_now_us(), waited;
	drl_result r;
	do {
		tu_sleep_ms(5);
		r = decide(l, "k");
		waited = drl_now_us() - t0;
	} while (!r.allowed && waited < 1 * SEC + tu_bound_ms(1000) * MS);
	printf("  admitted again %lld ms after FLUSHALL\n",
	       (long long)(waited / 1000));
	assert_int_equal(r.allowed, 1);
	assert_int_equal(r.path, DRL_PATH_STORE);
	/* Within the cap (1 s) plus a round (100 ms), on a quiet machine:
	 * the bound is generous for a loaded one. */
	assert_true(waited < 1 * SEC + tu_bound_ms(250) * MS);
	drl_limiter_free(l);
	drl_store_free(s);
}

/* Batches on Redis tx=lua's batched path: blocked items do not reach the
 * script. */
static void test_batch_redis(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have_redis);
	char uri[128];
	redis_uri(uri, sizeof uri, "tx=lua");
	drl_store *s = tu_store(uri);
	drl_limiter *l =
		tu_limiter(s, "fixed_window:3/1m;block_on_exceed=1m", "ncb:");
	int64_t t = INT64_C(1699999200) * SEC + SEC;
	drl_batch_item it[5];
	drl_error err = {0};
	for (int i = 0; i < 5; i++)
		it[i] = (drl_batch_item){.key = "a", .keylen = 1, .cost = 1};
	assert_int_equal(drl_allow_batch_at(l, it, 5, t, &err), 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(it[i].result.allowed, i < 3);
	uint64_t scripts = tu_stats(s).scripts;
	it[1] = (drl_batch_item){.key = "b", .keylen = 1, .cost = 1};
	assert_int_equal(drl_allow_batch_at(l, it, 5, t + MS, &err), 0);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(it[i].rc, 0);
		assert_int_equal(it[i].result.path,
				 i == 1 ? DRL_PATH_STORE : DRL_PATH_NEAR);
	}
	assert_int_equal(it[1].result.allowed, 1);
	assert_int_equal(tu_stats(s).scripts - scripts, 1);
	assert_int_equal(tu_stats(s).near_denials, 4);
	drl_limiter_free(l);
	drl_store_free(s);
}

DRL_FIXTURE_PAIR_GROUP(redis_srv, have_redis, mc_srv, have_mc)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batch_redis),
		cmocka_unit_test(test_sync_learns),
		cmocka_unit_test(test_flush_ends_blocks),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
