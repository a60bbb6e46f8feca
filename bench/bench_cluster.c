/*
 * Redis Cluster scaling: decisions/s on a cluster of 1 master against one
 * of 3 masters (no replicas), and on one plain Redis (redis://, the cost
 * of the cluster's routing), all started here on loopback ports, with the
 * same client (THREADS threads calling drl_allow() on keys drawn
 * uniformly from KEYS, every request admitted and written: tx=lua,
 * token_bucket). Rounds alternate between the two clusters; medians.
 *
 * Besides decisions/s it reads each master's CPU time (INFO cpu) and the
 * client's (getrusage) over each round, so it can say what a decision
 * costs a master: on a machine with fewer cores than masters + client
 * (this one has 2) the rate cannot scale, but the server CPU per decision
 * gives the capacity of one master core, and so the rate N masters reach
 * with a core each (docs/performance.md, "Redis Cluster").
 *
 * Run: meson test -C build --benchmark cluster --verbose
 * (or build/tests/bench_cluster [seconds per round] [rounds]).
 */
#include "bench_util.h"
#include "cluster_fixture.h"

#include <drl/drl.h>

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

enum { THREADS = 32, KEYS = 100000, ROUNDS_MAX = 15 };

static double seconds = 3.0;

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_self(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* used_cpu_sys + used_cpu_user of every master of c (of the plain
 * server when c is NULL), seconds. */
static drl_server plain;
static double cpu_masters(drl_cluster *c)
{
	double sum = 0;
	for (int i = 0; i < (c ? c->masters : 1); i++) {
		redisReply *r;
		if (c) {
			const char *argv[2] = {"INFO", "cpu"};
			r = drl_fixture_cluster_command(c, i, 2, argv);
		} else {
			redisContext *ctx =
				redisConnect("127.0.0.1", plain.port);
			r = ctx && !ctx->err ? redisCommand(ctx, "INFO cpu")
					     : NULL;
			redisFree(ctx);
		}
		if (r == NULL || r->type != REDIS_REPLY_STRING) {
			fprintf(stderr, "INFO cpu failed on node %d\n", i);
			exit(1);
		}
		const char *p;
		if ((p = strstr(r->str, "used_cpu_sys:")))
			sum += atof(p + 13);
		if ((p = strstr(r->str, "used_cpu_user:")))
			sum += atof(p + 14);
		freeReplyObject(r);
	}
	return sum;
}

typedef struct worker {
	drl_limiter *lim;
	unsigned seed;
	atomic_bool *stop;
	long done;
} worker;

static void *work(void *arg)
{
	worker *w = arg;
	while (!atomic_load_explicit(w->stop, memory_order_relaxed)) {
		char key[16];
		int n = snprintf(key, sizeof key, "k%d",
				 rand_r(&w->seed) % KEYS);
		drl_result r;
		drl_error err = {0};
		if (drl_allow(w->lim, key, (size_t)n, 1, &r, &err) != 0 ||
		    !r.allowed) {
			fprintf(stderr, "decision failed: %s\n", err.message);
			exit(1);
		}
		w->done++;
	}
	return NULL;
}

typedef struct round_result {
	double rate;      /* decisions/s */
	double server_us; /* master CPU µs per decision, all masters */
	double client_us; /* client CPU µs per decision */
} round_result;

static round_result one_round(drl_cluster *c, drl_limiter *l)
{
	atomic_bool stop = false;
	pthread_t th[THREADS];
	worker w[THREADS];
	double s0 = cpu_masters(c), c0 = cpu_self(), t0 = mono();
	for (int i = 0; i < THREADS; i++) {
		w[i] = (worker){.lim = l,
				.seed = (unsigned)(i * 7919 + 1),
				.stop = &stop};
		pthread_create(&th[i], NULL, work, &w[i]);
	}
	struct timespec ts = {
		(time_t)seconds,
		(long)((seconds - (double)(time_t)seconds) * 1e9)};
	nanosleep(&ts, NULL);
	atomic_store(&stop, true);
	long done = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		done += w[i].done;
	}
	double t = mono() - t0, cl = cpu_self() - c0, sv = cpu_masters(c) - s0;
	return (round_result){(double)done / t, sv * 1e6 / (double)done,
			      cl * 1e6 / (double)done};
}

