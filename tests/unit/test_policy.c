/* Policies: several limits on one key, checked together; a denial by any
 * consumes nothing from any. */
#include "testutil.h"

/* Limit 0 of the policy, seen alone through the same store and prefix. */
static int64_t remaining_of(drl_store *s, const char *spec, const char *key,
			    int64_t now)
{
	drl_limiter *l;
	assert_int_equal(drl_limiter_new(&l, s, spec, NULL, NULL), 0);
	drl_result r = tu_at(l, key, 0, now);
	drl_limiter_free(l);
	return r.remaining;
}

static void test_all_must_allow(void **state)
{
	(void)state;
	tu t = tu_open(NULL, "fixed_window:2/1s;fixed_window:3/1m");
	drl_limiter *l = t.lim;
	drl_result r = tu_at(l, "u", 1, 0);
	assert_true(r.allowed);
	assert_int_equal(r.remaining, 1); /* the tighter limit's view */
	assert_int_equal(r.limit_index, 0);
	assert_true(tu_at(l, "u", 1, 0).allowed);
	r = tu_at(l, "u", 1, 0);
	assert_false(r.allowed);
	assert_int_equal(r.limit_index, 0);
	assert_int_equal(r.retry_after_us, SEC);
	/* second second: the per-minute limit has one left */
	r = tu_at(l, "u", 1, SEC);
	assert_true(r.allowed);
	assert_int_equal(r.limit_index, 1);
	assert_int_equal(r.remaining, 0);
	r = tu_at(l, "u", 1, SEC);
	assert_false(r.allowed);
	assert_int_equal(r.limit_index, 1);
	assert_int_equal(r.retry_after_us, 59 * SEC);
	/* the per-second limit was refunded: 1 used of 2 */
	assert_int_equal(remaining_of(t.store, "fixed_window:2/1s", "u", SEC),
			 1);
	tu_free(&t);
}

static void test_denial_refunds_every_algorithm(void **state)
{
	(void)state;
	static const char *const first[] = {
		"fixed_window:5/1m",
		"sliding_window:5/1m",
		"subwindow:5/1m,subwindows=6",
		"subwindow:5/1m,subwindows=6,trailing=1",
		"token_bucket:5/1m",
		"gcra:5/1m",
		"sliding_log:5/1m",
	};
	for (size_t i = 0; i < sizeof first / sizeof first[0]; i++) {
		char spec[128];
		snprintf(spec, sizeof spec, "%s;fixed_window:1/1h", first[i]);
		tu t = tu_open(NULL, spec);
		int64_t now = 3600 * SEC + 7;
		assert_true(tu_at(t.lim, "k", 1, now).allowed);
		assert_int_equal(remaining_of(t.store, first[i], "k", now), 4);
		for (int j = 0; j < 10; j++)
			assert_false(tu_at(t.lim, "k", 2, now).allowed);
		if (remaining_of(t.store, first[i], "k", now) != 4)
			fail_msg("%s kept quota of denied requests", first[i]);
		tu_free(&t);
	}
}

/* retry_after of a denial is when every limit would allow. */
static void test_retry_is_the_latest(void **state)
{
	(void)state;
	tu t = tu_open(NULL, "fixed_window:1/1s;fixed_window:1/10s");
	assert_true(tu_at(t.lim, "k", 1, 0).allowed);
	drl_result r = tu_at(t.lim, "k", 1, 500 * MS);
	assert_false(r.allowed);
	assert_int_equal(r.retry_after_us, 9500 * MS);
	assert_int_equal(r.limit_index, 1);
	r = tu_at(t.lim, "k", 2, 500 * MS);
	assert_int_equal(r.retry_after_us, DRL_NEVER);
	tu_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_must_allow),
		cmocka_unit_test(test_denial_refunds_every_algorithm),
		cmocka_unit_test(test_retry_is_the_latest),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
