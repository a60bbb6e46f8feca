/*
 * A listening socket of drld's own and one thread that accepts its
 * connections and deals each to a callback. drld's gRPC server deals them
 * to its shards in turn (grpc_service.cc), so that each shard's poller
 * answers and writes the calls of its own connections: with one queue
 * polled by several pollers, grpc 1.51 finished a connection's calls on
 * whichever poller took them, the pollers contended for its lock and grpc
 * handed the writes to its executor threads (docs/performance.md,
 * "Shards"). grpc's own listener cannot deal: it hands every connection
 * to every queue of its server.
 */
#ifndef DRLD_ACCEPTOR_H
#define DRLD_ACCEPTOR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct drld_acceptor;

/* Takes over fd, a connected, non-blocking socket (TCP_NODELAY set on
 * TCP). Called on the acceptor's thread, one connection at a time. */
typedef void drld_accept_fn(void *arg, int fd);

/* Why a connection was closed without being dealt. */
enum drld_closed_reason {
	/* it sent no HTTP/2 preface in time (or something else, or hung
	 * up, or made room for a newer one) */
	DRLD_CLOSED_NO_PREFACE,
	/* over the descriptor reserve with none waiting to make room */
	DRLD_CLOSED_NO_DESCRIPTOR,
	DRLD_CLOSED_REASONS
};

/* Told of each connection closed undealt, on the acceptor's thread. */
typedef void drld_closed_fn(void *arg, enum drld_closed_reason why);

/* Listen on addr (HOST:PORT, port 0 picks one, or unix:/ABSOLUTE/PATH:
 * listen_addr.h) and deal every connection to deal(arg, fd) once it has
 * sent the HTTP/2 client preface, until drld_acceptor_stop(). A connection
 * whose preface has not arrived within preface_s seconds is closed
 * unread, and so is the one that has waited longest when a new one would
 * make more wait than there were descriptors free below the reserve at
 * start (at most 1,024), or would take a descriptor of the reserve kept
 * below RLIMIT_NOFILE (an eighth of it, at least 16): a client that never speaks
 * holds a descriptor for preface_s at most, and those it holds cannot
 * starve the HTTP port, the store or a client that speaks at once. With
 * none waiting, a connection over the reserve is closed at once.
 * A unix socket file left by a drld that did not stop cleanly is replaced;
 * a file of another kind is never touched (the start fails). Returns 0, or
 * -1 with a message in msg (n bytes). */
int drld_acceptor_start(struct drld_acceptor **out, const char *addr,
			unsigned preface_s, drld_accept_fn *deal,
			drld_closed_fn *closed, void *arg, char *msg, size_t n);

/* The TCP port it listens on (0 for a unix socket). */
unsigned drld_acceptor_port(const struct drld_acceptor *a);

/* Stop accepting (connections dealt already carry on), join the thread,
 * close the socket and remove a unix socket's file. NULL is a no-op. */
void drld_acceptor_stop(struct drld_acceptor *a);

#ifdef __cplusplus
}
#endif

#endif /* DRLD_ACCEPTOR_H */
