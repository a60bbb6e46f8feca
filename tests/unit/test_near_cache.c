/*
 * The near cache (block_on_exceed=, near_cache=; core/near.c) on the
 * memory store, through a spy that counts the calls reaching the store:
 *
 * - a denial of the store blocks the key: later requests of at least the
 *   denied cost are denied here (path DRL_PATH_NEAR) with no store call
 *   until min(retry_after, block_on_exceed) has passed, then the store is
 *   asked again; the result is the store's answer, aged;
 * - a smaller cost, a peek (cost 0), bad input, errors and on_error
 *   fallbacks go to the store (or fail) as without a cache, and errors and
 *   fallbacks never block;
 * - policies, batches, the two time bases, long keys, the table's bound;
 * - the sync thread (near_cache=1): a key another limiter exhausted is
 *   denied here without a store call from the request path, a block is
 *   extended while the store stands by it, and a limiter is freed while
 *   its thread runs;
 * - exactness: threads hammering one key admit exactly LIMIT, for every
 *   algorithm, with most denials answered locally.
 *
 * Rounds are driven by the test (drl__near_manual, drl__near_sync_round_at)
 * wherever the test is about what a round does; the two tests that run the
 * thread on the real clock (test_sync_learns, test_sync_competing) wait for
 * events with generous deadlines and skip under valgrind (DRL_VALGRIND),
 * which slows every thread 20-50x.
 */
#include "hot_key.h"
#include "spy_backend.h"

#include "internal.h"

#include "testutil.h" /* after internal.h: tu_wait_blocked */

#include <pthread.h>
#include <time.h>
#include <unistd.h>

/* A minute- and hour-aligned instant, 2023-11-14T22:00:00Z. */
#define BASE (INT64_C(1699999200) * SEC)

typedef struct fx {
	drl_store *store;
	spy *sp;
	drl_limiter *lim;
} fx;

static fx fx_open(const char *spec)
{
	fx f = {0};
	drl_error err = {0};
	f.store = spy_open("memory://", &f.sp);
	if (drl_limiter_new(&f.lim, f.store, spec, "nc:", &err))
		fail_msg("spec %s: %s", spec, err.message);
	return f;
}

static void fx_free(fx *f)
{
	drl_limiter_free(f->lim);
	drl_store_free(f->store);
}

/* One decision at the real clock; fails the test on an error. */
static drl_result now_(drl_limiter *l, const char *key, int64_t cost)
{
	drl_result r;
	drl_error err = {0};
	if (drl_allow(l, key, strlen(key), cost, &r, &err))
		fail_msg("drl_allow: %s", err.message);
	return r;
}

static bool under_valgrind(void)
{
	return getenv("DRL_VALGRIND") != NULL;
}

/* A local denial: every field. */
static void expect_near(drl_result r, int64_t limit, int64_t retry, int index)
{
	assert_int_equal(r.allowed, 0);
	assert_int_equal(r.path, DRL_PATH_NEAR);
	assert_int_equal(r.limit, limit);
	assert_int_equal(r.remaining, 0);
	assert_int_equal(r.retry_after_us, retry);
	assert_int_equal(r.limit_index, index);
	if (retry != DRL_NEVER)
		assert_true(r.reset_after_us >= retry);
}

/* ---- blocks ------------------------------------------------------------- */

/* After the store's denial: NEAR with no store call until the cap, then
 * the store again; the retry time is the store's, aged. */
static void test_block_until_cap(void **state)
{
	(void)state;
	fx f = fx_open("fixed_window:3/1m;block_on_exceed=10s");
	int64_t t = BASE + SEC;
	for (int i = 0; i < 3; i++)
		assert_int_equal(tu_at(f.lim, "k", 1, t).allowed, 1);
	drl_result r = tu_at(f.lim, "k", 1, t);
	assert_int_equal(r.allowed, 0);
	assert_int_equal(r.path, DRL_PATH_STORE);
	assert_int_equal(r.retry_after_us, 59 * SEC);
	spy_reset(f.sp);
	for (int k = 0; k < 100; k++) {
		int64_t at = t + k * 100 * MS;
		expect_near(tu_at(f.lim, "k", 1, at), 3,
			    59 * SEC - k * 100 * MS, 0);
	}
	expect_near(tu_at(f.lim, "k", 1, t + 10 * SEC - 1), 3, 49 * SEC + 1, 0);
	assert_int_equal(spy_total(f.sp), 0);
	assert_int_equal(tu_stats(f.store).near_denials, 101);
	/* The cap: the store is asked again, and blocks again. */
	r = tu_at(f.lim, "k", 1, t + 10 * SEC);
	assert_true(spy_total(f.sp) > 0);
	assert_int_equal(r.path, DRL_PATH_STORE);
	assert_int_equal(r.retry_after_us, 49 * SEC);
	spy_reset(f.sp);
	expect_near(tu_at(f.lim, "k", 1, t + 10 * SEC + 1), 3, 49 * SEC - 1, 0);
	assert_int_equal(spy_total(f.sp), 0);
	/* Another key is not blocked. */
	assert_int_equal(tu_at(f.lim, "other", 1, t).path, DRL_PATH_STORE);
	/* The window rolled: the store allows again. */
	r = tu_at(f.lim, "k", 1, BASE + 61 * SEC);
	assert_int_equal(r.allowed, 1);
	assert_int_equal(r.path, DRL_PATH_STORE);
	fx_free(&f);
}

