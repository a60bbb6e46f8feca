/* The Redis store (backends/redis/store.c and the layers under it,
 * backends/redis/internal.h), over hiredis: what registry.c and the
 * stores over many servers (cluster.c, sentinel.c) use. */
#ifndef DRL_BACKENDS_REDIS_H
#define DRL_BACKENDS_REDIS_H

#include "codes.h"

#include <drl/sys/backend.h>

#include <stdbool.h>

/*
 * Open a Redis store from a parsed URI (scheme "redis" or "redis+unix"):
 *
 *   redis://[user:password@]host[:port][/db][?options]
 *   redis+unix:///path/to/redis.sock[?options]
 *
 * Options: tx=lua|watch (lua), clock=client|server (client),
 * timeout_ms=N (1000; connect and each command), prefix=P (""; prepended
 * to every key), pool=N (16; connections serving calls at once), db=N (0;
 * the other way to name the database, the only one for redis+unix).
 *
 * Validates the whole URI (DRL_EINVAL naming the part; the password is
 * never quoted), then connects once (AUTH, SELECT) so a wrong address or
 * password fails here. On success *out is a new backend owned by the
 * caller (freed by its destroy slot); *uri is only read (options are
 * marked used) and may be cleared right after.
 */
int drl__redis_open(drl_backend **out, drl_uri *uri, drl_error *err);

/* ---- Redis Cluster nodes (used by backends/redis/cluster.c) ----------- */

/* DRL__EREDIRECT, DRL__UNSENT and the redirect: backends/redis/codes.h. */

/* Parse a redis-cluster or redis-sentinel URI's options (everything but
 * its hosts and path: tx, clock, timeout_ms, pool, pipelines, prefix,
 * connect, tls_*, user/password; db: 0 on a cluster) into a template
 * store that is never called, only copied by drl__redis_node and
 * drl__redis_sentinel_node. Marks the options used. */
int drl__redis_template(drl_backend **out, drl_uri *uri, drl_error *err);
bool drl__redis_template_lazy(const drl_backend *tmpl);
int64_t drl__redis_timeout_ms(const drl_backend *tmpl);
/* The URI's key prefix (prepended by node stores to every key). */
const char *drl__redis_prefix(const drl_backend *tmpl, size_t *len);

/* A store for the server at host:port with tmpl's options, not connected
 * yet; on a cluster template its redirect replies become
 * DRL__EREDIRECT. */
int drl__redis_node(drl_backend **out, const drl_backend *tmpl,
		    const char *host, int port, drl_error *err);

/* ---- Redis Sentinel (used by backends/redis/sentinel.c) --------------- */

/* A store for the sentinel at host:port: tmpl's TLS and timeout, the
 * credentials user, password (NULL password: no AUTH), database 0, one
 * connection, no pipes; not connected yet. Only for the calls below. */
int drl__redis_sentinel_node(drl_backend **out, const drl_backend *tmpl,
			     const char *host, int port, const char *user,
			     const char *password, drl_error *err);
/* Have `trouble(arg)` called, from any thread, whenever a call on node
 * (a store of drl__redis_node) meets what may mean a failover: the
 * server unreachable, a connection broken or timed out, a READONLY
 * reply; and have the node's blocking calls return DRL__UNSENT(code)
 * for a failure after which nothing ran. Set before the node's first
 * call. */
void drl__redis_watch(drl_backend *node, void (*trouble)(void *arg), void *arg);
/* SENTINEL GET-MASTER-ADDR-BY-NAME `name` on a sentinel node: *known
 * false when the sentinel monitors no master of that name; else the
 * master's host (NUL-terminated) and port. */
int drl__redis_sentinel_master(drl_backend *sentinel, const char *name,
			       char host[256], int *port, bool *known,
			       drl_error *err);
/* A connection to node subscribed to `channel` (backends/redis/sub.c),
 * opened within the node's timeout_ms with its TLS and credentials; a
 * subscription is used by one thread at a time and freed by
 * drl__redis_sub_close (NULL: no-op). */
typedef struct drl__redis_sub drl__redis_sub;
int drl__redis_sub_open(drl__redis_sub **out, drl_backend *node,
			const char *channel, drl_error *err);
/* The socket to poll for POLLIN; valid until drl__redis_sub_close. */
int drl__redis_sub_fd(const drl__redis_sub *sub);
/* Read what came (after poll said readable; never waits): fn(arg, msg,
 * len) for each message on the channel, msg NUL-terminated. 0, or the
 * error that ended the connection: close it. */
int drl__redis_sub_read(drl__redis_sub *sub,
			void (*fn)(void *arg, const char *msg, size_t len),
			void *arg, drl_error *err);
void drl__redis_sub_close(drl__redis_sub *sub);
/* ROLE on a node: "master", "slave" or "sentinel" into role; a plain
 * code on failure (never DRL__UNSENT). */
int drl__redis_role(drl_backend *node, char role[16], drl_error *err);

/* CLUSTER SLOTS on `node`: fn(arg, first, last, host, port, master) for
 * the master (master true) and each replica of every slot range. A
 * nonzero return from fn stops and is returned. */
typedef int (*drl__redis_slots_fn)(void *arg, int first, int last,
				   const char *host, int port, bool master);
int drl__redis_cluster_slots(drl_backend *node, drl__redis_slots_fn fn,
			     void *arg, drl_error *err);

#endif /* DRL_BACKENDS_REDIS_H */
