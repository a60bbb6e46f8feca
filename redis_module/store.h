/*
 * The libdrl store over the keys of the Redis server the module runs in:
 * the drl_backend (include/drl/sys/backend.h) the algorithms' C steps run
 * against inside DRL.DECIDE. It holds the same values under the same keys
 * as the Redis store's plain-command path and Lua twins (backends/redis/),
 * so tx=module, tx=lua and tx=watch decide one key in turn.
 *
 * Threads: a store lives for one command on Redis's main thread; it is
 * made on the stack and needs no freeing.
 */
#ifndef DRL_RM_STORE_H
#define DRL_RM_STORE_H

#include "fields.h"
#include "redismodule_min.h"

#include "drl/sys/backend.h"

/* The most fields of one group a store keeps known (drl__rm_store.known). */
#define DRL__RM_KNOWN_MAX 8

typedef struct drl__rm_store {
	drl_backend parent;
	RedisModuleCtx *ctx;
	RedisModuleString **keynames; /* the command's key arguments */
	size_t nkeynames;
	/* What the last add_read() left known of its group, for a trim()
	 * of that group right after it (no other write between): group is
	 * its name (one of keynames; NULL: nothing known), and the hash
	 * holds exactly the n fields f[0..n), f[i] len[i] bytes long. */
	struct {
		RedisModuleString *group;
		size_t n;
		unsigned char len[DRL__RM_KNOWN_MAX];
		char f[DRL__RM_KNOWN_MAX][DRL__RM_FIELD_MAX];
	} known;
} drl__rm_store;

/* A store over ctx's keys, for the command running in ctx; keynames[0..n)
 * (n may be 0) are the command's key arguments, used as they are where a
 * step names those bytes (valid while the command runs). */
void drl__rm_store_init(drl__rm_store *s, RedisModuleCtx *ctx,
			RedisModuleString **keynames, size_t n);

#endif
