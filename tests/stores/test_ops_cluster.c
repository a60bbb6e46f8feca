/*
 * drl_reset and shadow=1 on a real Redis Cluster of three masters
 * (tx=lua and tx=watch): the checks of tests/fixtures/ops_check.c, whose
 * neighbours share the reset key's hash tag and so its slot and node; and a
 * reset of a policy is one DEL. drl_adjust: the checks of tests/fixtures/adjust_check.c
 * (tx=auto, tx=lua, tx=watch).
 */
#include "adjust_check.h"
#include "cluster_fixture.h"
#include "ops_check.h"
#include "testutil.h"

#include <hiredis/hiredis.h>

static drl_cluster cl;
static char hosts[512];

static drl_store *open_store(const char *tx)
{
	char uri[600];
	snprintf(uri, sizeof uri, "redis-cluster://%s?tx=%s", hosts, tx);
	drl_store *st;
	drl_error err = {0};
	if (drl_store_open(&st, uri, &err))
		fail_msg("%s: %s", uri, err.message);
	return st;
}

/* DEL commands the cluster's masters have run (INFO commandstats). */
static long long del_calls(void)
{
	long long sum = 0;
	for (int i = 0; i < cl.masters; i++) {
		const char *argv[] = {"INFO", "commandstats"};
		redisReply *r = drl_fixture_cluster_command(&cl, i, 2, argv);
		assert_non_null(r);
		const char *p = r->type == REDIS_REPLY_STRING
					? strstr(r->str, "cmdstat_del:calls=")
					: NULL;
		sum += p ? atoll(p + strlen("cmdstat_del:calls=")) : 0;
		freeReplyObject(r);
	}
	return sum;
}

/* A reset of a policy is one DEL on the cluster (its keys share the user
 * key's hash tag, so one slot): atomic there. */
static void one_del(drl_store *st)
{
	drl_limiter *l;
	int64_t now = INT64_C(1700000000) * SEC;
	assert_int_equal(drl_limiter_new(&l, st,
					 "fixed_window:2/1m;sliding_log:3/1m;"
					 "subwindow:4/1m,subwindows=3",
					 "onedel:", NULL),
			 0);
	for (int i = 0; i < 3; i++)
		(void)tu_at(l, "k", 1, now);
	long long before = del_calls();
	assert_int_equal(drl_reset_at(l, "k", 1, now, NULL), 0);
	assert_int_equal(del_calls() - before, 1);
	assert_int_equal(tu_at(l, "k", 1, now).remaining, 1);
	drl_limiter_free(l);
}

/* Both checks, every spec, tx=lua and tx=watch, on one cluster started
 * here (a missing redis-server skips, or fails under CI=true). */
static void test_reset_and_shadow(void **state)
{
	(void)state;
	int rc = drl_fixture_cluster_start(&cl, 3, 0);
	if (rc == 1)
		skip();
	assert_int_equal(rc, 0);
	assert_non_null(drl_fixture_cluster_hosts(&cl, hosts, sizeof hosts));
	static const char *const tx[] = {"lua", "watch"};
	for (int i = 0; i < 2; i++) {
		drl_store *a = open_store(tx[i]), *b = open_store(tx[i]);
		one_del(a);
		for (size_t k = 0; k < ops_nspecs; k++) {
			ops_check_reset(a, tx[i], ops_specs[k]);
			ops_check_shadow(a, b, tx[i], ops_specs[k]);
		}
		drl_store_free(a);
		drl_store_free(b);
	}
}

/* drl_adjust on the cluster test_reset_and_shadow started (its own when
 * run alone). */
static void test_adjust(void **state)
{
	(void)state;
	if (cl.masters == 0) {
		int rc = drl_fixture_cluster_start(&cl, 3, 0);
		if (rc == 1)
			skip();
		assert_int_equal(rc, 0);
		assert_non_null(
			drl_fixture_cluster_hosts(&cl, hosts, sizeof hosts));
	}
	static const char *const tx[] = {"auto", "lua", "watch"};
	for (int i = 0; i < 3; i++) {
		char uri[600];
		snprintf(uri, sizeof uri, "redis-cluster://%s?tx=%s", hosts,
			 tx[i]);
		adjust_check_exact(uri);
		adjust_check_policy(uri);
		adjust_check_agrees(uri);
		adjust_check_hot_key(uri);
		adjust_check_options(uri);
		adjust_check_async(uri);
		adjust_check_bad_input(uri);
	}
}

static int teardown(void **state)
{
	(void)state;
	drl_fixture_cluster_stop(&cl); /* safe when it never started */
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reset_and_shadow),
		cmocka_unit_test(test_adjust),
	};
	return cmocka_run_group_tests(tests, NULL, teardown);
}
