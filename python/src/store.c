/*
 * drl.Store(uri="memory://"): a libdrl store, opened from a URI (README,
 * "Store URIs"). Thread-safe as the C store is: share one per process.
 * close() (or leaving a `with` block) frees it and the native limiters
 * made on it; every later call on them raises drl.InvalidError. It raises
 * drl.BusyError while another thread is inside a call on it.
 */
#include "drlpy.h"

#include <string.h>
#include <unistd.h>

/* Open s->uri; with the GIL released when `release` (a connect may wait
 * up to its timeout). A reopen after a fork keeps the GIL: the child's
 * other threads must not start a second reopen of the same store. */
static int open_native(StoreObject *s, int release)
{
	drl_error err = {0};
	drl_store *store = NULL;
	int rc;

	if (release) {
		Py_BEGIN_ALLOW_THREADS rc =
			drl_store_open(&store, s->uri, &err);
		Py_END_ALLOW_THREADS
	} else {
		rc = drl_store_open(&store, s->uri, &err);
	}
	if (rc != 0) {
		drlpy_raise(rc, &err);
		return -1;
	}
	s->store = store;
	s->pid = drlpy_pid;
	s->gen++;
	return 0;
}

int drlpy_store_current(StoreObject *s)
{
	if (s->store == NULL) {
		drlpy_invalid("the store is closed");
		return -1;
	}
	if (s->pid == drlpy_pid)
		return 0;
	/* A forked child: leave the parent's store alone (leaked, see
	 * drlpy.h) and open our own. Calls in flight were the parent's. */
	s->busy = 0;
	return open_native(s, 0);
}

static int store_init(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *names[] = {"uri", NULL};
	StoreObject *s = (StoreObject *)self;
	const char *uri = "memory://";

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|s:Store", names, &uri))
		return -1;
	if (s->uri != NULL || s->store != NULL) {
		PyErr_SetString(PyExc_TypeError,
				"drl.Store is initialized once");
		return -1;
	}
	s->uri = strdup(uri);
	if (s->uri == NULL) {
		PyErr_NoMemory();
		return -1;
	}
	return open_native(s, 1);
}

/* Free the native limiters and store (not in a forked child: leaked). */
static void close_native(StoreObject *s)
{
	int mine = s->pid == drlpy_pid;

	for (LimiterObject *l = s->limiters; l != NULL; l = l->next) {
		if (mine && l->gen == s->gen)
			drl_limiter_free(l->lim);
		l->lim = NULL;
	}
	if (mine)
		drl_store_free(s->store);
	s->store = NULL;
}

static PyObject *store_close(PyObject *self, PyObject *unused)
{
	StoreObject *s = (StoreObject *)self;

	if (s->busy > 0 && s->pid == drlpy_pid) {
		drl_error err = {.code = DRL_EBUSY};
		snprintf(err.message, sizeof err.message,
			 "close: %zd calls in flight on this store",
			 (size_t)s->busy);
		return drlpy_raise(DRL_EBUSY, &err);
	}
	close_native(s);
	Py_RETURN_NONE;
}

static void store_dealloc(PyObject *self)
{
	StoreObject *s = (StoreObject *)self;

	/* Limiters hold a reference: none is left, nothing is in flight. */
	if (s->store != NULL)
		close_native(s);
	free(s->uri);
	Py_TYPE(self)->tp_free(self);
}

static PyObject *store_stats(PyObject *self, PyObject *unused)
{
	StoreObject *s = (StoreObject *)self;
	drl_store_stats st;

	if (drlpy_store_current(s) < 0)
		return NULL;
	drl_store_stats_get(s->store, &st);
	return Py_BuildValue(
		"{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}",
		"decisions", st.decisions, "cas_attempts", st.cas_attempts,
		"cas_conflicts", st.cas_conflicts, "cas_exhausted",
		st.cas_exhausted, "scripts", st.scripts, "store_failures",
		st.store_failures, "breaker_opens", st.breaker_opens,
		"breaker_rejects", st.breaker_rejects, "fallbacks",
		st.fallbacks, "near_denials", st.near_denials, "near_syncs",
		st.near_syncs, "shadow_denials", st.shadow_denials);
}

static PyObject *store_enter(PyObject *self, PyObject *unused)
{
	return Py_NewRef(self);
}

static PyObject *store_exit(PyObject *self, PyObject *args)
{
	return store_close(self, NULL);
}

static PyObject *store_repr(PyObject *self)
{
	StoreObject *s = (StoreObject *)self;
	char shown[DRL_URI_SHOW_MAX];

	drl_uri_redact(shown, sizeof shown, s->uri ? s->uri : "");
	return PyUnicode_FromFormat("drl.Store('%s'%s)", shown,
				    s->store ? "" : ", closed");
}

static PyObject *store_get_uri(PyObject *self, void *unused)
{
	StoreObject *s = (StoreObject *)self;
	char shown[DRL_URI_SHOW_MAX];

	return PyUnicode_FromString(
		drl_uri_redact(shown, sizeof shown, s->uri ? s->uri : ""));
}

static PyObject *store_get_closed(PyObject *self, void *unused)
{
	return PyBool_FromLong(((StoreObject *)self)->store == NULL);
}

static PyMethodDef methods[] = {
	{"close", store_close, METH_NOARGS,
	 "Free the store and its limiters' native state."},
	{"stats", store_stats, METH_NOARGS,
	 "The store's counters (drl_store_stats) as a dict."},
	{"__enter__", store_enter, METH_NOARGS, NULL},
	{"__exit__", store_exit, METH_VARARGS, NULL},
	{NULL},
};

static PyObject *store_get_in_flight(PyObject *self, void *unused)
{
	StoreObject *s = (StoreObject *)self;

	return PyLong_FromSsize_t(s->pid == drlpy_pid ? s->busy : 0);
}

static PyGetSetDef getset[] = {
	{"uri", store_get_uri, NULL, "the URI, passwords replaced by ***",
	 NULL},
	{"in_flight", store_get_in_flight, NULL,
	 "calls on the store running now (threads, asyncio)", NULL},
	{"closed", store_get_closed, NULL, "True after close()", NULL},
	{NULL},
};

PyTypeObject Store_Type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "drl.Store",
	.tp_doc = "Store(uri='memory://'): a libdrl store opened from a URI.",
	.tp_basicsize = sizeof(StoreObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = PyType_GenericNew,
	.tp_init = store_init,
	.tp_dealloc = store_dealloc,
	.tp_methods = methods,
	.tp_getset = getset,
	.tp_repr = store_repr,
};
