/*
 * The async API's channels and its one descriptor (core/async_io.h).
 *
 * A context opens one channel per store that has them, at the first
 * request started on that store; the algorithms and the batch code name
 * it in their started calls (drl__call.chan, the started slots' `ch`),
 * and the store queues those calls on it. This file registers each
 * channel's descriptor in the context's epoll set and drives it.
 */
#include "async_io.h"
#include "internal.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

struct drl__aio_chan {
	drl_backend *store;
	drl_channel *ch;
	drl__aio_chan *next; /* the context's */
	drl__aio *io;
	drl_store *owner;
	drl__aio_chan *snext; /* the store's (owner->chans) */
	int fd;               /* registered in epfd, or -1 */
	short events;         /* ... for these poll events */
};

/* ---- the registry: which channels each store has ------------------------- */

static pthread_mutex_t registry = PTHREAD_MUTEX_INITIALIZER;

/* Take c off its store's list (registry held). */
static void store_unlink(drl__aio_chan *c)
{
	drl__aio_chan **pp = &c->owner->chans;
	while (*pp && *pp != c)
		pp = &(*pp)->snext;
	if (*pp)
		*pp = c->snext;
}

/* Close c, off epfd (its context's mu held). */
static void chan_end(drl__aio *io, drl__aio_chan *c)
{
	if (c->fd >= 0)
		(void)epoll_ctl(io->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	c->store->chan_close(c->ch);
	free(c);
}

void drl__aio_store_gone(drl_store *s)
{
	pthread_mutex_lock(&registry);
	while (s->chans) {
		drl__aio_chan *c = s->chans;
		s->chans = c->snext;
		drl__aio *io = c->io;
		pthread_mutex_lock(&io->mu);
		drl__aio_chan **pp = &io->chans;
		while (*pp != c)
			pp = &(*pp)->next;
		*pp = c->next;
		chan_end(io, c);
		pthread_mutex_unlock(&io->mu);
	}
	pthread_mutex_unlock(&registry);
}

/* ---- the descriptor ----------------------------------------------------- */

int drl__aio_init(drl__aio *io, int efd)
{
	pthread_mutexattr_t at;
	io->efd = efd;
	io->armed = INT64_MAX;
	io->chans = NULL;
	io->off = false;
	io->epfd = epoll_create1(EPOLL_CLOEXEC);
	io->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	struct epoll_event tv = {.events = EPOLLIN, .data.ptr = &io->tfd};
	if (io->epfd < 0 || io->tfd < 0 ||
	    epoll_ctl(io->epfd, EPOLL_CTL_ADD, efd, &ev) != 0 ||
	    epoll_ctl(io->epfd, EPOLL_CTL_ADD, io->tfd, &tv) != 0 ||
	    pthread_mutexattr_init(&at) != 0)
		goto fail;
	pthread_mutexattr_settype(&at, PTHREAD_MUTEX_RECURSIVE);
	int rc = pthread_mutex_init(&io->mu, &at);
	pthread_mutexattr_destroy(&at);
	if (rc == 0)
		return 0;
fail:
	if (io->epfd >= 0)
		close(io->epfd);
	if (io->tfd >= 0)
		close(io->tfd);
	return -1;
}

void drl__aio_free(drl__aio *io)
{
	pthread_mutex_lock(&registry);
	pthread_mutex_lock(&io->mu);
	for (drl__aio_chan *c = io->chans; c;) {
		drl__aio_chan *next = c->next;
		store_unlink(c);
		chan_end(io, c);
		c = next;
	}
	io->chans = NULL;
	pthread_mutex_unlock(&io->mu);
	pthread_mutex_unlock(&registry);
	pthread_mutex_destroy(&io->mu);
	close(io->tfd);
	close(io->epfd);
}

static bool has_channels(const drl_backend *b)
{
	return b->version >= 8 && (b->caps & DRL_CAP_CHANNEL) && b->chan_open &&
	       b->chan_poll && b->chan_process && b->chan_close;
}

/* io's channel of store, or NULL (io->mu held). */
static drl__aio_chan *find(drl__aio *io, const drl_store *owner)
{
	drl__aio_chan *c = io->chans;
	while (c && c->owner != owner)
		c = c->next;
	return c;
}

drl_channel *drl__aio_channel(drl__aio *io, drl_store *owner)
{
	drl_backend *store = owner->backend;
	if (io->off || !has_channels(store))
		return NULL;
	pthread_mutex_lock(&io->mu);
	drl__aio_chan *c = find(io, owner);
	pthread_mutex_unlock(&io->mu);
	if (c)
		return c->ch;
	/* The first on this store: made under both locks, in their order. */
	pthread_mutex_lock(&registry);
	pthread_mutex_lock(&io->mu);
	if ((c = find(io, owner)) == NULL &&
	    (c = calloc(1, sizeof *c)) != NULL) {
		if (store->chan_open(store, &c->ch, NULL) != 0) {
			free(c);
			c = NULL;
		} else {
			c->store = store;
			c->owner = owner;
			c->io = io;
			c->fd = -1;
			c->next = io->chans;
			io->chans = c;
			c->snext = owner->chans;
			owner->chans = c;
		}
	}
	pthread_mutex_unlock(&io->mu);
	pthread_mutex_unlock(&registry);
	return c ? c->ch : NULL;
}

/* Follow c's descriptor in epfd (io->mu held) and return its deadline
 * (chan_poll): a number the channel gives stays one connection until it
 * gives another (chan_poll's contract), so an unchanged number and
 * events need no call. */
static int64_t follow(drl__aio *io, drl__aio_chan *c)
{
	short events = 0;
	int64_t deadline = INT64_MAX;
	int fd = c->store->chan_poll(c->ch, &events, &deadline);
	if (fd == c->fd && events == c->events)
		return deadline;
	struct epoll_event ev = {.data.ptr = c};
	ev.events = ((events & POLLIN) ? EPOLLIN : 0) |
		    ((events & POLLOUT) ? EPOLLOUT : 0);
	if (c->fd >= 0 && c->fd != fd)
		(void)epoll_ctl(io->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	if (fd >= 0 && c->fd == fd)
		(void)epoll_ctl(io->epfd, EPOLL_CTL_MOD, fd, &ev);
	else if (fd >= 0)
		(void)epoll_ctl(io->epfd, EPOLL_CTL_ADD, fd, &ev);
	c->fd = fd;
	c->events = events;
	return deadline;
}

/* Follow every channel and arm the timer at the earliest deadline when
 * it is earlier than the one armed (a timer that rings early costs one
 * reap that finds nothing due; it is armed again then). */
static void follow_all(drl__aio *io)
{
	int64_t d = INT64_MAX;
	for (drl__aio_chan *c = io->chans; c; c = c->next) {
		int64_t cd = follow(io, c);
		if (cd < d)
			d = cd;
	}
	if (d < io->armed) {
		struct itimerspec it = {
			.it_value = {.tv_sec = d / 1000000,
				     .tv_nsec = (long)(d % 1000000) * 1000}};
		if (timerfd_settime(io->tfd, TFD_TIMER_ABSTIME, &it, NULL) == 0)
			io->armed = d;
	}
}

void drl__aio_reap(drl__aio *io, int timeout_ms)
{
	struct epoll_event evs[32];
	int n = epoll_wait(io->epfd, evs, 32, timeout_ms);
	if (n <= 0)
		return;
	pthread_mutex_lock(&io->mu);
	for (int i = 0; i < n; i++) {
		void *p = evs[i].data.ptr;
		uint64_t v;
		if (p == NULL) { /* the eventfd */
			ssize_t r = read(io->efd, &v, sizeof v);
			(void)r;
		} else if (p == &io->tfd) { /* a deadline: every channel */
			ssize_t r = read(io->tfd, &v, sizeof v);
			(void)r;
			io->armed = INT64_MAX;
			for (drl__aio_chan *c = io->chans; c; c = c->next)
				c->store->chan_process(c->ch, 0);
		} else {
			/* A channel, unless its store was freed since the
			 * wait (then it is off the list). */
			drl__aio_chan *c = io->chans;
			while (c && c != p)
				c = c->next;
			if (c == NULL)
				continue;
			uint32_t e = evs[i].events;
			short re = (short)(((e & EPOLLIN) ? POLLIN : 0) |
					   ((e & EPOLLOUT) ? POLLOUT : 0) |
					   ((e & EPOLLERR) ? POLLERR : 0) |
					   ((e & EPOLLHUP) ? POLLHUP : 0));
			c->store->chan_process(c->ch, re);
		}
	}
	follow_all(io);
	pthread_mutex_unlock(&io->mu);
}

void drl__aio_flush(drl__aio *io)
{
	pthread_mutex_lock(&io->mu);
	for (drl__aio_chan *c = io->chans; c; c = c->next)
		c->store->chan_process(c->ch, 0);
	follow_all(io);
	pthread_mutex_unlock(&io->mu);
}

int drl__aio_wait_ms(drl__aio *io)
{
	int64_t d = INT64_MAX;
	pthread_mutex_lock(&io->mu);
	for (drl__aio_chan *c = io->chans; c; c = c->next) {
		int64_t cd = follow(io, c); /* a number it gives is followed */
		if (cd < d)
			d = cd;
	}
	pthread_mutex_unlock(&io->mu);
	if (d == INT64_MAX)
		return -1;
	int64_t left = (d - drl_mono_us()) / 1000 + 1;
	return left < 1 ? 1 : left > 60000 ? 60000 : (int)left;
}