/* A retry_after below the cap ends the block at the store's time. */
static void test_block_until_retry(void **state)
{
	(void)state;
	fx f = fx_open("fixed_window:3/1s;block_on_exceed=1m");
	int64_t t = BASE + 200 * MS;
	for (int i = 0; i < 3; i++)
		tu_at(f.lim, "k", 1, t);
	assert_int_equal(tu_at(f.lim, "k", 1, t).retry_after_us, 800 * MS);
	spy_reset(f.sp);
	expect_near(tu_at(f.lim, "k", 1, t + 800 * MS - 1), 3, 1, 0);
	assert_int_equal(spy_total(f.sp), 0);
	drl_result r = tu_at(f.lim, "k", 1, t + 800 * MS);
	assert_int_equal(r.allowed, 1);
	assert_int_equal(r.path, DRL_PATH_STORE);
	fx_free(&f);
}

/* The block covers costs >= the denied one; smaller costs, and peeks,
 * still go to the store. */
static void test_block_by_cost(void **state)
{
	(void)state;
	fx f = fx_open("token_bucket:10/10s;block_on_exceed=1m");
	int64_t t = BASE;
	assert_int_equal(tu_at(f.lim, "k", 8, t).allowed, 1);
	drl_result r = tu_at(f.lim, "k", 5, t);
	assert_int_equal(r.allowed, 0);
	assert_int_equal(r.retry_after_us, 3 * SEC);
	spy_reset(f.sp);
	expect_near(tu_at(f.lim, "k", 5, t + MS), 10, 3 * SEC - MS, 0);
	expect_near(tu_at(f.lim, "k", 6, t + MS), 10, 3 * SEC - MS, 0);
	assert_int_equal(spy_total(f.sp), 0);
	r = tu_at(f.lim, "k", 1, t + MS); /* smaller: the store decides */
	assert_true(spy_total(f.sp) > 0);
	assert_int_equal(r.allowed, 1);
	assert_int_equal(r.path, DRL_PATH_STORE);
	spy_reset(f.sp);
	r = tu_at(f.lim, "k", 0, t + MS); /* a peek: always the store */
	assert_true(spy_total(f.sp) > 0);
	assert_int_equal(r.allowed, 1);
	assert_int_equal(r.path, DRL_PATH_STORE);
	assert_int_equal(r.remaining, 1);
	fx_free(&f);
}

/* A cost above the capacity: DRL_NEVER, remembered for the cap. */
static void test_block_never(void **state)
{
	(void)state;
	fx f = fx_open("fixed_window:3/1m;block_on_exceed=5s");
	int64_t t = BASE + SEC;
	drl_result r = tu_at(f.lim, "k", 4, t);
	assert_int_equal(r.path, DRL_PATH_STORE);
	assert_int_equal(r.retry_after_us, DRL_NEVER);
	spy_reset(f.sp);
	expect_near(tu_at(f.lim, "k", 4, t + SEC), 3, DRL_NEVER, 0);
	expect_near(tu_at(f.lim, "k", INT64_MAX, t + SEC), 3, DRL_NEVER, 0);
	assert_int_equal(spy_total(f.sp), 0);
	assert_int_equal(tu_at(f.lim, "k", 1, t + SEC).allowed, 1);
	spy_reset(f.sp);
	r = tu_at(f.lim, "k", 4, t + 5 * SEC);
	assert_true(spy_total(f.sp) > 0);
	assert_int_equal(r.retry_after_us, DRL_NEVER);
	assert_int_equal(r.path, DRL_PATH_STORE);
	fx_free(&f);
}

