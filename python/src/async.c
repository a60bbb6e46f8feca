/*
 * drl._drl.Async: a drl_async context for one event loop (drl/aio.py
 * attaches it to asyncio). start() begins a decision and returns at once;
 * the loop watches fd() and calls process() when it is readable, which
 * completes the decision's asyncio future on the loop's thread: exactly
 * once per start that returned, set_result(drl.Result) or
 * set_exception(drl.Error), unless future.cancelled().
 *
 * Not thread-safe: use one context from its loop's thread only. A context
 * belongs to the process that made it: in a forked child it is never
 * freed (its workers are the parent's; drlpy.h says why), and drl/aio.py
 * makes the child a context of its own for a loop of its own.
 */
#include "drlpy.h"

#include <unistd.h>

typedef struct {
	PyObject_HEAD drl_async *a;
	pid_t pid; /* the process that made `a`: only it frees it */
} AsyncObject;

/* What one started decision holds until its callback. */
typedef struct {
	LimiterObject *limiter; /* strong: pinned store, see drlpy_pin() */
	PyObject *future;
} pending;

static int async_init(PyObject *obj, PyObject *args, PyObject *kw)
{
	static char *names[] = {"threads", "queue", NULL};
	AsyncObject *self = (AsyncObject *)obj;
	drl_async_opts opts = {0};
	Py_ssize_t queue = 0;
	drl_error err;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|in:Async", names,
					 &opts.threads, &queue))
		return -1;
	if (self->a != NULL) {
		PyErr_SetString(PyExc_TypeError, "Async is initialized once");
		return -1;
	}
	if (queue < 0) {
		drlpy_invalid("queue: must be >= 0");
		return -1;
	}
	opts.queue = (size_t)queue;
	self->pid = drlpy_pid;
	rc = drl_async_new(&self->a, &opts, &err);
	if (rc != 0) {
		drlpy_raise(rc, &err);
		return -1;
	}
	return 0;
}

/* Complete p->future (an asyncio.Future) unless its task gave up on it. */
static void decided(drl_async *a, int rc, const drl_result *result,
		    const drl_error *err, void *arg)
{
	pending *p = arg;
	PyObject *cancelled, *value = NULL, *out = NULL;

	drlpy_unpin(p->limiter);
	cancelled = PyObject_CallMethod(p->future, "cancelled", NULL);
	if (cancelled != NULL && !PyObject_IsTrue(cancelled)) {
		value = rc == 0 ? drlpy_result(result)
				: drlpy_exception(rc, err);
		if (value != NULL)
			out = PyObject_CallMethod(p->future,
						  rc == 0 ? "set_result"
							  : "set_exception",
						  "O", value);
	} else if (cancelled != NULL) {
		out = Py_NewRef(Py_None);
	}
	if (out == NULL)
		PyErr_WriteUnraisable(p->future);
	Py_XDECREF(out);
	Py_XDECREF(value);
	Py_XDECREF(cancelled);
	Py_DECREF(p->future);
	Py_DECREF(p->limiter);
	PyMem_RawFree(p);
}

static PyObject *async_start(PyObject *obj, PyObject *args)
{
	AsyncObject *self = (AsyncObject *)obj;
	LimiterObject *limiter;
	PyObject *key, *costobj, *future;
	int64_t cost;
	const char *buf;
	size_t len;
	drl_limiter *lim;
	drl_error err;
	pending *p;
	int rc;

	if (!PyArg_ParseTuple(args, "O!OOO:start", &Limiter_Type, &limiter,
			      &key, &costobj, &future) ||
	    drlpy_key(key, &buf, &len) < 0 || drlpy_cost(costobj, &cost) < 0)
		return NULL;
	if (self->a == NULL)
		return drlpy_invalid("the async context is closed");
	p = PyMem_RawMalloc(sizeof *p);
	if (p == NULL)
		return PyErr_NoMemory();
	lim = drlpy_pin(limiter);
	if (lim == NULL) {
		PyMem_RawFree(p);
		return NULL;
	}
	p->limiter = (LimiterObject *)Py_NewRef(limiter);
	p->future = Py_NewRef(future);
	rc = drl_async_allow(self->a, lim, buf, len, cost, decided, p, &err);
	if (rc != 0) {
		drlpy_unpin(limiter);
		Py_DECREF(p->future);
		Py_DECREF(p->limiter);
		PyMem_RawFree(p);
		return drlpy_raise(rc, &err);
	}
	Py_RETURN_NONE;
}

static PyObject *async_process(PyObject *obj, PyObject *unused)
{
	AsyncObject *self = (AsyncObject *)obj;
	int n;

	if (self->a == NULL)
		return PyLong_FromLong(0);
	n = drl_async_process(self->a);
	if (n < 0)
		return drlpy_raise(n, NULL);
	return PyLong_FromLong(n);
}

static PyObject *async_fd(PyObject *obj, PyObject *unused)
{
	return PyLong_FromLong(drl_async_fd(((AsyncObject *)obj)->a));
}

static PyObject *async_pending(PyObject *obj, PyObject *unused)
{
	AsyncObject *self = (AsyncObject *)obj;

	return PyLong_FromSize_t(self->a ? drl_async_pending(self->a) : 0);
}

/* Free the context: what no worker began is canceled, what is in flight
 * is waited for (at most the store's timeout_ms), every callback runs. */
static PyObject *async_close(PyObject *obj, PyObject *unused)
{
	AsyncObject *self = (AsyncObject *)obj;
	drl_async *a = self->a;

	self->a = NULL;
	if (self->pid == drlpy_pid)
		drl_async_free(a);
	Py_RETURN_NONE;
}

static void async_dealloc(PyObject *obj)
{
	AsyncObject *self = (AsyncObject *)obj;

	if (self->pid == drlpy_pid)
		drl_async_free(self->a);
	Py_TYPE(obj)->tp_free(obj);
}

static PyMethodDef methods[] = {
	{"start", async_start, METH_VARARGS,
	 "start(limiter, key, cost, future): begin a decision."},
	{"process", async_process, METH_NOARGS,
	 "Run the callbacks of finished decisions; how many ran."},
	{"fd", async_fd, METH_NOARGS, "The descriptor to watch for reading."},
	{"pending", async_pending, METH_NOARGS,
	 "Decisions started whose callback has not begun."},
	{"close", async_close, METH_NOARGS, "Free the context."},
	{NULL},
};

PyTypeObject Async_Type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "drl._drl.Async",
	.tp_doc = "Async(threads=0, queue=0): a drl_async context.",
	.tp_basicsize = sizeof(AsyncObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = PyType_GenericNew,
	.tp_init = async_init,
	.tp_dealloc = async_dealloc,
	.tp_methods = methods,
};
