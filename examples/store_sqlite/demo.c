/*
 * The SQLite store decides the six algorithms through the public API
 * alone: the same sequence of requests, at the same fixed times, on
 * sqlite:// and on memory://, must give the same drl_result, field for
 * field. Prints one line per algorithm; exits 1 when any decision differs
 * (or a call fails), 2 for bad usage.
 *
 *   sqlite_store_demo /tmp/dir/demo.db [--bench N]
 *
 * --bench N then times N decisions (token_bucket, one key, one thread, at
 * the real clock) on the file and prints decisions per second.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* POSIX 2008 in a strict -std=c11 build */
#endif
#include "sqlite_store.h"

#include <drl/drl.h>
#include <drl/sys/backend.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const specs[] = {
	"fixed_window:5/1s",           "sliding_window:5/1s",
	"subwindow:5/1s,subwindows=4", "token_bucket:5/1s,burst=3",
	"gcra:5/1s,burst=3",           "sliding_log:5/1s",
};
#define NSPECS (sizeof specs / sizeof specs[0])

#define T0 INT64_C(1700000000000000) /* 2023-11-14T22:13:20Z, in µs */
#define STEPS 48
#define STEP_US INT64_C(70000) /* 70 ms: windows' edges fall between */
#define RESET_AT 30            /* before this step, forget key 0 */

/* Request i: which of two keys, its cost (mostly 1, some 2, some 0 to
 * peek) and its time. */
static const char *step_key(int i)
{
	return i % 3 == 2 ? "user-b" : "user-a";
}

static int64_t step_cost(int i)
{
	return i % 7 == 3 ? 2 : i % 11 == 5 ? 0 : 1;
}

/* Run the sequence for spec on store with a fresh key prefix into
 * res[STEPS]; 0 or the failing call's code (err says why). */
static int run_sequence(drl_store *store, const char *spec, const char *prefix,
			drl_result *res, drl_error *err)
{
	drl_limiter *lim = NULL;
	int rc = drl_limiter_new(&lim, store, spec, prefix, err);
	for (int i = 0; rc == 0 && i < STEPS; i++) {
		int64_t now = T0 + i * STEP_US;
		const char *key = step_key(i);
		if (i == RESET_AT)
			rc = drl_reset_at(lim, "user-a", 6, now, err);
		if (rc == 0)
			rc = drl_allow_at(lim, key, strlen(key), step_cost(i),
					  now, &res[i], err);
	}
	drl_limiter_free(lim);
	return rc;
}

/* Whether two results agree in every field. */
static int same(const drl_result *a, const drl_result *b)
{
	return a->allowed == b->allowed && a->limit == b->limit &&
	       a->remaining == b->remaining &&
	       a->reset_after_us == b->reset_after_us &&
	       a->retry_after_us == b->retry_after_us &&
	       a->limit_index == b->limit_index && a->path == b->path &&
	       a->would_allow == b->would_allow;
}

static void print_result(const char *where, const drl_result *r)
{
	printf("  %-9s allowed=%d limit=%" PRId64 " remaining=%" PRId64
	       " reset_after_us=%" PRId64 " retry_after_us=%" PRId64
	       " limit_index=%d path=%d would_allow=%d\n",
	       where, r->allowed, r->limit, r->remaining, r->reset_after_us,
	       r->retry_after_us, r->limit_index, r->path, r->would_allow);
}

/* "sqlite://" + path, percent-encoding every byte but [A-Za-z0-9/._~-]. */
static char *path_uri(const char *path)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyz"
				   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._~-";
	size_t n = strlen(path);
	char *u = malloc(sizeof "sqlite://" + 3 * n);
	if (!u)
		return NULL;
	char *o = u + sprintf(u, "sqlite://");
	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		if (strchr(safe, *p))
			*o++ = (char)*p;
		else
			o += sprintf(o, "%%%02X", *p);
	}
	*o = '\0';
	return u;
}

