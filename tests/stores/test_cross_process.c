/*
 * Cross-process exactness on one hot key: several processes, each with
 * several threads and its own store connections, ask at one fixed instant;
 * the total allowed must equal the limit exactly — for every algorithm on
 * Redis (tx=auto, the default: the counters by plain commands; tx=lua;
 * tx=watch) and on memcached. Real servers, started here.
 * Then the same with the near cache on (block_on_exceed=, near_cache=, at
 * one instant and at the real clock with the sync thread running): still
 * exactly the limit, and most decisions made locally.
 */
#include "hot_key.h"
#include "server_fixture.h"
#include "testutil.h"

static drl_server redis_srv, mc_srv;
static int have_redis, have_mc;

/* Redis with the URI's query *state: tx=auto (none: the counters
 * increment first and give back, INCRBY, PEXPIRE, GET pipelined, no
 * script, the others by their scripts), tx=lua, tx=watch. */
static void test_redis_tx(void **state)
{
	DRL_FIXTURE_NEED(have_redis);
	char uri[128];
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d%s", redis_srv.port,
		 (const char *)*state);
	hot_key_all_specs(uri);
	hot_key_near_cache(uri);
}

/* The store's clock decides; near cache blocks are still on this
 * process's monotonic clock. */
static void test_redis_server_clock_near_cache(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have_redis);
	static const hot_key_opts o = {"near_cache=1;near_cache_sync=20ms", 1,
				       50};
	static const char *const tx[] = {"auto", "lua", "watch"};
	for (int i = 0; i < 3; i++) {
		char uri[128];
		snprintf(uri, sizeof uri,
			 "redis://127.0.0.1:%d?tx=%s&clock=server",
			 redis_srv.port, tx[i]);
		hot_key_all_specs_opts(uri, &o);
	}
}

static void test_memcached(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have_mc);
	char uri[128];
	snprintf(uri, sizeof uri, "memcached://127.0.0.1:%d", mc_srv.port);
	hot_key_all_specs(uri);
	hot_key_near_cache(uri);
}

DRL_FIXTURE_PAIR_GROUP(redis_srv, have_redis, mc_srv, have_mc)

int main(void)
{
	const struct CMUnitTest tests[] = {
		TU_CASE(test_redis_auto, test_redis_tx, ""),
		TU_CASE(test_redis_lua, test_redis_tx, "?tx=lua"),
		TU_CASE(test_redis_watch, test_redis_tx, "?tx=watch"),
		cmocka_unit_test(test_redis_server_clock_near_cache),
		cmocka_unit_test(test_memcached),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
