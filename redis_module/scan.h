/*
 * The fields a decision reads from its group's hash, in one pass over
 * the hash's entries (RedisModule_ScanKey), instead of one lookup per
 * field: a lookup (RedisModule_HashGet) walks the hash's listpack from
 * its start (lpFind), so reading the k fields of a hash of k entries
 * walks it k times; the pass walks it once, and makes two strings per
 * entry (its field and its value) where a lookup makes one.
 *
 * Threads: Redis's main thread, within one command.
 */
#ifndef DRL_RM_SCAN_H
#define DRL_RM_SCAN_H

#include "fields.h"
#include "redismodule_min.h"

#include "drl/sys/backend.h"

#include <stdbool.h>

/* The most keys one pass reads. */
#define DRL__RM_SCAN_MAX 64

/* The values of the fields of keys[0..n) (grouped counters of one group,
 * glen bytes long) in the hash k, by one pass over its entries: v[i] a
 * string the caller frees (RedisModule_FreeString) or NULL when the hash
 * has no such field; found[0..*nfound) the keys whose field the hash has,
 * each field once (the first key naming it), in increasing order; *all
 * whether the hash holds nothing but those fields. False, and nothing
 * read, when the pass cannot be used: n > DRL__RM_SCAN_MAX, or a field
 * longer than DRL__RM_FIELD_MAX bytes. k is a hash (not empty). */
bool drl__rm_scan_fields(RedisModuleKey *k, size_t n, const drl_bytes *keys,
			 size_t glen, RedisModuleString **v, size_t *found,
			 size_t *nfound, bool *all);

#endif
