/*
 * Memory store benchmark: median ns per decision and decisions/s for every
 * algorithm, at 1 and 2 threads, on one hot key, on 10k distinct keys (the
 * table fits in the CPU caches) and on 1M distinct keys (it does not: each
 * decision waits for main memory).
 * Run: meson test -C build --benchmark memory --verbose
 * (or build/bench/bench_memory [rounds] [keys] [spec]: only the specs
 * that start with `spec`, e.g. fixed_window).
 *
 * Each cell runs ROUNDS timed rounds after a warm-up pass (which also
 * creates every key), and reports the median round. Time advances by 1 µs
 * per decision per thread, as real traffic would; limits are set high so
 * most decisions are admitted and write.
 */
#include "bench_util.h"

#include <drl/drl.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_THREADS = 2, KEYLEN = 16 };

static int rounds = 7;
static long nkeys = 1000000;
static long per_round = 1000000; /* decisions per thread per round */

typedef struct worker {
	drl_limiter *lim;
	const char *keys; /* count x KEYLEN from first, or NULL: the hot key */
	long first, count;
	int64_t now;
	long allowed;
	int failed;
	double ns, cpu_ns;
} worker;

/* Nanoseconds on `clock`: CLOCK_MONOTONIC, or CLOCK_THREAD_CPUTIME_ID (the
 * thread's CPU time, which a busy neighbour taking the core does not
 * inflate). */
static double clock_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *run(void *arg)
{
	worker *w = arg;
	drl_result r;
	double t0 = clock_ns(CLOCK_MONOTONIC);
	double c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	for (long i = 0; i < per_round; i++) {
		const char *key = "hot-key-00000000";
		if (w->keys)
			key = w->keys +
			      (size_t)(w->first + i % w->count) * KEYLEN;
		if (drl_allow_at(w->lim, key, KEYLEN, 1, w->now++, &r, NULL))
			w->failed = 1;
		w->allowed += r.allowed;
	}
	w->ns = (clock_ns(CLOCK_MONOTONIC) - t0) / (double)per_round;
	w->cpu_ns =
		(clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / (double)per_round;
	return NULL;
}

/* One cell: median over rounds of the mean ns per decision per thread
 * (wall clock, and the threads' CPU time);
 * `span` keys (split between the threads), or the hot key when keys is
 * NULL. */
static void cell(const char *spec, const char *keys, long span, int threads)
{
	drl_store *store;
	drl_limiter *lim;
	drl_error err;
	if (drl_store_open(&store, "memory://", &err) ||
	    drl_limiter_new(&lim, store, spec, NULL, &err)) {
		fprintf(stderr, "%s: %s\n", spec, err.message);
		exit(1);
	}
	worker w[MAX_THREADS];
	double med[64], med_cpu[64];
	long each = keys ? span / threads : 1;
	for (int i = 0; i < threads; i++)
		w[i] = (worker){.lim = lim,
				.keys = keys,
				.first = i * each,
				.count = each,
				.now = INT64_C(1700000000000000)};
	for (int round = -1; round < rounds; round++) {
		pthread_t th[MAX_THREADS];
		for (int i = 0; i < threads; i++)
			pthread_create(&th[i], NULL, run, &w[i]);
		double sum = 0, cpu = 0;
		for (int i = 0; i < threads; i++) {
			pthread_join(th[i], NULL);
			sum += w[i].ns;
			cpu += w[i].cpu_ns;
		}
		if (round >= 0) {
			med[round] = sum / threads;
			med_cpu[round] = cpu / threads;
		}
	}
	for (int i = 0; i < threads; i++)
		if (w[i].failed) {
			fprintf(stderr, "%s: a decision failed\n", spec);
			exit(1);
		}
	bench_sort(med, (size_t)rounds);
	bench_sort(med_cpu, (size_t)rounds);
	double ns = med[rounds / 2];
	char what[32];
	snprintf(what, sizeof what, "%ld keys", keys ? span : 1L);
	printf("| %-44s | %-10s | %d | %8.0f | %12.0f | %8.0f |\n", spec, what,
	       threads, ns, 1e9 / ns * threads, med_cpu[rounds / 2]);
	fflush(stdout);
	drl_limiter_free(lim);
	drl_store_free(store);
}

int main(int argc, char **argv)
{
	bool ok = true;
	rounds = (int)bench_arg_int(argc, argv, 1, rounds, 1, 64, &ok);
	nkeys = bench_arg_int(argc, argv, 2, nkeys, 2, 100000000, &ok);
	const char *only = argc > 3 ? argv[3] : "";
	if (!ok)
		return bench_usage("%s [rounds 1..64] [keys 2..100000000] "
				   "[spec]",
				   argv[0]);
	per_round = nkeys;
	char *keys = malloc((size_t)nkeys * KEYLEN);
	if (!keys)
		return 1;
	for (long i = 0; i < nkeys; i++) {
		char tmp[32];
		snprintf(tmp, sizeof tmp, "user-%011ld", i % 100000000000L);
		memcpy(keys + (size_t)i * KEYLEN, tmp, KEYLEN);
	}
	static const char *const specs[] = {
		"fixed_window:1000000000/1m",
		"sliding_window:1000000000/1m",
		"subwindow:1000000000/1m,subwindows=6",
		"token_bucket:1000000000/1m",
		"gcra:1000000000/1m",
		"sliding_log:1000/1s",
	};
	printf("memory store, %ld decisions per thread per round, median of "
	       "%d rounds\n\n",
	       per_round, rounds);
	printf("| %-44s | %-10s | %s | %8s | %12s | %8s |\n", "spec", "keys",
	       "T", "ns/dec", "decisions/s", "CPU ns/dec");
	printf("|---|---|---|---|---|---|\n");
	long spans[] = {1, nkeys < 10000 ? nkeys : 10000, nkeys};
	for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++)
		for (int k = 0; k < 3 && !strncmp(specs[s], only, strlen(only));
		     k++)
			for (int t = 1; t <= MAX_THREADS; t++)
				cell(specs[s], k ? keys : NULL, spans[k], t);
	free(keys);
	return 0;
}
