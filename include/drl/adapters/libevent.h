/*
 * Run a drl_async context's callbacks on a libevent event_base
 * (header-only, like hiredis's adapters/libevent.h): a persistent read
 * event on drl_async_fd() calls drl_async_process() on the thread running
 * the base's loop.
 *
 *   drl_libevent *h;
 *   drl_libevent_attach(&h, base, a, NULL);
 *   ... event_base_dispatch(base) ...
 *   drl_libevent_detach(h);   (before drl_async_free)
 *
 * The event keeps the base's loop running while attached; detach it when
 * no more requests will be started (drl_async_pending() == 0).
 */
#ifndef DRL_ADAPTERS_LIBEVENT_H
#define DRL_ADAPTERS_LIBEVENT_H

#include <drl/async.h>

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>

/* The attachment: owned by the adapter, freed by drl_libevent_detach(). */
typedef struct drl_libevent {
	struct event *ev;
	drl_async *async;
} drl_libevent;

static void drl_libevent__on_read(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	drl_async_process((drl_async *)arg);
}

/* Fill err (may be NULL) with code and msg; returns code. */
static inline int drl_libevent__fail(drl_error *err, int code, const char *what,
				     const char *detail)
{
	if (err != NULL) {
		err->code = code;
		snprintf(err->message, sizeof err->message, "%s: %s", what,
			 detail);
	}
	return code;
}

/* Watch a's fd on base. DRL_EINVAL (NULL argument, or libevent refused
 * the event) or DRL_ENOMEM, else 0 and *out is the attachment. */
static inline int drl_libevent_attach(drl_libevent **out,
				      struct event_base *base, drl_async *a,
				      drl_error *err)
{
	if (out == NULL || base == NULL || a == NULL)
		return drl_libevent__fail(err, DRL_EINVAL,
					  "drl_libevent_attach",
					  "NULL argument");
	*out = NULL;
	drl_libevent *h = (drl_libevent *)calloc(1, sizeof *h);
	if (h == NULL)
		return drl_libevent__fail(err, DRL_ENOMEM,
					  "drl_libevent_attach",
					  "out of memory");
	h->async = a;
	h->ev = event_new(base, drl_async_fd(a), EV_READ | EV_PERSIST,
			  drl_libevent__on_read, a);
	if (h->ev == NULL || event_add(h->ev, NULL) != 0) {
		if (h->ev)
			event_free(h->ev);
		free(h);
		return drl_libevent__fail(err, DRL_EINVAL,
					  "drl_libevent_attach",
					  "libevent refused the event");
	}
	*out = h;
	return 0;
}

/* Stop watching and free the attachment. NULL is a no-op. Call on the
 * loop's thread (or with the loop stopped), before drl_async_free() of
 * its context. */
static inline void drl_libevent_detach(drl_libevent *h)
{
	if (h == NULL)
		return;
	event_free(h->ev);
	free(h);
}

#endif /* DRL_ADAPTERS_LIBEVENT_H */
