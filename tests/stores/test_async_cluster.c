/*
 * The async API on a real Redis Cluster (three masters, no replicas), with
 * tx=lua and tx=watch: a sequence of requests and of batches decides
 * through the async API exactly what it decides through the blocking
 * calls (tests/fixtures/async_check.c), and a hot key with 400 requests in
 * flight admits exactly its limit. Skips when redis-server is missing, except
 * under CI=true (fails).
 */
#include "async_check.h"
#include "cluster_fixture.h"
#include "testutil.h"

static drl_cluster cl;
static int have_cluster;
static char hosts[256];

static const char *const specs[] = {
	"fixed_window:5/1s",         "sliding_window:5/1s",
	"token_bucket:3/1s,burst=7", "gcra:3/700ms,burst=4",
	"sliding_log:4/300ms",       "sliding_log:4/1s;gcra:2/1s,burst=3",
};

static const char *const hot_specs[] = {
	"fixed_window:100/1h",
	"subwindow:100/1h,subwindows=4",
	"token_bucket:100/1h",
	"sliding_log:100/1h",
};

#define COUNT(x) (sizeof(x) / sizeof((x)[0]))

/* A case: the cluster's tx, and where its key prefixes start (apart per
 * tx). */
typedef struct on_tx {
	const char *tx;
	int n0;
} on_tx;

/* The checks on the case *state's tx. */
static void test_on_cluster(void **state)
{
	DRL_FIXTURE_NEED(have_cluster);
	const char *tx = ((const on_tx *)*state)->tx;
	int n0 = ((const on_tx *)*state)->n0;
	char uri[512];
	snprintf(uri, sizeof uri, "redis-cluster://%s?tx=%s&timeout_ms=%lld",
		 hosts, tx, (long long)tu_bound_ms(2000));
	drl_store *s = tu_store(uri);
	drl_async *a = NULL;
	drl_async_opts o = {.threads = 16};
	assert_int_equal(drl_async_new(&a, &o, NULL), 0);
	for (size_t i = 0; i < COUNT(specs); i++) {
		char what[160];
		snprintf(what, sizeof what, "%s on a cluster, tx=%s", specs[i],
			 tx);
		async_check_equal(a, s, specs[i], what, n0 + (int)i);
	}
	for (size_t i = 0; i < COUNT(hot_specs); i++) {
		char prefix[32], what[160];
		snprintf(prefix, sizeof prefix, "ahot:%d:%zu:", n0, i);
		snprintf(what, sizeof what, "%s on a cluster, tx=%s",
			 hot_specs[i], tx);
		drl_limiter *l = tu_limiter(s, hot_specs[i], prefix);
		async_check_hot(a, l, what, false);
		drl_limiter_free(l);
	}
	drl_async_free(a);
	drl_store_free(s);
}

static const on_tx lua = {"lua", 0}, watch = {"watch", 100};

DRL_FIXTURE_CLUSTER_GROUP(cl, 3, 0, hosts, have_cluster)

int main(void)
{
	const struct CMUnitTest tests[] = {
		TU_CASE(test_lua, test_on_cluster, &lua),
		TU_CASE(test_watch, test_on_cluster, &watch),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
