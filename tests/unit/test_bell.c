/*
 * backends/redis/bell.h, the word the Redis pipes' waiting callers sleep on:
 *
 * - a ring for a thread's bits wakes it: four threads, each asleep for a
 *   bit of its own and a condition of its own, return one by one as each
 *   condition is made true and its bit rung (the others keep waiting);
 * - a ring between the peek and the wait is not lost: the wait returns
 *   at once.
 */
#include "backends/redis/bell.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>

#define SLEEPERS 4

static drl__bell bell;
static atomic_int go[SLEEPERS], back[SLEEPERS];

static void *sleeper(void *arg)
{
	int i = (int)(intptr_t)arg;
	for (;;) {
		uint32_t seen = drl__bell_peek(&bell);
		if (atomic_load(&go[i]))
			break;
		drl__bell_wait(&bell, seen, 1u << i);
	}
	atomic_store(&back[i], 1);
	return NULL;
}

static int count_back(void)
{
	int n = 0;
	for (int i = 0; i < SLEEPERS; i++)
		n += atomic_load(&back[i]);
	return n;
}

static void test_ring_wakes_by_bits(void **state)
{
	(void)state;
	pthread_t th[SLEEPERS];
	for (int i = 0; i < SLEEPERS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, sleeper,
						(void *)(intptr_t)i),
				 0);
	for (int i = SLEEPERS - 1; i >= 0; i--) {
		atomic_store(&go[i], 1);
		drl__bell_ring(&bell, 1u << i);
		assert_true(TU_WAIT_FOR(atomic_load(&back[i]) == 1,
					tu_bound_ms(10000)));
		/* the others still wait for their own conditions */
		assert_int_equal(count_back(), SLEEPERS - i);
	}
	for (int i = 0; i < SLEEPERS; i++)
		pthread_join(th[i], NULL);
}

static void test_ring_before_wait(void **state)
{
	(void)state;
	uint32_t seen = drl__bell_peek(&bell);
	drl__bell_ring(&bell, 1);
	drl__bell_wait(&bell, seen, 1); /* returns: it rang since */
	assert_int_not_equal(drl__bell_peek(&bell), seen);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_wakes_by_bits),
		cmocka_unit_test(test_ring_before_wait),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
