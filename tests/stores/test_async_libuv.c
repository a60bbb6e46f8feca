/* <drl/adapters/libuv.h> on a real uv_loop_t: tests/fixtures/async_loop.c. */
#include "async_loop.h"
#include "testutil.h"

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

static void on_error_cb(drl_libuv *h, const drl_error *err, void *arg)
{
	(void)h;
	loop_error *e = arg;
	e->count++;
	e->err = *err;
}

static void on_error(void *h, loop_error *e)
{
	drl_libuv_on_error(h, e ? on_error_cb : NULL, e);
}

static int alive(void *loop)
{
	return uv_loop_alive(loop);
}

static void hold_close(uv_handle_t *handle)
{
	free(handle);
}

static void hold_released(uv_async_t *hold)
{
	uv_close((uv_handle_t *)hold, hold_close);
}

/* A referenced uv_async_t, closed when released (uv_async_send). */
static void *hold(void *loop)
{
	uv_async_t *h = malloc(sizeof *h);
	if (h == NULL || uv_async_init(loop, h, hold_released) != 0)
		abort();
	return h;
}

static void release(void *token)
{
	uv_async_send(token);
}

/* Close what detach closed (its close callback frees the attachment). */
static void loop_free(void *loop)
{
	uv_run(loop, UV_RUN_DEFAULT);
	if (uv_loop_close(loop) != 0)
		abort();
	free(loop);
}

static void count_closed(void *arg)
{
	(*(int *)arg)++;
}

/* drl_libuv_on_closed(): called once the loop has closed the handles
 * that drl_async_free() (or drl_libuv_detach()) closed, on the loop's
 * next iteration, not before; the loop then holds nothing of the
 * adapter's (uv_loop_close succeeds). */
static void test_on_closed(void **state)
{
	(void)state;
	for (int by_detach = 0; by_detach < 2; by_detach++) {
		uv_loop_t *loop = make();
		drl_async *a = NULL;
		drl_libuv *h = NULL;
		drl_error err = {0, {0}};
		int calls = 0;
		assert_int_equal(drl_async_new(&a, NULL, &err), 0);
		assert_int_equal(drl_libuv_attach(&h, loop, a, &err), 0);
		drl_libuv_on_closed(h, count_closed, &calls);
		if (by_detach)
			drl_libuv_detach(h);
		drl_async_free(a); /* detaches h, unless detached */
		assert_int_equal(calls, 0);
		uv_run(loop, UV_RUN_DEFAULT);
		assert_int_equal(calls, 1);
		assert_int_equal(uv_loop_close(loop), 0);
		free(loop);
	}
}

int main(void)
{
	static const async_loop L = {
		"libuv", make,      attach,   attach_null, run,  stop,
		detach,  loop_free, on_error, alive,       hold, release,
	};
	static const struct CMUnitTest own[] = {
		cmocka_unit_test(test_on_closed),
	};
	int failed = async_loop_main(&L);
	return failed +
	       cmocka_run_group_tests_name("libuv adapter", own, NULL, NULL);
}