/* Errors and on_error fallbacks never block; bad input is refused
 * before the cache, blocked key or not. */
static void test_no_block_from_failures(void **state)
{
	(void)state;
	fx f = fx_open("fixed_window:1/1m;block_on_exceed=1m");
	fx g = fx_open("fixed_window:1/1m;block_on_exceed=1m;on_error=deny");
	fx h = fx_open("fixed_window:1/1m;block_on_exceed=1m;on_error=local");
	int64_t t = BASE + SEC;
	drl_result r;
	drl_error err = {0};
	spy_fail(f.sp, DRL_ESTORE);
	spy_fail(g.sp, DRL_ESTORE);
	spy_fail(h.sp, DRL_ESTORE);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(drl_allow_at(f.lim, "k", 1, 1, t, &r, &err),
				 DRL_ESTORE);
		r = tu_at(g.lim, "k", 1, t);
		assert_int_equal(r.path, DRL_PATH_FAIL_CLOSED);
		r = tu_at(h.lim, "k", 1, t); /* 1 allowed locally, 2 denied */
		assert_int_equal(r.path, DRL_PATH_LOCAL);
		assert_int_equal(r.allowed, i == 0);
	}
	spy_fail(f.sp, 0);
	spy_fail(g.sp, 0);
	spy_fail(h.sp, 0);
	fx *all[] = {&f, &g, &h};
	for (int i = 0; i < 3; i++) {
		spy_reset(all[i]->sp);
		r = tu_at(all[i]->lim, "k", 1, t);
		assert_true(spy_total(all[i]->sp) > 0);
		assert_int_equal(r.allowed, 1);
		assert_int_equal(r.path, DRL_PATH_STORE);
		assert_int_equal(tu_stats(all[i]->store).near_denials, 0);
	}
	/* Now blocked; bad input is still DRL_EINVAL, never NEAR. */
	assert_int_equal(tu_at(f.lim, "k", 1, t).path, DRL_PATH_STORE);
	assert_int_equal(tu_at(f.lim, "k", 1, t).path, DRL_PATH_NEAR);
	assert_int_equal(drl_allow_at(f.lim, "k", 1, -1, t, &r, &err),
			 DRL_EINVAL);
	assert_int_equal(r.path, DRL_PATH_STORE);
	assert_int_equal(drl_allow_at(f.lim, "k", 1, 1, -1, &r, &err),
			 DRL_EINVAL);
	assert_int_equal(drl_allow_at(f.lim, NULL, 1, 1, t, &r, &err),
			 DRL_EINVAL);
	fx_free(&f);
	fx_free(&g);
	fx_free(&h);
}

/* A policy: the block is the policy's answer, naming the limit that
 * denied, and lasts until every limit allows (within the cap). */
static void test_policy(void **state)
{
	(void)state;
	fx f = fx_open(
		"fixed_window:10/1m;fixed_window:2/1s;block_on_exceed=1m");
	int64_t t = BASE + SEC;
	int allowed = 0;
	assert_int_equal(tu_at(f.lim, "k", 1, t).allowed, 1);
	assert_int_equal(tu_at(f.lim, "k", 1, t).allowed, 1);
	drl_result r = tu_at(f.lim, "k", 1, t);
	assert_int_equal(r.limit_index, 1);
	assert_int_equal(r.retry_after_us, SEC);
	spy_reset(f.sp);
	expect_near(tu_at(f.lim, "k", 1, t + 999 * MS), 2, MS, 1);
	assert_int_equal(spy_total(f.sp), 0);
	/* Each second two more (the third is denied by the second limit and
	 * blocked to the next second), until the minute's 10 are spent. */
	for (int s = 1; s <= 4; s++)
		for (int i = 0; i < 3; i++)
			allowed += tu_at(f.lim, "k", 1, t + s * SEC).allowed;
	assert_int_equal(allowed, 8);
	/* The last call of second 4 was the first limit's denial. */
	spy_reset(f.sp);
	expect_near(tu_at(f.lim, "k", 1, t + 5 * SEC), 10, 54 * SEC, 0);
	expect_near(tu_at(f.lim, "k", 1, t + 30 * SEC), 10, 29 * SEC, 0);
	assert_int_equal(spy_total(f.sp), 0);
	fx_free(&f);
}

/* drl_allow (monotonic clock) and drl_allow_at (explicit times) do not
 * use each other's entries. */
