/* Limit spec and policy parsing: every bad part is named, nothing else
 * happens. */
#include "testutil.h"

static drl_store *store;

static int setup(void **state)
{
	(void)state;
	return drl_store_open(&store, NULL, NULL);
}

static int teardown(void **state)
{
	(void)state;
	drl_store_free(store);
	return 0;
}

static void good(const char *spec)
{
	drl_limiter *l = NULL;
	drl_error err = {0};
	int rc = drl_limiter_new(&l, store, spec, NULL, &err);
	if (rc)
		fail_msg("\"%s\" rejected: %s", spec, err.message);
	assert_non_null(l);
	drl_limiter_free(l);
}

/* The spec is refused with DRL_EINVAL and a message holding `part`. */
static void bad(const char *spec, const char *part)
{
	drl_limiter *l = (drl_limiter *)&l;
	drl_error err = {0};
	int rc = drl_limiter_new(&l, store, spec, NULL, &err);
	if (rc != DRL_EINVAL)
		fail_msg("\"%s\" gave %d, expected DRL_EINVAL", spec, rc);
	assert_null(l);
	assert_int_equal(err.code, DRL_EINVAL);
	if (!strstr(err.message, part))
		fail_msg("\"%s\": message \"%s\" does not name \"%s\"", spec,
			 err.message, part);
}

static void test_good_specs(void **state)
{
	(void)state;
	good("fixed_window:100/1m");
	good("fixed_window:100/1m;on_error=deny");
	good("on_error=allow;token_bucket:100/1m,burst=5");
	good("gcra:10/1s;on_error=local;fixed_window:100/1h");
	good("sliding_window:100/1m");
	good("subwindow:100/1m,subwindows=6");
	good("subwindow:100/1m,subwindows=6,trailing=1");
	good("token_bucket:100/1m,burst=20");
	good("gcra:100/1m,burst=20");
	good("sliding_log:100/1m");
	good("fixed_window:1/250ms");
	good("fixed_window:1/1ms");
	good("fixed_window:1000000000/366d");
	good("token_bucket:7/1h");
	good("gcra:1/1d");
	good("sliding_window:60/1m;fixed_window:10000/1d");
	good("sliding_log:10000/1s");
	/* a changed limit (issue 42): every policy where it is defined */
	good("token_bucket:100/1m,on_change=keep_available");
	good("token_bucket:100/1m,burst=5,on_change=scale,version=3");
	good("gcra:100/1m,on_change=additive,version=1000000000");
	good("gcra:100/1m,on_change=reset");
	good("fixed_window:100/1m,on_change=keep_used");
	good("sliding_log:100/1m,on_change=keep_used");
	good("sliding_log:100/1m,on_change=reset,version=2");
}

/* on_change= and version= where the state cannot carry them out. */
static void test_change_refused(void **state)
{
	(void)state;
	bad("fixed_window:100/1m,on_change=scale",
	    "on_change=scale is not defined for fixed_window");
	bad("sliding_window:100/1m,on_change=keep_available", "only keep_used");
	bad("subwindow:100/1m,subwindows=6,on_change=reset",
	    "on_change=reset is not defined for subwindow");
	bad("sliding_log:100/1m,on_change=additive",
	    "on_change=additive is not defined for sliding_log");
	bad("fixed_window:100/1m,version=2", "version= needs a state");
	bad("sliding_log:100/1m,on_change=scale", "only keep_used and reset");
	bad("token_bucket:100/1m,on_change=proportional",
	    "expected keep_used, keep_available, scale, additive or reset");
	bad("token_bucket:100/1m,version=0", "version=0 must be");
	bad("gcra:100/1m,version=1000000001", "from 1 to 1000000000");
	bad("gcra:100/1m,version=1,version=2", "given twice");
}

