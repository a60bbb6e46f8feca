/*
 * The six algorithms on the memory store: exact expected decisions at
 * chosen times (window edges, bursts, refill rounding, cost > limit,
 * cost 0, time going backwards, values near INT64 limits), and properties
 * checked on random traffic: retry_after, remaining and reset_after mean
 * what docs/algorithms.md says, sliding_log equals a perfect sliding
 * window, token_bucket and gcra decide alike.
 */
#include "testutil.h"

#define NEVER DRL_NEVER

static void test_fixed_window(void **state)
{
	(void)state;
	tu t = tu_open(NULL, "fixed_window:3/1s");
	drl_limiter *l = t.lim;
	EXPECT(tu_at(l, "a", 0, 500 * MS), 1, 3, 0, 0);
	EXPECT(tu_at(l, "a", 1, 500 * MS), 1, 2, 500 * MS, 0);
	EXPECT(tu_at(l, "a", 1, 500 * MS), 1, 1, 500 * MS, 0);
	EXPECT(tu_at(l, "a", 1, 500 * MS), 1, 0, 500 * MS, 0);
	EXPECT(tu_at(l, "a", 1, 500 * MS), 0, 0, 500 * MS, 500 * MS);
	EXPECT(tu_at(l, "a", 1, SEC - 1), 0, 0, 1, 1);   /* edge */
	EXPECT(tu_at(l, "a", 1, SEC), 1, 2, SEC, 0);     /* next window */
	EXPECT(tu_at(l, "a", 4, SEC), 0, 2, SEC, NEVER); /* cost > limit */
	EXPECT(tu_at(l, "a", 0, SEC), 1, 2, SEC, 0);     /* cost 0 peeks */
	EXPECT(tu_at(l, "a", 2, 1500 * MS), 1, 0, 500 * MS, 0);
	/* backwards inside the window: the same counter, nothing new */
	EXPECT(tu_at(l, "a", 1, 1200 * MS), 0, 0, 800 * MS, 800 * MS);
	/* another key is another limit */
	EXPECT(tu_at(l, "b", 3, 1500 * MS), 1, 0, 500 * MS, 0);
	/* the latest time there is: 2^62 % 1e6 = 387904 */
	EXPECT(tu_at(l, "a", 1, DRL_TIME_MAX_US - 5), 1, 2, SEC - 387899, 0);
	EXPECT(tu_at(l, "a", 3, DRL_TIME_MAX_US), 0, 2, SEC - 387904,
	       SEC - 387904);
	drl_result r;
	drl_error err = {0};
	assert_int_equal(
		drl_allow_at(l, "a", 1, 1, DRL_TIME_MAX_US + 1, &r, &err),
		DRL_EINVAL);
	assert_non_null(strstr(err.message, "time"));
	tu_free(&t);
}

static void test_sliding_window(void **state)
{
	(void)state;
	tu t = tu_open(NULL, "sliding_window:10/1s");
	drl_limiter *l = t.lim;
	for (int i = 9; i >= 0; i--)
		EXPECT(tu_at(l, "s", 1, 200 * MS), 1, i, 1800 * MS, 0);
	/* full: the earliest fit is just past the next window's start */
	EXPECT(tu_at(l, "s", 1, 200 * MS), 0, 0, 1800 * MS, 800 * MS + 1);
	/* half way through the next window the old one weighs 5 */
	for (int i = 4; i >= 0; i--)
		EXPECT(tu_at(l, "s", 1, 1500 * MS), 1, i, 1500 * MS, 0);
	EXPECT(tu_at(l, "s", 1, 1500 * MS), 0, 0, 1500 * MS, 1);
	/* one µs later floor(10 * 499999 / 1e6) = 4: room for one */
	EXPECT(tu_at(l, "s", 1, 1500 * MS + 1), 1, 0, 1500 * MS - 1, 0);
	EXPECT(tu_at(l, "s", 11, 1600 * MS), 0, 0, 1400 * MS, NEVER);
	/* two windows on, everything has gone */
	EXPECT(tu_at(l, "s", 0, 3 * SEC), 1, 10, 0, 0);
	tu_free(&t);
}

