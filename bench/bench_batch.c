/*
 * Batch benchmark: decisions/s of drl_allow_at() one request at a time
 * against drl_allow_batch_at() with batches of 100 and of 1000, one
 * thread, on Redis tx=lua, for token_bucket and fixed_window. Each cell is
 * the median of RUNS timed runs (after a warm-up run; the modes' runs
 * interleaved); the last column is the cell's rate over the single-call
 * rate.
 * Run: meson test -C build --benchmark batch --verbose
 * (or build/bench/bench_batch [seconds per run] [redis URI]). Without a
 * URI it starts its own redis-server (persistence off) on a free loopback
 * port and stops it after.
 *
 * Requests cycle over KEYS distinct keys at the real time, under limits so
 * high that every request is admitted and writes, as the single path does.
 */
#include "bench_redis.h"
#include "bench_util.h"

#include <drl/drl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { RUNS = 3, KEYS = 10000, KEYLEN = 10 };

static double seconds = 1.0;
static char keys[KEYS][KEYLEN + 1];
static drl_batch_item items[1000];

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* One timed run: decisions/s, one by one (batch 0) or in batches; exits
 * on any failed decision. */
static double run(drl_limiter *l, size_t batch)
{
	long done = 0, k = 0;
	double t0 = bench_mono(), t;
	do {
		drl_error err = {0};
		if (batch == 0) {
			drl_result r;
			for (int i = 0; i < 100; i++, k = (k + 1) % KEYS)
				if (drl_allow_at(l, keys[k], KEYLEN, 1,
						 now_us(), &r, &err) ||
				    !r.allowed) {
					fprintf(stderr, "single: %s\n",
						err.message);
					exit(1);
				}
			done += 100;
		} else {
			for (size_t i = 0; i < batch; i++, k = (k + 1) % KEYS)
				items[i] = (drl_batch_item){.key = keys[k],
							    .keylen = KEYLEN,
							    .cost = 1};
			if (drl_allow_batch_at(l, items, batch, now_us(),
					       &err)) {
				fprintf(stderr, "batch: %s\n", err.message);
				exit(1);
			}
			for (size_t i = 0; i < batch; i++)
				if (items[i].rc || !items[i].result.allowed) {
					fprintf(stderr, "batch item %zu: %s\n",
						i, err.message);
					exit(1);
				}
			done += (long)batch;
		}
		t = bench_mono();
	} while (t - t0 < seconds);
	return (double)done / (t - t0);
}

int main(int argc, char **argv)
{
	static const char *const specs[] = {"token_bucket:1000000/1s",
					    "fixed_window:1000000/1s"};
	static const size_t batches[] = {0, 100, 1000};
	bool ok = true;
	seconds = bench_arg_num(argc, argv, 1, seconds, 0.001, 3600, &ok);
	if (!ok)
		return bench_usage("%s [seconds per run] [redis URI]", argv[0]);
	bench_name_keys((char *)keys, sizeof keys[0], KEYS, "key-", 6);

	bench_target t;
	if (!bench_target_open(&t, argc > 2 ? argv[2] : NULL))
		return 1;
	drl_store *s = t.store;
	drl_error err = {0};
	printf("%s, 1 thread, %d keys, median of %d runs of %.1f s\n", t.uri,
	       KEYS, RUNS, seconds);
	printf("%-26s %-10s %14s %8s\n", "limit", "calls", "decisions/s",
	       "ratio");
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
		drl_limiter *l = NULL;
		char prefix[32];
		snprintf(prefix, sizeof prefix,
			 "bench-batch:%d:%zu:", (int)getpid(), i);
		if (drl_limiter_new(&l, s, specs[i], prefix, &err)) {
			fprintf(stderr, "%s: %s\n", specs[i], err.message);
			return 1;
		}
		/* Runs interleaved (single, 100, 1000, single, ...), so that
		 * a noisy neighbour slows every mode alike. */
		enum { MODES = sizeof batches / sizeof batches[0] };
		double r[MODES][RUNS];
		for (size_t b = 0; b < MODES; b++)
			run(l, batches[b]); /* warm-up: keys, script cache */
		for (int j = 0; j < RUNS; j++)
			for (size_t b = 0; b < MODES; b++)
				r[b][j] = run(l, batches[b]);
		for (size_t b = 0; b < MODES; b++) {
			char calls[32] = "single";
			bench_sort(r[b], RUNS);
			if (batches[b])
				snprintf(calls, sizeof calls, "batch %zu",
					 batches[b]);
			printf("%-26s %-10s %14.0f %7.1fx\n", specs[i], calls,
			       r[b][RUNS / 2], r[b][RUNS / 2] / r[0][RUNS / 2]);
		}
		fflush(stdout);
		drl_limiter_free(l);
	}
	bench_target_close(&t);
	return 0;
}
