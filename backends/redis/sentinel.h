/* The Redis Sentinel store (backends/redis/sentinel.c). */
#ifndef DRL_BACKENDS_REDIS_SENTINEL_H
#define DRL_BACKENDS_REDIS_SENTINEL_H

#include <drl/sys/backend.h>

/*
 * Open a Redis Sentinel store from a parsed URI (scheme "redis-sentinel",
 * or "rediss-sentinel": TLS to the sentinels and to the master):
 *
 *   redis-sentinel://[user:password@]host:port[,host:port...]/master[?options]
 *
 * The hosts are sentinels (port 26379 when none is written), the path the
 * name the sentinels monitor the master by. user:password are the
 * master's (AUTH on the master, as redis://); the sentinels' own are
 * sentinel_user= and sentinel_password=. The store moves when a sentinel
 * publishes +switch-master (a subscription to each sentinel);
 * sentinel_check_ms=N (1000; 0: never) asks the sentinels that often
 * even when nothing failed. Every
 * other option as for redis:// (tx, clock, timeout_ms, pool, pipelines,
 * prefix, db, connect, tls_*), applied to the master.
 *
 * Unless connect=lazy, the master is asked for and checked (ROLE) at
 * open, so a wrong sentinel address, password or master name fails here.
 */
int drl__redis_sentinel_open(drl_backend **out, drl_uri *uri, drl_error *err);

#endif /* DRL_BACKENDS_REDIS_SENTINEL_H */
