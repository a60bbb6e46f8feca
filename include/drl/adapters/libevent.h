/*
 * Run a drl_async context's callbacks on a libevent event_base
 * (header-only, like hiredis's adapters/libevent.h): a persistent read
 * event on drl_async_fd() calls drl_async_process() on the thread running
 * the base's loop.
 *
 *   drl_libevent *h;
 *   drl_libevent_attach(&h, base, a, &err);
 *   drl_libevent_on_error(h, on_error, arg);  (optional)
 *   ... starts ...
 *   event_base_dispatch(base);                (returns once all ran)
 *   drl_async_free(a);                        (detaches h too)
 *
 * The loop's thread: attach, run the loop, detach and drl_async_free()
 * on one thread (or free with the loop not running).
 *
 * Keeping the loop alive: the event is added while the context is busy
 * (requests pending, or a drain's done callback due: drl_async_adapter in
 * <drl/async.h>) and deleted while idle (libevent has no unreferenced
 * event), so event_base_dispatch() returns once every callback has run,
 * as a base with nothing else to do does. A start that makes the context
 * busy adds the event from the starting thread: a program that starts
 * requests on other threads makes its base safe for that, as libevent
 * asks of any base used from several threads (evthread_use_pthreads()
 * before event_base_new()); starts on the loop's thread need nothing.
 *
 * Poll errors: libevent has no error status for an event: an error on the
 * descriptor (it was closed or replaced behind the context's back) wakes
 * the event as readable, again and again. When a wake-up finds no
 * callback to run, the adapter asks poll() about the descriptor; at an
 * error (POLLERR, POLLHUP, POLLNVAL) it deletes the event for good,
 * records errno's name for it (h->error: EBADF, EIO or EPIPE) and calls
 * the error callback set by drl_libevent_on_error() with
 * DRL_EUNAVAILABLE. Requests pending then stay in the context and the
 * adapter runs none of their callbacks (event_base_dispatch() may return
 * with drl_async_pending() > 0): run them with drl_async_process(), with
 * drl_async_free() (which waits for those in flight and runs every
 * callback), or after a new attachment (drl_libevent_detach(),
 * drl_libevent_attach()).
 */
#ifndef DRL_ADAPTERS_LIBEVENT_H
#define DRL_ADAPTERS_LIBEVENT_H

#include <drl/async.h>
#include <drl/sys/backend.h> /* drl_error_set */

#include <errno.h>
#include <event2/event.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct drl_libevent drl_libevent;

/* A poll error (see above): err->code is DRL_EUNAVAILABLE, err->message
 * says what poll() reported; err is valid only during the call. On the
 * loop's thread; it may detach h or free the context. */
typedef void (*drl_libevent_error_cb)(drl_libevent *h, const drl_error *err,
				      void *arg);

/* The attachment: owned by the adapter, freed by drl_libevent_detach()
 * or drl_async_free(). */
struct drl_libevent {
	struct event *ev;
	drl_async *async; /* NULL once detached */
	int in_read;      /* in drl_libevent__on_read's drl_async_process */
	int error;        /* an errno value after a poll error, or 0 (atomic) */
	drl_libevent_error_cb on_error;
	void *error_arg;
};

/* drl_async_adapter.busy: any thread, the context's lock held (hence the
 * delete that does not wait for a running callback). */
static void drl_libevent__busy(void *arg, int busy)
{
	drl_libevent *h = (drl_libevent *)arg;
	if (__atomic_load_n(&h->error, __ATOMIC_ACQUIRE))
		return;
	if (busy)
		event_add(h->ev, NULL);
	else
		event_del_noblock(h->ev);
}

/* After a wake-up that ran nothing: an error on the descriptor? */
static void drl_libevent__check(drl_libevent *h, evutil_socket_t fd)
{
	struct pollfd p = {fd, POLLIN, 0};
	if (poll(&p, 1, 0) != 1 ||
	    !(p.revents & (POLLERR | POLLHUP | POLLNVAL)))
		return;
	int error = p.revents & POLLNVAL  ? EBADF
		    : p.revents & POLLERR ? EIO
					  : EPIPE;
	__atomic_store_n(&h->error, error, __ATOMIC_RELEASE);
	event_del(h->ev);
	if (h->on_error == NULL)
		return;
	drl_error err = {DRL_EUNAVAILABLE, {0}};
	snprintf(err.message, sizeof err.message,
		 "drl_libevent: drl_async_fd() reports %s (%s); the adapter "
		 "stopped watching",
		 p.revents & POLLNVAL  ? "POLLNVAL"
		 : p.revents & POLLERR ? "POLLERR"
				       : "POLLHUP",
		 strerror(error));
	h->on_error(h, &err, h->error_arg);
}

/* drl_async_adapter.cleanup: drl_async_free() of the context. */
static void drl_libevent__cleanup(void *arg)
{
	drl_libevent *h = (drl_libevent *)arg;
	event_free(h->ev);
	free(h);
}

static void drl_libevent__on_read(evutil_socket_t fd, short what, void *arg)
{
	drl_libevent *h = (drl_libevent *)arg;
	(void)what;
	h->in_read = 1;
	int ran = drl_async_process(h->async);
	h->in_read = 0;
	if (h->async == NULL) /* a callback detached h: freed here */
		drl_libevent__cleanup(h);
	else if (ran == 0)
		drl_libevent__check(h, fd);
}

/* Watch a's fd on base, on the loop's thread. 0 and *out is the
 * attachment; DRL_EINVAL (NULL argument, or libevent refused the event),
 * DRL_ENOMEM, DRL_EBUSY (an adapter is attached to a already). */
static inline int drl_libevent_attach(drl_libevent **out,
				      struct event_base *base, drl_async *a,
				      drl_error *err)
{
	if (out == NULL || base == NULL || a == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_libevent_attach: NULL argument");
	*out = NULL;
	drl_libevent *h = (drl_libevent *)calloc(1, sizeof *h);
	if (h == NULL)
		return drl_error_set(err, DRL_ENOMEM,
				     "drl_libevent_attach: out of memory");
	h->async = a;
	h->ev = event_new(base, drl_async_fd(a), EV_READ | EV_PERSIST,
			  drl_libevent__on_read, h);
	if (h->ev == NULL) {
		free(h);
		return drl_error_set(
			err, DRL_EINVAL,
			"drl_libevent_attach: libevent refused the event");
	}
	/* adds the event now when the context is busy */
	drl_async_adapter hooks = {drl_libevent__busy, drl_libevent__cleanup,
				   h};
	int rc = drl_async_set_adapter(a, &hooks, err);
	if (rc != 0) {
		drl_libevent__cleanup(h);
		return rc;
	}
	*out = h;
	return 0;
}

/* Call on_error(h, err, arg) at a poll error (see above); NULL: none.
 * On the loop's thread. */
static inline void drl_libevent_on_error(drl_libevent *h,
					 drl_libevent_error_cb on_error,
					 void *arg)
{
	h->on_error = on_error;
	h->error_arg = arg;
}

/* Stop watching and free the attachment: h is gone after it (and after
 * drl_async_free() of its context, which detached it). NULL is a no-op.
 * On the loop's thread (or with the loop stopped). */
static inline void drl_libevent_detach(drl_libevent *h)
{
	if (h == NULL || h->async == NULL)
		return;
	drl_async_set_adapter(h->async, NULL, NULL);
	h->async = NULL;
	if (h->in_read) { /* from a callback: its on_read frees h */
		event_del(h->ev);
		return;
	}
	drl_libevent__cleanup(h);
}

#endif /* DRL_ADAPTERS_LIBEVENT_H */
