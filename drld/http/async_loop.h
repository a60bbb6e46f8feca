/*
 * A drl_async context and the one thread that runs its callbacks: how
 * drld's HTTP server decides without a thread waiting for the store, on a
 * store that sends single decisions without a worker (drl_async_direct():
 * Redis tx=lua with shared connections; docs/threading.md). It starts a
 * decision on the thread that read the request and finishes the request
 * from the callback, on this loop's thread. (The gRPC server runs its
 * callbacks on its own pollers instead: envoy/grpc_async.h.)
 */
#ifndef DRLD_ASYNC_LOOP_H
#define DRLD_ASYNC_LOOP_H

#include <drl/async.h>

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct drld_async_loop;

/* A context that holds at most `queue` decisions in flight (one more
 * start is DRL_EBUSY), and its thread. 0, or -1 with msg (n bytes). */
int drld_async_loop_start(struct drld_async_loop **out, size_t queue, char *msg,
			  size_t n);
drl_async *drld_async_loop_context(struct drld_async_loop *l);
/* Wait until no decision is in flight (each ends by its store's
 * timeout_ms), then stop the thread and free the context. NULL: no-op. */
void drld_async_loop_stop(struct drld_async_loop *l);

#ifdef __cplusplus
}
#endif
#endif /* DRLD_ASYNC_LOOP_H */
