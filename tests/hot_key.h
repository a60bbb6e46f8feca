/*
 * The cross-process hot-key test, shared by every store's tests: several
 * processes, each with several threads and its own store connections, ask
 * for one key at one fixed instant; the total allowed must equal the limit
 * exactly. Each process opens the store from its URI, so nothing is shared
 * but the server.
 */
#ifndef DRL_HOT_KEY_H
#define DRL_HOT_KEY_H

#include <drl/sys/backend.h>

#include <stddef.h>

enum { HOT_PROCS = 3, HOT_THREADS = 4, HOT_CALLS = 60, HOT_LIMIT = 200 };

/* What processes of a run count, each its own and summed. */
typedef struct hot_key_counts {
	int allowed; /* decisions allowed */
	int errors;  /* calls that failed (all of them when a process could
			not open its store) */
	int near;    /* denials of the near cache (DRL_PATH_NEAR) */
	/* hot_key_fork's sums only: processes that reported nothing (they
	 * crashed), the last one's signal (-1: none, 0: no crash), and the
	 * last nonzero exit status (valgrind's 99: a memory error in a
	 * child) */
	int lost, signal, status;
} hot_key_counts;

/* The processes of a run: fork `procs` children (1..16), each runs
 * body(arg, i, &counts) (i: 0..procs-1; counts zeroed) and exits, and
 * return the sums, with the processes that reported nothing (crashed) in
 * `lost` and a nonzero exit in `status`. The caller has no other thread running (TSan's children die
 * otherwise, and so might a child's locks). */
hot_key_counts hot_key_fork(int procs,
			    void (*body)(void *arg, int i, hot_key_counts *out),
			    void *arg);

/* Run spec (allowing HOT_LIMIT at one instant) on uri from HOT_PROCS
 * processes; fail the test unless exactly HOT_LIMIT were allowed. `n`
 * picks the instant and goes into the key prefix, so runs share nothing. */
void hot_key_run(const char *uri, const char *spec, int n);

/* From now on, children open the store with drl_store_open_with(uri, o,
 * n) instead of drl_store_open(uri) (n == 0: drl_store_open again), so a
 * store registered by the application runs the test; o[0..n) must stay
 * valid until reset. A URI whose scheme is one of o's gets no timeout_ms
 * added (hot_key_run_opts): such a store may not know the option. */
void hot_key_set_openers(const drl_store_opener *o, size_t n);

/* hot_key_run for every algorithm, and a policy of two limits. */
void hot_key_all_specs(const char *uri);

/* What a run adds to the plain one. */
typedef struct hot_key_opts {
	/* Policy segments appended to every spec ("near_cache=1"), or NULL. */
	const char *options;
	/* drl_allow at the real-time clock instead of drl_allow_at at one
	 * instant; hot_key_all_specs_opts then uses PERIODs of 1d (and runs
	 * again a run that crossed a sub-window edge, 1d / 6, where windows
	 * may roll). */
	int real_clock;
	/* Fail unless at least this percentage of the decisions had path
	 * DRL_PATH_NEAR (answered in the process, no store call). */
	int min_near_pct;
} hot_key_opts;

/* hot_key_run with options (NULL: none). Returns 1 when a real-clock run
 * crossed a sub-window edge (1d / 6) and proved nothing (nothing
 * asserted), else 0. Store URIs other than memory:// get a timeout_ms
 * scaled by tu_bound_ms unless they name one. */
int hot_key_run_opts(const char *uri, const char *spec, int n,
		     const hot_key_opts *o);

/* hot_key_all_specs with options. */
void hot_key_all_specs_opts(const char *uri, const hot_key_opts *o);

/* hot_key_all_specs_opts with each way of turning the near cache on
 * (block_on_exceed=, near_cache=; at one instant and at the real clock):
 * exactly the limit, and at least half the decisions local. Under valgrind
 * (DRL_VALGRIND) one way only. */
void hot_key_near_cache(const char *uri);

/* The specs at the real clock (PERIODs of 1d), HOT_SPECS of them. Their
 * finest sub-window edges are HOT_DAY_EDGE_US apart: a run that crosses
 * one proves nothing (a thread whose clock read the old sub-window does
 * not see the counts others made in the new one) and is run again. */
enum { HOT_SPECS = 8 };
extern const char *const hot_key_day_specs[HOT_SPECS];
#define HOT_DAY_EDGE_US (INT64_C(86400000000) / 6)

#endif
