/*
 * The async API against blocking threads, on Redis tx=lua: decisions/s and
 * latency percentiles (p50, p99, p99.9) of
 *   - async: one loop thread (poll(2) on drl_async_fd) keeping 64
 *     requests in flight through a drl_async context of 16 threads,
 *     each callback starting the next request;
 *   - blocking: THREADS threads calling drl_allow() in a loop.
 * A latency is from the start (drl_async_allow / drl_allow called) to the
 * callback's (or the return's) first instruction. Requests cycle over
 * KEYS keys at the real clock under limits high enough that every request
 * is admitted and writes. The modes' runs interleave; each line is one
 * run's percentiles (all of that run's requests, sorted).
 *
 * Run: meson test -C build --benchmark async --verbose
 * (or build/bench/bench_async [seconds per run] [runs] [in flight]
 * [workers] [redis URI]).
 * Without a URI it starts its own redis-server (persistence off) on a
 * free loopback port and stops it after.
 */
#include "bench_redis.h"
#include "bench_util.h"

#include <drl/async.h>

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { IN_FLIGHT_MAX = 1024, THREADS = 16, KEYS = 10000, KEYLEN = 10 };

/* The defaults: 64 requests in flight on one loop, 16 worker threads. */
static int in_flight = 64, workers = 16;
enum { MAX_SAMPLES = 4 * 1024 * 1024 };

static char keys[KEYS][KEYLEN + 1];

/* Latencies of one run, µs; threads claim slots with an atomic add. */
static double *lat;
static _Atomic size_t nlat;

static void record(double us)
{
	size_t i = nlat++;
	if (i < MAX_SAMPLES)
		lat[i] = us;
}

/* Print one run: decisions/s and percentiles. */
static void report(const char *mode, double secs, long failed)
{
	size_t n = nlat < MAX_SAMPLES ? nlat : MAX_SAMPLES;
	bench_sort(lat, n);
	printf("%-34s %10.0f %8.0f %8.0f %8.0f %6ld\n", mode, (double)n / secs,
	       lat[n / 2], lat[n * 99 / 100], lat[n * 999 / 1000], failed);
	fflush(stdout);
}

/* ---- async: one loop thread ---------------------------------------------- */

typedef struct loop loop;

/* One of the IN_FLIGHT places: its request's start time. */
typedef struct slot {
	loop *lp;
	double t0;
} slot;

struct loop {
	drl_async *a;
	drl_limiter *l;
	double end;
	size_t next_key;
	long inflight, failed;
	slot slots[IN_FLIGHT_MAX];
};

static void start(slot *s);

/* Record the latency, and start the slot's next request until the end. */
static void on_done(drl_async *a, int rc, const drl_result *r,
		    const drl_error *err, void *arg)
{
	(void)a;
	(void)err;
	slot *s = arg;
	record((bench_mono() - s->t0) * 1e6);
	if (rc || !r->allowed)
		s->lp->failed++;
	s->lp->inflight--;
	if (bench_mono() < s->lp->end)
		start(s);
}

static void start(slot *s)
{
	loop *lp = s->lp;
	const char *key = keys[lp->next_key];
	lp->next_key = (lp->next_key + 1) % KEYS;
	s->t0 = bench_mono();
	drl_error err = {0};
	if (drl_async_allow(lp->a, lp->l, key, KEYLEN, 1, on_done, s, &err)) {
		fprintf(stderr, "start: %s\n", err.message);
		exit(1);
	}
	lp->inflight++;
}

/* in_flight requests in flight for secs, on this thread's poll loop. */
static long run_async(drl_async *a, drl_limiter *l, double secs)
{
	static loop lp;
	lp = (loop){.a = a, .l = l, .end = bench_mono() + secs};
	for (int i = 0; i < in_flight; i++) {
		lp.slots[i].lp = &lp;
		start(&lp.slots[i]);
	}
	struct pollfd p = {.fd = drl_async_fd(a), .events = POLLIN};
	while (lp.inflight > 0) {
		poll(&p, 1, 1000);
		drl_async_process(a);
	}
	return lp.failed;
}

/* ---- blocking: THREADS threads -------------------------------------------- */

typedef struct worker {
	pthread_t th;
	drl_limiter *l;
	double end;
	size_t key;
	long failed;
} worker;

static void *blocking(void *p)
{
	worker *w = p;
	while (bench_mono() < w->end) {
		drl_result r;
		double t0 = bench_mono();
		int rc = drl_allow(w->l, keys[w->key], KEYLEN, 1, &r, NULL);
		record((bench_mono() - t0) * 1e6);
		if (rc || !r.allowed)
			w->failed++;
		w->key = (w->key + THREADS) % KEYS;
	}
	return NULL;
}

static long run_blocking(drl_limiter *l, double secs)
{
	static worker w[THREADS];
	long failed = 0;
	double end = bench_mono() + secs;
	for (int i = 0; i < THREADS; i++) {
		w[i] = (worker){.l = l, .end = end, .key = (size_t)i};
		pthread_create(&w[i].th, NULL, blocking, &w[i]);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(w[i].th, NULL);
		failed += w[i].failed;
	}
	return failed;
}

int main(int argc, char **argv)
{
	bool ok = true;
	double secs = bench_arg_num(argc, argv, 1, 3, 0.001, 3600, &ok);
	int runs = (int)bench_arg_int(argc, argv, 2, 3, 1, 1000, &ok);
	in_flight = (int)bench_arg_int(argc, argv, 3, in_flight, 1,
				       IN_FLIGHT_MAX, &ok);
	workers = (int)bench_arg_int(argc, argv, 4, workers, 1,
				     DRL_ASYNC_THREADS_MAX, &ok);
	if (!ok)
		return bench_usage("%s [seconds per run] [runs] [in flight] "
				   "[workers] [URI]",
				   argv[0]);
	bench_name_keys((char *)keys, sizeof keys[0], KEYS, "key-", 6);
	bench_target t;
	if (!bench_target_open(&t, argc > 5 ? argv[5] : NULL))
		return 1;
	drl_store *s = t.store;
	lat = malloc(MAX_SAMPLES * sizeof *lat);
	drl_limiter *l = NULL;
	drl_async *a = NULL;
	drl_async_opts o = {.threads = workers};
	drl_error err = {0};
	if (lat == NULL ||
	    drl_limiter_new(&l, s, "token_bucket:1000000000/1s",
			    "bench-async:", &err) ||
	    drl_async_new(&a, &o, &err)) {
		fprintf(stderr, "%s: %s\n", t.uri, err.message);
		return 1;
	}
	printf("%s, token_bucket, %d keys, %d runs of %.1f s each\n", t.uri,
	       KEYS, runs, secs);
	printf("%-34s %10s %8s %8s %8s %6s\n", "mode", "decisions/s", "p50 us",
	       "p99 us", "p99.9 us", "failed");
	char async_mode[64], blocking_mode[64];
	snprintf(async_mode, sizeof async_mode,
		 "async: 1 loop, %d in flight, %d workers", in_flight, workers);
	snprintf(blocking_mode, sizeof blocking_mode, "blocking: %d threads",
		 THREADS);
	for (int r = 0; r < runs; r++) {
		nlat = 0;
		long failed = run_async(a, l, secs);
		report(async_mode, secs, failed);
		nlat = 0;
		failed = run_blocking(l, secs);
		report(blocking_mode, secs, failed);
	}
	drl_async_free(a);
	drl_limiter_free(l);
	free(lat);
	bench_target_close(&t);
	return 0;
}
