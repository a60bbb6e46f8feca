/*
 * drld's gRPC server: Envoy's rate limit service,
 * envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit
 * (docs/envoy.md), on grpc++'s synchronous server. The server only carries
 * the call: grpc_service.cc turns the protobuf request into the C request
 * of envoy_service.h and the answer back; drld_envoy_decide() decides.
 *
 * C interface to C++ code: every function here is extern "C" and catches
 * what the C++ side could throw.
 */
#ifndef DRLD_GRPC_SERVICE_H
#define DRLD_GRPC_SERVICE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Most threads the gRPC server runs (each carries one call at a time);
 * calls beyond them are answered RESOURCE_EXHAUSTED. */
#define DRLD_GRPC_THREADS_MAX 256

struct drld;
struct drld_grpc;

/* Serve ShouldRateLimit on `addr` ("127.0.0.1:8081", "[::1]:0"; port 0
 * picks one) for drld d, insecure (plaintext HTTP/2, as Envoy's cluster
 * to envoyproxy/ratelimit is by default). Returns 0, or -1 with a message
 * in msg (n bytes). */
int drld_grpc_start(struct drld_grpc **out, struct drld *d, const char *addr,
		    char *msg, size_t n);

/* The port it listens on. */
unsigned drld_grpc_port(const struct drld_grpc *g);

/* Stop accepting calls, wait up to timeout_s seconds for those in flight
 * (then cancel them), and free g. NULL is a no-op. */
void drld_grpc_stop(struct drld_grpc *g, unsigned timeout_s);

#ifdef __cplusplus
}
#endif

#endif /* DRLD_GRPC_SERVICE_H */
