/* <drl/adapters/libevent.h> on a real event_base:
 * tests/fixtures/async_loop.c. */
#include "async_loop.h"

#include <drl/adapters/libevent.h>

#include <stdlib.h>

static void *make(void)
{
	struct event_base *base = event_base_new();
	if (base == NULL)
		abort();
	return base;
}

static int attach(void *loop, drl_async *a, void **h, drl_error *err)
{
	return drl_libevent_attach((drl_libevent **)h, loop, a, err);
}

static int attach_null(drl_async *a, drl_error *err)
{
	drl_libevent *h;
	struct event_base *base = make();
	int rc = drl_libevent_attach(&h, NULL, a, err);
	if (rc == DRL_EINVAL)
		rc = drl_libevent_attach(&h, base, NULL, err);
	if (rc == DRL_EINVAL)
		rc = drl_libevent_attach(NULL, base, a, err);
	event_base_free(base);
	return rc;
}

static void run(void *loop)
{
	event_base_dispatch(loop);
}

static void stop(void *loop)
{
	event_base_loopbreak(loop);
}

static void detach(void *h)
{
	drl_libevent_detach(h);
}

static void on_error_cb(drl_libevent *h, const drl_error *err, void *arg)
{
	(void)h;
	loop_error *e = arg;
	e->count++;
	e->err = *err;
}

static void on_error(void *h, loop_error *e)
{
	drl_libevent_on_error(h, e ? on_error_cb : NULL, e);
}

static int alive(void *loop)
{
	return event_base_get_num_events(loop,
					 EVENT_BASE_COUNT_ADDED |
						 EVENT_BASE_COUNT_ACTIVE) > 0;
}

static void loop_free(void *loop)
{
	event_base_free(loop);
}

int main(void)
{
	/* no hold/release: a start on another thread needs a base made
	 * thread-safe by evthread_use_pthreads() (libevent_pthreads) */
	static const async_loop L = {
		"libevent", make,      attach,   attach_null, run,  stop,
		detach,     loop_free, on_error, alive,       NULL, NULL,
	};
	return async_loop_main(&L);
}
