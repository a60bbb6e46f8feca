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
 * token_bucket and gcra keep their parameters in the state (LIMIT and
 * burst are not in the key): a decision under other parameters converts
 * the state by on_change= in the same step, or decides with a newer
 * version's stored parameters. bucket4j's documented vectors, two clients
 * alternating versions, equal versions refused, and on_change=scale
 * against Python's fractions (tests/fixtures/scale_vectors.py), on every store:
 * the C steps (memory, watch, memcached) and the Lua twins (lua).
 * sliding_log keeps its log (what was used) under a key without LIMIT,
 * and records LIMIT and version in it: a changed LIMIT keeps the count
 * (keep_used) or clears the log (reset), a newer version's LIMIT decides,
 * and a log kept from a higher LIMIT is read whole by a lower one.
 */
#include "ops_check.h"
#include "scale_vectors.h"
#include "server_fixture.h"
#include "testutil.h"

#include <string.h>
#include <unistd.h>

#define T0 INT64_C(1700000000000000) /* inside one hour and one day */

/* One decision at time t: what remains, and whether it was allowed. */
static int64_t allow_t(drl_limiter *l, int64_t cost, int64_t t, int *allowed)
{
	drl_result r;
	drl_error err = {0};
	if (drl_allow_at(l, "k", 1, cost, t, &r, &err) != 0)
		fail_msg("drl_allow_at: %s", err.message);
	*allowed = r.allowed;
	return r.remaining;
}

