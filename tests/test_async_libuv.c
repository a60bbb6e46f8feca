/* <drl/adapters/libuv.h> on a real uv_loop_t: tests/async_loop.c. */
#include "async_loop.h"

#include <drl/adapters/libuv.h>

#include <stdlib.h>

static void *make(void)
{
	uv_loop_t *loop = malloc(sizeof *loop);
	if (loop == NULL || uv_loop_init(loop) != 0)
		abort();
	return loop;
}

static int attach(void *loop, drl_async *a, void **h, drl_error *err)
{
	return drl_libuv_attach((drl_libuv **)h, loop, a, err);
}

static int attach_null(drl_async *a, drl_error *err)
{
	drl_libuv *h;
	uv_loop_t *loop = make();
	int rc = drl_libuv_attach(&h, NULL, a, err);
	if (rc == DRL_EINVAL)
		rc = drl_libuv_attach(&h, loop, NULL, err);
	if (rc == DRL_EINVAL)
		rc = drl_libuv_attach(NULL, loop, a, err);
	uv_loop_close(loop);
	free(loop);
	return rc;
}

static void run(void *loop)
{
	uv_run(loop, UV_RUN_DEFAULT);
}

static void stop(void *loop)
{
	uv_stop(loop);
}

static void detach(void *h)
{
	drl_libuv_detach(h);
}

/* Close what detach closed (its close callback frees the attachment). */
static void loop_free(void *loop)
{
	uv_run(loop, UV_RUN_DEFAULT);
	if (uv_loop_close(loop) != 0)
		abort();
	free(loop);
}

int main(void)
{
	static const async_loop L = {
		"libuv", make, attach, attach_null,
		run,     stop, detach, loop_free,
	};
	return async_loop_main(&L);
}
