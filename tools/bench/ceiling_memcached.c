/*
 * The memcached ceiling: conc threads, one libmemcached handle each with
 * the store's transport settings, incrementing (binary protocol:
 * increment_with_initial) for the cell's duration on one key or uniform
 * random keys.
 */
#include "shared.h"
#include "common/clock.h"
#include "common/hist.h"
#include "drl_config.h"

#include <drl/sys/backend.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if DRL_HAVE_MEMCACHED
#include <libmemcached/memcached.h>

typedef struct mc_ctx {
	const char *config;
	bool binary;
	int64_t keys;
	const char *prefix;
	pthread_barrier_t ready, go;
	int64_t deadline_ns;
	_Atomic int failed;
} mc_ctx;

typedef struct mc_worker {
	mc_ctx *c;
	int id;
	tl_hist lat;
	uint64_t calls, errors;
	int64_t end_ns;
} mc_worker;

static bool mc_incr(memcached_st *mc, bool binary, const char *key, size_t klen)
{
	uint64_t v;
	memcached_return_t rc;
	if (binary) {
		/* A client that loses the race to create the key gets
		 * NOT_STORED and sends it again (as the store does). */
		for (int i = 0; i < 2; i++) {
			rc = memcached_increment_with_initial(mc, key, klen, 1,
							      1, KEY_TTL_S, &v);
			if (rc != MEMCACHED_NOTSTORED)
				break;
		}
		return rc == MEMCACHED_SUCCESS;
	}
	rc = memcached_increment(mc, key, klen, 1, &v);
	if (rc == MEMCACHED_NOTFOUND) {
		rc = memcached_add(mc, key, klen, "1", 1, KEY_TTL_S, 0);
		if (rc == MEMCACHED_NOTSTORED)
			rc = memcached_increment(mc, key, klen, 1, &v);
		else if (rc == MEMCACHED_SUCCESS)
			return true;
	}
	return rc == MEMCACHED_SUCCESS;
}

static void *mc_worker_main(void *arg)
{
	mc_worker *w = arg;
	mc_ctx *c = w->c;
	memcached_st *mc = memcached(c->config, strlen(c->config));
	/* the transport settings the store uses (backends/memcached.c) */
	if (mc != NULL) {
		memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
		memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_NO_BLOCK, 1);
	}
	uint64_t rng = bench_rand_seed((uint64_t)w->id, 2);
	char key[200];
	size_t plen = strlen(c->prefix);

	memcpy(key, c->prefix, plen);
	if (mc == NULL) {
		atomic_store(&c->failed, 1);
	} else {
		size_t l = (size_t)snprintf(key + plen, sizeof key - plen,
					    "w%d", w->id);
		if (!mc_incr(mc, c->binary, key, plen + l))
			atomic_store(&c->failed, 1);
	}
	pthread_barrier_wait(&c->ready);
	pthread_barrier_wait(&c->go);
	int64_t t1 = tl_mono_ns();
	while (mc != NULL &&
	       !atomic_load_explicit(&c->failed, memory_order_relaxed)) {
		int64_t t0 = tl_mono_ns();
		if (t0 >= c->deadline_ns)
			break;
		size_t klen = plen + bench_pick_key(key + plen, c->keys, &rng);
		bool ok = mc_incr(mc, c->binary, key, klen);
		t1 = tl_mono_ns();
		tl_hist_add(&w->lat, t1 - t0);
		w->calls++;
		w->errors += !ok;
	}
	w->end_ns = t1;
	if (mc)
		memcached_free(mc);
	return NULL;
}

