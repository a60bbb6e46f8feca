/*
 * --ceiling: the same server measured without the library, once per
 * (server, spec, keys, concurrency, pipeline depth) and round, whichever
 * cells share it (tx=lua and tx=watch on one server). The measuring is in
 * bench/ceiling_redis.c (redis-benchmark) and bench/ceiling_memcached.c
 * (raw increments); this file keeps the results and reads URI options.
 */
#include "shared.h"
#include "drl_config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The median of v[0..n) (n >= 1): the middle value, or the mean of the
 * middle two. */
double bench_median(const double *v, int n)
{
	double s[ROUNDS_MAX];
	memcpy(s, v, sizeof *v * (size_t)n);
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
			double t = s[j];
			s[j] = s[j - 1];
			s[j - 1] = t;
		}
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* Every ceiling measured or tried in this run, in the order first asked
 * for. */
static ceiling ceilings[CEILINGS_MAX];
static size_t nceilings;
static uint64_t ceiling_serial;

const ceiling *bench_ceilings(size_t *n)
{
	*n = nceilings;
	return ceilings;
}

static ceiling *ceiling_find(const char *id)
{
	for (size_t i = 0; i < nceilings; i++)
		if (strcmp(ceilings[i].id, id) == 0)
			return &ceilings[i];
	return NULL;
}

/* The ceiling id of a cell ("" when no ceiling applies). The Redis script
 * ceiling depends on the server and the spec, not on tx=; memcached's
 * increment ceiling only on the servers. */
void bench_ceiling_id(char *id, size_t cap, const char *uri, const char *spec,
		      int64_t keys, int conc, int pipeline)
{
	id[0] = '\0';
	if (pipeline > 1 && strncmp(uri, "redis://", 8) != 0 &&
	    strncmp(uri, "redis+unix://", 13) != 0)
		return; /* only redis-benchmark pipelines */
	size_t hl = strcspn(uri, "?");
	/* A cluster has no single server to drive (bench_cluster measures
	 * the cluster: docs/performance.md). */
	if (strncmp(uri, "redis-cluster:", 14) == 0)
		return;
	if (strncmp(uri, "redis", 5) == 0)
		snprintf(id, cap, "%.*s|%s|%" PRId64 "|%d|P%d", (int)hl, uri,
			 spec, keys, conc, pipeline);
	else if (strncmp(uri, "memcached", 9) == 0)
		snprintf(id, cap, "%.*s|%" PRId64 "|%d", (int)hl, uri, keys,
			 conc);
}

/* The ceiling for a cell, measured for round `round` unless that round
 * (or a failure) is already recorded: cells that share a ceiling (tx=lua
 * and tx=watch on one server) measure it once per round. NULL when no
 * ceiling applies. */
ceiling *bench_ceiling_for(const char *uri, const char *spec, int64_t keys,
			   int conc, int pipeline, int64_t duration_ns,
			   const char *run_prefix, int round)
{
	char id[600];
	char prefix[96];
	double rps = 0, p50 = 0, p99 = 0;
	bool ok = false;

	bench_ceiling_id(id, sizeof id, uri, spec, keys, conc, pipeline);
	if (id[0] == '\0')
		return NULL;
	ceiling *cl = ceiling_find(id);
	if (cl == NULL) {
		if (nceilings == CEILINGS_MAX)
			return NULL;
		cl = &ceilings[nceilings++];
		memset(cl, 0, sizeof *cl);
		bench_copy_msg(cl->id, sizeof cl->id, id);
	}
	if (cl->failed || cl->nrounds > round || cl->nrounds == ROUNDS_MAX)
		return cl;
	/* a fresh key every round: no state carried over */
	snprintf(prefix, sizeof prefix, "%sc%" PRIu64 ":", run_prefix,
		 ++ceiling_serial);
	if (strncmp(uri, "redis", 5) == 0) {
#if DRL_HAVE_REDIS
		ok = bench_ceiling_redis(cl, uri, spec, keys, conc, pipeline,
					 duration_ns, prefix, &rps, &p50, &p99);
#else
		bench_copy_msg(cl->note, sizeof cl->note,
			       "built without hiredis");
#endif
	} else {
#if DRL_HAVE_MEMCACHED
		ok = bench_ceiling_memcached(cl, uri, keys, conc, duration_ns,
					     prefix, &rps, &p50, &p99);
#else
		bench_copy_msg(cl->note, sizeof cl->note,
			       "built without libmemcached");
#endif
	}
	if (!ok) {
		cl->failed = true;
		return cl;
	}
	cl->rate[cl->nrounds] = rps;
	cl->p50[cl->nrounds] = p50;
	cl->p99[cl->nrounds] = p99;
	cl->nrounds++;
	cl->ok = true;
	cl->per_s = bench_median(cl->rate, cl->nrounds);
	cl->p50_us = bench_median(cl->p50, cl->nrounds);
	cl->p99_us = bench_median(cl->p99, cl->nrounds);
	return cl;
}