static void test_subwindow(void **state)
{
	(void)state;
	tu t = tu_open(NULL, "subwindow:6/6s,subwindows=3");
	drl_limiter *l = t.lim;
	EXPECT(tu_at(l, "w", 2, 1 * SEC), 1, 4, 5 * SEC, 0);
	EXPECT(tu_at(l, "w", 2, 3 * SEC), 1, 2, 5 * SEC, 0);
	EXPECT(tu_at(l, "w", 2, 5 * SEC), 1, 0, 5 * SEC, 0);
	/* the oldest sub-window [0s,2s) leaves at 6s */
	EXPECT(tu_at(l, "w", 1, 5 * SEC), 0, 0, 5 * SEC, 1 * SEC);
	EXPECT(tu_at(l, "w", 1, 6 * SEC), 1, 1, 6 * SEC, 0);
	tu_free(&t);

	t = tu_open(NULL, "subwindow:6/6s,subwindows=3,trailing=1");
	l = t.lim;
	EXPECT(tu_at(l, "x", 2, 1 * SEC), 1, 4, 7 * SEC, 0);
	EXPECT(tu_at(l, "x", 2, 3 * SEC), 1, 2, 7 * SEC, 0);
	EXPECT(tu_at(l, "x", 2, 5 * SEC), 1, 0, 7 * SEC, 0);
	/* at 6s the expired sub-window still weighs fully: 4 + 2 */
	EXPECT(tu_at(l, "x", 1, 6 * SEC), 0, 0, 6 * SEC, 1);
	/* 1 µs later it weighs floor(2 * (2s - 1µs) / 2s) = 1 */
	EXPECT(tu_at(l, "x", 1, 6 * SEC + 1), 1, 0, 8 * SEC - 1, 0);
	tu_free(&t);
}

static void test_token_bucket(void **state)
{
	(void)state;
	tu t = tu_open(NULL, "token_bucket:10/1s,burst=5");
	drl_limiter *l = t.lim;
	EXPECT(tu_at(l, "t", 0, 0), 1, 5, 0, 0);
	for (int i = 1; i <= 5; i++)
		EXPECT(tu_at(l, "t", 1, 0), 1, 5 - i, i * 100 * MS, 0);
	EXPECT(tu_at(l, "t", 1, 0), 0, 0, 500 * MS, 100 * MS);
	EXPECT(tu_at(l, "t", 1, 100 * MS), 1, 0, 500 * MS, 0);
	/* 1.5 tokens refilled: one whole, half left over */
	EXPECT(tu_at(l, "t", 1, 250 * MS), 1, 0, 450 * MS, 0);
	EXPECT(tu_at(l, "t", 1, 250 * MS), 0, 0, 450 * MS, 50 * MS);
	EXPECT(tu_at(l, "t", 6, 250 * MS), 0, 0, 450 * MS, NEVER);
	EXPECT(tu_at(l, "t", 5, 250 * MS), 0, 0, 450 * MS, 450 * MS);
	EXPECT(tu_at(l, "t", 5, 700 * MS), 1, 0, 500 * MS, 0);
	tu_free(&t);

	/* 1s / 3 is not a whole number of µs: no rounding drift */
	t = tu_open(NULL, "token_bucket:3/1s");
	l = t.lim;
	EXPECT(tu_at(l, "r", 3, 0), 1, 0, SEC, 0);
	EXPECT(tu_at(l, "r", 1, 0), 0, 0, SEC, 333334);
	EXPECT(tu_at(l, "r", 1, 333333), 0, 0, SEC - 333333, 1);
	EXPECT(tu_at(l, "r", 1, 333334), 1, 0, SEC, 0);
	/* 3000 requests spaced exactly 1/3 s (rounded up) all pass */
	int64_t now = 10 * SEC;
	EXPECT(tu_at(l, "q", 3, now), 1, 0, SEC, 0);
	for (int i = 1; i <= 3000; i++)
		assert_true(tu_at(l, "q", 1, now + (i * SEC + 2) / 3).allowed);
	tu_free(&t);
}

