/*
 * Near cache benchmark: an abusive workload on Redis tx=lua with and
 * without the near cache (block_on_exceed=, near_cache=), and what a
 * local denial costs.
 *
 * Workload: THREADS threads (default 4) call drl_allow() for S seconds
 * (default 3): 90% of the calls on HOT (8) hot keys, far over their limit,
 * 10% on COLD (100,000) cold keys, well under it (the legitimate traffic,
 * admitted). Every key has the same limit. Each mode prints decisions/s,
 * denied/s, the store's round trips per second made by requests and by
 * the sync thread, the share of decisions made locally (path NEAR), and
 * the hot keys' round trips, and for them the admissions against the limit's allowance over the
 * run (token_bucket: burst + rate x elapsed; fixed_window: LIMIT per window
 * the run touched): the overshoot, which must be 0. Each row is the run
 * with the median decisions/s of RUNS runs, the modes' runs interleaved;
 * the overshoot column is the largest of the runs.
 *
 * Local: every one of 1024 keys blocked; 1 and 2 threads call drl_allow()
 * on all of them, or on 8 of them (hot keys: the threads meet on the same
 * locks): the denials per second a process answers with no network
 * (ns/dec is per thread).
 *
 * Run: meson test -C build --benchmark near --verbose
 * (or build/bench/bench_near [seconds] [threads] [redis URI]). Without a
 * URI it starts its own redis-server (persistence off) on a free loopback
 * port and stops it after.
 */
#include "bench_redis.h"
#include "bench_util.h"

#include <drl/drl.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { RUNS = 3, HOT = 8, COLD = 100000, THREADS_MAX = 64, LOCAL_KEYS = 1024 };

static double seconds = 3.0;
static int nthreads = 4;
static char hot[HOT][16], cold[COLD][16];

/* A limit and how to compute what it allows over [t0, t1] (µs). */
typedef struct limit {
	const char *spec;
	bool window; /* fixed_window: LIMIT per window touched */
	int64_t limit, burst, period_us;
} limit;

static const limit limits[] = {
	{"token_bucket:100/1s", false, 100, 100, 1000000},
	{"fixed_window:600/1m", true, 600, 0, 60000000},
};

static const char *const modes[] = {
	"",
	"block_on_exceed=10s",
	"near_cache=1",
	"near_cache=1;block_on_exceed=10s",
};
enum { MODES = sizeof modes / sizeof modes[0] };

typedef struct worker {
	drl_limiter *lim;
	pthread_barrier_t *go;
	_Atomic bool *stop;
	uint64_t rng;
	long calls, allowed, errors, paths[5], hot_store, hot_allowed[HOT];
} worker;

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *work(void *arg)
{
	worker *w = arg;
	pthread_barrier_wait(w->go);
	while (!atomic_load_explicit(w->stop, memory_order_relaxed)) {
		uint64_t r = next_rand(&w->rng);
		bool is_hot = r % 10 != 0;
		size_t k = (size_t)(r >> 8) % (is_hot ? HOT : COLD);
		const char *key = is_hot ? hot[k] : cold[k];
		drl_result res;
		if (drl_allow(w->lim, key, strlen(key), 1, &res, NULL)) {
			w->errors++;
			continue;
		}
		w->calls++;
		w->allowed += res.allowed;
		if (res.path >= 0 && res.path < 5)
			w->paths[res.path]++;
		if (is_hot && res.allowed)
			w->hot_allowed[k]++;
		if (is_hot && res.path == DRL_PATH_STORE)
			w->hot_store++;
	}
	return NULL;
}

typedef struct outcome {
	double rate, denied, store, hot_store, syncs, local;
	long hot_allowed, allowance, overshoot, errors;
} outcome;

/* What lim allows one key over [t0, t1] at most. */
static long allowance(const limit *lim, int64_t t0, int64_t t1)
{
	if (lim->window)
		return (long)(lim->limit *
			      (t1 / lim->period_us - t0 / lim->period_us + 1));
	return (long)(lim->burst + (t1 - t0) * lim->limit / lim->period_us + 1);
}

