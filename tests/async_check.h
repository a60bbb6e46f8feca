/*
 * What the async API's tests check on any store (tests/async_check.c):
 * the async API decides exactly what the blocking one does, a hot key
 * admits exactly its limit with hundreds of requests in flight. Used by
 * test_async.c (memory, Redis, memcached) and test_async_cluster.c.
 */
#ifndef DRL_ASYNC_CHECK_H
#define DRL_ASYNC_CHECK_H

#include <drl/async.h>

#include <stdbool.h>
#include <stdint.h>

#define ASYNC_T0 INT64_C(1700000000000000) /* a fixed decision time */

/* Wait for the context's fd and process until *count reaches want; fails
 * the test when that takes longer than a generous deadline. */
void async_process_until(drl_async *a, const int *count, int want);

/* Fail the test (naming `what` and `step`) unless two outcomes agree in
 * rc, every field of the result and (on an error) the message. */
void async_same(int rc_a, const drl_result *a, const drl_error *ea, int rc_b,
		const drl_result *b, const drl_error *eb, const char *what,
		int step);

/* One single request's outcome, as async_one_cb (arg) saw it. */
typedef struct async_one {
	int count;
	int rc;
	drl_result result;
	drl_error err;
} async_one;

void async_one_cb(drl_async *a, int rc, const drl_result *r,
		  const drl_error *err, void *arg);

/* `spec` on store s: a sequence of single requests and one of batches
 * (with bad items), each started alone through a and waited for, and the
 * same through the blocking calls on a twin limiter: the same outcome at
 * every step. n makes the limiters' prefixes unique. */
void async_check_equal(drl_async *a, drl_store *s, const char *spec,
		       const char *what, int n);

/* 400 requests for one key on l (a limit of 100), all in flight at once:
 * at ASYNC_T0, or at the real clock (drl_async_allow); exactly 100
 * allowed, none failed. */
void async_check_hot(drl_async *a, drl_limiter *l, const char *what,
		     bool real_clock);

#endif
