/*
 * The Redis store's hand-written RESP (backends/redis/resp.c) against
 * what it stands in for: drl__redis_i64 against snprintf("%" PRId64),
 * drl__redis_resp_append against hiredis's redisFormatCommandArgv, byte
 * for byte.
 */
#include "backends/redis/internal.h"

#include <hiredis/hiredis.h>

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void check_i64(int64_t v)
{
	char want[32], got[24];
	int n = snprintf(want, sizeof want, "%" PRId64, v);
	size_t len = drl__redis_i64(got, v);
	assert_int_equal(len, (size_t)n);
	assert_memory_equal(got, want, len);
}

/* Every length of decimal, both signs, the ends of int64_t. */
static void test_i64(void **state)
{
	(void)state;
	check_i64(0);
	check_i64(INT64_MAX);
	check_i64(INT64_MIN);
	for (int64_t p = 1; p <= INT64_MAX / 10; p *= 10)
		for (int64_t d = -1; d <= 1; d++) {
			check_i64(p + d);
			check_i64(-(p + d));
			check_i64(p * 9 + d);
		}
	unsigned seed = 42;
	for (int i = 0; i < 10000; i++) {
		uint64_t u = ((uint64_t)rand_r(&seed) << 33) ^
			     ((uint64_t)rand_r(&seed) << 2) ^
			     (uint64_t)rand_r(&seed);
		int64_t v = (int64_t)(u & (uint64_t)INT64_MAX);
		check_i64(v);
		check_i64(-v);
	}
}

/* A command of empty, binary and long arguments, appended twice to one
 * growing buffer: the bytes hiredis formats, twice over. */
static void test_append_as_hiredis(void **state)
{
	(void)state;
	char big[5000];
	memset(big, 'x', sizeof big);
	const char *argv[] = {"EVALSHA", "", "a\0b\r\n", big, "-12"};
	const size_t lens[] = {7, 0, 5, sizeof big, 3};
	int argc = (int)(sizeof lens / sizeof lens[0]);
	char *want = NULL;
	long long wn = redisFormatCommandArgv(&want, argc, argv, lens);
	assert_true(wn > 0);
	char *buf = NULL;
	size_t len = 0, cap = 0;
	for (int round = 0; round < 2; round++)
		assert_int_equal(drl__redis_resp_append(&buf, &len, &cap, argc,
							argv, lens),
				 0);
	assert_int_equal(len, 2 * (size_t)wn);
	assert_memory_equal(buf, want, (size_t)wn);
	assert_memory_equal(buf + wn, want, (size_t)wn);
	free(buf);
	redisFreeCommand(want);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_i64),
		cmocka_unit_test(test_append_as_hiredis),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
