/*
 * What libmemcached 1.1 lets a sliding-window decision do with its two
 * requests (increment the current window, read the previous one), measured
 * without libdrl: the same server, the behaviours the store sets (binary
 * protocol, TCP_NODELAY, non-blocking I/O), THREADS threads, each with
 * handles of its own (a memcached_st is not thread-safe).
 *
 *   raw      increment_with_initial(cur): the ceiling, 1 round trip
 *   seq      increment_with_initial(cur), then mget(prev): what the store
 *            does today, 2 round trips one after the other
 *   overlap  mget(prev) sent on a second handle (not read yet),
 *            increment_with_initial(cur) on the first, then prev fetched:
 *            2 round trips at once, on 2 connections
 *   quiet    increment with MEMCACHED_BEHAVIOR_NOREPLY (binary INCREMENTQ),
 *            then mget(cur, prev) on the same handle: 1 round trip; the
 *            count read is not the one the increment returned
 *
 * Rates: decisions/s, median of ROUNDS rounds of SECONDS each (the modes
 * take turns within a round), one hot key. Exactness: EXACT_TRIALS times, a
 * fresh counter, THREADS threads making 720 calls between them against a
 * limit of 200 (the cross-process test's numbers, tests/fixtures/hot_key.h),
 * each call admitted when the count it sees is <= 200 and otherwise refunded,
 * as the library decides; afterwards the counter must hold exactly the
 * admitted calls.
 *
 * Usage: bench_mc_pipeline PORT THREADS SECONDS ROUNDS
 * against a memcached on 127.0.0.1:PORT (e.g. `memcached -U 0 -p PORT`).
 * Keys are named after a random run id: a server can be reused.
 */
#include "bench_util.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libmemcached/memcached.h>

#define BIAS (UINT64_C(1) << 62)
#define EXACT_LIMIT 200 /* tests/fixtures/hot_key.h: 200 of 720 calls */
#define EXACT_CALLS 720
#define EXACT_TRIALS 50
#define MODES 4

static const char *const mode_name[MODES] = {"raw", "seq", "overlap", "quiet"};

typedef struct job {
	int port, mode;
	double seconds;
	long calls; /* exactness phase: calls per thread (0: timed) */
	char cur[64], prev[64];
	atomic_long done; /* decisions */
	atomic_long admitted;
	atomic_long errors;
} job;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A handle configured as the store configures its own. */
static memcached_st *handle(int port, bool noreply)
{
	memcached_st *mc = memcached_create(NULL);
	memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
	memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_NO_BLOCK, 1);
	memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
	memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_NOREPLY, noreply);
	memcached_server_add(mc, "127.0.0.1", (in_port_t)port);
	return mc;
}

/* Read every result of the pending mget; the value of `key` (biased, 0
 * when absent) goes to *v. false on an error. */
static bool fetch(memcached_st *mc, const char *key, uint64_t *v)
{
	memcached_result_st res;
	memcached_return_t rc;
	bool ok = true;

	*v = BIAS;
	memcached_result_create(mc, &res);
	while (memcached_fetch_result(mc, &res, &rc) != NULL) {
		if (strlen(key) == memcached_result_key_length(&res) &&
		    memcmp(key, memcached_result_key_value(&res),
			   strlen(key)) == 0)
			*v = strtoull(memcached_result_value(&res), NULL, 10);
	}
	if (rc != MEMCACHED_END && rc != MEMCACHED_NOTFOUND)
		ok = false;
	memcached_result_free(&res);
	return ok;
}

/* One decision in mode j->mode; *count = the current window's count the
 * decision sees. false on an error. */
static bool decide(job *j, memcached_st *a, memcached_st *b, memcached_st *q,
		   int64_t *count)
{
	const char *one[1] = {j->prev};
	size_t one_len[1] = {strlen(j->prev)};
	const char *two[2] = {j->cur, j->prev};
	size_t two_len[2] = {strlen(j->cur), strlen(j->prev)};
	size_t cl = strlen(j->cur);
	uint64_t v = 0, p;

	switch (j->mode) {
	case 0:
		if (memcached_increment_with_initial(a, j->cur, cl, 1, BIAS + 1,
						     600, &v))
			return false;
		break;
	case 1:
		if (memcached_increment_with_initial(a, j->cur, cl, 1, BIAS + 1,
						     600, &v))
			return false;
		if (memcached_mget(a, one, one_len, 1) ||
		    !fetch(a, j->prev, &p))
			return false;
		break;
	case 2:
		if (memcached_mget(b, one, one_len, 1))
			return false;
		if (memcached_increment_with_initial(a, j->cur, cl, 1, BIAS + 1,
						     600, &v)) {
			fetch(b, j->prev, &p);
			return false;
		}
		if (!fetch(b, j->prev, &p))
			return false;
		break;
	default:
		memcached_increment_with_initial(q, j->cur, cl, 1, BIAS + 1,
						 600, &v);
		if (memcached_mget(q, two, two_len, 2) || !fetch(q, j->cur, &v))
			return false;
	}
	*count = (int64_t)(v - BIAS);
	return true;
}