static void test_gcra(void **state)
{
	(void)state;
	tu t = tu_open(NULL, "gcra:10/1s,burst=5");
	drl_limiter *l = t.lim;
	for (int i = 1; i <= 5; i++)
		EXPECT(tu_at(l, "g", 1, 0), 1, 5 - i, i * 100 * MS, 0);
	EXPECT(tu_at(l, "g", 1, 0), 0, 0, 500 * MS, 100 * MS);
	EXPECT(tu_at(l, "g", 1, 100 * MS), 1, 0, 500 * MS, 0);
	EXPECT(tu_at(l, "g", 1, 250 * MS), 1, 0, 450 * MS, 0);
	EXPECT(tu_at(l, "g", 1, 250 * MS), 0, 0, 450 * MS, 50 * MS);
	EXPECT(tu_at(l, "g", 6, 250 * MS), 0, 0, 450 * MS, NEVER);
	EXPECT(tu_at(l, "g", 0, 250 * MS), 1, 0, 450 * MS, 0);
	/* cost 0 peeks, allowed even when time went back past the TAT */
	EXPECT(tu_at(l, "g", 0, 0), 1, 0, 700 * MS, 0);
	tu_free(&t);
}

static void test_sliding_log(void **state)
{
	(void)state;
	tu t = tu_open(NULL, "sliding_log:3/1s");
	drl_limiter *l = t.lim;
	EXPECT(tu_at(l, "l", 1, 100 * MS), 1, 2, SEC, 0);
	EXPECT(tu_at(l, "l", 1, 200 * MS), 1, 1, SEC, 0);
	EXPECT(tu_at(l, "l", 1, 300 * MS), 1, 0, SEC, 0);
	EXPECT(tu_at(l, "l", 1, 500 * MS), 0, 0, 800 * MS, 600 * MS);
	/* the window is (now - 1s, now]: the 100ms entry just left */
	EXPECT(tu_at(l, "l", 1, 1100 * MS), 1, 0, SEC, 0);
	/* (0.25s, 1.25s] holds 0.3s and 1.1s: one left, two asked */
	EXPECT(tu_at(l, "l", 2, 1250 * MS), 0, 1, 850 * MS, 50 * MS);
	EXPECT(tu_at(l, "l", 4, 1250 * MS), 0, 1, 850 * MS, NEVER);
	EXPECT(tu_at(l, "l", 0, 1250 * MS), 1, 1, 850 * MS, 0);
	EXPECT(tu_at(l, "l", 2, 1300 * MS), 1, 0, SEC, 0);
	tu_free(&t);
}

/* Time going backwards never grants extra quota: after a limit is spent
 * at T, no earlier time admits anything. token_bucket, gcra and
 * sliding_log clamp to the newest time they have seen; window counters
 * count a request in the (sub-)window its time names, so for them going
 * back is checked within that (sub-)window (docs/algorithms.md). */
static void test_time_backwards(void **state)
{
	(void)state;
	static const struct {
		const char *spec;
		int64_t max_back;
	} cases[] = {
		{"fixed_window:5/10s", 9 * SEC},
		{"sliding_window:5/10s", 9 * SEC},
		{"subwindow:5/10s,subwindows=5", 1 * SEC},
		{"subwindow:5/10s,subwindows=5,trailing=1", 1 * SEC},
		{"token_bucket:5/10s", 9 * SEC},
		{"gcra:5/10s", 9 * SEC},
		{"sliding_log:5/10s", 9 * SEC},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		tu t = tu_open(NULL, cases[i].spec);
		int64_t base = 1000 * SEC + 9 * SEC; /* late in a window */
		assert_true(tu_at(t.lim, "k", 5, base).allowed);
		for (int64_t back = 1; back <= cases[i].max_back;
		     back += 123457) {
			drl_result r = tu_at(t.lim, "k", 1, base - back);
			if (r.allowed)
				fail_msg("%s admitted at T-%lld after the "
					 "limit was spent at T",
					 cases[i].spec, (long long)back);
		}
		tu_free(&t);
	}
}

