/*
 * Many threads of one process on one hot key: the count of decisions
 * allowed, for a test to compare with the limit (test_threads.c on
 * memory://, test_redis_pipe.c on Redis's shared connections).
 */
#ifndef DRL_HOT_THREADS_H
#define DRL_HOT_THREADS_H

#include "testutil.h"

#include <pthread.h>

enum { HOT_THREADS_MAX = 64 };

typedef struct hot_job {
	drl_limiter *lim;
	int64_t now;
	int calls;
	int allowed, errors;
} hot_job;

static inline void *hot_threads_worker(void *arg)
{
	hot_job *j = arg;
	for (int i = 0; i < j->calls; i++) {
		drl_result r;
		if (drl_allow_at(j->lim, "hot", 3, 1, j->now, &r, NULL))
			j->errors++;
		else if (r.allowed)
			j->allowed++;
	}
	return NULL;
}

/* `threads` threads, `calls` decisions each on key "hot" of spec on uri
 * (NULL: memory://), all at instant `now`: how many were allowed (the
 * test fails on any error). */
static inline int hot_threads_allowed(const char *uri, const char *spec,
				      int threads, int calls, int64_t now)
{
	tu t = tu_open(uri, spec);
	pthread_t th[HOT_THREADS_MAX];
	hot_job jobs[HOT_THREADS_MAX];
	assert_true(threads > 0 && threads <= HOT_THREADS_MAX);
	for (int i = 0; i < threads; i++) {
		jobs[i] = (hot_job){.lim = t.lim, .now = now, .calls = calls};
		assert_int_equal(pthread_create(&th[i], NULL,
						hot_threads_worker, &jobs[i]),
				 0);
	}
	int allowed = 0, errors = 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		allowed += jobs[i].allowed;
		errors += jobs[i].errors;
	}
	assert_int_equal(errors, 0);
	tu_free(&t);
	return allowed;
}

#endif
