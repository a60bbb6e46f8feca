/*
 * Run a drl_async context's callbacks on a libuv loop (header-only, like
 * hiredis's adapters/libuv.h): a uv_poll_t watches drl_async_fd() and
 * calls drl_async_process() on the loop's thread when it is readable.
 *
 *   drl_libuv *h;
 *   drl_libuv_attach(&h, loop, a, &err);     (on the loop's thread)
 *   drl_libuv_on_error(h, on_error, arg);    (optional)
 *   ... starts ...
 *   uv_run(loop, UV_RUN_DEFAULT);            (returns once all ran)
 *   drl_async_free(a);                       (detaches h too)
 *
 * The loop's thread: attach, run the loop, detach and drl_async_free()
 * on one thread (or free with the loop not running).
 *
 * Keeping the loop alive: the poll handle is referenced (uv_ref) while
 * the context is busy (requests pending, or a drain's done callback due:
 * drl_async_adapter in <drl/async.h>) and unreferenced while idle, so
 * uv_run(loop, UV_RUN_DEFAULT) returns once every callback has run, as a
 * loop with nothing else to do does. The handle keeps watching while
 * unreferenced: a request started on another thread while the loop runs
 * for other handles is delivered, and the handle is referenced for it
 * from the loop's thread (a uv_async_t, which is not referenced itself);
 * a loop with nothing else to run for may have returned by then, so a
 * program that starts requests only on other threads keeps its loop
 * alive itself, as it must for anything it hears from those threads.
 *
 * Poll errors: when libuv reports one (the poll callback's status < 0:
 * the descriptor was closed or replaced behind the context's back),
 * libuv has stopped the handle. The adapter records the status (h->status)
 * and calls the error callback set by drl_libuv_on_error() with
 * DRL_EUNAVAILABLE and libuv's message; it watches no more. Requests
 * pending then stay in the context and the adapter runs none of their
 * callbacks (uv_run may return with drl_async_pending() > 0): run them
 * with drl_async_process(), with drl_async_free() (which waits for those
 * in flight and runs every callback), or after a new attachment
 * (drl_libuv_detach(), drl_libuv_attach()).
 */
#ifndef DRL_ADAPTERS_LIBUV_H
#define DRL_ADAPTERS_LIBUV_H

#include <drl/async.h>
#include <drl/sys/backend.h> /* drl_error_set */

#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

typedef struct drl_libuv drl_libuv;

/* A poll error (see above): err->code is DRL_EUNAVAILABLE, err->message
 * names libuv's error; err is valid only during the call. On the loop's
 * thread; it may detach h or free the context. */
typedef void (*drl_libuv_error_cb)(drl_libuv *h, const drl_error *err,
				   void *arg);

/* The attachment: owned by the adapter, freed once its handles have
 * closed after drl_libuv_detach() or drl_async_free() (the loop's next
 * iteration). */
struct drl_libuv {
	uv_poll_t poll;     /* watches drl_async_fd() */
	uv_async_t wake;    /* a busy change made on another thread */
	drl_async *async;   /* NULL once detached */
	uv_thread_t thread; /* the loop's: attach's */
	int busy;           /* the context's latest busy state (atomic) */
	int closing;        /* close callbacks still to come */
	int status;         /* libuv's poll error, or 0 while none */
	drl_libuv_error_cb on_error;
	void *error_arg;
	void (*closed)(void *arg); /* drl_libuv_on_closed() */
	void *closed_arg;
};

/* Reference the poll handle while busy (the loop's thread). */
static void drl_libuv__apply(drl_libuv *h)
{
	if (__atomic_load_n(&h->busy, __ATOMIC_ACQUIRE))
		uv_ref((uv_handle_t *)&h->poll);
	else
		uv_unref((uv_handle_t *)&h->poll);
}

/* drl_async_adapter.busy: any thread, the context's lock held. */
static void drl_libuv__busy(void *arg, int busy)
{
	drl_libuv *h = (drl_libuv *)arg;
	__atomic_store_n(&h->busy, busy, __ATOMIC_RELEASE);
	uv_thread_t self = uv_thread_self();
	if (uv_thread_equal(&self, &h->thread))
		drl_libuv__apply(h);
	else
		uv_async_send(&h->wake);
}

static void drl_libuv__on_wake(uv_async_t *wake)
{
	drl_libuv__apply((drl_libuv *)wake->data);
}

static void drl_libuv__on_poll(uv_poll_t *poll, int status, int events)
{
	drl_libuv *h = (drl_libuv *)poll->data;
	(void)events;
	if (status == 0) {
		if (h->async)
			drl_async_process(h->async);
		return;
	}
	h->status = status;
	if (h->on_error == NULL || h->async == NULL)
		return;
	drl_error err = {DRL_EUNAVAILABLE, {0}};
	snprintf(err.message, sizeof err.message,
		 "drl_libuv: polling drl_async_fd() failed: %s (%s); the "
		 "adapter stopped watching",
		 uv_strerror(status), uv_err_name(status));
	h->on_error(h, &err, h->error_arg);
}