/* Values near the top of every range: no overflow, sane answers. */
static void test_huge_values(void **state)
{
	(void)state;
	static const char *const specs[] = {
		"fixed_window:1000000000/366d",
		"sliding_window:1000000000/366d",
		"subwindow:1000000000/366d,subwindows=60,trailing=1",
		"token_bucket:1000000000/366d,burst=1000000000",
		"gcra:1000000000/366d,burst=1000000000",
		"gcra:1/1d,burst=50000",
		"token_bucket:1000000000/1ms,burst=1",
		"sliding_log:10000/366d",
	};
	int64_t times[] = {0, 1, DRL_TIME_MAX_US / 2, DRL_TIME_MAX_US - 1,
			   DRL_TIME_MAX_US};
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
		tu t = tu_open(NULL, specs[i]);
		for (size_t j = 0; j < sizeof times / sizeof times[0]; j++) {
			drl_result r = tu_at(t.lim, "h", 1, times[j]);
			assert_true(r.remaining >= 0);
			assert_true(r.remaining <= r.limit);
			assert_true(r.reset_after_us >= 0);
			r = tu_at(t.lim, "h", INT64_MAX, times[j]);
			assert_false(r.allowed);
			assert_int_equal(r.retry_after_us, NEVER);
		}
		tu_free(&t);
	}
}

/* ---- properties on random traffic ------------------------------------ */

typedef struct ev {
	int64_t t, cost;
} ev;

static uint64_t rng = 88172645463325252u;
static int64_t rnd(int64_t n)
{
	return (int64_t)(tu_xorshift(&rng) % (uint64_t)n);
}

/* A fresh store holding exactly the admitted events `hist[0..n)`. */
static tu replay(const char *spec, const ev *hist, int n)
{
	tu t = tu_open(NULL, spec);
	for (int i = 0; i < n; i++)
		if (!tu_at(t.lim, "k", hist[i].cost, hist[i].t).allowed)
			fail_msg("%s: replay of an admitted event denied",
				 spec);
	return t;
}

/* retry_after R: denied at t+R-1, allowed at t+R. remaining k: exactly k
 * more unit requests fit now. reset_after: full quota by then. Time goes
 * back, one step in five, by up to `back` µs (0: never). */
static void check_properties(const char *spec, int64_t period, int64_t back)
{
	ev hist[160];
	int nh = 0;
	tu t = tu_open(NULL, spec);
	int64_t now = 5000 * SEC + rnd(period);
	for (int step = 0; step < 160; step++) {
		if (back && rnd(5) == 0)
			now -= 1 + rnd(back);
		else
			now += rnd(4) == 0 ? 0 : rnd(period / 3);
		int64_t cost = rnd(4);
		drl_result r = tu_at(t.lim, "k", cost, now);
		if (r.allowed) {
			if (cost > 0)
				hist[nh++] = (ev){now, cost};
			tu c = replay(spec, hist, nh);
			for (int64_t j = 0; j < r.remaining; j++)
				assert_true(tu_at(c.lim, "k", 1, now).allowed);
			assert_false(tu_at(c.lim, "k", 1, now).allowed);
			tu_free(&c);
			c = replay(spec, hist, nh);
			drl_result f =
				tu_at(c.lim, "k", 0, now + r.reset_after_us);
			assert_int_equal(f.remaining, f.limit);
			tu_free(&c);
		} else if (r.retry_after_us != NEVER) {
			assert_true(r.retry_after_us > 0);
			tu c = replay(spec, hist, nh);
			if (tu_at(c.lim, "k", cost, now + r.retry_after_us - 1)
				    .allowed)
				fail_msg("%s: allowed before retry_after",
					 spec);
			if (!tu_at(c.lim, "k", cost, now + r.retry_after_us)
				     .allowed)
				fail_msg("%s: denied at retry_after", spec);
			tu_free(&c);
		}
	}
	tu_free(&t);
}

static void test_properties(void **state)
{
	(void)state;
	check_properties("fixed_window:5/1s", SEC, 0);
	check_properties("sliding_window:5/1s", SEC, 0);
	check_properties("subwindow:5/1s,subwindows=4", SEC, 0);
	check_properties("subwindow:5/1s,subwindows=4,trailing=1", SEC, 0);
	check_properties("token_bucket:5/1s", SEC, 0);
	check_properties("token_bucket:3/1s,burst=5", SEC, 0);
	check_properties("gcra:7/1s,burst=4", SEC, 0);
	check_properties("sliding_log:5/1s", SEC, 0);
	/* the buckets, with time going back by less and more than T */
	check_properties("token_bucket:3/1s,burst=5", SEC, 200 * MS);
	check_properties("token_bucket:3/1s,burst=5", SEC, 900 * MS);
	check_properties("gcra:7/1s,burst=4", SEC, 100 * MS);
	check_properties("gcra:7/1s,burst=4", SEC, 600 * MS);
}