static double median(double *v, int n)
{
	bench_sort(v, (size_t)n);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	bool ok = true;
	seconds = bench_arg_num(argc, argv, 1, seconds, 0.001, 600, &ok);
	int rounds = (int)bench_arg_int(argc, argv, 2, 5, 1, ROUNDS_MAX, &ok);
	if (!ok)
		return bench_usage("%s [seconds 0.001..600] [rounds 1..%d]",
				   argv[0], ROUNDS_MAX);
	/* Cells: a 1-master cluster, a 3-master cluster, one plain Redis. */
	enum { CELLS = 3 };
	static drl_cluster store_cl[2];
	drl_cluster *cl[CELLS] = {&store_cl[0], &store_cl[1], NULL};
	const int masters[CELLS] = {1, 3, 1};
	const char *name[CELLS] = {"cluster, 1 master", "cluster, 3 masters",
				   "redis:// (one server)"};
	drl_store *store[CELLS];
	drl_limiter *lim[CELLS];
	for (int k = 0; k < CELLS; k++) {
		char hosts[256], uri[512];
		int rc = cl[k] ? drl_fixture_cluster_start(cl[k], masters[k], 0)
			       : drl_fixture_redis_start(&plain, NULL);
		if (rc != 0) {
			fprintf(stderr, "cannot start %s\n", name[k]);
			return 1;
		}
		if (cl[k]) {
			drl_fixture_cluster_hosts(cl[k], hosts, sizeof hosts);
			snprintf(uri, sizeof uri,
				 "redis-cluster://%s?tx=lua&pool=%d", hosts,
				 THREADS);
		} else {
			snprintf(uri, sizeof uri,
				 "redis://127.0.0.1:%d?tx=lua&pool=%d",
				 plain.port, THREADS);
		}
		drl_error err = {0};
		if (drl_store_open(&store[k], uri, &err) ||
		    drl_limiter_new(&lim[k], store[k],
				    "token_bucket:1000000000/1s", NULL, &err)) {
			fprintf(stderr, "%s: %s\n", uri, err.message);
			return 1;
		}
	}
	double rate[CELLS][ROUNDS_MAX], sv[CELLS][ROUNDS_MAX],
		cu[CELLS][ROUNDS_MAX];
	for (int k = 0; k < CELLS; k++) /* warm-up: connections, scripts */
		(void)one_round(cl[k], lim[k]);
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < CELLS; k++) {
			round_result x = one_round(cl[k], lim[k]);
			rate[k][r] = x.rate;
			sv[k][r] = x.server_us;
			cu[k][r] = x.client_us;
			fprintf(stderr, "round %d, %s: %.0f/s\n", r, name[k],
				x.rate);
		}
	}
	printf("Redis Cluster, tx=lua, token_bucket, %d threads, %d keys, "
	       "%d rounds of %.1f s (medians)\n",
	       THREADS, KEYS, rounds, seconds);
	printf("| store | decisions/s | master CPU µs/decision | client CPU "
	       "µs/decision | decisions per master-CPU-s |\n|---|--:|--:|--:|"
	       "--:|\n");
	double med[CELLS];
	for (int k = 0; k < CELLS; k++) {
		double ms = median(sv[k], rounds), mc = median(cu[k], rounds);
		med[k] = median(rate[k], rounds);
		printf("| %s | %.0f | %.1f | %.1f | %.0f |\n", name[k], med[k],
		       ms, mc, 1e6 / ms);
	}
	printf("3 masters / 1 master: %.2fx; cluster 1 master / redis://: "
	       "%.2fx (same run)\n",
	       med[1] / med[0], med[0] / med[2]);
	for (int k = 0; k < CELLS; k++) {
		drl_limiter_free(lim[k]);
		drl_store_free(store[k]);
		if (cl[k])
			drl_fixture_cluster_stop(cl[k]);
		else
			drl_fixture_stop(&plain);
	}
	return 0;
}