static void *worker(void *arg)
{
	job *j = arg;
	memcached_st *a = handle(j->port, false), *b = handle(j->port, false);
	memcached_st *q = handle(j->port, true);
	double end = now_s() + j->seconds;
	uint64_t ignored;

	for (long i = 0; j->calls > 0 ? i < j->calls : now_s() < end; i++) {
		int64_t count;
		if (!decide(j, a, b, q, &count)) {
			atomic_fetch_add(&j->errors, 1);
			continue;
		}
		atomic_fetch_add(&j->done, 1);
		if (j->calls == 0)
			continue;
		if (count <= EXACT_LIMIT)
			atomic_fetch_add(&j->admitted, 1);
		else /* over: refund, as the library does */
			memcached_decrement_with_initial(a, j->cur,
							 strlen(j->cur), 1,
							 BIAS, 600, &ignored);
	}
	memcached_free(a);
	memcached_free(b);
	memcached_free(q);
	return NULL;
}

static void run(job *j, int threads)
{
	pthread_t t[256];
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, j);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
}

int main(int argc, char **argv)
{
	static unsigned serial;
	double rate[MODES][32];
	int port, threads, rounds;
	double seconds;

	bool ok = argc == 5;
	port = (int)bench_arg_int(argc, argv, 1, 0, 1, 65535, &ok);
	threads = (int)bench_arg_int(argc, argv, 2, 0, 1, 256, &ok);
	seconds = bench_arg_num(argc, argv, 3, 0, 0.001, 3600, &ok);
	rounds = (int)bench_arg_int(argc, argv, 4, 0, 1, 32, &ok);
	if (!ok)
		return bench_usage("%s PORT THREADS SECONDS ROUNDS", argv[0]);
	srand((unsigned)time(NULL));
	unsigned run_id = (unsigned)rand();
	/* the modes take turns within each round */
	for (int r = 0; r < rounds; r++)
		for (int m = 0; m < MODES; m++) {
			job j = {.port = port, .mode = m, .seconds = seconds};
			snprintf(j.cur, sizeof j.cur, "bp:%u:%u:cur", run_id,
				 ++serial);
			snprintf(j.prev, sizeof j.prev, "bp:%u:%u:prev", run_id,
				 serial);
			double t0 = now_s();
			run(&j, threads);
			rate[m][r] =
				(double)atomic_load(&j.done) / (now_s() - t0);
			if (atomic_load(&j.errors))
				printf("%s round %d: %ld errors\n",
				       mode_name[m], r, atomic_load(&j.errors));
		}
	printf("threads %d, %d rounds of %.1f s, hot key\n", threads, rounds,
	       seconds);
	bench_sort(rate[0], (size_t)rounds);
	for (int m = 0; m < MODES; m++) {
		double raw = rate[0][rounds / 2];
		if (m > 0)
			bench_sort(rate[m], (size_t)rounds);
		printf("%-8s median %8.0f decisions/s  %.2fx raw\n",
		       mode_name[m], rate[m][rounds / 2],
		       rate[m][rounds / 2] / raw);
	}
	for (int m = 1; m < MODES; m++) {
		long lo = EXACT_CALLS, hi = 0, off = 0, lost = 0, errs = 0;
		for (int t = 0; t < EXACT_TRIALS; t++) {
			job j = {.port = port,
				 .mode = m,
				 .calls = EXACT_CALLS / threads};
			snprintf(j.cur, sizeof j.cur, "bp:%u:%u:cur", run_id,
				 ++serial);
			snprintf(j.prev, sizeof j.prev, "bp:%u:%u:prev", run_id,
				 serial);
			run(&j, threads);
			long a = atomic_load(&j.admitted);
			memcached_st *mc = handle(port, false);
			uint64_t final = 0;
			const char *k[1] = {j.cur};
			size_t kl[1] = {strlen(j.cur)};
			if (memcached_mget(mc, k, kl, 1) ||
			    !fetch(mc, j.cur, &final))
				final = 0;
			memcached_free(mc);
			/* every denial was refunded: the counter must hold
			 * exactly the admitted increments */
			lost += (int64_t)(final - BIAS) != a;
			errs += atomic_load(&j.errors);
			lo = a < lo ? a : lo;
			hi = a > hi ? a : hi;
			off += a != EXACT_LIMIT;
		}
		printf("exact %-8s %d trials of %d calls, limit %d: admitted "
		       "%ld..%ld, %ld trials not exactly the limit, %ld "
		       "counters not equal to it, %ld errors\n",
		       mode_name[m], EXACT_TRIALS,
		       EXACT_CALLS / threads * threads, EXACT_LIMIT, lo, hi,
		       off, lost, errs);
	}
	return 0;
}
