/* The Redis store (backends/redis.c), over hiredis. */
#ifndef DRL_BACKENDS_REDIS_H
#define DRL_BACKENDS_REDIS_H

#include "internal.h"

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
int drl__redis_open(drl_backend **out, drl__uri *uri, drl_error *err);

#endif /* DRL_BACKENDS_REDIS_H */
