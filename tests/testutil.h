/* Small helpers shared by the cmocka tests (header-only). */
#ifndef DRL_TESTUTIL_H
#define DRL_TESTUTIL_H

#include <drl/drl.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
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

/* A store from uri, a limiter on it (prefix may be NULL); each fails the
 * test when it cannot be made. */
static inline drl_store *tu_store(const char *uri)
{
	drl_store *s = NULL;
	drl_error err = {0};
	if (drl_store_open(&s, uri, &err))
		fail_msg("%s: %s", uri, err.message);
	return s;
}

static inline drl_limiter *tu_limiter(drl_store *s, const char *spec,
				      const char *prefix)
{
	drl_limiter *l = NULL;
	drl_error err = {0};
	if (drl_limiter_new(&l, s, spec, prefix, &err))
		fail_msg("%s: %s", spec, err.message);
	return l;
}

/* On store s, whose every call fails: a limit with on_error=allow answers
 * allowed (DRL_PATH_FAIL_OPEN), one with on_error=deny denied
 * (DRL_PATH_FAIL_CLOSED), one without returns `want` with a message that
 * holds `says`. Frees s. */
static inline void tu_on_error_paths(drl_store *s, int want, const char *says)
{
	drl_limiter *allow = tu_limiter(s, "gcra:5/1s;on_error=allow", "oe:a:");
	drl_limiter *deny = tu_limiter(s, "gcra:5/1s;on_error=deny", "oe:d:");
	drl_limiter *none = tu_limiter(s, "gcra:5/1s", "oe:n:");
	drl_result r;
	drl_error err = {0};
	assert_int_equal(drl_allow(allow, "k", 1, 1, &r, &err), 0);
	assert_true(r.allowed);
	assert_int_equal(r.path, DRL_PATH_FAIL_OPEN);
	assert_int_equal(drl_allow(deny, "k", 1, 1, &r, &err), 0);
	assert_false(r.allowed);
	assert_int_equal(r.path, DRL_PATH_FAIL_CLOSED);
	assert_int_equal(drl_allow(none, "k", 1, 1, &r, &err), want);
	if (strstr(err.message, says) == NULL)
		fail_msg("\"%s\" does not say \"%s\"", err.message, says);
	drl_limiter_free(allow);
	drl_limiter_free(deny);
	drl_limiter_free(none);
	drl_store_free(s);
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

/* ---- time -----------------------------------------------------------------
 *
 * Tests judge behaviour, never the machine's speed. A test that waits for
 * something polls for the event with a generous deadline; a test that must
 * measure time (a timeout, a breaker period) asserts exactly what the code
 * promises ("not before timeout_ms"), and bounds only by tu_bound_ms() what
 * depends on how fast this machine runs ("returns soon after"). Such tests
 * carry the 'timing' suite label in tests/meson.build. */

/* CLOCK_MONOTONIC in microseconds and milliseconds. */
static inline int64_t tu_mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline int64_t tu_mono_ms(void)
{
	return tu_mono_us() / 1000;
}

/* Sleep at least ms milliseconds (signals do not cut it short). */
static inline void tu_sleep_ms(int64_t ms)
{
	struct timespec ts = {(time_t)(ms / 1000),
			      (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

/* Sleep until CLOCK_MONOTONIC has passed t_us. */
static inline void tu_sleep_until_us(int64_t t_us)
{
	int64_t now;
	while ((now = tu_mono_us()) <= t_us) {
		int64_t left = t_us - now + 1;
		struct timespec ts = {(time_t)(left / 1000000),
				      (long)(left % 1000000) * 1000L};
		nanosleep(&ts, NULL);
	}
}

/* How many times slower than a quiet machine this run may be:
 * $DRL_TEST_SLOWDOWN when set (1 to 1000), else 50 under valgrind
 * (DRL_VALGRIND, set by the 'valgrind' test setup), 20 under TSan, 10
 * under ASan, and 4 for a plain build (a busy, shared machine). */
static inline int64_t tu_slowdown(void)
{
	const char *env = getenv("DRL_TEST_SLOWDOWN");
	if (env != NULL && *env != '\0') {
		long v = strtol(env, NULL, 10);
		return v < 1 ? 1 : v > 1000 ? 1000 : v;
	}
	env = getenv("DRL_VALGRIND");
	if (env != NULL && *env != '\0' && strcmp(env, "0") != 0)
		return 50;
#if defined(__SANITIZE_THREAD__)
	return 20;
#elif defined(__SANITIZE_ADDRESS__)
	return 10;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
	return 20;
#elif __has_feature(address_sanitizer)
	return 10;
#else
	return 4;
#endif
#else
	return 4;
#endif
}

/* An upper bound for work that takes about `ms` on a quiet machine. */
static inline int64_t tu_bound_ms(int64_t ms)
{
	return ms * tu_slowdown();
}

/* Poll `cond` every millisecond until it holds or `ms` (already a
 * generous deadline: scale it with tu_bound_ms) have passed; evaluates to
 * whether it holds. */
#define TU_WAIT_FOR(cond, ms)                                                  \
	__extension__({                                                        \
		int64_t tu_end_ = tu_mono_ms() + (ms);                         \
		while (!(cond) && tu_mono_ms() < tu_end_)                      \
			tu_sleep_ms(1);                                        \
		(bool)(cond);                                                  \
	})

#ifdef DRL_INTERNAL_H
/* Wait (up to tu_bound_ms(1000)) until l's near cache blocks key for cost
 * 1 at the monotonic clock (drl_allow's base); fails the test otherwise.
 * Looking counts as a use of the key, so the sync thread keeps peeking
 * it. */
static inline bool tu_blocked_now(drl_limiter *l, const char *key)
{
	drl__near_req q;
	drl_result r;
	drl__near_req_make(l->near, &q, key, strlen(key), DRL__NEAR_MONO,
			   drl_mono_us());
	return drl__near_check(l->near, &q, 1, &r);
}

static inline void tu_wait_blocked(drl_limiter *l, const char *key)
{
	if (!TU_WAIT_FOR(tu_blocked_now(l, key), tu_bound_ms(1000)))
		fail_msg("key \"%s\" not blocked after %lld ms", key,
			 (long long)tu_bound_ms(1000));
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
