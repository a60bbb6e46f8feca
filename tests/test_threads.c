/* Many threads on one hot key of the memory store: total allowed equals
 * the limit exactly, for every algorithm and for a policy. */
#include "testutil.h"

#include <pthread.h>

enum { THREADS = 8, CALLS = 400, LIMIT = 1000 };

typedef struct job {
	drl_limiter *lim;
	int64_t now;
	int allowed;
	int errors;
} job;

static void *worker(void *arg)
{
	job *j = arg;
	for (int i = 0; i < CALLS; i++) {
		drl_result r;
		if (drl_allow_at(j->lim, "hot", 3, 1, j->now, &r, NULL))
			j->errors++;
		else if (r.allowed)
			j->allowed++;
	}
	return NULL;
}

static int run(const char *spec)
{
	tu t = tu_open(NULL, spec);
	pthread_t th[THREADS];
	job jobs[THREADS];
	for (int i = 0; i < THREADS; i++) {
		jobs[i] = (job){t.lim, 1700000000 * SEC + 12345, 0, 0};
		assert_int_equal(pthread_create(&th[i], NULL, worker, &jobs[i]),
				 0);
	}
	int allowed = 0, errors = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		allowed += jobs[i].allowed;
		errors += jobs[i].errors;
	}
	assert_int_equal(errors, 0);
	tu_free(&t);
	return allowed;
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
