/*
 * drld's gRPC server: Envoy's rate limit service,
 * envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit
 * (docs/envoy.md), and gRPC's health checking (grpc_health.h), on grpc++'s
 * completion-queue ("async") API. The server only carries the call:
 * grpc_service.cc turns the protobuf request into the C request of
 * envoy_service.h and the answer back; envoy_service.c decides.
 *
 * Threads: the server is --grpc-pollers shards, each a grpc::Server with
 * its own completion queue and one poller, which answers and writes every
 * call of the connections dealt to the shard (and reads them: under
 * GRPC_POLL_STRATEGY=poll always; under grpc's default, epoll1, whichever
 * poller is in epoll may read a connection's bytes, since that engine
 * polls one epoll set for the whole process); grpc runs no thread of its
 * own for them (its callback API would: a hand-over per call,
 * docs/performance.md "drld over gRPC"). Plaintext connections are
 * accepted by drld (acceptor.h) and dealt to the shards in turn; with TLS
 * every shard listens on the port (SO_REUSEPORT) and the kernel deals
 * them. Where a decision runs: on memory:// on the poller that read the
 * call; on a store whose calls can be started (Redis tx=lua on shared
 * connections) it is started there and that shard's poller finishes it
 * when the store has answered (grpc_async.h); otherwise (and for a limit
 * that store cannot start) drld_grpc_opts's `deciders`, N threads shared
 * by the shards, block in the store (bounded by its timeout_ms) and
 * finish the call, so the pollers never wait for Redis or memcached.
 *
 * C interface to C++ code: every function here is extern "C" and catches
 * what the C++ side could throw.
 */
#ifndef DRLD_GRPC_SERVICE_H
#define DRLD_GRPC_SERVICE_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Deciders (--grpc-threads): the default and the most. */
#define DRLD_GRPC_DECIDERS_DEFAULT 16
#define DRLD_GRPC_DECIDERS_MAX 256
/* Pollers (--grpc-pollers): the most. The default is
 * drld_grpc_pollers_default(). */
#define DRLD_GRPC_POLLERS_MAX 64
/* Calls that may wait for a decider (--grpc-queue): the default and the
 * most. One more is answered RESOURCE_EXHAUSTED at once (Envoy's
 * failure_mode_deny decides), so a flood of calls costs neither a thread
 * each nor unbounded memory. */
#define DRLD_GRPC_QUEUE_DEFAULT 4096
#define DRLD_GRPC_QUEUE_MAX 65536
/* --grpc-max-connection-age and its grace, in seconds: the defaults
 * (envoyproxy/ratelimit's: a day and an hour) and the most (a week). */
#define DRLD_GRPC_AGE_DEFAULT 86400
#define DRLD_GRPC_AGE_GRACE_DEFAULT 3600
#define DRLD_GRPC_AGE_MAX 604800
/* --grpc-tls-refresh, in seconds: the default and the most (a day). */
#define DRLD_GRPC_TLS_REFRESH_DEFAULT 60
#define DRLD_GRPC_TLS_REFRESH_MAX 86400

struct drld;
struct drld_grpc;

/* How the server runs (drld's --grpc-* options). */
struct drld_grpc_opts {
	/* threads deciding calls (0..DRLD_GRPC_DECIDERS_MAX; 0: on
	 * the pollers) */
	unsigned deciders;
	/* shards, each with one thread polling its completion queue: it
	 * reads, answers and writes the calls of the connections dealt
	 * to it (1..DRLD_GRPC_POLLERS_MAX; 0: drld_grpc_pollers_default()) */
	unsigned pollers;
	/* calls that may wait for the deciders, and decisions each
	 * shard's async context may have in flight (1..DRLD_GRPC_QUEUE_MAX;
	 * unused when deciders is 0) */
	unsigned queue;
	/* seconds a connection may live before the server asks the
	 * client to move to a new one (HTTP/2 GOAWAY), so the calls of
	 * long-lived clients (Envoy) spread over drld instances added
	 * later; 0: forever. At most DRLD_GRPC_AGE_MAX. */
	unsigned max_connection_age_s;
	/* seconds the calls in flight on such a connection get to finish
	 * before it is closed; 0: as long as they take. */
	unsigned max_connection_age_grace_s;
	/* seconds a connection may go without a call before the server
	 * sends GOAWAY and closes it (a client that completed the HTTP/2
	 * handshake and holds the connection idle); 0: forever. At most
	 * DRLD_GRPC_AGE_MAX. */
	unsigned max_connection_idle_s;
	/* TLS: PEM files (checked by tls.h) of the certificate chain and
	 * its key, or NULL for plaintext HTTP/2; with tls_client_ca,
	 * clients must present a certificate one of its CAs signed. gRPC
	 * reads the files again every tls_refresh_s seconds, so a renewed
	 * certificate is served without a restart. */
	const char *tls_cert, *tls_key, *tls_client_ca;
	unsigned tls_refresh_s;
	/* with tls_client_ca: a name the client certificate's
	 * subjectAltName must hold (DNS, URI, IP or email), or NULL */
	const char *tls_client_san;
	/* seconds a new connection has to send the HTTP/2 preface (or,
	 * with TLS, to finish its handshake) before it is closed */
	unsigned preface_timeout_s;
};

/* Serve ShouldRateLimit on `addr` ("127.0.0.1:8081", "[::1]:0"; port 0
 * picks one) for drld d, over plaintext HTTP/2 (as Envoy's cluster to
 * envoyproxy/ratelimit is by default) or TLS, as o says. Returns 0, or -1
 * with a message in msg (n bytes). */
int drld_grpc_start(struct drld_grpc **out, struct drld *d, const char *addr,
		    const struct drld_grpc_opts *o, char *msg, size_t n);

/* The shards when --grpc-pollers is not given: one per CPU drld may run
 * on (its affinity: taskset, a container's cpuset), at least 1 and at
 * most 8. Measured on 2 vCPUs (docs/performance.md, "Shards"): two
 * shards answered the Envoy shape (2 connections x 16 calls) at 93.6k
 * calls/s against 78.3k for the one poller before them (medians of three
 * alternating rounds), at about the same CPU per call. */
unsigned drld_grpc_pollers_default(void);

/* The port it listens on. */
unsigned drld_grpc_port(const struct drld_grpc *g);

/* Stop accepting calls, wait up to timeout_s seconds for those in flight
 * (then cancel them: their callers get CANCELLED), stop the deciders and
 * free g; returns true. NULL is a no-op (true). When a decider is still
 * in a store call after timeout_s (a stalled store: it would hold the
 * stop until the store's timeout_ms), g is left as it is and it returns
 * false: the caller then ends the process without freeing what the
 * deciders use (_exit). */
bool drld_grpc_stop(struct drld_grpc *g, unsigned timeout_s);

#ifdef __cplusplus
}
#endif

#endif /* DRLD_GRPC_SERVICE_H */
