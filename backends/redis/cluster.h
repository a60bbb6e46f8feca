/* The Redis Cluster store (backends/redis/cluster.c). */
#ifndef DRL_BACKENDS_REDIS_CLUSTER_H
#define DRL_BACKENDS_REDIS_CLUSTER_H

#include <drl/sys/backend.h>

/*
 * Open a Redis Cluster store from a parsed URI (scheme "redis-cluster"):
 *
 *   redis-cluster://[user:password@]host:port[,host:port...][?options]
 *
 * The hosts are seeds: any reachable node gives the slot map. Options as
 * for redis:// (tx, clock, timeout_ms, prefix, pool per node, connect)
 * except the database (a cluster has only database 0). Unless
 * connect=lazy, the slot map is read at open, so a wrong address or
 * password fails here.
 */
int drl__redis_cluster_open(drl_backend **out, drl_uri *uri, drl_error *err);

/* The Redis Cluster hash slot (CRC16 of the {hash tag} or of the whole
 * key, modulo 16384) of prefix + key. */
int drl__redis_cluster_slot(const char *prefix, size_t plen, const void *key,
			    size_t keylen);

#endif /* DRL_BACKENDS_REDIS_CLUSTER_H */
