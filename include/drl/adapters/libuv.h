/*
 * Run a drl_async context's callbacks on a libuv loop (header-only, like
 * hiredis's adapters/libuv.h): a uv_poll_t watches drl_async_fd() and
 * calls drl_async_process() on the loop's thread when it is readable.
 *
 *   drl_libuv *h;
 *   drl_libuv_attach(&h, uv_default_loop(), a, NULL);
 *   ... uv_run(loop, UV_RUN_DEFAULT) ...
 *   drl_libuv_detach(h);   (on the loop's thread, before drl_async_free)
 *
 * The poll handle keeps the loop alive while attached; detach it when no
 * more requests will be started (drl_async_pending() == 0) so uv_run can
 * return.
 */
#ifndef DRL_ADAPTERS_LIBUV_H
#define DRL_ADAPTERS_LIBUV_H

#include <drl/async.h>

#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

/* The attachment: owned by the adapter, freed by drl_libuv_detach(). */
typedef struct drl_libuv {
	uv_poll_t poll; /* first: the handle's address is the struct's */
	drl_async *async;
} drl_libuv;

static void drl_libuv__on_poll(uv_poll_t *poll, int status, int events)
{
	(void)events;
	if (status == 0)
		drl_async_process(((drl_libuv *)poll->data)->async);
}

static void drl_libuv__on_close(uv_handle_t *handle)
{
	free(handle->data);
}

/* Fill err (may be NULL) with code and msg; returns code. */
static inline int drl_libuv__fail(drl_error *err, int code, const char *what,
				  const char *detail)
{
	if (err != NULL) {
		err->code = code;
		snprintf(err->message, sizeof err->message, "%s: %s", what,
			 detail);
	}
	return code;
}

/* Watch a's fd on loop. DRL_EINVAL (NULL argument) or DRL_ENOMEM, else 0
 * and *out is the attachment. Call on the loop's thread. */
static inline int drl_libuv_attach(drl_libuv **out, uv_loop_t *loop,
				   drl_async *a, drl_error *err)
{
	if (out == NULL || loop == NULL || a == NULL)
		return drl_libuv__fail(err, DRL_EINVAL, "drl_libuv_attach",
				       "NULL argument");
	*out = NULL;
	drl_libuv *h = (drl_libuv *)calloc(1, sizeof *h);
	if (h == NULL)
		return drl_libuv__fail(err, DRL_ENOMEM, "drl_libuv_attach",
				       "out of memory");
	h->async = a;
	h->poll.data = h;
	int rc = uv_poll_init(loop, &h->poll, drl_async_fd(a));
	if (rc == 0)
		rc = uv_poll_start(&h->poll, UV_READABLE, drl_libuv__on_poll);
	if (rc != 0) {
		int inited = h->poll.loop != NULL;
		if (inited)
			uv_close((uv_handle_t *)&h->poll, drl_libuv__on_close);
		else
			free(h);
		return drl_libuv__fail(err, DRL_EINVAL, "drl_libuv_attach",
				       uv_strerror(rc));
	}
	*out = h;
	return 0;
}

/* Stop watching; the attachment is freed by the loop once the handle has
 * closed (the next loop iteration). NULL is a no-op. Call on the loop's
 * thread, before drl_async_free() of its context. */
static inline void drl_libuv_detach(drl_libuv *h)
{
	if (h == NULL)
		return;
	uv_poll_stop(&h->poll);
	uv_close((uv_handle_t *)&h->poll, drl_libuv__on_close);
}

#endif /* DRL_ADAPTERS_LIBUV_H */
