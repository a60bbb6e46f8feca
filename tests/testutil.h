/* Small helpers shared by the cmocka tests (header-only). */
#ifndef DRL_TESTUTIL_H
#define DRL_TESTUTIL_H

#include <drl/drl.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#define MS INT64_C(1000)
#define SEC INT64_C(1000000)

/* A limiter on a fresh memory store; both freed by tu_free(). */
typedef struct tu {
	drl_store *store;
	drl_limiter *lim;
} tu;

static inline tu tu_open(const char *uri, const char *spec)
{
	tu t = {0};
	drl_error err = {0};
	int rc = drl_store_open(&t.store, uri, &err);
	if (rc)
		fail_msg("store %s: %s", uri ? uri : "(default)", err.message);
	rc = drl_limiter_new(&t.lim, t.store, spec, NULL, &err);
	if (rc)
		fail_msg("spec %s: %s", spec, err.message);
	return t;
}

static inline void tu_free(tu *t)
{
	drl_limiter_free(t->lim);
	drl_store_free(t->store);
}

/* One decision at an explicit time; fails the test on an error. */
static inline drl_result tu_at(drl_limiter *l, const char *key, int64_t cost,
			       int64_t now)
{
	drl_result r;
	drl_error err = {0};
	int rc = drl_allow_at(l, key, strlen(key), cost, now, &r, &err);
	if (rc)
		fail_msg("drl_allow_at: %s (%s)", err.message,
			 drl_err_name(rc));
	return r;
}

/* The store's counters. */
static inline drl_store_stats tu_stats(drl_store *s)
{
	drl_store_stats st;
	assert_int_equal(drl_store_stats_get(s, &st), 0);
	return st;
}

/* Sleep ms milliseconds. */
static inline void tu_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

#ifdef DRL_INTERNAL_H
/* Wait (up to 5 s) until l's near cache blocks key for cost 1 at the
 * monotonic clock (drl_allow's base); fails the test otherwise. Looking
 * counts as a use of the key, so the sync thread keeps peeking it. */
static inline void tu_wait_blocked(drl_limiter *l, const char *key)
{
	for (int i = 0; i < 5000; i++) {
		drl__near_req q;
		drl_result r;
		drl__near_req_make(l->near, &q, key, strlen(key),
				   DRL__NEAR_MONO, drl__mono_us());
		if (drl__near_check(l->near, &q, 1, &r))
			return;
		tu_sleep_ms(1);
	}
	fail_msg("key \"%s\" not blocked after 5 s", key);
}
#endif

/* Assert every field of a decision. */
#define EXPECT(r, a, rem, reset, retry)                                        \
	do {                                                                   \
		drl_result r_ = (r);                                           \
		assert_int_equal(r_.allowed, (a));                             \
		assert_int_equal(r_.remaining, (rem));                         \
		assert_int_equal(r_.reset_after_us, (reset));                  \
		assert_int_equal(r_.retry_after_us, (retry));                  \
	} while (0)

#endif
