/*
 * A limit that changes keeps its count (issue 42, first part): the
 * counter algorithms (fixed_window, sliding_window, subwindow) store what
 * was used, under a key that names the algorithm and its windows but not
 * LIMIT, so a limiter made with another LIMIT on the same prefix and key
 * (drld's reload, a new deploy, a plan upgraded) goes on from the count:
 * c + cost <= L'. Raising the limit admits exactly what it adds; lowering
 * it denies until the count falls under it, and a denial consumes
 * nothing. The same answers on memory, Redis (tx=auto, lua, watch) and
 * memcached (real servers, started here).
 *
 * token_bucket, gcra and sliding_log still start afresh on a changed
 * limit (their state holds times in the old rate; docs/algorithms.md,
 * "When a limit changes"): pinned here so a change of that is seen.
 */
#include "ops_check.h"
#include "server_fixture.h"
#include "testutil.h"

#include <string.h>
#include <unistd.h>

#define T0 INT64_C(1700000000000000) /* inside one hour and one day */

static int64_t allow(drl_limiter *l, int64_t cost, int *allowed)
{
	drl_result r;
	drl_error err = {0};
	if (drl_allow_at(l, "k", 1, cost, T0, &r, &err) != 0)
		fail_msg("drl_allow_at: %s", err.message);
	*allowed = r.allowed;
	return r.remaining;
}

/* On store s, algorithm alg (its options after LIMIT/PERIOD in opt). */
static void counter_keeps_count(drl_store *s, const char *where,
				const char *alg, const char *opt, int n)
{
	char spec[3][96], prefix[48];
	const int limits[3] = {10, 20, 5};
	snprintf(prefix, sizeof prefix, "lc:%d:%d:", (int)getpid(), n);
	drl_limiter *l[3];
	for (int i = 0; i < 3; i++) {
		snprintf(spec[i], sizeof spec[i], "%s:%d/1h%s", alg, limits[i],
			 opt);
		l[i] = tu_limiter(s, spec[i], prefix);
	}
	int ok;
	for (int k = 0; k < 6; k++)
		(void)allow(l[0], 1, &ok);
	assert_int_equal(ok, 1); /* 6 of 10 used */
	int64_t rem = allow(l[1], 1, &ok);
	if (!ok || rem != 13)
		fail_msg("%s %s: raised to 20 after 6 used: allowed %d, %lld "
			 "left (want 1, 13)",
			 where, alg, ok, (long long)rem);
	rem = allow(l[2], 1, &ok);
	if (ok || rem != 0)
		fail_msg("%s %s: lowered to 5 after 7 used: allowed %d, %lld "
			 "left (want 0, 0)",
			 where, alg, ok, (long long)rem);
	/* the denial consumed nothing: 7 used, 13 left of 20 */
	rem = allow(l[1], 0, &ok);
	if (rem != 13)
		fail_msg("%s %s: after the denial under 5, %lld left of 20 "
			 "(want 13)",
			 where, alg, (long long)rem);
	/* raised: exactly what it adds */
	int more = 0;
	for (int k = 0; k < 20; k++) {
		(void)allow(l[1], 1, &ok);
		more += ok;
	}
	if (more != 13)
		fail_msg("%s %s: %d more admitted under 20 (want 13)", where,
			 alg, more);
	for (int i = 0; i < 3; i++)
		drl_limiter_free(l[i]);
}

/* A state in the limit's own rate: a changed limit starts afresh. */
static void rate_state_starts_afresh(drl_store *s, const char *where,
				     const char *alg, int n)
{
	char a[64], b[64], prefix[48];
	snprintf(prefix, sizeof prefix, "lr:%d:%d:", (int)getpid(), n);
	snprintf(a, sizeof a, "%s:10/1h", alg);
	snprintf(b, sizeof b, "%s:20/1h", alg);
	drl_limiter *la = tu_limiter(s, a, prefix),
		    *lb = tu_limiter(s, b, prefix);
	int ok;
	for (int k = 0; k < 6; k++)
		(void)allow(la, 1, &ok);
	int64_t rem = allow(lb, 1, &ok);
	if (!ok || rem != 19)
		fail_msg("%s %s: %lld left after a change to 20 (want 19: "
			 "afresh)",
			 where, alg, (long long)rem);
	drl_limiter_free(la);
	drl_limiter_free(lb);
}

static void test_every_store(void **state)
{
	(void)state;
	char uris[OPS_URIS_MAX + 1][OPS_URI_MAX];
	size_t nuris = ops_store_uris(uris);
	const drl_server *redis = ops_redis();
	if (redis != NULL) /* tx=auto, the default: counters on commands */
		snprintf(uris[nuris++], OPS_URI_MAX, "redis://127.0.0.1:%d",
			 redis->port);
	int n = 0;
	for (size_t u = 0; u < nuris; u++) {
		drl_store *s = tu_store(uris[u]);
		counter_keeps_count(s, uris[u], "fixed_window", "", n++);
		counter_keeps_count(s, uris[u], "sliding_window", "", n++);
		counter_keeps_count(s, uris[u], "subwindow", ",subwindows=6",
				    n++);
		rate_state_starts_afresh(s, uris[u], "token_bucket", n++);
		rate_state_starts_afresh(s, uris[u], "gcra", n++);
		rate_state_starts_afresh(s, uris[u], "sliding_log", n++);
		drl_store_free(s);
	}
}

/* A policy may not hold two limits that count the same state. */
static void test_policy_shares_no_count(void **state)
{
	(void)state;
	drl_store *s = tu_store("memory://");
	drl_limiter *l = NULL;
	drl_error err = {0};
	assert_int_equal(
		drl_limiter_new(&l, s, "fixed_window:10/1h;fixed_window:20/1h",
				NULL, &err),
		DRL_EINVAL);
	assert_non_null(strstr(err.message, "the same algorithm and period"));
	assert_int_equal(
		drl_limiter_new(&l, s, "fixed_window:10/1h;fixed_window:20/1d",
				NULL, &err),
		0);
	drl_limiter_free(l);
	drl_store_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_store),
		cmocka_unit_test(test_policy_shares_no_count),
	};
	return cmocka_run_group_tests(tests, ops_servers_start,
				      ops_servers_stop);
}