/* sliding_log against a perfect sliding window kept here by brute force. */
static void test_sliding_log_is_exact(void **state)
{
	(void)state;
	enum { L = 6, N = 3000 };
	const int64_t P = 700 * MS;
	tu t = tu_open(NULL, "sliding_log:6/700ms");
	static ev admitted[N];
	int na = 0;
	int64_t now = 77 * SEC;
	for (int i = 0; i < N; i++) {
		now += rnd(3) == 0 ? 0 : rnd(P / 4);
		int64_t cost = rnd(3), used = 0;
		for (int j = 0; j < na; j++)
			if (admitted[j].t > now - P)
				used += admitted[j].cost;
		drl_result r = tu_at(t.lim, "k", cost, now);
		assert_int_equal(r.allowed, used + cost <= L);
		if (r.allowed && cost > 0)
			admitted[na++] = (ev){now, cost};
		assert_int_equal(r.remaining,
				 L - used - (r.allowed ? cost : 0));
	}
	tu_free(&t);
}

/* Every field of two answers, or which one differs first (NULL: none). */
static const char *differs(const drl_result *a, const drl_result *b)
{
	return a->allowed != b->allowed                 ? "allowed"
	       : a->limit != b->limit                   ? "limit"
	       : a->remaining != b->remaining           ? "remaining"
	       : a->reset_after_us != b->reset_after_us ? "reset_after"
	       : a->retry_after_us != b->retry_after_us ? "retry_after"
	       : a->limit_index != b->limit_index       ? "limit_index"
	       : a->would_allow != b->would_allow       ? "would_allow"
							: NULL;
}

/* Different algorithms, same answers: token_bucket = gcra; fixed_window
 * and sliding_window = their subwindow parameterizations. One request in
 * four comes from a client whose clock lags by up to `back` µs (0: none),
 * so time goes back by up to that much. */
static void same_decisions(const char *a, const char *b, int64_t back)
{
	tu x = tu_open(NULL, a), y = tu_open(NULL, b);
	int64_t real = 123 * SEC;
	for (int i = 0; i < 5000; i++) {
		real += rnd(3) == 0 ? 0 : rnd(300 * MS);
		int64_t now = back && rnd(4) == 0 ? real - 1 - rnd(back) : real;
		int64_t cost = rnd(4);
		drl_result r1 = tu_at(x.lim, "k", cost, now);
		drl_result r2 = tu_at(y.lim, "k", cost, now);
		const char *what = differs(&r1, &r2);
		if (what)
			fail_msg("%s vs %s: %s differs at step %d", a, b, what,
				 i);
	}
	tu_free(&x);
	tu_free(&y);
}

static void test_equivalences(void **state)
{
	(void)state;
	static const char *const pairs[][2] = {
		{"token_bucket:10/1s,burst=5", "gcra:10/1s,burst=5"},
		{"token_bucket:7/1m", "gcra:7/1m"},
		{"token_bucket:3/1s,burst=1", "gcra:3/1s,burst=1"},
		{"token_bucket:4/1s,burst=9", "gcra:4/1s,burst=9"},
		/* refunds: the fixed window denies after the bucket admits */
		{"token_bucket:10/1s,burst=5;fixed_window:2/1s",
		 "gcra:10/1s,burst=5;fixed_window:2/1s"},
	};
	/* emission intervals 100ms, 8.57s, 333ms, 250ms, 100ms: steps back
	 * of up to half of one, and of up to several */
	static const int64_t backs[][2] = {{50 * MS, 350 * MS},
					   {4 * SEC, 30 * SEC},
					   {150 * MS, 900 * MS},
					   {120 * MS, 700 * MS},
					   {50 * MS, 350 * MS}};
	for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
		same_decisions(pairs[i][0], pairs[i][1], 0);
		same_decisions(pairs[i][0], pairs[i][1], backs[i][0]);
		same_decisions(pairs[i][0], pairs[i][1], backs[i][1]);
	}
	same_decisions("fixed_window:5/1s", "subwindow:5/1s,subwindows=1", 0);
	same_decisions("sliding_window:5/1s",
		       "subwindow:5/1s,subwindows=1,trailing=1", 0);
}

