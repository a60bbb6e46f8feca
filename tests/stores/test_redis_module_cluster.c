/*
 * The Redis module (redis_module/drl_redis.so) on a one-node Redis Cluster:
 * a real redis-server with --cluster-enabled and --loadmodule on free
 * loopback ports (tests/fixtures/cluster_fixture.h). DRL.TWIN declares its
 * key (the first argument: first key 1, last key 1, step 1), so the
 * cluster store routes it as it routes EVALSHA.
 *
 * Cross-process exactness on a hot key under tx=module and tx=auto: every
 * algorithm and a policy of two admit exactly the limit, and they were
 * DRL.TWIN's decisions (INFO commandstats: no EVALSHA), a policy's
 * DRL.POLICY's (its keys share the user key's hash tag: one slot, the
 * groups' keys declared by the legacy range, step 9). A Redis Cluster
 * store has no plain counter commands, so tx=auto's counters are
 * DRL.TWIN's too. Then tx=auto decides as tx=lua on a random sequence,
 * policies too.
 *
 * Under CI=true a missing redis-server or module fails; otherwise skips.
 */
#include "cluster_fixture.h"
#include "hot_key.h"
#include "redis_info.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static drl_cluster cl;
static int have;
static char hosts[64];
static redisContext *node; /* the one node, for INFO and CONFIG */

static const char *const module_args[] = {"--loadmodule", DRL_REDIS_MODULE,
					  NULL};

static int setup(void **state)
{
	(void)state;
	int rc = drl_fixture_module_begin(DRL_REDIS_MODULE, DRL_MODULE_PRELOAD);
	if (rc)
		return rc < 0 ? -1 : 0;
	rc = drl_fixture_cluster_start_with(&cl, 1, 0, module_args);
	drl_fixture_module_end();
	if (rc < 0)
		return -1;
	have = rc == 0;
	if (!have)
		return 0;
	if (drl_fixture_cluster_hosts(&cl, hosts, sizeof hosts) == NULL)
		return -1;
	node = redis_raw_open(cl.node[0].port);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (node)
		redisFree(node);
	drl_fixture_cluster_stop(&cl);
	return 0;
}

/* Processes of threads on one key at one instant, every algorithm and a
 * policy of two, on the cluster with tx=`tx`: exactly the limit, by
 * DRL.TWIN and no script. */
static void hot_key_by_module(const char *tx)
{
	char uri[160];
	snprintf(uri, sizeof uri, "redis-cluster://%s?tx=%s", hosts, tx);
	freeReplyObject(redisCommand(node, "CONFIG RESETSTAT"));
	hot_key_all_specs(uri);
	long long twin = redis_cmd_calls(node, "drl.twin");
	long long sha = redis_cmd_calls(node, "evalsha");
	if (twin == 0 || sha != 0)
		fail_msg("tx=%s on the cluster: %lld DRL.TWIN, %lld EVALSHA",
			 tx, twin, sha);
	/* the policy of two: one DRL.POLICY per decision, routed by its
	 * keys' one slot */
	long long policy = redis_cmd_calls(node, "drl.policy");
	if (policy == 0)
		fail_msg("tx=%s on the cluster: no DRL.POLICY", tx);
	freeReplyObject(redisCommand(node, "CONFIG RESETSTAT"));
	hot_key_run(uri,
		    "token_bucket:400/1h,burst=400;fixed_window:200/1h;"
		    "sliding_log:300/1h",
		    91);
	twin = redis_cmd_calls(node, "drl.twin");
	policy = redis_cmd_calls(node, "drl.policy");
	/* tx=auto: the calls that go out before a connection's server has
	 * answered whether it has the module go limit by limit */
	if ((twin != 0 && strcmp(tx, "module") == 0) || policy == 0)
		fail_msg("tx=%s on the cluster: a policy of three: %lld "
			 "DRL.TWIN, %lld DRL.POLICY",
			 tx, twin, policy);
}

static void test_hot_key_module(void **state)
{
	(void)state;
	if (!have)
		skip();
	hot_key_by_module("module");
}

static void test_hot_key_auto(void **state)
{
	(void)state;
	if (!have)
		skip();
	hot_key_by_module("auto");
}

/* tx=auto (DRL.TWIN) and tx=lua on the cluster: the same decisions on a
 * random sequence of costs (0: a peek) and time steps, every algorithm. */
static void test_auto_as_lua(void **state)
{
	(void)state;
	if (!have)
		skip();
	static const char *const specs[] = {
		"fixed_window:5/1s",
		"sliding_window:5/1s",
		"subwindow:6/1s,subwindows=4,trailing=1",
		"token_bucket:5/1s,burst=7",
		"gcra:4/700ms,burst=3",
		"sliding_log:4/1s",
		/* policies: DRL.POLICY (one slot: the user key's tag) */
		"token_bucket:5/1s,burst=7;fixed_window:4/1s",
		"gcra:4/700ms,burst=3;sliding_log:3/1s;subwindow:6/1s,"
		"subwindows=4",
	};
	char ua[160], ul[160];
	snprintf(ua, sizeof ua, "redis-cluster://%s?tx=auto", hosts);
	snprintf(ul, sizeof ul, "redis-cluster://%s?tx=lua", hosts);
	drl_store *sa = tu_store(ua), *sl = tu_store(ul);
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
		drl_limiter *la = tu_limiter(sa, specs[i], "ca:");
		drl_limiter *ll = tu_limiter(sl, specs[i], "cl:");
		unsigned seed = 31;
		int64_t now = INT64_C(1700000000000000);
		for (int k = 0; k < 100; k++) {
			now += (int64_t)(rand_r(&seed) % 300) * 1000;
			int64_t cost = rand_r(&seed) % 4;
			drl_result a, l;
			drl_error ea = {0}, el = {0};
			int rca = drl_allow_at(la, "u", 1, cost, now, &a, &ea);
			int rcl = drl_allow_at(ll, "u", 1, cost, now, &l, &el);
			if (rca || rcl)
				fail_msg("%s step %d: %s / %s", specs[i], k,
					 ea.message, el.message);
			if (a.allowed != l.allowed || a.limit != l.limit ||
			    a.remaining != l.remaining ||
			    a.reset_after_us != l.reset_after_us ||
			    a.retry_after_us != l.retry_after_us ||
			    a.limit_index != l.limit_index)
				fail_msg("%s step %d: tx=auto and tx=lua "
					 "differ",
					 specs[i], k);
		}
		drl_limiter_free(la);
		drl_limiter_free(ll);
	}
	drl_store_free(sa);
	drl_store_free(sl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hot_key_module),
		cmocka_unit_test(test_hot_key_auto),
		cmocka_unit_test(test_auto_as_lua),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