/* libmemcached configuration for a memcached:// URI ("--SERVER=h:p ..."). */
static bool mc_config(const char *uri, char *cfg, size_t cap, bool *binary,
		      char *why, size_t whycap)
{
	drl_uri *u = NULL;
	if (!bench_uri_parse(&u, uri, why, whycap))
		return false;
	drl_error err = {0};
	bool ok = false;
	size_t o = 0;
	const char *bin = drl_uri_option(u, "binary");
	*binary = !(bin && strcmp(bin, "0") == 0);
	if (strcmp(drl_uri_scheme(u), "memcached+unix") == 0) {
		const char *path = drl_uri_path(u);
		o = (size_t)snprintf(cfg, cap, "--SOCKET=\"%s\"",
				     path ? path : "");
	} else if (strcmp(drl_uri_scheme(u), "memcached") == 0) {
		/* The library's host grammar and default port. */
		drl_hostport hp[64];
		size_t n;
		if (drl_hostport_list(drl_uri_hosts(u), 11211, "memcached URI",
				      hp, 64, &n, &err) != 0) {
			bench_copy_msg(why, whycap, err.message);
			goto out;
		}
		for (size_t i = 0; i < n && o < cap; i++) {
			if (hp[i].ipv6) {
				snprintf(why, whycap,
					 "cannot build a raw client for an "
					 "IPv6 host");
				goto out;
			}
			o += (size_t)snprintf(cfg + o, cap - o,
					      "%s--SERVER=%s:%d", o ? " " : "",
					      hp[i].host, hp[i].port);
		}
	} else {
		snprintf(why, whycap, "not a memcached:// URI");
		goto out;
	}
	if (*binary && o < cap)
		o += (size_t)snprintf(cfg + o, cap - o, " --BINARY-PROTOCOL");
	if (o >= cap) {
		snprintf(why, whycap, "URI too long");
		goto out;
	}
	ok = true;
out:
	drl_uri_free(u);
	return ok;
}

/* One round of the memcached ceiling: conc threads incrementing for
 * duration_ns. */
bool bench_ceiling_memcached(ceiling *cl, const char *uri, int64_t keys,
			     int conc, int64_t duration_ns, const char *prefix,
			     double *rps, double *p50, double *p99)
{
	char cfg[1024];
	mc_ctx c = {.config = cfg, .keys = keys, .prefix = prefix};
	mc_worker *w;
	pthread_t *th;
	int started;

	if (!mc_config(uri, cfg, sizeof cfg, &c.binary, cl->note,
		       sizeof cl->note))
		return false;
	snprintf(cl->tool, sizeof cl->tool, "libmemcached %s",
		 c.binary ? "increment_with_initial (binary)" : "incr (ascii)");
	w = calloc((size_t)conc, sizeof *w);
	th = calloc((size_t)conc, sizeof *th);
	if (w == NULL || th == NULL ||
	    pthread_barrier_init(&c.ready, NULL, (unsigned)conc + 1) != 0) {
		snprintf(cl->note, sizeof cl->note, "out of memory");
		free(w);
		free(th);
		return false;
	}
	pthread_barrier_init(&c.go, NULL, (unsigned)conc + 1);
	for (started = 0; started < conc; started++) {
		w[started].c = &c;
		w[started].id = started;
		if (pthread_create(&th[started], NULL, mc_worker_main,
				   &w[started]) != 0) {
			fprintf(stderr, "drl bench: cannot start threads\n");
			abort();
		}
	}
	pthread_barrier_wait(&c.ready);
	int64_t start = tl_mono_ns();
	c.deadline_ns = start + duration_ns;
	pthread_barrier_wait(&c.go);
	tl_hist all = {{0}, 0, 0};
	uint64_t calls = 0, errors = 0;
	int64_t end = start;
	for (int i = 0; i < conc; i++) {
		pthread_join(th[i], NULL);
		tl_hist_merge(&all, &w[i].lat);
		calls += w[i].calls;
		errors += w[i].errors;
		if (w[i].end_ns > end)
			end = w[i].end_ns;
	}
	pthread_barrier_destroy(&c.ready);
	pthread_barrier_destroy(&c.go);
	free(w);
	free(th);
	if (atomic_load(&c.failed) || errors > calls / 1000 || calls == 0 ||
	    end <= start) {
		snprintf(cl->note, sizeof cl->note,
			 "raw increments failed (%" PRIu64 " of %" PRIu64 ")",
			 errors, calls);
		return false;
	}
	*rps = (double)calls / ((double)(end - start) / 1e9);
	*p50 = tl_hist_quantile_us(&all, 0.5);
	*p99 = tl_hist_quantile_us(&all, 0.99);
	snprintf(cl->command, sizeof cl->command,
		 "built in: %d threads, one memcached_st each, %s on %s for "
		 "%.1f s",
		 conc,
		 c.binary ? "memcached_increment_with_initial"
			  : "memcached_increment",
		 keys == 1 ? "one key" : "uniform random keys",
		 (double)duration_ns / 1e9);
	return true;
}
#endif /* DRL_HAVE_MEMCACHED */