/* Issue 18's replay: 40 random limits (LIMIT 3..100, burst above and below
 * it, PERIOD 1s or 1m), 80 requests each (cost 0..3), time going back one
 * step in four by 500µs to two emission intervals: token_bucket and gcra
 * give the same answer, every field, every time. */
static void test_equivalence_sweep(void **state)
{
	(void)state;
	int agree = 0, total = 0;
	for (int seq = 0; seq < 40; seq++) {
		int64_t limit = 3 + rnd(98), period = rnd(2) ? SEC : 60 * SEC;
		int64_t burst =
			rnd(2) ? limit + 1 + rnd(limit) : 1 + rnd(limit);
		char a[96], b[96];
		snprintf(a, sizeof a, "token_bucket:%lld/%s,burst=%lld",
			 (long long)limit, period == SEC ? "1s" : "1m",
			 (long long)burst);
		snprintf(b, sizeof b, "gcra%s", a + strlen("token_bucket"));
		tu x = tu_open(NULL, a), y = tu_open(NULL, b);
		int64_t t = (period + limit - 1) / limit, now = 1000 * SEC;
		for (int i = 0; i < 80; i++, total++) {
			if (rnd(4) == 0)
				now -= 500 + rnd(2 * t - 500 + 1);
			else
				now += rnd(3) == 0 ? 0 : rnd(2 * t);
			int64_t cost = rnd(4);
			drl_result r1 = tu_at(x.lim, "k", cost, now);
			drl_result r2 = tu_at(y.lim, "k", cost, now);
			const char *what = differs(&r1, &r2);
			if (what)
				fail_msg("%s vs gcra: %s differs at request "
					 "%d",
					 a, what, i);
			agree++;
		}
		tu_free(&x);
		tu_free(&y);
	}
	print_message("token_bucket = gcra: %d of %d answers with time "
		      "going back\n",
		      agree, total);
}

/* Two clients of one limit whose clocks differ by less than one emission
 * interval (50ms of 100ms) and by more (250ms): the lagging one is
 * charged neither its lag nor credited with any. Both algorithms, the
 * same numbers (docs/algorithms.md, "Time going backwards"). */
static void test_lagging_client(void **state)
{
	(void)state;
	static const char *const specs[] = {"token_bucket:10/1s,burst=5",
					    "gcra:10/1s,burst=5"};
	for (int i = 0; i < 2; i++) {
		tu t = tu_open(NULL, specs[i]);
		drl_limiter *l = t.lim;
		/* A at 10s takes 1: 4 left, full again at 10.1s */
		EXPECT(tu_at(l, "a", 1, 10 * SEC), 1, 4, 100 * MS, 0);
		/* B, 50ms behind, sees those 4 (not 3.5): it takes them;
		 * its own clock reads the bucket full 550ms on */
		EXPECT(tu_at(l, "a", 4, 10 * SEC - 50 * MS), 1, 0, 550 * MS, 0);
		/* and it is not credited its lag: A waits the full 100ms */
		EXPECT(tu_at(l, "a", 1, 10 * SEC), 0, 0, 500 * MS, 100 * MS);
		EXPECT(tu_at(l, "a", 1, 10 * SEC + 100 * MS), 1, 0, 500 * MS,
		       0);
		/* B 250ms behind, on a key A took 1 from: 4 left for B too */
		EXPECT(tu_at(l, "b", 1, 20 * SEC), 1, 4, 100 * MS, 0);
		EXPECT(tu_at(l, "b", 4, 20 * SEC - 250 * MS), 1, 0, 750 * MS,
		       0);
		EXPECT(tu_at(l, "b", 1, 20 * SEC - 250 * MS), 0, 0, 750 * MS,
		       350 * MS);
		/* a peek a second behind sees the bucket as it is at 20s */
		EXPECT(tu_at(l, "b", 0, 19 * SEC), 1, 0, SEC + 500 * MS, 0);
		tu_free(&t);

		/* a refund (the fixed window denies) leaves the bucket full
		 * at 10.5s: 100ms behind, it is full now, reset_after 0 */
		char policy[64];
		snprintf(policy, sizeof policy, "%s;fixed_window:1/1h",
			 specs[i]);
		t = tu_open(NULL, policy);
		assert_true(tu_at(t.lim, "c", 1, 10 * SEC).allowed);
		assert_false(tu_at(t.lim, "c", 1, 10 * SEC + 500 * MS).allowed);
		drl_result r = tu_at(t.lim, "c", 6, 10 * SEC + 400 * MS);
		assert_int_equal(r.limit_index, 0);
		EXPECT(r, 0, 5, 0, NEVER);
		tu_free(&t);
	}
}

