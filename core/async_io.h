/*
 * The async API's event-loop side in fd mode (core/async_io.c):
 * drl_async_fd() is an epoll set holding the context's eventfd, the
 * sockets of its store channels (DRL_CAP_CHANNEL) and a timerfd armed at
 * the earliest deadline of a call on them. Requests started on a store
 * with channels travel on the context's own channel of that store, whose
 * I/O the thread in drl_async_process() does: no thread of the store's,
 * no wake-up between threads. Internal to core/async.c.
 *
 * Threading: every channel call runs under `mu` (recursive: a reply's
 * completion may start a give-back on the same channel); lock order: mu,
 * then the context's lock (a completion hands its request over).
 */
#ifndef DRL_ASYNC_IO_H
#define DRL_ASYNC_IO_H

#include <drl/sys/backend.h>

struct drl_store;

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct drl__aio_chan drl__aio_chan;

typedef struct drl__aio {
	int epfd;      /* what drl_async_fd() returns */
	int tfd;       /* the timerfd, in epfd */
	int efd;       /* the context's eventfd, in epfd (not owned) */
	int64_t armed; /* tfd armed for (µs, CLOCK_MONOTONIC); INT64_MAX */
	pthread_mutex_t mu;
	drl__aio_chan *chans; /* one per store, opened at first use */
	bool off;             /* drl_async_notify(): no channels */
} drl__aio;

/* Make io around the eventfd efd: 0, or -1 (nothing made). */
int drl__aio_init(drl__aio *io, int efd);
/* Close every channel (a call left on one ends DRL_ECANCELED) and the
 * descriptors. */
void drl__aio_free(drl__aio *io);
/* The channel a started call of `store` goes out on: the context's
 * channel of it (opened here at first use), or NULL: the store's own
 * started calls (no channels, drl_async_notify(), or none could be
 * opened). */
drl_channel *drl__aio_channel(drl__aio *io, struct drl_store *store);
/* Take what epfd reports ready within timeout_ms (0: none waited for):
 * each channel ready is processed (replies read, completions run, calls
 * past their deadline failed), the eventfd read. */
void drl__aio_reap(drl__aio *io, int timeout_ms);
/* Write what the channels have queued (chan_process(ch, 0)) and follow
 * their descriptors and deadlines in epfd and tfd. */
void drl__aio_flush(drl__aio *io);
/* Milliseconds until the earliest deadline of a call on a channel (at
 * least 1), or -1 when no call is on one. */
int drl__aio_wait_ms(drl__aio *io);

#endif /* DRL_ASYNC_IO_H */