static void test_time_bases(void **state)
{
	(void)state;
	fx f = fx_open("fixed_window:3/1d;block_on_exceed=1m");
	int64_t t = BASE + SEC;
	for (int i = 0; i < 4; i++)
		tu_at(f.lim, "k", 1, t);
	spy_reset(f.sp);
	drl_result r = now_(f.lim, "k", 1); /* another day: allowed */
	assert_true(spy_total(f.sp) > 0);
	assert_int_equal(r.path, DRL_PATH_STORE);
	assert_int_equal(r.allowed, 1);
	for (int i = 0; i < 3; i++)
		now_(f.lim, "k", 1);
	spy_reset(f.sp);
	r = now_(f.lim, "k", 1);
	assert_int_equal(r.path, DRL_PATH_NEAR);
	assert_true(r.retry_after_us > 0);
	assert_int_equal(spy_total(f.sp), 0);
	/* The explicit entry was replaced: the store is asked again. */
	r = tu_at(f.lim, "k", 1, t + MS);
	assert_true(spy_total(f.sp) > 0);
	assert_int_equal(r.path, DRL_PATH_STORE);
	assert_int_equal(r.allowed, 0);
	fx_free(&f);
}

/* Batches: blocked items are decided here, the others by the store, whose
 * denials block; a batch of blocked items makes no store call. */
static void test_batch(void **state)
{
	(void)state;
	fx f = fx_open("fixed_window:3/1m;block_on_exceed=1m");
	int64_t t = BASE + SEC;
	drl_batch_item it[5];
	drl_error err = {0};
	for (int i = 0; i < 5; i++)
		it[i] = (drl_batch_item){.key = "a", .keylen = 1, .cost = 1};
	assert_int_equal(drl_allow_batch_at(f.lim, it, 5, t, &err), 0);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(it[i].rc, 0);
		assert_int_equal(it[i].result.allowed, i < 3);
		assert_int_equal(it[i].result.path, DRL_PATH_STORE);
	}
	spy_reset(f.sp);
	it[0] = (drl_batch_item){.key = "a", .keylen = 1, .cost = 1};
	it[1] = (drl_batch_item){.key = "b", .keylen = 1, .cost = 1};
	it[2] = (drl_batch_item){.key = "a", .keylen = 1, .cost = 2};
	it[3] = (drl_batch_item){.key = NULL, .keylen = 1, .cost = 1};
	it[4] = (drl_batch_item){.key = "a", .keylen = 1, .cost = 0};
	assert_int_equal(drl_allow_batch_at(f.lim, it, 5, t + MS, &err), 0);
	expect_near(it[0].result, 3, 59 * SEC - MS, 0);
	assert_int_equal(it[1].result.path, DRL_PATH_STORE);
	assert_int_equal(it[1].result.allowed, 1);
	expect_near(it[2].result, 3, 59 * SEC - MS, 0);
	assert_int_equal(it[3].rc, DRL_EINVAL);
	assert_int_equal(it[4].result.path, DRL_PATH_STORE); /* a peek */
	assert_true(spy_total(f.sp) > 0);
	spy_reset(f.sp);
	it[2].cost = 1;
	assert_int_equal(drl_allow_batch_at(f.lim, it, 3, t + 2 * MS, &err), 0);
	assert_int_equal(it[1].result.path, DRL_PATH_STORE); /* b: 2 of 3 */
	spy_reset(f.sp);
	it[1].key = "a";
	assert_int_equal(drl_allow_batch_at(f.lim, it, 3, t + 3 * MS, &err), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(it[i].result.path, DRL_PATH_NEAR);
	assert_int_equal(spy_total(f.sp), 0);
	/* drl_allow_batch: the monotonic base, like drl_allow. */
	it[0] = (drl_batch_item){.key = "c", .keylen = 1, .cost = 4};
	assert_int_equal(drl_allow_batch(f.lim, it, 1, &err), 0);
	assert_int_equal(it[0].result.retry_after_us, DRL_NEVER);
	spy_reset(f.sp);
	assert_int_equal(drl_allow_batch(f.lim, it, 1, &err), 0);
	expect_near(it[0].result, 3, DRL_NEVER, 0);
	assert_int_equal(spy_total(f.sp), 0);
	assert_int_equal(tu_stats(f.store).near_denials, 8);
	fx_free(&f);
}

/* Keys longer than an entry holds inline, and longer than the store keys
 * spell out (their SHA-256 names them): compared whole. */