static int64_t allow(drl_limiter *l, int64_t cost, int *allowed)
{
	return allow_t(l, cost, T0, allowed);
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

/* sliding_log:10/1m with 6 used (at distinct times: 6 entries), raised
 * to 20: exactly 14 more admitted; lowered to 5: denied, and the denial
 * consumes nothing (14 left under 20 after it). */
static void log_keeps_count(drl_store *s, const char *where, int n)
{
	char prefix[48];
	snprintf(prefix, sizeof prefix, "lk:%d:%d:", (int)getpid(), n);
	drl_limiter *l10 = tu_limiter(s, "sliding_log:10/1m", prefix),
		    *l20 = tu_limiter(s, "sliding_log:20/1m", prefix),
		    *l5 = tu_limiter(s, "sliding_log:5/1m", prefix);
	const int64_t ms = 1000;
	int ok, got = 0;
	for (int k = 0; k < 6; k++) {
		(void)allow_t(l10, 1, T0 + k * ms, &ok);
		got += ok;
	}
	assert_int_equal(got, 6);
	int64_t rem = allow_t(l5, 1, T0 + 10 * ms, &ok);
	if (ok || rem != 0)
		fail_msg("%s sliding_log: lowered to 5 after 6 used: allowed "
			 "%d, %lld left (want 0, 0)",
			 where, ok, (long long)rem);
	rem = allow_t(l20, 0, T0 + 11 * ms, &ok);
	if (rem != 14)
		fail_msg("%s sliding_log: raised to 20 after 6 used and a "
			 "denial under 5: %lld left (want 14)",
			 where, (long long)rem);
	int more = 0;
	for (int k = 0; k < 30; k++) {
		(void)allow_t(l20, 1, T0 + (20 + k) * ms, &ok);
		more += ok;
	}
	if (more != 14)
		fail_msg("%s sliding_log: %d more admitted under 20 (want 14)",
			 where, more);
	drl_limiter_free(l10);
	drl_limiter_free(l20);
	drl_limiter_free(l5);
}

/* on_change=reset clears the log once: 6 used of 10, a decision under
 * 20,on_change=reset leaves 19; the old spec (keep_used) then counts that
 * one (8 left of 10 after its own). With versions the newer reset is not
 * undone by the older spec, nor repeated: v1 follows v2's LIMIT and log. */
static void log_reset(drl_store *s, const char *where, int n)
{
	for (int v = 0; v < 2; v++) {
		char prefix[48];
		snprintf(prefix, sizeof prefix, "lz:%d:%d:%d:", (int)getpid(),
			 n, v);
		drl_limiter *a = tu_limiter(s,
					    v ? "sliding_log:10/1m,version=1"
					      : "sliding_log:10/1m",
					    prefix),
			    *b = tu_limiter(
				    s,
				    v ? "sliding_log:20/1m,on_change=reset,"
					"version=2"
				      : "sliding_log:20/1m,on_change=reset",
				    prefix);
		int ok;
		for (int k = 0; k < 6; k++)
			(void)allow_t(a, 1, T0 + k, &ok);
		int64_t rem = allow_t(b, 1, T0 + 10, &ok);
		if (!ok || rem != 19)
			fail_msg("%s sliding_log: reset to 20 after 6 used: "
				 "%lld left (want 19)",
				 where, (long long)rem);
		rem = allow_t(a, 1, T0 + 11, &ok);
		int64_t want = v ? 18 : 8; /* v1 follows v2: 20 */
		if (!ok || rem != want)
			fail_msg("%s sliding_log%s: back to the old spec after "
				 "a reset: %lld left (want %lld)",
				 where, v ? " with versions" : "",
				 (long long)rem, (long long)want);
		/* without versions each change clears it again (a look
		 * shows it); with them v2 finds its own LIMIT: nothing to
		 * take over */
		rem = allow_t(b, 0, T0 + 12, &ok);
		want = v ? 18 : 20;
		if (rem != want)
			fail_msg("%s sliding_log%s: a look under the reset "
				 "spec again: %lld left (want %lld)",
				 where, v ? " with versions" : "",
				 (long long)rem, (long long)want);
		drl_limiter_free(a);
		drl_limiter_free(b);
	}
}

/* A log kept from a higher LIMIT (300 entries, 4.8 KB) is read whole by
 * a spec of 5, which denies and records itself over it, entries and all:
 * back under 400, exactly the 100 left are admitted (nothing dropped,
 * nothing minted). */
static void log_from_higher_limit(drl_store *s, const char *where, int n)
{
	char prefix[48];
	snprintf(prefix, sizeof prefix, "lh:%d:%d:", (int)getpid(), n);
	drl_limiter *big = tu_limiter(s, "sliding_log:400/1h", prefix),
		    *small = tu_limiter(s, "sliding_log:5/1h", prefix);
	int ok, got = 0;
	for (int k = 0; k < 300; k++) {
		(void)allow_t(big, 1, T0 + k, &ok);
		got += ok;
	}
	assert_int_equal(got, 300);
	int64_t rem = allow_t(small, 1, T0 + 400, &ok);
	if (ok || rem != 0)
		fail_msg("%s sliding_log: 5 on a log of 300: allowed %d, %lld "
			 "left (want 0, 0)",
			 where, ok, (long long)rem);
	for (int k = 0; k < 150; k++) {
		(void)allow_t(big, 1, T0 + 500 + k, &ok);
		got += ok;
	}
	if (got != 400)
		fail_msg("%s sliding_log: back under 400, %d admitted in all "
			 "(want 400)",
			 where, got);
	drl_limiter_free(big);
	drl_limiter_free(small);
}

/* bucket4j's TokensInheritanceStrategy examples: a bucket of 100 with 40
 * available, changed to 200 and to 20, by each policy. */
static void params_vectors(drl_store *s, const char *where, const char *alg,
			   int n)
{
	static const struct {
		const char *policy;
		int64_t to200, to20;
	} want[] = {
		{"keep_available", 40, 20}, {"scale", 80, 8},
		{"additive", 140, 20},      {"reset", 200, 20},
		{"keep_used", 140, 0}, /* 60 used: 20 owed, floor 0 */
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		for (int to = 0; to < 2; to++) {
			char a[64], b[96], prefix[64];
			snprintf(prefix, sizeof prefix,
				 "lp:%d:%d:%zu:%d:", (int)getpid(), n, i, to);
			snprintf(a, sizeof a, "%s:100/1h", alg);
			snprintf(b, sizeof b, "%s:%d/1h,on_change=%s", alg,
				 to ? 20 : 200, want[i].policy);
			drl_limiter *la = tu_limiter(s, a, prefix),
				    *lb = tu_limiter(s, b, prefix);
			int ok;
			(void)allow(la, 60, &ok);
			int64_t rem = allow(lb, 0, &ok);
			int64_t w = to ? want[i].to20 : want[i].to200;
			if (rem != w)
				fail_msg("%s %s: 40 of 100 available, changed "
					 "to %d by %s: %lld available (want "
					 "%lld)",
					 where, alg, to ? 20 : 200,
					 want[i].policy, (long long)rem,
					 (long long)w);
			/* converted once: the old limit now follows it */
			rem = allow(lb, 0, &ok);
			if (rem != w)
				fail_msg("%s %s %s: %lld on the second look "
					 "(want %lld)",
					 where, alg, want[i].policy,
					 (long long)rem, (long long)w);
			drl_limiter_free(la);
			drl_limiter_free(lb);
		}
}

/* Two clients on one key alternate, v1 with 100 (through one-item
 * batches) and v2 with 50: after the first v2 decision they admit
 * together what 50 alone admits, and v1 answers v2's limit. Equal
 * versions with other parameters: DRL_ECORRUPT, under any on_error. */
static void params_versions(drl_store *s, const char *where, const char *alg,
			    int n)
{
	char v1[64], v2[64], v2b[80], one[32], prefix[48], alone[48];
	snprintf(prefix, sizeof prefix, "lv:%d:%d:", (int)getpid(), n);
	snprintf(alone, sizeof alone, "la:%d:%d:", (int)getpid(), n);
	snprintf(v1, sizeof v1, "%s:100/1h,version=1", alg);
	snprintf(v2, sizeof v2, "%s:50/1h,version=2", alg);
	snprintf(v2b, sizeof v2b, "%s:60/1h,version=2;on_error=allow", alg);
	snprintf(one, sizeof one, "%s:50/1h", alg);
	drl_limiter *l1 = tu_limiter(s, v1, prefix),
		    *l2 = tu_limiter(s, v2, prefix),
		    *ref = tu_limiter(s, one, alone);
	int ok, got = 0, want = 0;
	(void)allow(l1, 10, &ok);
	(void)allow(ref, 10, &ok);
	(void)allow(l2, 1, &ok);
	(void)allow(ref, 1, &ok);
	for (int k = 0; k < 120; k++) {
		drl_result r;
		drl_error err = {0};
		/* v1 through a batch (the twins' batch variant on tx=lua) */
		drl_batch_item it = {.key = "k", .keylen = 1, .cost = 1};
		if (k % 2 ? drl_allow_at(l2, "k", 1, 1, T0, &r, &err)
			  : drl_allow_batch_at(l1, &it, 1, T0, &err) || it.rc)
			fail_msg("%s %s: %s", where, alg, err.message);
		if (k % 2 == 0)
			r = it.result;
		got += r.allowed;
		if (r.limit != 50)
			fail_msg("%s %s: v%d answered limit %lld (want 50)",
				 where, alg, k % 2 ? 2 : 1, (long long)r.limit);
		(void)allow(ref, 1, &ok);
		want += ok;
	}
	if (got != want || want != 39)
		fail_msg("%s %s: v1 and v2 alternating admitted %d, 50 alone "
			 "%d (want 39)",
			 where, alg, got, want);
	drl_limiter *l2b = tu_limiter(s, v2b, prefix);
	drl_result r;
	drl_error err = {0};
	if (drl_allow_at(l2b, "k", 1, 1, T0, &r, &err) != DRL_ECORRUPT ||
	    !strstr(err.message, "version 2"))
		fail_msg("%s %s: version 2 with 60 on version 2 with 50: %s "
			 "(want DRL_ECORRUPT, also under on_error=allow)",
			 where, alg, err.message);
	drl_limiter_free(l1);
	drl_limiter_free(l2);
	drl_limiter_free(l2b);
	drl_limiter_free(ref);
}

/* on_change=scale floors exactly: the level after the change equals
 * Python's floor(Fraction(level * B2, B)), also for a level in a
 * penalty's debt. Under 1/1s,burst=B2 the reset_after of a look is
 * exactly the units missing from full. */
static void params_scale(drl_store *s, const char *where, const char *alg,
			 int n)
{
	const size_t nv = sizeof scale_vectors / sizeof scale_vectors[0];
	for (size_t i = 0; i < nv; i++) {
		char a[96], b[96], prefix[64];
		snprintf(prefix, sizeof prefix, "ls:%d:%d:%zu:", (int)getpid(),
			 n, i);
		snprintf(a, sizeof a, "%s:%lld/1s,burst=%lld", alg,
			 scale_vectors[i].limit, scale_vectors[i].burst);
		snprintf(b, sizeof b, "%s:1/1s,burst=%lld,on_change=scale", alg,
			 scale_vectors[i].burst2);
		drl_limiter *la = tu_limiter(s, a, prefix),
			    *lb = tu_limiter(s, b, prefix);
		drl_result r;
		drl_error err = {0};
		if (drl_allow_at(la, "k", 1, scale_vectors[i].cost, T0, &r,
				 &err) ||
		    (scale_vectors[i].penalty &&
		     drl_adjust_at(la, "k", 1, scale_vectors[i].penalty, T0, &r,
				   &err)))
			fail_msg("%s: %s", a, err.message);
		for (int look = 0; look < 2; look++) {
			if (drl_allow_at(lb, "k", 1, 0,
					 T0 + scale_vectors[i].dt, &r, &err))
				fail_msg("%s: %s", b, err.message);
			long long level = scale_vectors[i].burst2 * 1000000LL -
					  r.reset_after_us;
			if (level != scale_vectors[i].want)
				fail_msg("%s %s vector %zu: scaled level %lld "
					 "(want %lld, Python's fractions)",
					 where, alg, i, level,
					 scale_vectors[i].want);
		}
		drl_limiter_free(la);
		drl_limiter_free(lb);
	}
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
		static const char *const kept[] = {"token_bucket", "gcra"};
		for (int a = 0; a < 2; a++) {
			params_vectors(s, uris[u], kept[a], n++);
			params_versions(s, uris[u], kept[a], n++);
			params_scale(s, uris[u], kept[a], n++);
		}
		log_keeps_count(s, uris[u], n++);
		log_reset(s, uris[u], n++);
		log_from_higher_limit(s, uris[u], n++);
		params_versions(s, uris[u], "sliding_log", n++);
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