/* One timed run of the workload with `spec`, on fresh keys. */
static outcome run(drl_store *s, const limit *lim, const char *mode, int id)
{
	char spec[160], prefix[64];
	snprintf(spec, sizeof spec, "%s%s%s", lim->spec, mode[0] ? ";" : "",
		 mode);
	snprintf(prefix, sizeof prefix, "bench-near:%d:%d:", (int)getpid(), id);
	drl_limiter *l = NULL;
	drl_error err = {0};
	if (drl_limiter_new(&l, s, spec, prefix, &err)) {
		fprintf(stderr, "%s: %s\n", spec, err.message);
		exit(1);
	}
	pthread_barrier_t go;
	_Atomic bool stop = false;
	worker w[THREADS_MAX];
	pthread_t th[THREADS_MAX];
	pthread_barrier_init(&go, NULL, (unsigned)nthreads + 1);
	for (int i = 0; i < nthreads; i++) {
		w[i] = (worker){.lim = l, .go = &go, .stop = &stop};
		w[i].rng = 0x9E3779B97F4A7C15u * (uint64_t)(i + 1 + id * 64);
		pthread_create(&th[i], NULL, work, &w[i]);
	}
	drl_store_stats before, after;
	drl_store_stats_get(s, &before);
	int64_t t0 = drl_now_us();
	double m0 = bench_mono();
	pthread_barrier_wait(&go);
	usleep((useconds_t)(seconds * 1e6));
	atomic_store(&stop, true);
	long calls = 0, allowed = 0, paths[5] = {0}, hot_ok[HOT] = {0};
	long hot_store = 0;
	outcome o = {0};
	for (int i = 0; i < nthreads; i++) {
		pthread_join(th[i], NULL);
		calls += w[i].calls;
		allowed += w[i].allowed;
		o.errors += w[i].errors;
		hot_store += w[i].hot_store;
		for (int p = 0; p < 5; p++)
			paths[p] += w[i].paths[p];
		for (int k = 0; k < HOT; k++)
			hot_ok[k] += w[i].hot_allowed[k];
	}
	double el = bench_mono() - m0;
	int64_t t1 = drl_now_us();
	drl_store_stats_get(s, &after);
	drl_limiter_free(l);
	pthread_barrier_destroy(&go);
	long each = allowance(lim, t0, t1);
	for (int k = 0; k < HOT; k++) {
		o.hot_allowed += hot_ok[k];
		o.allowance += each;
		if (hot_ok[k] > each)
			o.overshoot += hot_ok[k] - each;
	}
	o.rate = (double)calls / el;
	o.denied = (double)(calls - allowed) / el;
	o.store = (double)paths[DRL_PATH_STORE] / el;
	o.hot_store = (double)hot_store / el;
	o.syncs = (double)(after.near_syncs - before.near_syncs) / el;
	o.local = calls ? 100.0 * (double)paths[4] / (double)calls : 0;
	return o;
}

static int by_rate(const void *a, const void *b)
{
	const outcome *x = a, *y = b;
	return (x->rate > y->rate) - (x->rate < y->rate);
}

static void workload(drl_store *s)
{
	int id = 0;
	printf("%-20s %-33s %11s %10s %8s %8s %8s %6s %19s %9s\n", "limit",
	       "mode", "decisions/s", "denied/s", "store/s", "hot st/s",
	       "syncs/s", "local", "hot allowed/allow.", "overshoot");
	for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
		outcome o[MODES][RUNS];
		for (int r = 0; r < RUNS; r++)
			for (int m = 0; m < MODES; m++)
				o[m][r] = run(s, &limits[i], modes[m], id++);
		for (int m = 0; m < MODES; m++) {
			long worst = 0, errors = 0;
			for (int r = 0; r < RUNS; r++) {
				if (o[m][r].overshoot > worst)
					worst = o[m][r].overshoot;
				errors += o[m][r].errors;
			}
			qsort(o[m], RUNS, sizeof o[m][0], by_rate);
			outcome *med = &o[m][RUNS / 2];
			printf("%-20s %-33s %11.0f %10.0f %8.0f %8.0f %8.0f "
			       "%5.1f%% %9ld/%-9ld %9ld%s\n",
			       limits[i].spec,
			       modes[m][0] ? modes[m] : "(none)", med->rate,
			       med->denied, med->store, med->hot_store,
			       med->syncs, med->local, med->hot_allowed,
			       med->allowance, worst, errors ? "  ERRORS" : "");
		}
		fflush(stdout);
	}
}

typedef struct local_job {
	drl_limiter *lim;
	int nkeys; /* the first nkeys of the LOCAL_KEYS blocked keys */
	pthread_barrier_t *go;
	_Atomic bool *stop;
	long calls, not_near;
} local_job;

