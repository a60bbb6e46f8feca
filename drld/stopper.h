/*
 * A thread that runs until it is told to stop: its loop polls `fd` (an
 * eventfd) with the rest of what it waits for, and returns once fd is
 * readable. The config watcher and the gRPC acceptor run so.
 *
 * Threading: start and stop from one thread (the one that owns the
 * object the loop serves); the loop itself only reads fd.
 */
#ifndef DRLD_STOPPER_H
#define DRLD_STOPPER_H

#include <pthread.h>

struct drld_stopper {
	pthread_t thread;
	int fd; /* eventfd: readable once drld_stopper_stop() began */
};

/* Make s->fd, then run(arg) on a new thread (run reads s->fd: set before
 * it starts). 0, or an errno with nothing left open (s->fd -1). */
int drld_stopper_start(struct drld_stopper *s, void *(*run)(void *), void *arg);

/* Make s->fd readable, wait for the thread to return, close s->fd. A
 * failed write is said on stderr, naming `what`. */
void drld_stopper_stop(struct drld_stopper *s, const char *what);

#endif
