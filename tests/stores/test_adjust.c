/*
 * drl_adjust (penalty +delta, reward -delta) on every algorithm and on
 * memory, Redis tx=auto, tx=lua, tx=watch and memcached (real servers,
 * started here; a missing binary skips its stores, or fails under
 * CI=true): the checks of tests/fixtures/adjust_check.c, on each store; and
 * redis-sentinel:// (one sentinel watching the Redis started here) for
 * each tx. Redis Cluster: tests/stores/test_ops_cluster.c.
 */
#include "adjust_check.h"
#include "ops_check.h"
#include "server_fixture.h"
#include "spy_backend.h"
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

/* A case run by test_on_stores: a check and whether memory:// (the
 * reference) is left out. */
typedef struct on_stores {
	void (*check)(const char *uri);
	bool others;
} on_stores;

/* every_store with the case *state (main's table names each). */
static void test_on_stores(void **state)
{
	const on_stores *c = *state;
	every_store(c->check, c->others);
}

/* A case of main's table: NAME runs CHECK on every store (OTHERS: but
 * memory://). */
#define ON_STORES(name, check, others)                                         \
	TU_CASE(name, test_on_stores, (&(const on_stores){(check), (others)}))

/* The sentinel of test_sentinel, stopped by the group's teardown (also
 * when a check fails). */
static drl_server sen;
static int have_sen;

/* Through a sentinel: the store the sentinel names decides, the same
 * checks. */
static void test_sentinel(void **state)
{
	(void)state;
	const drl_server *redis = ops_redis();
	if (redis == NULL)
		skip();
	char line[96];
	snprintf(line, sizeof line, "sentinel monitor adj 127.0.0.1 %d 1",
		 redis->port);
	const char *const conf[] = {line, NULL};
	int rc = drl_fixture_redis_sentinel_start(&sen, conf);
	if (rc == 1)
		skip(); /* no redis-sentinel, not under CI */
	assert_int_equal(rc, 0);
	have_sen = 1;
	static const char *const tx[] = {"auto", "lua", "watch"};
	for (int i = 0; i < 3; i++) {
		char uri[OPS_URI_MAX];
		snprintf(uri, sizeof uri,
			 "redis-sentinel://127.0.0.1:%d/adj?tx=%s", sen.port,
			 tx[i]);
		adjust_check_exact(uri);
		adjust_check_policy(uri);
		adjust_check_agrees(uri);
		adjust_check_hot_key(uri);
	}
}

static int teardown(void **state)
{
	if (have_sen)
		drl_fixture_stop(&sen);
	return ops_servers_stop(state);
}

/* At the real clock, and at the store's (clock=server, every tx). */
static void test_real_clock(void **state)
{
	(void)state;
	every_store(adjust_check_real_clock, false);
	const drl_server *redis = ops_redis();
	if (redis == NULL)
		return;
	static const char *const tx[] = {"auto", "lua", "watch"};
	for (int i = 0; i < 3; i++) {
		char uri[OPS_URI_MAX];
		snprintf(uri, sizeof uri,
			 "redis://127.0.0.1:%d?tx=%s&clock=server", redis->port,
			 tx[i]);
		adjust_check_real_clock(uri);
	}
}

/* A store that fails: the store's error whatever on_error says (nothing
 * was decided for a fallback to act on), and a denial in *result. */
static void test_store_fails(void **state)
{
	(void)state;
	static const char *const specs[] = {
		"fixed_window:5/1m;on_error=allow", "gcra:5/1m;on_error=deny",
		"sliding_log:5/1m;on_error=local", "token_bucket:5/1m"};
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
		ops_spied s = ops_spied_open(specs[i]);
		spy_fail(s.sp, DRL_EUNAVAILABLE);
		drl_result r;
		drl_error err = {0};
		memset(&r, 0x5a, sizeof r);
		int rc = drl_adjust_at(s.l, "k", 1, -2,
				       INT64_C(1700006400000000), &r, &err);
		if (rc != DRL_EUNAVAILABLE || r.allowed || r.would_allow)
			fail_msg("%s: rc %s, allowed %d", specs[i],
				 drl_err_name(rc), r.allowed);
		assert_true(spy_total(s.sp) > 0);
		ops_spied_free(&s);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		ON_STORES(test_exact, adjust_check_exact, false),
		ON_STORES(test_policy, adjust_check_policy, false),
		ON_STORES(test_every_store_agrees, adjust_check_agrees, true),
		ON_STORES(test_hot_key, adjust_check_hot_key, false),
		ON_STORES(test_options, adjust_check_options, false),
		cmocka_unit_test(test_sentinel),
		cmocka_unit_test(test_real_clock),
		cmocka_unit_test(test_store_fails),
		ON_STORES(test_async, adjust_check_async, false),
		ON_STORES(test_bad_input, adjust_check_bad_input, false),
	};
	return cmocka_run_group_tests(tests, ops_servers_start, teardown);
}
