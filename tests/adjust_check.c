/* drl_adjust judged on one store: see adjust_check.h. */
#include "adjust_check.h"

#include "async_check.h"
#include "ops_check.h"
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A time aligned to every period above (a whole number of days). */
#define T0 (INT64_C(1700006400) * SEC)

/* Prefixes of their own for every limiter this process makes. */
static int prefixes;

static drl_limiter *fresh(drl_store *st, const char *spec)
{
	char prefix[64];
	snprintf(prefix, sizeof prefix, "adj%d.%d:", (int)getpid(), prefixes++);
	return tu_limiter(st, spec, prefix);
}

/* drl_adjust_at (adjust) or drl_allow_at of n at now; fails the test on
 * an error. */
static drl_result call(bool adjust, drl_limiter *l, const char *key, int64_t n,
		       int64_t now, const char *what)
{
	drl_result r;
	drl_error err = {0};
	int rc = adjust ? drl_adjust_at(l, key, strlen(key), n, now, &r, &err)
			: drl_allow_at(l, key, strlen(key), n, now, &r, &err);
	if (rc)
		fail_msg("%s: %s(%lld) at %lld: %s (%s)", what,
			 adjust ? "drl_adjust_at" : "drl_allow_at",
			 (long long)n, (long long)now, err.message,
			 drl_err_name(rc));
	return r;
}
#define adj(l, key, delta, now, what) call(true, l, key, delta, now, what)
#define dec(l, key, cost, now, what) call(false, l, key, cost, now, what)

/* How many requests of cost 1 are admitted at `now`, one after another,
 * until the first denial (at most `most`). */
static int64_t admitted(drl_limiter *l, const char *key, int64_t now,
			int64_t most, const char *what)
{
	int64_t n = 0;
	while (n < most && dec(l, key, 1, now, what).allowed)
		n++;
	return n;
}

