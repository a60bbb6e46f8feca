/*
 * drld's HTTP side, on libmicrohttpd: the daemon with its bounds, routing
 * (/v1/check, /metrics, protected prefixes, 404), request bodies, and
 * turning a drld_reply into a response.
 */
#ifndef DRLD_HTTP_H
#define DRLD_HTTP_H

#include "check.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* The bounds and the address; defaults in main.c and docs/drld.md. */
struct drld_http_opts {
	struct sockaddr_storage addr; /* numeric IPv4 or IPv6, port */
	unsigned threads;             /* HTTP threads (epoll each) */
	unsigned max_connections;     /* open connections at once */
	unsigned timeout_s;           /* idle connection timeout, and
					 the time a request has to arrive
					 whole (deadline.h) */
	unsigned max_per_ip;          /* open connections from one client
					 address (0: no bound) */
	size_t max_body;              /* request body bytes (413 above) */
	size_t conn_memory;           /* per connection: request line,
					 headers, buffers (431 above) */
};

struct drld_http;

/* Start serving d on o->addr. Returns 0, or -1 with a message in msg
 * (n bytes), e.g. when the address is in use. */
int drld_http_start(struct drld_http **out, struct drld *d,
		    const struct drld_http_opts *o, char *msg, size_t n);

/* The port actually bound (the one picked for port 0). */
unsigned drld_http_port(const struct drld_http *h);

/* Stop: accept no more connections, wait (at most grace_s seconds) for
 * the requests in flight to be answered, close every connection, join
 * the threads and free h; returns true. NULL is a no-op (true).
 *
 * When requests are still in a blocking store call after grace_s (a
 * stalled store on the blocking path), each is answered 503 on its
 * socket, h is left as it is (its threads cannot be joined before the
 * store's timeout_ms) and it returns false: the caller then ends the
 * process without freeing what those threads use (_exit). */
bool drld_http_stop(struct drld_http *h, unsigned grace_s);

#endif /* DRLD_HTTP_H */