static void test_long_keys(void **state)
{
	(void)state;
	fx f = fx_open("fixed_window:1/1m;block_on_exceed=1m");
	int64_t t = BASE + SEC;
	static const size_t lens[] = {24, 25, 100, 128, 129, 5000};
	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
		char *a = malloc(lens[i]), *b = malloc(lens[i]);
		drl_result r;
		drl_error err = {0};
		assert_non_null(a);
		assert_non_null(b);
		memset(a, (int)('a' + i), lens[i]);
		memcpy(b, a, lens[i]);
		b[lens[i] - 1] = 'y';
		for (int j = 0; j < 2; j++)
			assert_int_equal(
				drl_allow_at(f.lim, a, lens[i], 1, t, &r, &err),
				0);
		assert_int_equal(r.path, DRL_PATH_STORE);
		assert_int_equal(
			drl_allow_at(f.lim, a, lens[i], 1, t, &r, &err), 0);
		assert_int_equal(r.path, DRL_PATH_NEAR);
		assert_int_equal(
			drl_allow_at(f.lim, b, lens[i], 1, t, &r, &err), 0);
		assert_int_equal(r.path, DRL_PATH_STORE);
		assert_int_equal(r.allowed, 1);
		assert_int_equal(
			drl_allow_at(f.lim, a, lens[i] - 1, 1, t, &r, &err), 0);
		assert_int_equal(r.path, DRL_PATH_STORE);
		free(a);
		free(b);
	}
	fx_free(&f);
}

/* near_cache_keys bounds the table: with 8 entries (one bucket), the 8
 * most recently blocked keys stay blocked, the others went. */
static void test_bounded(void **state)
{
	(void)state;
	fx f = fx_open("fixed_window:1/1m;block_on_exceed=1m;"
		       "near_cache_keys=8");
	int64_t t = BASE + SEC;
	char key[16];
	for (int k = 0; k < 20; k++) {
		snprintf(key, sizeof key, "key%d", k);
		tu_at(f.lim, key, 1, t + k * MS);
		assert_int_equal(tu_at(f.lim, key, 1, t + k * MS).path,
				 DRL_PATH_STORE);
	}
	for (int k = 19; k >= 12; k--) {
		snprintf(key, sizeof key, "key%d", k);
		assert_int_equal(tu_at(f.lim, key, 1, t + 20 * MS).path,
				 DRL_PATH_NEAR);
	}
	assert_int_equal(tu_at(f.lim, "key11", 1, t + 20 * MS).path,
			 DRL_PATH_STORE);
	fx_free(&f);
}

/* The table's rules, through the internal interface: the newest answer
 * wins, an allow of a blocked cost lifts the block, an older answer than
 * the one held is dropped. */
static void test_answers(void **state)
{
	(void)state;
	fx f = fx_open("fixed_window:10/1m;block_on_exceed=1m");
	drl__near *n = f.lim->near;
	drl__near_req q;
	drl_result deny = {.allowed = 0,
			   .limit = 10,
			   .retry_after_us = 1000,
			   .reset_after_us = 2000},
		   allow = {.allowed = 1, .limit = 10, .remaining = 1}, r;
	assert_non_null(n);
	drl__near_req_make(n, &q, "k", 1, DRL__NEAR_EXPLICIT, 100);
	drl__near_record(n, &q, 2, &deny);
	q.t = 150;
	assert_false(drl__near_check(n, &q, 1, &r));
	assert_true(drl__near_check(n, &q, 2, &r));
	expect_near(r, 10, 950, 0);
	assert_int_equal(r.reset_after_us, 1950);
	q.t = 200;
	drl__near_record(n, &q, 1, &allow); /* a smaller cost: stays */
	assert_true(drl__near_check(n, &q, 2, &r));
	q.t = 300;
	drl__near_record(n, &q, 2, &allow); /* the blocked cost: lifted */
	q.t = 350;
	assert_false(drl__near_check(n, &q, 2, &r));
	q.t = 400;
	drl__near_record(n, &q, 1, &deny);
	q.t = 390;
	drl__near_record(n, &q, 5, &allow); /* older than the denial */
	q.t = 450;
	assert_true(drl__near_check(n, &q, 1, &r));
	q.t = 1400;
	assert_false(drl__near_check(n, &q, 1, &r));
	/* The monotonic base does not see the explicit entry. */
	q.base = DRL__NEAR_MONO;
	q.t = 450;
	assert_false(drl__near_check(n, &q, 1, &r));
	fx_free(&f);
}

