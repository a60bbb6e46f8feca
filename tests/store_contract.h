/*
 * The store conformance suite: every promise of include/drl/sys/backend.h,
 * checked on a store through that header and the public API alone, so a
 * store outside this tree runs it as ours do (docs/stores.md).
 *
 * A store under test is described by a store_contract_target: how to open
 * a fresh backend of it, and the URI (with the openers that know its
 * scheme) that child processes open for the cross-process hot-key test.
 * store_contract_run() runs every check as a cmocka group and returns the
 * number of failed checks (0: the store conforms).
 *
 * The suite needs cmocka and the public headers only (<drl/drl.h>,
 * <drl/sys/backend.h>); it links against libdrl. Checks never judge speed:
 * TTL expiry is awaited with a generous deadline, threads are joined,
 * never slept upon.
 */
#ifndef DRL_STORE_CONTRACT_H
#define DRL_STORE_CONTRACT_H

#include <drl/drl.h>
#include <drl/sys/backend.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct store_contract_target {
	/* For messages and the cmocka group's name ("memory", "redis lua"). */
	const char *name;
	/* Open a new backend whose keys are not seen by any backend opened
	 * before (e.g. a fresh key prefix per call, or a new file): each
	 * check starts from an empty store. 0 or a DRL_E* code with err set. */
	int (*open)(void *arg, drl_backend **out, drl_error *err);
	void *arg;
	/* A URI of the same store, opened in child processes through
	 * drl_store_open_with(uri, openers, nopeners) for the hot-key test
	 * (each run uses a key prefix of its own: the URI need not be fresh).
	 * NULL: the store keeps its state in the process (memory://), so
	 * processes share nothing and the hot-key check is skipped. */
	const char *uri;
	const drl_store_opener *openers;
	size_t nopeners;
	/* The shortest TTL the store keeps to the microsecond's intent, in
	 * µs: the TTL checks write with this and await expiry (memcached
	 * counts whole seconds: 1000000). 0: 100 ms. */
	int64_t ttl_min_us;
	/* The store may evict keys before their TTL (a cache: memcached).
	 * Checks then do not assert that an unexpired key survives memory
	 * pressure; they still assert everything else. */
	bool may_evict;
	/* How many times the thread checks' rounds (8 threads x 500 incr,
	 * 8 x 100 load/cas) are run; 0: once. An in-process store answers
	 * in nanoseconds and can afford 100 times as many, which makes a
	 * lost update likelier to show; a networked store a few. */
	int threads_rounds;
} store_contract_target;

/* Run every check on t; returns how many failed. */
int store_contract_run(const store_contract_target *t);

/* The hot-key test alone, for every algorithm on t's URI (also part of
 * store_contract_run). */
void store_contract_hot_key(const store_contract_target *t);

#endif /* DRL_STORE_CONTRACT_H */
