/*
 * One decision's call of a Lua twin, as data: for the tools; not part of
 * the public API (core/twin_call.c).
 *
 * `drl bench --ceiling` drives Redis without the library (redis-benchmark
 * EVALSHA) to measure what the server alone can do. To measure the same
 * thing the library asks for, it must send exactly the script, keys and
 * integers the library sends for one decision. drl__twin_call_make builds
 * them with the library's own code (the limit parser, the key builder and
 * drl__script_args, which drl__script_decide uses too), so a change of a
 * twin's protocol changes the benchmark with it.
 *
 * Linked from the internal archive (internal_dep); the symbols are drl__
 * (internal, hidden in libdrl.so). Tools include this header, never
 * internal.h.
 */
#ifndef DRL_TWIN_CALL_H
#define DRL_TWIN_CALL_H

#include "drl/drl.h"

#include <stddef.h>
#include <stdint.h>

/* Room for one store key (prefix + limit tag + user key) and for the
 * twin's integer arguments; twin_call.c checks both against the core's. */
#define DRL__TWIN_KEY_MAX 480
#define DRL__TWIN_ARGS_MAX 16

/* The twin's call for one decision of one limit. Everything is owned by
 * the struct, except name and source: static, valid for the process. */
typedef struct drl__twin_call {
	const char *name;   /* the twin's name ("counter", "gcra", ...) */
	const char *source; /* its Lua source, to SCRIPT LOAD / EVAL */
	/* KEYS: the one key a store that does not need every key declared
	 * (plain Redis; not Redis Cluster) is sent; nkeys is 1. */
	size_t nkeys;
	char key[DRL__TWIN_KEY_MAX];
	size_t keylen;
	/* ARGV, in order, as decimal integers */
	size_t nargs;
	int64_t args[DRL__TWIN_ARGS_MAX];
} drl__twin_call;

/* Fill *out with what a limiter of the single limit `spec` (no ';') made
 * with key prefix `prefix` sends, on a store that runs scripts, to decide
 * `cost` for the user key key[0..keylen) at now_us: an explicit time in
 * µs, or -1 when the store's clock decides (clock=server: the twin reads
 * the server's TIME, and its state moves with time as under load).
 * Returns 0; DRL_EINVAL (in err) for a bad spec, prefix, key, cost or time;
 * DRL_ENOTSUP when no Lua twin runs for this spec (its algorithm has none,
 * or its numbers do not fit a twin's doubles). */
int drl__twin_call_make(drl__twin_call *out, const char *spec,
			const char *prefix, const void *key, size_t keylen,
			int64_t now_us, int64_t cost, drl_error *err);

#endif /* DRL_TWIN_CALL_H */
