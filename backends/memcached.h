/* The memcached store (backends/memcached.c), over libmemcached. */
#ifndef DRL_BACKENDS_MEMCACHED_H
#define DRL_BACKENDS_MEMCACHED_H

#include <drl/sys/backend.h>

/*
 * Open a memcached store from a parsed URI (scheme "memcached" or
 * "memcached+unix"):
 *
 *   memcached://host[:port][,host[:port]...][?options]   (port 11211)
 *   memcached+unix:///path/to/memcached.sock[?options]
 *
 * Several hosts form one pool with consistent (ketama) hashing: every key
 * lives on exactly one server, and adding a server moves only a share of
 * the keys. A dead server is never ejected: calls for its keys fail within
 * the timeout (DRL_ESTORE / DRL_ETIMEDOUT), calls for other keys carry on.
 *
 * Options: timeout_ms=N (1000; connect, poll, send and receive, each),
 * prefix=P (""; prepended to every key; no spaces or control bytes, at most
 * 128 bytes), binary=0|1 (1; the binary protocol, needed for
 * one-round-trip counters), pool=N (16; connections serving calls at once;
 * a call waits up to 10 x timeout_ms for a free one, then DRL_ETIMEDOUT),
 * channels=0|1 (1; DRL_CAP_CHANNEL: the async API's counter decisions in
 * fd mode go out on a connection of its own that its loop drives,
 * memcached/chan.c; 0: every async decision on a worker).
 * No user or password (SASL is not supported) and no path.
 *
 * Validates the whole URI (DRL_EINVAL naming the part), then asks every
 * server for its version: the open fails when none answers, so a wrong
 * address fails here. On success *out is a new backend owned by the caller
 * (freed by its destroy slot); *uri is only read (options are marked used)
 * and may be cleared right after.
 *
 * Thread-safe: every method may be called from any number of threads at
 * once (each call borrows one connection handle from the pool); a channel
 * by one thread at a time (drl/sys/backend.h). Not
 * fork-safe: a child process opens a store of its own.
 */
int drl__memcached_open(drl_backend **out, drl_uri *uri, drl_error *err);

#endif /* DRL_BACKENDS_MEMCACHED_H */