static void *local_work(void *arg)
{
	local_job *j = arg;
	char key[LOCAL_KEYS][16];
	bench_name_keys((char *)key, sizeof key[0], LOCAL_KEYS, "blocked-", 0);
	pthread_barrier_wait(j->go);
	while (!atomic_load_explicit(j->stop, memory_order_relaxed)) {
		for (int k = 0; k < LOCAL_KEYS; k++) {
			drl_result r;
			int i = k % j->nkeys;
			if (drl_allow(j->lim, key[i], strlen(key[i]), 1, &r,
				      NULL) ||
			    r.path != 4)
				j->not_near++;
		}
		j->calls += LOCAL_KEYS;
	}
	return NULL;
}

/* Local denials per second with t threads on nkeys keys, all blocked. */
static double local_run(drl_limiter *l, int t, int nkeys)
{
	pthread_barrier_t go;
	_Atomic bool stop = false;
	local_job j[2];
	pthread_t th[2];
	pthread_barrier_init(&go, NULL, (unsigned)t + 1);
	for (int i = 0; i < t; i++) {
		j[i] = (local_job){
			.lim = l, .nkeys = nkeys, .go = &go, .stop = &stop};
		pthread_create(&th[i], NULL, local_work, &j[i]);
	}
	pthread_barrier_wait(&go);
	double m0 = bench_mono();
	usleep((useconds_t)(seconds / 3 * 1e6));
	atomic_store(&stop, true);
	long calls = 0, bad = 0;
	for (int i = 0; i < t; i++) {
		pthread_join(th[i], NULL);
		calls += j[i].calls;
		bad += j[i].not_near;
	}
	double el = bench_mono() - m0;
	pthread_barrier_destroy(&go);
	if (bad)
		printf("  (%ld decisions were not local)\n", bad);
	return (double)calls / el;
}

static void local(drl_store *s)
{
	static const char *const specs[] = {
		"fixed_window:1/1d;block_on_exceed=1d",
		"fixed_window:1/1d;near_cache=1",
	};
	printf("\nlocal denials, every key blocked (drl_allow, the real-time "
	       "path), median of %d runs of %.1f s\n",
	       RUNS, seconds / 3);
	printf("%-40s %6s %8s %14s %10s\n", "limit", "keys", "threads",
	       "decisions/s", "ns/dec");
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
		char prefix[64];
		drl_limiter *l = NULL;
		drl_error err = {0};
		snprintf(prefix, sizeof prefix,
			 "bench-near-local:%d:%zu:", (int)getpid(), i);
		if (drl_limiter_new(&l, s, specs[i], prefix, &err)) {
			fprintf(stderr, "%s: %s\n", specs[i], err.message);
			exit(1);
		}
		for (int k = 0; k < LOCAL_KEYS; k++) {
			char key[16];
			drl_result r;
			snprintf(key, sizeof key, "blocked-%d", k);
			drl_allow(l, key, strlen(key), 1, &r, NULL);
			drl_allow(l, key, strlen(key), 1, &r, NULL);
		}
		for (int c = 0; c < 4; c++) {
			int t = 1 + c % 2, nkeys = c < 2 ? LOCAL_KEYS : HOT;
			double r[RUNS];
			for (int k = 0; k < RUNS; k++)
				r[k] = local_run(l, t, nkeys);
			bench_sort(r, RUNS);
			printf("%-40s %6d %8d %14.0f %10.1f\n", specs[i], nkeys,
			       t, r[RUNS / 2], 1e9 * t / r[RUNS / 2]);
		}
		drl_limiter_free(l);
		fflush(stdout);
	}
}

int main(int argc, char **argv)
{
	bool ok = true;
	seconds = bench_arg_num(argc, argv, 1, seconds, 0.001, 3600, &ok);
	nthreads = (int)bench_arg_int(argc, argv, 2, nthreads, 1, THREADS_MAX,
				      &ok);
	if (!ok)
		return bench_usage("%s [seconds per run] [threads 1..%d] "
				   "[redis URI]",
				   argv[0], THREADS_MAX);
	bench_name_keys((char *)hot, sizeof hot[0], HOT, "hot-", 0);
	bench_name_keys((char *)cold, sizeof cold[0], COLD, "cold-", 6);
	bench_target t;
	if (!bench_target_open(&t, argc > 3 ? argv[3] : NULL))
		return 1;
	drl_store *s = t.store;
	printf("%s, %d threads, %d hot keys (90%% of calls), %d cold keys, "
	       "median of %d runs of %.1f s\n",
	       t.uri, nthreads, HOT, COLD, RUNS, seconds);
	workload(s);
	local(s);
	bench_target_close(&t);
	return 0;
}
