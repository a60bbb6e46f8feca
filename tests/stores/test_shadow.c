/*
 * shadow=1: a limiter decides and consumes exactly as without it, but
 * answers allowed; would_allow and the other fields are the real decision
 * and the store counts shadow denials. The same random traffic with and
 * without shadow=1 on memory, Redis (tx=lua, tx=watch) and memcached
 * (real servers, started here), every algorithm and policies, single
 * calls and batches; with the near cache and the on_error policy; the
 * option's grammar. Redis Cluster: tests/stores/test_ops_cluster.c.
 */
#include "ops_check.h"
#include "spy_backend.h"
#include "testutil.h"

static void test_every_store(void **state)
{
	(void)state;
	ops_every_store(ops_check_shadow);
}

static void expect_spec_error(const char *spec, const char *msg)
{
	drl_store *st;
	drl_limiter *l = NULL;
	drl_error err = {0};
	assert_int_equal(drl_store_open(&st, "memory://", NULL), 0);
	assert_int_equal(drl_limiter_new(&l, st, spec, NULL, &err), DRL_EINVAL);
	assert_null(l);
	if (strstr(err.message, msg) == NULL)
		fail_msg("%s: \"%s\" lacks \"%s\"", spec, err.message, msg);
	drl_store_free(st);
}

static void test_grammar(void **state)
{
	(void)state;
	expect_spec_error("fixed_window:1/1s;shadow=2", "shadow=2 must be 0");
	expect_spec_error("fixed_window:1/1s;shadow=", "shadow= must be 0");
	expect_spec_error("fixed_window:1/1s;shadow=yes", "must be 0 or 1");
	expect_spec_error("shadow=1;fixed_window:1/1s;shadow=0",
			  "\"shadow\" given twice");
	expect_spec_error("shadow=1", "has options but no limit");
	/* anywhere in the policy; shadow=0 is the default */
	int64_t now = INT64_C(1700000000) * SEC;
	static const char *const on[] = {"shadow=1;fixed_window:1/1s",
					 "fixed_window:1/1s;shadow=1"};
	for (int i = 0; i < 2; i++) {
		tu t = tu_open("memory://", on[i]);
		assert_int_equal(tu_at(t.lim, "k", 1, now).allowed, 1);
		drl_result r = tu_at(t.lim, "k", 1, now);
		assert_int_equal(r.allowed, 1);
		assert_int_equal(r.would_allow, 0);
		tu_free(&t);
	}
	tu t = tu_open("memory://", "fixed_window:1/1s;shadow=0");
	assert_int_equal(tu_at(t.lim, "k", 1, now).would_allow, 1);
	drl_result r = tu_at(t.lim, "k", 1, now);
	assert_int_equal(r.allowed, 0);
	assert_int_equal(r.would_allow, 0);
	assert_int_equal(tu_stats(t.store).shadow_denials, 0);
	tu_free(&t);
}

/* With block_on_exceed, a shadowed denial the near cache repeats is still
 * answered allowed (path DRL_PATH_NEAR, would_allow 0) and counted; the
 * store consumed only what was allowed. */
static void test_near_cache(void **state)
{
	(void)state;
	tu t = tu_open("memory://",
		       "fixed_window:2/1h;block_on_exceed=1h;shadow=1");
	int64_t now = INT64_C(1700000000) * SEC;
	static const struct {
		int would_allow, path;
	} want[] = {{1, DRL_PATH_STORE},
		    {1, DRL_PATH_STORE},
		    {0, DRL_PATH_STORE},
		    {0, DRL_PATH_NEAR},
		    {0, DRL_PATH_NEAR}};
	for (int i = 0; i < 5; i++) {
		drl_result r = tu_at(t.lim, "k", 1, now);
		assert_int_equal(r.allowed, 1);
		assert_int_equal(r.would_allow, want[i].would_allow);
		assert_int_equal(r.path, want[i].path);
	}
	drl_store_stats s = tu_stats(t.store);
	assert_int_equal(s.shadow_denials, 3);
	assert_int_equal(s.near_denials, 2);
	/* a peek asks the store: two consumed, none left */
	drl_result r = tu_at(t.lim, "k", 0, now);
	assert_int_equal(r.remaining, 0);
	assert_int_equal(r.path, DRL_PATH_STORE);
	tu_free(&t);
}

/* A store failure decided by on_error=deny is a denial like any other:
 * answered allowed. Without an on_error policy the call fails, shadowed
 * or not: an error is not a decision. */
static void test_store_failure(void **state)
{
	(void)state;
	ops_spied deny = ops_spied_open("gcra:5/1s;on_error=deny;shadow=1");
	ops_spied ret = ops_spied_open("gcra:5/1s;shadow=1");
	spy_fail(deny.sp, DRL_EUNAVAILABLE);
	spy_fail(ret.sp, DRL_EUNAVAILABLE);
	drl_result r;
	int64_t now = INT64_C(1700000000) * SEC;
	assert_int_equal(drl_allow_at(deny.l, "k", 1, 1, now, &r, NULL), 0);
	assert_int_equal(r.allowed, 1);
	assert_int_equal(r.would_allow, 0);
	assert_int_equal(r.path, DRL_PATH_FAIL_CLOSED);
	assert_int_equal(tu_stats(deny.st).shadow_denials, 1);
	assert_int_equal(drl_allow_at(ret.l, "k", 1, 1, now, &r, NULL),
			 DRL_EUNAVAILABLE);
	assert_int_equal(r.allowed, 0);
	assert_int_equal(r.would_allow, 0);
	assert_int_equal(tu_stats(ret.st).shadow_denials, 0);
	ops_spied_free(&deny);
	ops_spied_free(&ret);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_store),
		cmocka_unit_test(test_grammar),
		cmocka_unit_test(test_near_cache),
		cmocka_unit_test(test_store_failure),
	};
	return cmocka_run_group_tests(tests, ops_servers_start,
				      ops_servers_stop);
}
