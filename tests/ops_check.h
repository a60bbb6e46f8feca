/*
 * drl_reset and shadow=1 judged on one store, by decisions: the checks
 * that tests/test_reset.c, tests/test_shadow.c (memory, Redis tx=lua and
 * tx=watch, memcached) and tests/test_ops_cluster.c (Redis Cluster) run on
 * every store. Each fails the running cmocka test with a message naming
 * the spec, the store and the step.
 */
#ifndef DRL_TESTS_OPS_CHECK_H
#define DRL_TESTS_OPS_CHECK_H

#include <drl/drl.h>

#include <stddef.h>

struct drl_server; /* server_fixture.h */

/* Every algorithm, options that change its keys, numbers too large for a
 * Lua twin, and policies. */
extern const char *const ops_specs[];
extern const size_t ops_nspecs;

/* A cmocka group's setup and teardown: redis-server and memcached started
 * (drl_fixture_start_pair: a missing binary skips its stores, or fails
 * under CI=true) and stopped. */
int ops_servers_start(void **state);
int ops_servers_stop(void **state);
/* The redis-server started, or NULL when it is missing. */
const struct drl_server *ops_redis(void);

/* A limiter on spec (default prefix) over a spy (tests/spy_backend.h) of
 * a fresh memory store, for tests that watch or fail the store's calls;
 * ops_spied_free frees all three. Fails the test when spec is bad. */
struct spy;
typedef struct ops_spied {
	struct spy *sp;
	drl_store *st;
	drl_limiter *l;
} ops_spied;
ops_spied ops_spied_open(const char *spec);
void ops_spied_free(ops_spied *s);

/* The store URIs the checks run on, into uris[] (OPS_URIS_MAX of
 * OPS_URI_MAX bytes): memory://, then Redis tx=lua and tx=watch and
 * memcached on the servers ops_servers_start() started. Returns how
 * many. */
#define OPS_URIS_MAX 4
#define OPS_URI_MAX 128
size_t ops_store_uris(char uris[OPS_URIS_MAX][OPS_URI_MAX]);

/* Traffic for the key "alice" and its neighbours (other user keys that
 * share its bytes, a limiter whose prefix extends this one's with the
 * same user key and so the same hash tag, another limit with the same
 * prefix and key), crossing a window edge; then drl_reset_at() of
 * "alice": every neighbour peeks the same as before, and "alice" decides
 * as a fresh memory store does. Each check writes under prefixes of its
 * own; `name` is for messages. */
void ops_check_reset(drl_store *st, const char *name, const char *spec);

/* The same random traffic (times forward and back, costs 0 to 4 and
 * beyond every capacity, single calls and batches) on `spec` in `plain`
 * and on "spec;shadow=1" in `shadowed` (another store object on the same
 * server, for its own counters): every answer is allowed, would_allow is
 * the plain decision and every other field equals it; the shadowed
 * store's shadow_denials grows by the plain denials, the plain store's
 * not at all. */
void ops_check_shadow(drl_store *plain, drl_store *shadowed, const char *name,
		      const char *spec);

/* For every store URI (ops_store_uris) and every spec of ops_specs: two
 * store objects opened on the URI (for checks with two sets of counters)
 * and fn called with them, the URI as name, and the spec. */
typedef void (*ops_check_fn)(drl_store *a, drl_store *b, const char *name,
			     const char *spec);
void ops_every_store(ops_check_fn fn);

#endif