#define CHECK_EQ(what, a, b)                                                   \
	do {                                                                   \
		long long a_ = (long long)(a), b_ = (long long)(b);            \
		if (a_ != b_)                                                  \
			fail_msg("%s: %s is %lld, want %lld (line %d)", what,  \
				 #a, a_, b_, __LINE__);                        \
	} while (0)

/* One limit of capacity cap on store st (spec): the exact checks. */
static void exact_one(drl_store *st, const char *uri, const char *spec,
		      int64_t cap)
{
	char what[256];
	snprintf(what, sizeof what, "%s on %s", spec, uri);
	drl_limiter *l = fresh(st, spec);
	drl_result r;

	/* a penalty within the capacity: exactly cap - 2 left */
	r = adj(l, "p", 2, T0, what);
	CHECK_EQ(what, r.allowed, 1);
	CHECK_EQ(what, r.remaining, cap - 2);
	CHECK_EQ(what, r.limit, cap);
	CHECK_EQ(what, admitted(l, "p", T0, 3 * cap, what), cap - 2);

	/* a penalty past the limit: denied, and a reward of less than the
	 * debt still denies; the rest of it admits exactly what is left */
	r = adj(l, "q", cap + 3, T0, what);
	CHECK_EQ(what, r.allowed, 0);
	CHECK_EQ(what, r.remaining, 0);
	if (r.retry_after_us <= 0)
		fail_msg("%s: retry_after %lld after a penalty", what,
			 (long long)r.retry_after_us);
	r = adj(l, "q", -3, T0, what);
	CHECK_EQ(what, r.allowed, 0);
	r = adj(l, "q", -2, T0, what);
	CHECK_EQ(what, r.allowed, 1);
	CHECK_EQ(what, r.remaining, 2);
	CHECK_EQ(what, admitted(l, "q", T0, 3 * cap, what), 2);

	/* a reward on a used key: exactly that many more */
	CHECK_EQ(what, admitted(l, "r", T0, 3 * cap, what), cap);
	r = adj(l, "r", -2, T0, what);
	CHECK_EQ(what, r.remaining, 2);
	CHECK_EQ(what, admitted(l, "r", T0, 3 * cap, what), 2);

	/* never beyond a full quota */
	r = adj(l, "f", -5, T0, what);
	CHECK_EQ(what, r.remaining, cap);
	CHECK_EQ(what, admitted(l, "f", T0, 3 * cap, what), cap);

	/* the bound: a penalty leaves at most 2 x cap used; rewards then
	 * take exactly that off (a larger debt would still deny) */
	r = adj(l, "b", DRL_LIMIT_MAX, T0, what);
	CHECK_EQ(what, r.allowed, 0);
	r = adj(l, "b", 1, T0, what); /* at the bound: not raised */
	r = adj(l, "b", -(2 * cap - 1), T0, what);
	CHECK_EQ(what, r.allowed, 1);
	CHECK_EQ(what, r.remaining, cap - 1);
	CHECK_EQ(what, admitted(l, "b", T0, 3 * cap, what), cap - 1);

	/* delta 0 changes nothing and says whether cost 1 is admitted */
	r = adj(l, "b", 0, T0, what);
	CHECK_EQ(what, r.allowed, 0);
	r = adj(l, "z", 0, T0, what);
	CHECK_EQ(what, r.allowed, 1);
	CHECK_EQ(what, r.remaining, cap);

	/* after a penalty, retry_after is the first moment a request of
	 * cost 1 is admitted: denied a µs before, admitted then */
	r = adj(l, "t", cap + 1, T0 + 7 * SEC, what);
	int64_t at = T0 + 7 * SEC + r.retry_after_us;
	CHECK_EQ(what, dec(l, "t", 1, at - 1, what).allowed, 0);
	CHECK_EQ(what, dec(l, "t", 1, at, what).allowed, 1);
	drl_limiter_free(l);
}

/* Which units a reward takes: the newest. Two units a third of the
 * period apart; a reward of one; once the older one has left the window
 * (sliding_log, subwindow) the key is full again. */
static void newest_first(drl_store *st, const char *uri, const char *spec,
			 int64_t cap, int64_t period)
{
	char what[256];
	snprintf(what, sizeof what, "%s on %s (newest first)", spec, uri);
	drl_limiter *l = fresh(st, spec);
	CHECK_EQ(what, dec(l, "n", 1, T0, what).allowed, 1);
	CHECK_EQ(what, dec(l, "n", 1, T0 + period / 2, what).allowed, 1);
	drl_result r = adj(l, "n", -1, T0 + period / 2, what);
	CHECK_EQ(what, r.remaining, cap - 1);
	r = dec(l, "n", 0, T0 + period + period / 4, what);
	CHECK_EQ(what, r.remaining, cap);
	drl_limiter_free(l);
}

void adjust_check_exact(const char *uri)
{
	static const struct {
		const char *spec;
		int64_t cap;
	} one[] = {
		{"fixed_window:5/1m", 5},
		{"sliding_window:5/1m", 5},
		{"subwindow:6/1m,subwindows=4", 6},
		{"subwindow:6/1m,subwindows=4,trailing=1", 6},
		{"token_bucket:3/1m,burst=7", 7},
		{"gcra:3/40s,burst=4", 4},
		{"sliding_log:5/1m", 5},
		{"sliding_window:1000000/1d", 1000000},
	};
	drl_store *st = tu_store(uri);
	for (size_t i = 0; i < sizeof one / sizeof one[0]; i++)
		if (one[i].cap <= 100)
			exact_one(st, uri, one[i].spec, one[i].cap);
	newest_first(st, uri, "sliding_log:5/1m", 5, 60 * SEC);
	newest_first(st, uri, "subwindow:6/1m,subwindows=4", 6, 60 * SEC);
	drl_store_free(st);
}

/* A policy: every limit moves (seen through a limiter of its second
 * limit alone, on the same keys); the answer is the limit that denies. */
void adjust_check_policy(const char *uri)
{
	const char *what = uri;
	char prefix[64];
	snprintf(prefix, sizeof prefix, "adjp%d.%d:", (int)getpid(),
		 prefixes++);
	drl_store *st = tu_store(uri);
	drl_limiter *l =
		tu_limiter(st, "token_bucket:5/1m;fixed_window:8/3m", prefix);
	drl_limiter *fw = tu_limiter(st, "fixed_window:8/3m", prefix);
	drl_result r = adj(l, "k", 6, T0, what);
	CHECK_EQ(what, r.allowed, 0);
	CHECK_EQ(what, r.limit_index, 0);
	CHECK_EQ(what, dec(fw, "k", 0, T0, what).remaining, 2);
	r = adj(l, "k", -4, T0, what);
	CHECK_EQ(what, r.allowed, 1);
	CHECK_EQ(what, r.remaining, 3); /* the bucket's; 6 in the window */
	CHECK_EQ(what, dec(fw, "k", 0, T0, what).remaining, 6);
	/* both deny; a minute on, the window alone, until it ends */
	r = adj(l, "k", 6, T0, what);
	CHECK_EQ(what, r.allowed, 0);
	r = adj(l, "k", 0, T0 + 60 * SEC, what);
	CHECK_EQ(what, r.allowed, 0);
	CHECK_EQ(what, r.limit_index, 1);
	CHECK_EQ(what, r.retry_after_us, 120 * SEC);
	drl_limiter_free(fw);
	drl_limiter_free(l);
	drl_store_free(st);
}

/* xorshift: the same traffic on every store. */
static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static bool same(const drl_result *a, const drl_result *b)
{
	return a->allowed == b->allowed && a->limit == b->limit &&
	       a->remaining == b->remaining &&
	       a->reset_after_us == b->reset_after_us &&
	       a->retry_after_us == b->retry_after_us &&
	       a->limit_index == b->limit_index;
}

#define STEPS 160

static void differ(const char *what, int k, const drl_result *w,
		   const drl_result *g)
{
	fail_msg("%s, step %d: want allowed=%d rem=%lld reset=%lld "
		 "retry=%lld lim=%d, got %d %lld %lld %lld %d",
		 what, k, w->allowed, (long long)w->remaining,
		 (long long)w->reset_after_us, (long long)w->retry_after_us,
		 w->limit_index, g->allowed, (long long)g->remaining,
		 (long long)g->reset_after_us, (long long)g->retry_after_us,
		 g->limit_index);
}

/* A batch of one item at now: what drl_allow_batch_at answers for it
 * (tx=lua: the batch script, reading a penalty's states too). */
static drl_result batch_one(drl_limiter *l, const char *key, int64_t cost,
			    int64_t now, const char *what)
{
	drl_batch_item it = {.key = key, .keylen = strlen(key), .cost = cost};
	drl_error err = {0};
	if (drl_allow_batch_at(l, &it, 1, now, &err) || it.rc)
		fail_msg("%s: drl_allow_batch_at(%lld) at %lld: %s", what,
			 (long long)cost, (long long)now, err.message);
	return it.result;
}

/* Random decisions (single, or a batch of one) and adjustments, times
 * moving forward (now and then a little back), recorded on memory:// and
 * replayed on every store. */
static void traffic(drl_limiter *l, uint64_t seed, drl_result *out,
		    const char *what)
{
	uint64_t s = seed;
	int64_t now = T0;
	for (int i = 0; i < STEPS; i++) {
		uint64_t x = rng(&s);
		now += (int64_t)(x % 9) * 2500 * MS;
		int64_t t = (x >> 8) % 7 == 0 ? now - 3 * SEC : now;
		int64_t delta = (int64_t)((x >> 16) % 23) - 11;
		int64_t cost = (int64_t)((x >> 32) % 4);
		if ((x >> 24) % 3 == 0)
			out[i] = adj(l, "d", delta, t, what);
		else if ((x >> 40) % 3 == 0)
			out[i] = batch_one(l, "d", cost, t, what);
		else
			out[i] = dec(l, "d", cost, t, what);
	}
}

void adjust_check_agrees(const char *uri)
{
	static drl_result want[STEPS], got[STEPS];
	for (size_t i = 0; i < ops_nspecs; i++) {
		for (uint64_t seed = 1; seed <= 3; seed++) {
			char what[256];
			snprintf(what, sizeof what, "%s on %s seed %d",
				 ops_specs[i], uri, (int)seed);
			drl_store *mem = tu_store("memory://");
			drl_limiter *l = fresh(mem, ops_specs[i]);
			traffic(l, seed * 0x9e3779b97f4a7c15u, want, what);
			drl_limiter_free(l);
			drl_store_free(mem);
			drl_store *st = tu_store(uri);
			l = fresh(st, ops_specs[i]);
			traffic(l, seed * 0x9e3779b97f4a7c15u, got, what);
			for (int k = 0; k < STEPS; k++)
				if (!same(&want[k], &got[k]))
					differ(what, k, &want[k], &got[k]);
			drl_limiter_free(l);
			drl_store_free(st);
		}
	}
}

/* ---- a hot key ------------------------------------------------------- */

#define HOT_LIMIT 200
#define HOT_PENALTIES 50
#define HOT_REWARDS 100
#define HOT_THREADS 4

typedef struct hot_job {
	drl_limiter *l;
	int kind; /* 0 decide, 1 penalize, 2 reward */
	int64_t n;
	int64_t done; /* allowed, or adjustments made */
} hot_job;

static void *hot_worker(void *arg)
{
	hot_job *j = arg;
	for (int64_t i = 0; i < j->n; i++) {
		drl_result r;
		int rc;
		if (j->kind == 0)
			rc = drl_allow_at(j->l, "hot", 3, 1, T0, &r, NULL);
		else
			rc = drl_adjust_at(j->l, "hot", 3,
					   j->kind == 1 ? 1 : -1, T0, &r, NULL);
		if (rc == 0 && (j->kind != 0 || r.allowed))
			j->done++;
	}
	return NULL;
}

/* LIMIT used first, then deciders, a penalizer and a rewarder at once:
 * every reward finds a unit used (at most HOT_REWARDS < LIMIT are given
 * back), no penalty reaches 2 x LIMIT (HOT_PENALTIES plus the threads'
 * increments in flight stay below LIMIT). Nothing is lost or made up:
 * the key's usage after it all (the drain leaves it at LIMIT or beyond,
 * read by rewarding one unit at a time until a request fits) is exactly
 * admitted + penalties - rewards. */
static void hot_key(const char *uri, const char *spec)
{
	char what[256];
	snprintf(what, sizeof what, "%s on %s (hot key)", spec, uri);
	drl_store *st = tu_store(uri);
	drl_limiter *l = fresh(st, spec);
	int64_t total = admitted(l, "hot", T0, 2 * HOT_LIMIT, what);
	CHECK_EQ(what, total, HOT_LIMIT);
	hot_job jobs[HOT_THREADS + 2];
	pthread_t th[HOT_THREADS + 2];
	for (int i = 0; i < HOT_THREADS + 2; i++) {
		jobs[i] = (hot_job){.l = l, .kind = 0, .n = 120};
		if (i == HOT_THREADS)
			jobs[i] = (hot_job){
				.l = l, .kind = 1, .n = HOT_PENALTIES};
		if (i == HOT_THREADS + 1)
			jobs[i] =
				(hot_job){.l = l, .kind = 2, .n = HOT_REWARDS};
		assert_int_equal(
			pthread_create(&th[i], NULL, hot_worker, &jobs[i]), 0);
	}
	for (int i = 0; i < HOT_THREADS + 2; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < HOT_THREADS; i++)
		total += jobs[i].done;
	total += admitted(l, "hot", T0, 4 * HOT_LIMIT, what);
	int64_t pen = jobs[HOT_THREADS].done, rew = jobs[HOT_THREADS + 1].done;
	if (pen < HOT_PENALTIES / 2 || rew < HOT_REWARDS / 2)
		fail_msg("%s: only %lld penalties, %lld rewards made", what,
			 (long long)pen, (long long)rew);
	int64_t used = HOT_LIMIT - 1;
	while (!adj(l, "hot", 0, T0, what).allowed) {
		(void)adj(l, "hot", -1, T0, what);
		used++;
	}
	if (used > HOT_LIMIT + pen)
		fail_msg("%s: %lld used after it all", what, (long long)used);
	CHECK_EQ(what, total, used + rew - pen);
	drl_limiter_free(l);
	drl_store_free(st);
}

void adjust_check_hot_key(const char *uri)
{
	static const char *const hot[] = {
		"fixed_window:200/1h",
		"sliding_window:200/1h",
		"subwindow:200/1h,subwindows=4,trailing=1",
		"token_bucket:200/1h",
		"gcra:200/1h",
		"sliding_log:200/1h"};
	for (size_t i = 0; i < sizeof hot / sizeof hot[0]; i++)
		hot_key(uri, hot[i]);
}

/* ---- bad input ---------------------------------------------------------- */

static void bad(drl_limiter *l, const void *key, size_t keylen, int64_t delta,
		int64_t now, bool explicit_time, drl_result *res,
		const char *what)
{
	drl_error err = {0};
	if (res)
		memset(res, 0x5a, sizeof *res);
	int rc = explicit_time
			 ? drl_adjust_at(l, key, keylen, delta, now, res, &err)
			 : drl_adjust(l, key, keylen, delta, res, &err);
	if (rc != DRL_EINVAL || err.code != DRL_EINVAL ||
	    err.message[0] == '\0')
		fail_msg("%s: delta %lld keylen %zu now %lld: rc %d, \"%s\"",
			 what, (long long)delta, keylen, (long long)now, rc,
			 err.message);
	if (res && (res->allowed || res->would_allow))
		fail_msg("%s: a failed call's result is not a denial", what);
}

void adjust_check_bad_input(const char *uri)
{
	static char big[DRL_KEY_MAX + 1];
	for (size_t i = 0; i < ops_nspecs; i++) {
		char what[256];
		snprintf(what, sizeof what, "%s on %s (bad input)",
			 ops_specs[i], uri);
		drl_store *st = tu_store(uri);
		drl_limiter *l = fresh(st, ops_specs[i]);
		drl_result r, before = dec(l, "k", 1, T0, what);
		before = dec(l, "k", 0, T0, what);
		bad(l, "k", 0, 1, T0, true, &r, what);
		bad(l, big, sizeof big, 1, T0, true, &r, what);
		bad(l, NULL, 1, 1, T0, true, &r, what);
		bad(l, "k", 1, DRL_LIMIT_MAX + 1, T0, true, &r, what);
		bad(l, "k", 1, -DRL_LIMIT_MAX - 1, T0, true, &r, what);
		bad(l, "k", 1, INT64_MIN, T0, true, &r, what);
		bad(l, "k", 1, INT64_MAX, T0, true, &r, what);
		bad(l, "k", 1, -1, -1, true, &r, what);
		bad(l, "k", 1, -1, DRL_TIME_MAX_US + 1, true, &r, what);
		bad(l, "k", 1, -1, INT64_MIN, true, &r, what);
		bad(l, "k", 1, -1, T0, true, NULL, what);
		bad(NULL, "k", 1, -1, T0, true, &r, what);
		bad(l, "k", 0, -1, 0, false, &r, what);
		bad(l, "k", 1, INT64_MIN, 0, false, &r, what);
		bad(l, "k", 1, -1, 0, false, NULL, what);
		drl_result after = dec(l, "k", 0, T0, what);
		if (!same(&before, &after))
			fail_msg("%s: bad input changed the key", what);
		/* the bounds themselves are taken */
		(void)adj(l, "k", DRL_LIMIT_MAX, T0, what);
		(void)adj(l, "k", -DRL_LIMIT_MAX, T0, what);
		drl_limiter_free(l);
		drl_store_free(st);
	}
}

void adjust_check_options(const char *uri)
{
	char what[256];
	drl_store *st = tu_store(uri);
	/* the near cache: a denial blocks the key here; a reward lifts it */
	snprintf(what, sizeof what, "block_on_exceed on %s", uri);
	drl_limiter *l = fresh(st, "fixed_window:2/1m;block_on_exceed=30s");
	CHECK_EQ(what, admitted(l, "n", T0, 5, what), 2);
	drl_result r = dec(l, "n", 1, T0, what);
	CHECK_EQ(what, r.path, DRL_PATH_NEAR);
	r = adj(l, "n", -1, T0, what);
	CHECK_EQ(what, r.allowed, 1);
	r = dec(l, "n", 1, T0, what);
	CHECK_EQ(what, r.allowed, 1);
	CHECK_EQ(what, r.path, DRL_PATH_STORE);
	drl_limiter_free(l);
	/* shadow=1: answered allowed, the real answer in would_allow */
	snprintf(what, sizeof what, "shadow=1 on %s", uri);
	l = fresh(st, "gcra:2/1m;shadow=1");
	r = adj(l, "s", 3, T0, what);
	CHECK_EQ(what, r.allowed, 1);
	CHECK_EQ(what, r.would_allow, 0);
	CHECK_EQ(what, r.retry_after_us, 60 * SEC);
	r = adj(l, "s", -2, T0, what);
	CHECK_EQ(what, r.would_allow, 1);
	CHECK_EQ(what, r.remaining, 1);
	drl_limiter_free(l);
	drl_store_free(st);
}

void adjust_check_async(const char *uri)
{
	drl_async *a;
	drl_error err = {0};
	assert_int_equal(drl_async_new(&a, NULL, &err), 0);
	drl_store *st = tu_store(uri);
	for (size_t i = 0; i < ops_nspecs; i++) {
		char what[256];
		snprintf(what, sizeof what, "%s on %s (async)", ops_specs[i],
			 uri);
		drl_limiter *l = fresh(st, ops_specs[i]);
		drl_limiter *twin = fresh(st, ops_specs[i]);
		static const int64_t deltas[] = {3, 0, -1, 9, -20, 1, -2};
		for (int k = 0; k < 7; k++) {
			int64_t t = T0 + k * 7 * SEC;
			async_one one = {0};
			drl_result r;
			drl_error e = {0};
			int rc = drl_async_adjust_at(a, l, "k", 1, deltas[k], t,
						     async_one_cb, &one, &err);
			if (rc)
				fail_msg("%s: %s", what, err.message);
			async_process_until(a, &one.count, 1);
			int rb = drl_adjust_at(twin, "k", 1, deltas[k], t, &r,
					       &e);
			async_same(one.rc, &one.result, &one.err, rb, &r, &e,
				   what, k);
		}
		/* bad input: refused at start, no callback */
		async_one none = {0};
		if (drl_async_adjust(a, l, "k", 1, DRL_LIMIT_MAX + 1,
				     async_one_cb, &none, &err) != DRL_EINVAL ||
		    drl_async_adjust_at(a, l, "k", 0, 1, T0, async_one_cb,
					&none, &err) != DRL_EINVAL ||
		    drl_async_adjust_at(a, l, "k", 1, 1, -1, async_one_cb,
					&none, &err) != DRL_EINVAL)
			fail_msg("%s: bad input started", what);
		/* at the real clock: a reward on a fresh key leaves it full */
		async_one one = {0};
		assert_int_equal(drl_async_adjust(a, l, "fresh", 5, -1,
						  async_one_cb, &one, &err),
				 0);
		async_process_until(a, &one.count, 1);
		CHECK_EQ(what, one.rc, 0);
		CHECK_EQ(what, one.result.allowed, 1);
		assert_int_equal(drl_async_process(a), 0);
		CHECK_EQ(what, none.count, 0);
		drl_limiter_free(twin);
		drl_limiter_free(l);
	}
	drl_store_free(st);
	drl_async_free(a);
}

void adjust_check_real_clock(const char *uri)
{
	/* no window edge in sight: a day's windows (the check would have
	 * to straddle midnight UTC), an hour's refill */
	static const char *const real[] = {
		"token_bucket:3/1h", "sliding_log:3/1h", "fixed_window:3/1d",
		"sliding_window:3/1d;gcra:3/1h",
		"subwindow:3/1d,subwindows=2,trailing=1"};
	drl_store *st = tu_store(uri);
	for (size_t i = 0; i < sizeof real / sizeof real[0]; i++) {
		char what[256];
		snprintf(what, sizeof what, "%s on %s (real clock)", real[i],
			 uri);
		drl_limiter *l = fresh(st, real[i]);
		drl_result r;
		drl_error err = {0};
		if (drl_adjust(l, "k", 1, 3, &r, &err))
			fail_msg("%s: %s", what, err.message);
		CHECK_EQ(what, r.allowed, 0);
		CHECK_EQ(what, drl_allow(l, "k", 1, 1, &r, &err), 0);
		CHECK_EQ(what, r.allowed, 0);
		CHECK_EQ(what, drl_adjust(l, "k", 1, -1, &r, &err), 0);
		CHECK_EQ(what, r.allowed, 1);
		CHECK_EQ(what, r.remaining, 1);
		CHECK_EQ(what, drl_allow(l, "k", 1, 1, &r, &err), 0);
		CHECK_EQ(what, r.allowed, 1);
		CHECK_EQ(what, drl_allow(l, "k", 1, 1, &r, &err), 0);
		CHECK_EQ(what, r.allowed, 0);
		drl_limiter_free(l);
	}
	drl_store_free(st);
}
