/*
 * Cross-process exactness on one hot key: several processes, each with
 * several threads and its own store connections, ask at one fixed instant;
 * the total allowed must equal the limit exactly — for every algorithm on
 * Redis (tx=lua and tx=watch) and on memcached. Real servers, started here.
 */
#include "hot_key.h"
#include "server_fixture.h"
#include "testutil.h"

static drl_server redis_srv, mc_srv;
static int have_redis, have_mc;

static void test_redis_lua(void **state)
{
	(void)state;
	if (!have_redis)
		skip();
	char uri[128];
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d?tx=lua",
		 redis_srv.port);
	hot_key_all_specs(uri);
}

static void test_redis_watch(void **state)
{
	(void)state;
	if (!have_redis)
		skip();
	char uri[128];
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d?tx=watch",
		 redis_srv.port);
	hot_key_all_specs(uri);
}

static void test_memcached(void **state)
{
	(void)state;
	if (!have_mc)
		skip();
	char uri[128];
	snprintf(uri, sizeof uri, "memcached://127.0.0.1:%d", mc_srv.port);
	hot_key_all_specs(uri);
}

static int setup(void **state)
{
	(void)state;
	int rc = drl_fixture_redis_start(&redis_srv, NULL);
	if (rc < 0)
		return -1;
	have_redis = rc == 0;
	rc = drl_fixture_memcached_start(&mc_srv, NULL);
	if (rc < 0)
		return -1;
	have_mc = rc == 0;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (have_redis)
		drl_fixture_stop(&redis_srv);
	if (have_mc)
		drl_fixture_stop(&mc_srv);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_redis_lua),
		cmocka_unit_test(test_redis_watch),
		cmocka_unit_test(test_memcached),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