static void test_bad_specs(void **state)
{
	(void)state;
	bad("", "empty");
	bad("fixed_window", "ALGORITHM:LIMIT/PERIOD");
	bad("nope:1/1s", "unknown algorithm \"nope\"");
	bad("fixed_window:1", "LIMIT/PERIOD");
	bad("fixed_window:0/1s", "LIMIT \"0\"");
	bad("fixed_window:-5/1s", "LIMIT \"-5\"");
	bad("fixed_window:1000000001/1s", "LIMIT \"1000000001\"");
	bad("fixed_window:abc/1s", "LIMIT \"abc\"");
	bad("fixed_window:99999999999999999999/1s", "LIMIT");
	bad("fixed_window:1/0s", "PERIOD \"0s\"");
	bad("fixed_window:1/1", "PERIOD \"1\"");
	bad("fixed_window:1/s", "PERIOD \"s\"");
	bad("fixed_window:1/1w", "PERIOD \"1w\"");
	bad("fixed_window:1/367d", "PERIOD \"367d\"");
	bad("fixed_window:1/99999999999999999999d", "PERIOD");
	bad("fixed_window:1/1s,", "trailing ','");
	bad("fixed_window:1/1s,burst=2", "unknown option \"burst\"");
	bad("token_bucket:1/1s,burst=0", "burst=0");
	bad("token_bucket:1/1s,burst=x", "burst=x");
	bad("token_bucket:1/1s,burst=2,burst=3", "given twice");
	bad("token_bucket:1/1s,burst", "not name=value");
	bad("token_bucket:1/1s,=3", "not name=value");
	bad("token_bucket:1/1s,colour=red", "unknown option \"colour\"");
	bad("subwindow:10/1m,subwindows=0", "subwindows=0");
	bad("subwindow:10/1m,subwindows=61", "subwindows=61");
	bad("subwindow:10/1m,subwindows=7", "sub-window");
	bad("subwindow:10/1m,trailing=2", "trailing=2");
	bad("sliding_log:10001/1s", "at most 10000");
	bad("gcra:1/366d,burst=1000000000", "2^52");
	bad("fixed_window: 1/1s", "spaces");
	bad("fixed_window:1/1s\n", "control");
	bad("fixed_window:1/1s;", "empty limit");
	bad(";fixed_window:1/1s", "empty limit");
	bad("fixed_window:1/1s;fixed_window:1/1s", "appears twice");
	/* on_error: a policy segment, once, with a known value, beside at
	 * least one limit. */
	bad("fixed_window:1/1s;on_error=maybe",
	    "expected deny, allow or local");
	bad("fixed_window:1/1s;on_error=", "expected deny, allow or local");
	bad("fixed_window:1/1s;on_error=deny;on_error=allow", "given twice");
	bad("on_error=deny", "no limit");
	bad("fixed_window:1/1s;onerror=deny", "unknown policy option");
	bad("fixed_window:1/1s,on_error=deny", "unknown option \"on_error\"");
	bad("fixed_window:1/1s;fixed_window:2/2s;fixed_window:3/3s;"
	    "fixed_window:4/4s;fixed_window:5/5s;fixed_window:6/6s;"
	    "fixed_window:7/7s;fixed_window:8/8s;fixed_window:9/9s",
	    "at most 8");
}

static void test_bad_arguments(void **state)
{
	(void)state;
	drl_limiter *l = NULL;
	drl_error err = {0};
	assert_int_equal(drl_limiter_new(NULL, store, "gcra:1/1s", NULL, &err),
			 DRL_EINVAL);
	assert_int_equal(drl_limiter_new(&l, NULL, "gcra:1/1s", NULL, &err),
			 DRL_EINVAL);
	assert_non_null(strstr(err.message, "store"));
	assert_int_equal(drl_limiter_new(&l, store, NULL, NULL, &err),
			 DRL_EINVAL);
	assert_non_null(strstr(err.message, "spec"));
	char prefix[200];
	memset(prefix, 'p', sizeof prefix - 1);
	prefix[sizeof prefix - 1] = '\0';
	assert_int_equal(drl_limiter_new(&l, store, "gcra:1/1s", prefix, &err),
			 DRL_EINVAL);
	assert_non_null(strstr(err.message, "prefix"));
	/* braces would move the key's hash tag: refused */
	assert_int_equal(drl_limiter_new(&l, store, "gcra:1/1s", "a{b", &err),
			 DRL_EINVAL);
	assert_non_null(strstr(err.message, "hash tag"));
	assert_int_equal(drl_limiter_new(&l, store, "gcra:1/1s", "}", &err),
			 DRL_EINVAL);
	assert_null(l);
	/* no error struct: still refused, no crash */
	assert_int_equal(drl_limiter_new(&l, store, "junk", NULL, NULL),
			 DRL_EINVAL);
	drl_limiter_free(NULL);
}

static void test_bad_uris(void **state)
{
	(void)state;
	drl_store *s = NULL;
	drl_error err = {0};
	assert_int_equal(drl_store_open(&s, "nosuch://x", &err), DRL_EINVAL);
	assert_non_null(strstr(err.message, "nosuch"));
	assert_null(s);
	assert_int_equal(drl_store_open(&s, "memory", &err), DRL_EINVAL);
	assert_int_equal(drl_store_open(&s, "memory://?bogus=1", &err),
			 DRL_EINVAL);
	assert_non_null(strstr(err.message, "bogus"));
	assert_int_equal(drl_store_open(NULL, "memory://", &err), DRL_EINVAL);
	drl_store_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_specs),
		cmocka_unit_test(test_bad_specs),
		cmocka_unit_test(test_change_refused),
		cmocka_unit_test(test_bad_arguments),
		cmocka_unit_test(test_bad_uris),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
