/*
 * drl_reset and shadow=1 on a real Redis Cluster of three masters
 * (tx=lua and tx=watch): the checks of tests/ops_check.c, whose neighbours
 * share the reset key's hash tag and so its slot and node.
 */
#include "cluster_fixture.h"
#include "ops_check.h"
#include "testutil.h"

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
		for (size_t k = 0; k < ops_nspecs; k++) {
			ops_check_reset(a, tx[i], ops_specs[k]);
			ops_check_shadow(a, b, tx[i], ops_specs[k]);
		}
		drl_store_free(a);
		drl_store_free(b);
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
	};
	return cmocka_run_group_tests(tests, NULL, teardown);
}
