/*
 * The Redis store's URI into an rstore (backends/redis/uri.c), for the
 * store (backends/redis/store.c). Internal: nothing here is part of the API.
 */
#ifndef DRL_REDIS_URI_H
#define DRL_REDIS_URI_H

#include "internal.h"

#include <drl/sys/backend.h>

#include <stdbool.h>
#include <stddef.h>

/*
 * Everything URI u says (scheme redis, redis+unix or redis-cluster) into
 * s, checked before any connection is made: where and how to connect,
 * the credentials, timeout_ms, pool, pipelines, connect=lazy, prefix, db
 * and tx (s->watch_tx); *server_clock_out is whether it says
 * clock=server (set on success only). Marks the options used. DRL_EINVAL
 * names the part (never the password). The strings s gets (host, user,
 * password, prefix) are the caller's to free, also on failure. s->parent
 * is left alone: the store's methods are backends/redis/store.c's.
 */
int drl__redis_parse_uri(rstore *s, drl_uri *u, bool *server_clock_out,
			 drl_error *err);

/* Copy of p[0..n) as a C string, or NULL (out of memory). */
char *drl__redis_dup_n(const char *p, size_t n);

#endif /* DRL_REDIS_URI_H */