/* N decisions at the real clock on one key; prints decisions/s. */
static int bench(drl_store *store, long n, const char *prefix)
{
	drl_limiter *lim = NULL;
	drl_error err = {0};
	drl_result r;
	int rc = drl_limiter_new(&lim, store, "token_bucket:1000000/1s", prefix,
				 &err);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; rc == 0 && i < n; i++)
		rc = drl_allow(lim, "bench", 5, 1, &r, &err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	drl_limiter_free(lim);
	if (rc) {
		fprintf(stderr, "bench: %s\n", err.message);
		return 1;
	}
	double s = (double)(t1.tv_sec - t0.tv_sec) +
		   (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("bench: %ld decisions in %.3f s: %.0f decisions/s "
	       "(token_bucket, one key, one thread)\n",
	       n, s, (double)n / s);
	return 0;
}

int main(int argc, char **argv)
{
	long bench_n = 0;
	if (argc == 4 && strcmp(argv[2], "--bench") == 0)
		bench_n = strtol(argv[3], NULL, 10);
	if ((argc != 2 && argc != 4) || argv[1][0] != '/' ||
	    (argc == 4 && bench_n <= 0)) {
		fprintf(stderr,
			"usage: %s /absolute/path/file.db "
			"[--bench N]\n",
			argv[0]);
		return 2;
	}
	char *uri = path_uri(argv[1]);
	drl_store *sq = NULL, *mem = NULL;
	drl_error err = {0};
	int rc = uri ? drl_store_open_with(&sq, uri, &sqlite_store_opener, 1,
					   &err)
		     : DRL_ENOMEM;
	if (rc) {
		fprintf(stderr, "%s: %s\n", uri ? uri : "uri", err.message);
		free(uri);
		return 1;
	}
	rc = drl_store_open(&mem, "memory://", &err);
	if (rc) {
		fprintf(stderr, "memory://: %s\n", err.message);
		drl_store_free(sq);
		free(uri);
		return 1;
	}
	/* a prefix of this run's own: a file used before holds other keys */
	char prefix[64];
	snprintf(prefix, sizeof prefix, "demo-%ld-%" PRId64 ":", (long)getpid(),
		 drl_now_us());
	printf("%s: the six algorithms, %d requests each at fixed times, "
	       "against memory://\n",
	       uri, STEPS);
	int bad = 0;
	for (size_t a = 0; a < NSPECS; a++) {
		drl_result rs[STEPS], rm[STEPS];
		memset(rs, 0, sizeof rs);
		memset(rm, 0, sizeof rm);
		drl_store *on[2] = {sq, mem};
		drl_result *into[2] = {rs, rm};
		for (int k = 0; rc == 0 && k < 2; k++) {
			rc = run_sequence(on[k], specs[a], prefix, into[k],
					  &err);
			if (rc)
				printf("%-28s FAILED on %s: %s\n", specs[a],
				       k ? "memory" : "sqlite", err.message);
		}
		if (rc) {
			bad = 1;
			rc = 0;
			continue;
		}
		int allowed = 0, differ = -1;
		for (int i = 0; i < STEPS; i++) {
			allowed += rs[i].allowed;
			if (differ < 0 && !same(&rs[i], &rm[i]))
				differ = i;
		}
		if (differ >= 0) {
			printf("%-28s DIFFERS at request %d (t0+%" PRId64
			       " ms, key %s, cost %" PRId64 ")\n",
			       specs[a], differ, differ * STEP_US / 1000,
			       step_key(differ), step_cost(differ));
			print_result("sqlite:", &rs[differ]);
			print_result("memory:", &rm[differ]);
			bad = 1;
			continue;
		}
		printf("%-28s %d allowed of %d, every result as on memory://\n",
		       specs[a], allowed, STEPS);
	}
	if (bad == 0 && bench_n > 0)
		bad = bench(sq, bench_n, prefix);
	drl_store_free(mem);
	drl_store_free(sq);
	free(uri);
	return bad;
}
