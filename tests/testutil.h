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
