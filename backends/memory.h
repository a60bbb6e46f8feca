/*
 * The embedded in-process store, "memory://" (the default store).
 *
 * Options: shards=N (power of two in [1, 1024], default 64): how many
 * independently locked parts the table is split into; max_keys=N (default
 * 0, unlimited): refuse to create keys beyond N live ones (DRL_ESTORE),
 * rather than evict live state; group_max_keys=M (default 0, no bound):
 * refuse to create a key when M live keys share its bytes before its
 * first '{' (its group: one limit's keys), so one limit cannot take all
 * of max_keys (DRL_ESTORE, "memory store full for this key's group").
 *
 * Thread-safe: every method may be called from any number of threads at
 * once; each call locks only the shard of the key it touches.
 */
#ifndef DRL_BACKENDS_MEMORY_H
#define DRL_BACKENDS_MEMORY_H

#include <drl/sys/backend.h>

/* Open a memory store from a parsed memory:// URI (options marked used;
 * the caller keeps owning `uri`). *out is owned by the caller and freed
 * with (*out)->destroy(*out). DRL_EINVAL naming a bad option, DRL_ENOMEM. */
int drl__memory_open(drl_backend **out, drl_uri *uri, drl_error *err);

/* Test hook: entries the store holds in memory right now, including
 * expired ones it has not reclaimed yet (so a test can see reclamation). */
size_t drl__memory_count(drl_backend *b);

#endif /* DRL_BACKENDS_MEMORY_H */
