/*
 * drl_adjust (penalty +delta, reward -delta) on every algorithm and on
 * memory, Redis tx=auto, tx=lua, tx=watch and memcached (real servers,
 * started here; a missing binary skips its stores, or fails under
 * CI=true): the checks of tests/adjust_check.c, on each store. Redis
 * Cluster: tests/test_ops_cluster.c.
 */
#include "adjust_check.h"
#include "ops_check.h"
#include "server_fixture.h"
#include "testutil.h"

#include <stdio.h>

#define URIS_MAX (OPS_URIS_MAX + 1)

/* memory://, Redis tx=lua, tx=watch, memcached (ops_check.h), and Redis
 * tx=auto: how many. */
static size_t store_uris(char uris[URIS_MAX][OPS_URI_MAX])
{
	size_t n = ops_store_uris(uris);
	const drl_server *redis = ops_redis();
	if (redis != NULL)
		snprintf(uris[n++], OPS_URI_MAX, "redis://127.0.0.1:%d?tx=auto",
			 redis->port);
	return n;
}

/* check on every store; `others`: not memory:// (the reference). */
static void every_store(void (*check)(const char *uri), bool others)
{
	char uris[URIS_MAX][OPS_URI_MAX];
	size_t n = store_uris(uris);
	for (size_t u = others ? 1 : 0; u < n; u++)
		check(uris[u]);
}

static void test_exact(void **state)
{
	(void)state;
	every_store(adjust_check_exact, false);
}

static void test_policy(void **state)
{
	(void)state;
	every_store(adjust_check_policy, false);
}

static void test_every_store_agrees(void **state)
{
	(void)state;
	every_store(adjust_check_agrees, true);
}

static void test_hot_key(void **state)
{
	(void)state;
	every_store(adjust_check_hot_key, false);
}

static void test_options(void **state)
{
	(void)state;
	every_store(adjust_check_options, false);
}

static void test_bad_input(void **state)
{
	(void)state;
	every_store(adjust_check_bad_input, false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact),
		cmocka_unit_test(test_policy),
		cmocka_unit_test(test_every_store_agrees),
		cmocka_unit_test(test_hot_key),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_bad_input),
	};
	return cmocka_run_group_tests(tests, ops_servers_start,
				      ops_servers_stop);
}
