/* Many threads on one hot key of the memory store: total allowed equals
 * the limit exactly, for every algorithm and for a policy. */
#include "hot_threads.h"

enum { THREADS = 8, CALLS = 400, LIMIT = 1000 };

static int run(const char *spec)
{
	return hot_threads_allowed(NULL, spec, THREADS, CALLS,
				   1700000000 * SEC + 12345);
}

static void test_hot_key_exact(void **state)
{
	(void)state;
	static const char *const specs[] = {
		"fixed_window:1000/1m",
		"sliding_window:1000/1m",
		"subwindow:1000/1m,subwindows=6",
		"subwindow:1000/1m,subwindows=6,trailing=1",
		"token_bucket:1000/1h",
		"gcra:1000/1h",
		"sliding_log:1000/1m",
		"fixed_window:1000/1m;token_bucket:5000/1h",
		"token_bucket:5000/1h;sliding_log:1000/1m",
	};
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
		int allowed = run(specs[i]);
		if (allowed != LIMIT)
			fail_msg("%s: %d allowed of %d requests, limit %d",
				 specs[i], allowed, THREADS * CALLS, LIMIT);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hot_key_exact),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