static void drl_libuv__on_close(uv_handle_t *handle)
{
	drl_libuv *h = (drl_libuv *)handle->data;
	if (--h->closing != 0)
		return;
	void (*closed)(void *) = h->closed;
	void *arg = h->closed_arg;
	free(h);
	if (closed != NULL)
		closed(arg);
}

/* Close both handles (unhooked from the context already). */
static inline void drl_libuv__close(drl_libuv *h)
{
	h->async = NULL;
	h->closing = 2;
	uv_poll_stop(&h->poll);
	uv_close((uv_handle_t *)&h->poll, drl_libuv__on_close);
	uv_close((uv_handle_t *)&h->wake, drl_libuv__on_close);
}

/* drl_async_adapter.cleanup: drl_async_free() of the context. */
static void drl_libuv__cleanup(void *arg)
{
	drl_libuv__close((drl_libuv *)arg);
}

/* Watch a's fd on loop, on the loop's thread. 0 and *out is the
 * attachment; DRL_EINVAL (NULL argument, or libuv refused the handles),
 * DRL_ENOMEM, DRL_EBUSY (an adapter is attached to a already). */
static inline int drl_libuv_attach(drl_libuv **out, uv_loop_t *loop,
				   drl_async *a, drl_error *err)
{
	if (out == NULL || loop == NULL || a == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_libuv_attach: NULL argument");
	*out = NULL;
	drl_libuv *h = (drl_libuv *)calloc(1, sizeof *h);
	if (h == NULL)
		return drl_error_set(err, DRL_ENOMEM,
				     "drl_libuv_attach: out of memory");
	h->async = a;
	h->poll.data = h;
	h->wake.data = h;
	h->thread = uv_thread_self();
	int rc = uv_poll_init(loop, &h->poll, drl_async_fd(a));
	if (rc != 0) {
		free(h);
		return drl_error_set(err, DRL_EINVAL, "drl_libuv_attach: %s",
				     uv_strerror(rc));
	}
	rc = uv_async_init(loop, &h->wake, drl_libuv__on_wake);
	if (rc != 0) {
		h->closing = 1;
		uv_close((uv_handle_t *)&h->poll, drl_libuv__on_close);
		return drl_error_set(err, DRL_EINVAL, "drl_libuv_attach: %s",
				     uv_strerror(rc));
	}
	uv_unref((uv_handle_t *)&h->wake);
	rc = uv_poll_start(&h->poll, UV_READABLE, drl_libuv__on_poll);
	drl_async_adapter hooks = {drl_libuv__busy, drl_libuv__cleanup, h};
	int drc = rc != 0 ? DRL_EINVAL : drl_async_set_adapter(a, &hooks, err);
	if (drc != 0) {
		drl_libuv__close(h);
		if (rc != 0)
			drl_error_set(err, drc, "drl_libuv_attach: %s",
				      uv_strerror(rc));
		return drc;
	}
	*out = h;
	return 0;
}

/* Call on_error(h, err, arg) at a poll error (see above); NULL: none.
 * On the loop's thread. */
static inline void drl_libuv_on_error(drl_libuv *h, drl_libuv_error_cb on_error,
				      void *arg)
{
	h->on_error = on_error;
	h->error_arg = arg;
}

/* Call closed(arg) once h's handles have closed and h is freed (after
 * drl_libuv_detach() or drl_async_free() of its context: the loop's next
 * iteration), on the loop's thread: from then on the loop calls none of
 * the adapter's code. For a program whose code may go away once the loop
 * stops calling it: a Node addon's environment cleanup (Node unloads an
 * addon a worker_thread loaded once the worker's environment is torn
 * down, and a close callback run after that would jump into unmapped
 * code), a plugin about to be unloaded. Set it before the detach or the
 * free; NULL: none. */
static inline void drl_libuv_on_closed(drl_libuv *h, void (*closed)(void *arg),
				       void *arg)
{
	h->closed = closed;
	h->closed_arg = arg;
}

/* Stop watching; the attachment is freed by the loop once its handles
 * have closed (the next loop iteration). NULL, and a second call before
 * then, are no-ops; after drl_async_free() of its context, h is gone
 * (that detached it). On the loop's thread. */
static inline void drl_libuv_detach(drl_libuv *h)
{
	if (h == NULL || h->closing)
		return;
	if (h->async)
		drl_async_set_adapter(h->async, NULL, NULL);
	drl_libuv__close(h);
}

#endif /* DRL_ADAPTERS_LIBUV_H */