/* Bad calls: refused with DRL_EINVAL, and nothing consumed. */
static void test_bad_calls(void **state)
{
	(void)state;
	tu t = tu_open(NULL, "fixed_window:1/1s");
	drl_result r;
	drl_error err = {0};
	assert_int_equal(drl_allow_at(t.lim, "k", 1, -1, 0, &r, &err),
			 DRL_EINVAL);
	assert_non_null(strstr(err.message, "cost"));
	assert_int_equal(drl_allow_at(t.lim, "k", 0, 1, 0, &r, &err),
			 DRL_EINVAL);
	assert_non_null(strstr(err.message, "key length"));
	assert_int_equal(
		drl_allow_at(t.lim, "k", DRL_KEY_MAX + 1, 1, 0, &r, &err),
		DRL_EINVAL);
	assert_int_equal(drl_allow_at(t.lim, NULL, 1, 1, 0, &r, &err),
			 DRL_EINVAL);
	assert_int_equal(drl_allow_at(NULL, "k", 1, 1, 0, &r, &err),
			 DRL_EINVAL);
	assert_int_equal(drl_allow_at(t.lim, "k", 1, 1, 0, NULL, &err),
			 DRL_EINVAL);
	assert_int_equal(drl_allow_at(t.lim, "k", 1, 1, -5, &r, &err),
			 DRL_EINVAL);
	assert_int_equal(drl_allow(t.lim, "k", 1, -3, &r, NULL), DRL_EINVAL);
	/* none of that consumed the one request */
	EXPECT(tu_at(t.lim, "k", 1, 0), 1, 0, SEC, 0);
	/* the real-time clock works too */
	assert_int_equal(drl_allow(t.lim, "rt", 2, 1, &r, &err), 0);
	assert_true(r.allowed);
	assert_true(drl_now_us() > INT64_C(1600000000) * SEC);
	tu_free(&t);
}

/* Keys are bytes: NUL, newlines, long keys (hashed past 128 bytes) are
 * distinct limits. */
static void test_key_bytes(void **state)
{
	(void)state;
	tu t = tu_open(NULL, "fixed_window:1/1s");
	static char big1[DRL_KEY_MAX], big2[DRL_KEY_MAX];
	memset(big1, 'x', sizeof big1);
	memset(big2, 'x', sizeof big2);
	big2[sizeof big2 - 1] = 'y';
	const struct {
		const char *p;
		size_t n;
	} keys[] = {
		{"a\0b", 3},         {"a\0c", 3}, {"a", 1},
		{"a\n", 2},          {"{x}", 3},  {"1:a", 3},
		{big1, 129},         {big1, 130}, {big1, sizeof big1},
		{big2, sizeof big2},
	};
	drl_result r;
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		assert_int_equal(drl_allow_at(t.lim, keys[i].p, keys[i].n, 1, 0,
					      &r, NULL),
				 0);
		if (!r.allowed)
			fail_msg("key %zu shares state with another", i);
	}
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		assert_int_equal(drl_allow_at(t.lim, keys[i].p, keys[i].n, 1, 0,
					      &r, NULL),
				 0);
		assert_false(r.allowed);
	}
	tu_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixed_window),
		cmocka_unit_test(test_sliding_window),
		cmocka_unit_test(test_subwindow),
		cmocka_unit_test(test_token_bucket),
		cmocka_unit_test(test_gcra),
		cmocka_unit_test(test_sliding_log),
		cmocka_unit_test(test_time_backwards),
		cmocka_unit_test(test_huge_values),
		cmocka_unit_test(test_properties),
		cmocka_unit_test(test_sliding_log_is_exact),
		cmocka_unit_test(test_equivalences),
		cmocka_unit_test(test_equivalence_sweep),
		cmocka_unit_test(test_lagging_client),
		cmocka_unit_test(test_bad_calls),
		cmocka_unit_test(test_key_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
