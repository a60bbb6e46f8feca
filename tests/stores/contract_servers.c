/*
 * The store conformance suite (tests/fixtures/store_contract.h) on real
 * servers, one store per run, named by the only argument:
 *   redis_auto     redis:// with tx=auto (the default: add_read too)
 *   redis_lua      redis:// with tx=lua (scripts, batches)
 *   redis_watch    redis:// with tx=watch&clock=server (WATCH/MULTI, now)
 *   redis_cluster  redis-cluster:// on three masters (tx=lua)
 *   memcached      memcached://, binary and ASCII protocols, pool=4
 * The fixtures start the servers on free loopback ports. A missing server
 * binary skips (exit 77), or fails under CI=true. Backends are opened
 * through the public API (drl_backend_open_with), each with a key prefix
 * of its own; only the fixtures are test code of this tree.
 */
#include "store_contract.h"

#include "server_fixture.h"
#include "testutil.h"
#ifdef CONTRACT_HAVE_CLUSTER
#include "cluster_fixture.h"
#endif

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* How to reach one store: base "scheme://hosts", options without '?'. */
typedef struct runner {
	char base[600];
	const char *opts;
	char uri[800]; /* base?opts: the hot-key check's URI */
} runner;

/* Backends opened so far (every runner's): part of each new prefix. */
static int opened;

/* A backend on r's store with a key prefix no earlier open used, and a
 * timeout a slow machine (sanitizers, a busy core) does not reach. */
static int open_fresh_prefix(void *arg, drl_backend **out, drl_error *err)
{
	runner *r = arg;
	char uri[1000];
	snprintf(uri, sizeof uri, "%s?%s&timeout_ms=%lld&prefix=c%d_%d_",
		 r->base, r->opts, (long long)tu_bound_ms(1000), (int)getpid(),
		 opened++);
	return drl_backend_open_with(out, uri, NULL, 0, err);
}

/* One target of a store: its options and how it differs. */
typedef struct variant {
	const char *name;
	const char *opts;
	int64_t ttl_min_us; /* 0: the suite's default */
	bool may_evict;
	int rounds;
} variant;

/* Run the suite on base with each variant; the number of failed checks. */
static int run(const char *base, const variant *v, size_t n)
{
	int failed = 0;
	for (size_t i = 0; i < n; i++) {
		runner r = {.opts = v[i].opts};
		snprintf(r.base, sizeof r.base, "%s", base);
		snprintf(r.uri, sizeof r.uri, "%s?%s", base, v[i].opts);
		const store_contract_target t = {
			.name = v[i].name,
			.open = open_fresh_prefix,
			.arg = &r,
			.uri = r.uri,
			.ttl_min_us = v[i].ttl_min_us,
			.may_evict = v[i].may_evict,
			.threads_rounds = v[i].rounds,
		};
		failed += store_contract_run(&t);
	}
	return failed;
}

/* Start one server with `start`, run the variants on scheme://its port,
 * stop it: 0 passed, 1 failed (or could not start), 77 skipped. */
static int on_server(int (*start)(drl_server *, const char *const *),
		     const char *what, const char *scheme, const variant *v,
		     size_t n)
{
	drl_server s;
	int rc = start(&s, NULL);
	if (rc == 1) {
		printf("%s not installed: skipping\n", what);
		return 77;
	}
	if (rc != 0) {
		fprintf(stderr, "cannot start %s\n", what);
		return 1;
	}
	char base[64];
	snprintf(base, sizeof base, "%s://127.0.0.1:%d", scheme, s.port);
	int failed = run(base, v, n);
	drl_fixture_stop(&s);
	return failed ? 1 : 0;
}

static const variant redis_auto[] = {{"redis auto", "tx=auto", 0, false, 2}};
static const variant redis_lua[] = {{"redis lua", "tx=lua", 0, false, 2}};
static const variant redis_watch[] = {
	{"redis watch", "tx=watch&clock=server", 0, false, 2}};
/* memcached counts TTLs in whole seconds and is a cache (it may evict). */
static const variant memcached[] = {
	{"memcached binary", "binary=1&pool=4", SEC, true, 4},
	{"memcached ascii", "binary=0&pool=4", SEC, true, 4},
};

#ifdef CONTRACT_HAVE_CLUSTER
static int cluster(void)
{
	static const variant lua[] = {{"redis cluster", "tx=lua", 0, false, 2}};
	drl_cluster c;
	char hosts[512], base[600];
	int have = 0;
	memset(&c, 0, sizeof c);
	if (drl_fixture_cluster_setup(&c, 3, 0, hosts, sizeof hosts, &have)) {
		fprintf(stderr, "cannot start a Redis Cluster\n");
		drl_fixture_cluster_stop(&c);
		return 1;
	}
	if (!have) {
		printf("redis-server not installed: skipping\n");
		return 77;
	}
	snprintf(base, sizeof base, "redis-cluster://%s", hosts);
	int failed = run(base, lua, 1);
	drl_fixture_cluster_stop(&c);
	return failed ? 1 : 0;
}
#endif

/* The stores on one server each, by the name meson passes: how the
 * server starts, its binary, the URI scheme, the variants run on it. */
static const struct {
	const char *which;
	int (*start)(drl_server *, const char *const *);
	const char *what, *scheme;
	const variant *v;
	size_t n;
} on_one_server[] = {
	{"redis_auto", drl_fixture_redis_start, "redis-server", "redis",
	 redis_auto, 1},
	{"redis_lua", drl_fixture_redis_start, "redis-server", "redis",
	 redis_lua, 1},
	{"redis_watch", drl_fixture_redis_start, "redis-server", "redis",
	 redis_watch, 1},
	{"memcached", drl_fixture_memcached_start, "memcached", "memcached",
	 memcached, 2},
};

int main(int argc, char **argv)
{
	const char *which = argc == 2 ? argv[1] : "";
	for (size_t i = 0; i < sizeof on_one_server / sizeof on_one_server[0];
	     i++)
		if (strcmp(which, on_one_server[i].which) == 0)
			return on_server(
				on_one_server[i].start, on_one_server[i].what,
				on_one_server[i].scheme, on_one_server[i].v,
				on_one_server[i].n);
#ifdef CONTRACT_HAVE_CLUSTER
	if (strcmp(which, "redis_cluster") == 0)
		return cluster();
#endif
	fprintf(stderr,
		"usage: %s "
		"redis_auto|redis_lua|redis_watch|redis_cluster|memcached\n",
		argv[0]);
	return 2;
}