/* ---- the sync thread ---------------------------------------------------- */

/* Rounds driven by the test (drl__near_manual): the limiter's thread runs
 * none of its own, and each round is told what the monotonic clock reads.
 * near_cache_sync=1m, so a round "a minute later" finds a key asked for
 * now stale (older than half a round) and still recent (used within four
 * rounds), however slowly this machine ran the requests. */
static fx fx_manual(const char *spec)
{
	fx f = fx_open(spec);
	drl__near_manual(f.lim->near);
	return f;
}

#define LATER (31 * SEC) /* past half of near_cache_sync=1m */

/* Limiter A exhausts a key that limiter B used before (down to half its
 * quota: the thread peeks no key far from its limit); B's thread peeks it
 * and B then denies it with no store call from the request path. This
 * one runs B's own thread on the real clock: wait for it. */
static void test_sync_learns(void **state)
{
	(void)state;
	if (under_valgrind())
		skip();
	fx b = fx_open("token_bucket:5/1d;near_cache=1;near_cache_sync=50ms");
	drl_limiter *a;
	drl_error err = {0};
	assert_int_equal(
		drl_limiter_new(&a, b.store, "token_bucket:5/1d", "nc:", &err),
		0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(now_(b.lim, "k", 1).path, DRL_PATH_STORE);
	for (int i = 0; i < 2; i++)
		assert_int_equal(now_(a, "k", 1).allowed, 1);
	assert_int_equal(now_(a, "k", 1).allowed, 0);
	/* B's thread peeks the key (its last answer is older than half a
	 * round) and learns it is exhausted. */
	tu_wait_blocked(b.lim, "k");
	assert_true(tu_stats(b.store).near_syncs >= 1);
	drl_result r = now_(b.lim, "k", 1);
	assert_int_equal(r.path, DRL_PATH_NEAR);
	assert_true(r.retry_after_us > 4 * 3600 * SEC);
	assert_int_equal(tu_stats(b.store).near_denials, 1);
	drl_limiter_free(a);
	fx_free(&b);
}

/* A key far from its limit (the last answer left more than half) is not
 * peeked: that would cost a round trip for nothing, after every use of
 * every legitimate key. Once it is down to half, it is. */
static void test_sync_skips_far_keys(void **state)
{
	(void)state;
	fx f = fx_manual("gcra:5/1d;near_cache=1;near_cache_sync=1m");
	assert_int_equal(now_(f.lim, "k", 1).remaining, 4);
	assert_int_equal(
		drl__near_sync_round_at(f.lim->near, drl_mono_us() + LATER), 0);
	assert_int_equal(tu_stats(f.store).near_syncs, 0);
	assert_int_equal(now_(f.lim, "k", 1).remaining, 3);
	assert_int_equal(now_(f.lim, "k", 1).remaining, 2);
	assert_int_equal(
		drl__near_sync_round_at(f.lim->near, drl_mono_us() + LATER), 1);
	assert_int_equal(tu_stats(f.store).near_syncs, 1);
	fx_free(&f);
}

/* Whether f's near cache blocks key "k" for cost 1 at monotonic time t. */
static bool blocked_at(fx *f, int64_t t)
{
	drl__near_req q;
	drl_result r;
	drl__near_req_make(f->lim->near, &q, "k", 1, DRL__NEAR_MONO, t);
	return drl__near_check(f->lim->near, &q, 1, &r);
}

/* A block capped at 100 ms is extended by a round, before it lapses,
 * while the store still denies; a round leaves a block alone that ends
 * later than two rounds from now. */
static void test_sync_extends(void **state)
{
	(void)state;
	fx f = fx_manual("fixed_window:3/1d;near_cache=1;near_cache_sync=1m;"
			 "block_on_exceed=100ms");
	for (int i = 0; i < 3; i++)
		assert_int_equal(now_(f.lim, "k", 1).allowed, 1);
	assert_int_equal(now_(f.lim, "k", 1).path, DRL_PATH_STORE);
	/* The block began before the store was asked: it ends by then. */
	int64_t ends_by = drl_mono_us() + 100 * MS;
	assert_true(blocked_at(&f, ends_by - 100 * MS));
	assert_false(blocked_at(&f, ends_by + 1));
	assert_int_equal(now_(f.lim, "k", 1).path, DRL_PATH_NEAR);
	/* A round whose horizon (two rounds: 2 min) the block ends within
	 * peeks it; the store still denies, so the block now runs 100 ms
	 * from the peek. */
	tu_sleep_until_us(ends_by - 100 * MS + 2 * MS);
	assert_int_equal(drl__near_sync_round_at(f.lim->near, drl_mono_us()),
			 1);
	assert_true(blocked_at(&f, ends_by + 1));
	assert_int_equal(now_(f.lim, "k", 1).path, DRL_PATH_NEAR);
	assert_int_equal(tu_stats(f.store).near_syncs, 1);
	fx_free(&f);

	/* block_on_exceed=10m: beyond the horizon of two 1 s rounds. */
	f = fx_manual("fixed_window:3/1d;near_cache=1;near_cache_sync=1s;"
		      "block_on_exceed=10m");
	for (int i = 0; i < 4; i++)
		now_(f.lim, "k", 1);
	assert_int_equal(now_(f.lim, "k", 1).path, DRL_PATH_NEAR);
	assert_int_equal(drl__near_sync_round_at(f.lim->near, drl_mono_us()),
			 0);
	fx_free(&f);
}

typedef struct taker {
	drl_limiter *lim;
	_Atomic bool *stop;
	long allowed, near, store;
	_Atomic long calls; /* read while the thread runs */
} taker;

static void *take_loop(void *arg)
{
	taker *k = arg;
	while (!atomic_load(k->stop)) {
		drl_result r = now_(k->lim, "hot", 1);
		k->allowed += r.allowed;
		k->near += r.path == DRL_PATH_NEAR;
		k->store += r.path == DRL_PATH_STORE;
		atomic_fetch_add(&k->calls, 1);
	}
	return NULL;
}

/* Limiter A takes every token as it refills; B (near_cache) hammers the
 * same key: B's denials are mostly local, and A and B together never get
 * more than the bucket gives. */
static void test_sync_competing(void **state)
{
	(void)state;
	if (under_valgrind())
		skip();
	fx f = fx_open("token_bucket:20/1s,burst=5;near_cache=1;"
		       "near_cache_sync=10ms");
	drl_limiter *a;
	drl_error err = {0};
	assert_int_equal(drl_limiter_new(&a, f.store,
					 "token_bucket:20/1s,"
					 "burst=5",
					 "nc:", &err),
			 0);
	_Atomic bool stop = false;
	taker ta = {.lim = a, .stop = &stop},
	      tb = {.lim = f.lim, .stop = &stop};
	pthread_t th[2];
	int64_t t0 = drl_now_us();
	pthread_create(&th[0], NULL, take_loop, &ta);
	pthread_create(&th[1], NULL, take_loop, &tb);
	/* At least 500 ms (ten refills) and 500 of B's calls, however slowly
	 * this machine schedules the two threads. */
	tu_sleep_ms(500);
	bool enough =
		TU_WAIT_FOR(atomic_load(&tb.calls) >= 500, tu_bound_ms(5000));
	atomic_store(&stop, true);
	pthread_join(th[0], NULL);
	pthread_join(th[1], NULL);
	int64_t elapsed = drl_now_us() - t0;
	long most = 5 + (long)(elapsed * 20 / SEC) + 1;
	printf("  competing: A %ld allowed; B %ld allowed, %ld local, %ld "
	       "store; at most %ld\n",
	       ta.allowed, tb.allowed, tb.near, tb.store, most);
	assert_true(enough);
	assert_true(ta.allowed + tb.allowed <= most);
	assert_true(tb.near > tb.store);
	drl_limiter_free(a);
	fx_free(&f);
}

typedef struct hammer {
	drl_limiter *lim;
	int id;
} hammer;

static void *hammer_loop(void *arg)
{
	hammer *h = arg;
	char key[32];
	for (int i = 0; i < 2000; i++) {
		snprintf(key, sizeof key, "h%d:%d", h->id, i % 50);
		now_(h->lim, key, 1);
	}
	return NULL;
}

/* A limiter freed while its thread peeks: no leak, no race (ASan, TSan,
 * valgrind), and drl_limiter_free returns promptly. */
static void test_free_while_syncing(void **state)
{
	(void)state;
	for (int round = 0; round < 10; round++) {
		fx f = fx_open("fixed_window:5/1d;near_cache=1;"
			       "near_cache_sync=1ms");
		hammer h[3];
		pthread_t th[3];
		for (int i = 0; i < 3; i++) {
			h[i] = (hammer){f.lim, i};
			pthread_create(&th[i], NULL, hammer_loop, &h[i]);
		}
		for (int i = 0; i < 3; i++)
			pthread_join(th[i], NULL);
		tu_sleep_ms(round % 3);
		int64_t t0 = drl_mono_us();
		fx_free(&f);
		/* promptly: not a whole round of a busy thread later */
		assert_true(drl_mono_us() - t0 < tu_bound_ms(500) * MS);
	}
}

/* ---- exactness ------------------------------------------------------------ */

enum { X_THREADS = 4, X_CALLS = 500, X_LIMIT = 200 };

typedef struct xjob {
	drl_limiter *lim;
	int64_t now; /* 0: the real clock */
	int allowed, near, errors;
} xjob;

static void *x_worker(void *arg)
{
	xjob *j = arg;
	for (int i = 0; i < X_CALLS; i++) {
		drl_result r;
		int rc = j->now ? drl_allow_at(j->lim, "hot", 3, 1, j->now, &r,
					       NULL)
				: drl_allow(j->lim, "hot", 3, 1, &r, NULL);
		if (rc)
			j->errors++;
		j->allowed += rc == 0 && r.allowed;
		j->near += rc == 0 && r.path == DRL_PATH_NEAR;
	}
	return NULL;
}

/* X_THREADS threads on one key of one memory store; 1 when the run
 * crossed a sub-window edge of the day specs (the real clock's windows may
 * roll: run again). */
static int x_run(const char *spec, int64_t now)
{
	static int run;
	char prefix[32];
	drl_store *s;
	drl_limiter *l;
	drl_error err = {0};
	snprintf(prefix, sizeof prefix, "x%d:", run++);
	assert_int_equal(drl_store_open(&s, "memory://", &err), 0);
	if (drl_limiter_new(&l, s, spec, prefix, &err))
		fail_msg("%s: %s", spec, err.message);
	int64_t edge = HOT_DAY_EDGE_US, t0 = drl_now_us();
	xjob j[X_THREADS];
	pthread_t th[X_THREADS];
	for (int i = 0; i < X_THREADS; i++) {
		j[i] = (xjob){.lim = l, .now = now};
		pthread_create(&th[i], NULL, x_worker, &j[i]);
	}
	int allowed = 0, near = 0, errors = 0;
	for (int i = 0; i < X_THREADS; i++) {
		pthread_join(th[i], NULL);
		allowed += j[i].allowed;
		near += j[i].near;
		errors += j[i].errors;
	}
	drl_limiter_free(l);
	drl_store_free(s);
	if (now == 0 && t0 / edge != drl_now_us() / edge)
		return 1;
	printf("  %-58s %s: allowed %d, local %d of %d\n", spec,
	       now ? "one instant" : "real clock", allowed, near,
	       X_THREADS * X_CALLS);
	assert_int_equal(errors, 0);
	assert_int_equal(allowed, X_LIMIT);
	assert_true(near >= (X_THREADS * X_CALLS - X_LIMIT) / 2);
	return 0;
}

static void test_exact_memory(void **state)
{
	(void)state;
	static const char *const opts[] = {
		"near_cache=1;near_cache_sync=20ms",
		"block_on_exceed=1s",
		"block_on_exceed=1s;near_cache=1;near_cache_sync=5ms",
	};
	for (size_t a = 0; a < HOT_SPECS; a++) {
		for (size_t o = 0; o < sizeof opts / sizeof opts[0]; o++) {
			char spec[160];
			snprintf(spec, sizeof spec, "%s;%s",
				 hot_key_day_specs[a], opts[o]);
			x_run(spec, BASE + 7 * SEC);
			if (x_run(spec, 0))
				x_run(spec, 0);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_block_until_cap),
		cmocka_unit_test(test_block_until_retry),
		cmocka_unit_test(test_block_by_cost),
		cmocka_unit_test(test_block_never),
		cmocka_unit_test(test_no_block_from_failures),
		cmocka_unit_test(test_policy),
		cmocka_unit_test(test_time_bases),
		cmocka_unit_test(test_batch),
		cmocka_unit_test(test_long_keys),
		cmocka_unit_test(test_bounded),
		cmocka_unit_test(test_answers),
		cmocka_unit_test(test_sync_learns),
		cmocka_unit_test(test_sync_skips_far_keys),
		cmocka_unit_test(test_sync_extends),
		cmocka_unit_test(test_sync_competing),
		cmocka_unit_test(test_free_while_syncing),
		cmocka_unit_test(test_exact_memory),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
