/*
 * Whole-request deadlines for drld's HTTP connections. libmicrohttpd's
 * own timeout (--timeout-s) closes a connection that sends nothing for
 * that long, but a client that sends one header byte a second is never
 * idle ("slowloris"): 1,024 of them held every connection slot. Here
 * each connection carries a deadline by which its current request must
 * have arrived whole (headers and body), from its accept or the end of
 * the request before; one thread shuts down the socket of a connection
 * past it, and libmicrohttpd then closes it as a hung-up one.
 *
 * Threads: drld_deadline_add(), _arm(), _disarm() and _remove() may be
 * called from any thread (libmicrohttpd's), a connection's from one
 * thread at a time.
 */
#ifndef DRLD_DEADLINE_H
#define DRLD_DEADLINE_H

#include <stdbool.h>
#include <stddef.h>

struct drld_deadlines;
struct drld_deadline;

/* Start the thread that enforces deadlines of timeout_s seconds.
 * Returns 0, or -1 (out of memory or threads). */
int drld_deadlines_start(struct drld_deadlines **out, unsigned timeout_s);

/* Track connection socket fd, its deadline armed: timeout_s from now.
 * NULL when out of memory (the connection is then not tracked). Remove
 * it with drld_deadline_remove() before fd is closed. */
struct drld_deadline *drld_deadline_add(struct drld_deadlines *ds, int fd);

/* The next request must arrive whole within timeout_s from now. */
void drld_deadline_arm(struct drld_deadlines *ds, struct drld_deadline *c);

/* The request has arrived: no deadline until drld_deadline_arm() (the
 * answer is drld's to give; the store has its own timeout_ms). */
void drld_deadline_disarm(struct drld_deadline *c);

/* Stop tracking c (its socket is about to be closed) and free it. NULL
 * is a no-op. */
void drld_deadline_remove(struct drld_deadlines *ds, struct drld_deadline *c);

/* A new connection is coming: when the connections tracked (less those
 * already shut down here and not yet removed) are `soft` or more, shut
 * down the one that has waited longest for its request, idle keep-alive
 * connections included (a connection whose request is in, being decided
 * or answered, is never chosen). Returns whether one was. So a crowd of
 * clients that never finish a request cannot hold every connection slot:
 * each newcomer pushes the oldest of them out (docs/security.md, "drld
 * under attack"). Linear in the connections tracked. */
bool drld_deadlines_make_room(struct drld_deadlines *ds, size_t soft);

/* Stop the thread and free ds; every connection must have been removed.
 * NULL is a no-op. */
void drld_deadlines_stop(struct drld_deadlines *ds);

#endif /* DRLD_DEADLINE_H */
