/*
 * drl.Limiter(store, spec, prefix=None): a limit or policy (README, "Limit
 * specs") on a store. Thread-safe: share one per process; the GIL is
 * released during every decision, so threads wait for the store together.
 *
 * Keys are str (encoded UTF-8) or bytes; anything else is TypeError. A
 * cost is an int 0..2^63-1: another type (a float, even 2.0) is TypeError,
 * a negative one is drl.InvalidError with the library's message, one past
 * 2^63-1 is drl.InvalidError with ours.
 */
#include "drlpy.h"

#include <string.h>
#include <unistd.h>

/* Make self->lim on the store's current native store. */
static int make_native(LimiterObject *self)
{
	drl_error err = {0};
	drl_limiter *lim = NULL;
	int rc = drl_limiter_new(&lim, self->store->store, self->spec,
				 self->prefix, &err);

	if (rc != 0) {
		drlpy_raise(rc, &err);
		return -1;
	}
	self->lim = lim;
	self->gen = self->store->gen;
	return 0;
}

drl_limiter *drlpy_pin(LimiterObject *self)
{
	StoreObject *s = self->store;

	if (drlpy_store_current(s) < 0) /* closed: self->lim is NULL too */
		return NULL;
	/* After a fork the old native limiter is the parent's: leaked. */
	if (self->gen != s->gen && make_native(self) < 0)
		return NULL;
	s->busy++;
	return self->lim;
}

void drlpy_unpin(LimiterObject *self)
{
	self->store->busy--;
}

int drlpy_key(PyObject *key, const char **buf, size_t *len)
{
	Py_ssize_t n;

	if (PyUnicode_Check(key)) {
		*buf = PyUnicode_AsUTF8AndSize(key, &n);
		if (*buf == NULL)
			return -1;
	} else if (PyBytes_Check(key)) {
		*buf = PyBytes_AS_STRING(key);
		n = PyBytes_GET_SIZE(key);
	} else {
		PyErr_Format(PyExc_TypeError,
			     "key must be str or bytes, not %.100s",
			     Py_TYPE(key)->tp_name);
		return -1;
	}
	*len = (size_t)n;
	return 0;
}

int drlpy_cost(PyObject *cost, int64_t *out)
{
	int overflow = 0;
	long long v;

	if (!PyLong_Check(cost) || PyBool_Check(cost)) {
		PyErr_Format(PyExc_TypeError, "cost must be an int, not %.100s",
			     Py_TYPE(cost)->tp_name);
		return -1;
	}
	v = PyLong_AsLongLongAndOverflow(cost, &overflow);
	if (overflow != 0) {
		drlpy_invalid("cost: out of range (0..2^63-1)");
		return -1;
	}
	if (v == -1 && PyErr_Occurred())
		return -1;
	*out = v;
	return 0;
}

static int limiter_init(PyObject *obj, PyObject *args, PyObject *kw)
{
	static char *names[] = {"store", "spec", "prefix", NULL};
	LimiterObject *self = (LimiterObject *)obj;
	StoreObject *store;
	const char *spec, *prefix = NULL;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O!s|z:Limiter", names,
					 &Store_Type, &store, &spec, &prefix))
		return -1;
	if (self->store != NULL) {
		PyErr_SetString(PyExc_TypeError,
				"drl.Limiter is initialized once");
		return -1;
	}
	if (drlpy_store_current(store) < 0)
		return -1;
	self->spec = strdup(spec);
	self->prefix = prefix ? strdup(prefix) : NULL;
	if (self->spec == NULL || (prefix != NULL && self->prefix == NULL)) {
		PyErr_NoMemory();
		return -1;
	}
	self->store = (StoreObject *)Py_NewRef(store);
	if (make_native(self) < 0)
		return -1;
	self->next = store->limiters;
	if (self->next != NULL)
		self->next->prev = self;
	store->limiters = self;
	return 0;
}

static void limiter_dealloc(PyObject *obj)
{
	LimiterObject *self = (LimiterObject *)obj;
	StoreObject *s = self->store;

	if (s != NULL) {
		if (self->lim != NULL && self->gen == s->gen &&
		    s->pid == drlpy_pid)
			drl_limiter_free(self->lim);
		if (self->prev != NULL)
			self->prev->next = self->next;
		else if (s->limiters == self)
			s->limiters = self->next;
		if (self->next != NULL)
			self->next->prev = self->prev;
		Py_DECREF(s);
	}
	free(self->spec);
	free(self->prefix);
	Py_TYPE(obj)->tp_free(obj);
}

/* allow(key, cost=1) and allow_at(key, cost, now_us): args[0..nargs) then
 * keywords named in kwnames. */
static int parse(const char *fn, PyObject *const *args, Py_ssize_t nargs,
		 PyObject *kwnames, int want_time, PyObject **key,
		 int64_t *cost, int64_t *now_us)
{
	static const char *names[] = {"key", "cost", "now_us"};
	PyObject *v[3] = {NULL, NULL, NULL};
	Py_ssize_t nmax = want_time ? 3 : 2;
	Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;

	if (nargs > nmax) {
		PyErr_Format(PyExc_TypeError,
			     "%s() takes at most %zd arguments", fn, nmax);
		return -1;
	}
	for (Py_ssize_t i = 0; i < nargs; i++)
		v[i] = args[i];
	for (Py_ssize_t i = 0; i < nkw; i++) {
		PyObject *name = PyTuple_GET_ITEM(kwnames, i);
		Py_ssize_t j = 0;

		while (j < nmax &&
		       PyUnicode_CompareWithASCIIString(name, names[j]) != 0)
			j++;
		if (j == nmax || v[j] != NULL) {
			PyErr_Format(PyExc_TypeError,
				     "%s() got an unexpected or repeated "
				     "argument %R",
				     fn, name);
			return -1;
		}
		v[j] = args[nargs + i];
	}
	if (v[0] == NULL || (want_time && v[2] == NULL)) {
		PyErr_Format(PyExc_TypeError, "%s() missing %s", fn,
			     v[0] == NULL ? "key" : "now_us");
		return -1;
	}
	*key = v[0];
	*cost = 1;
	if (v[1] != NULL && drlpy_cost(v[1], cost) < 0)
		return -1;
	if (want_time && drlpy_cost(v[2], now_us) < 0)
		return -1;
	return 0;
}

static PyObject *decide(LimiterObject *self, const char *fn,
			PyObject *const *args, Py_ssize_t nargs,
			PyObject *kwnames, int at)
{
	PyObject *key;
	int64_t cost, now_us = 0;
	const char *buf;
	size_t len;
	drl_limiter *lim;
	drl_result r;
	drl_error err;
	int rc;

	if (parse(fn, args, nargs, kwnames, at, &key, &cost, &now_us) < 0 ||
	    drlpy_key(key, &buf, &len) < 0)
		return NULL;
	lim = drlpy_pin(self);
	if (lim == NULL)
		return NULL;
	Py_BEGIN_ALLOW_THREADS rc =
		at ? drl_allow_at(lim, buf, len, cost, now_us, &r, &err)
		   : drl_allow(lim, buf, len, cost, &r, &err);
	Py_END_ALLOW_THREADS drlpy_unpin(self);
	if (rc != 0)
		return drlpy_raise(rc, &err);
	return drlpy_result(&r);
}

static PyObject *limiter_allow(PyObject *self, PyObject *const *args,
			       Py_ssize_t nargs, PyObject *kwnames)
{
	return decide((LimiterObject *)self, "allow", args, nargs, kwnames, 0);
}

static PyObject *limiter_allow_at(PyObject *self, PyObject *const *args,
				  Py_ssize_t nargs, PyObject *kwnames)
{
	return decide((LimiterObject *)self, "allow_at", args, nargs, kwnames,
		      1);
}

static PyObject *forget(LimiterObject *self, PyObject *args, int at)
{
	PyObject *key, *when = NULL;
	int64_t now_us = 0;
	const char *buf;
	size_t len;
	drl_limiter *lim;
	drl_error err;
	int rc;

	if (!PyArg_ParseTuple(args, at ? "OO:reset_at" : "O:reset", &key,
			      &when) ||
	    drlpy_key(key, &buf, &len) < 0 ||
	    (at && drlpy_cost(when, &now_us) < 0))
		return NULL;
	lim = drlpy_pin(self);
	if (lim == NULL)
		return NULL;
	Py_BEGIN_ALLOW_THREADS rc =
		at ? drl_reset_at(lim, buf, len, now_us, &err)
		   : drl_reset(lim, buf, len, &err);
	Py_END_ALLOW_THREADS drlpy_unpin(self);
	if (rc != 0)
		return drlpy_raise(rc, &err);
	Py_RETURN_NONE;
}

static PyObject *limiter_reset(PyObject *self, PyObject *args)
{
	return forget((LimiterObject *)self, args, 0);
}

static PyObject *limiter_reset_at(PyObject *self, PyObject *args)
{
	return forget((LimiterObject *)self, args, 1);
}

static PyObject *limiter_direct(PyObject *obj, PyObject *unused)
{
	LimiterObject *self = (LimiterObject *)obj;
	drl_limiter *lim = drlpy_pin(self);
	const char *why = "";
	int direct;

	if (lim == NULL)
		return NULL;
	direct = drl_async_path(lim, &why);
	drlpy_unpin(self);
	return Py_BuildValue("(Os)", direct ? Py_True : Py_False, why);
}

/* _c_loop(key, n): ns per drl_allow(key, 1) over n calls made from C, GIL
 * held: the C side of the binding's overhead, measured in the same
 * process as the Python calls it is compared with (python/bench). */
static PyObject *limiter_c_loop(PyObject *obj, PyObject *args)
{
	LimiterObject *self = (LimiterObject *)obj;
	PyObject *key;
	Py_ssize_t n;
	const char *buf;
	size_t len;
	drl_limiter *lim;
	drl_result r;
	drl_error err;
	int64_t t0;
	double ns;

	if (!PyArg_ParseTuple(args, "On:_c_loop", &key, &n) ||
	    drlpy_key(key, &buf, &len) < 0)
		return NULL;
	if (n <= 0)
		return drlpy_invalid("_c_loop: n must be > 0");
	lim = drlpy_pin(self);
	if (lim == NULL)
		return NULL;
	t0 = drl_mono_us();
	for (Py_ssize_t i = 0; i < n; i++)
		drl_allow(lim, buf, len, 1, &r, &err);
	ns = (double)(drl_mono_us() - t0) * 1000.0 / (double)n;
	drlpy_unpin(self);
	return PyFloat_FromDouble(ns);
}

static PyMethodDef methods[] = {
	{"allow", (PyCFunction)(void (*)(void))limiter_allow,
	 METH_FASTCALL | METH_KEYWORDS,
	 "allow(key, cost=1) -> Result: decide a request now."},
	{"allow_at", (PyCFunction)(void (*)(void))limiter_allow_at,
	 METH_FASTCALL | METH_KEYWORDS,
	 "allow_at(key, cost, now_us) -> Result: decide at an explicit time."},
	{"reset", limiter_reset, METH_VARARGS,
	 "reset(key): forget key on every limit of the policy."},
	{"reset_at", limiter_reset_at, METH_VARARGS,
	 "reset_at(key, now_us): the same as of an explicit time."},
	{"_c_loop", limiter_c_loop, METH_VARARGS,
	 "_c_loop(key, n): ns per drl_allow() from C (benchmarks)."},
	{"async_path", limiter_direct, METH_NOARGS,
	 "(direct, why): whether an async decision needs no worker thread."},
	{NULL},
};

static PyObject *get_spec(PyObject *self, void *unused)
{
	return PyUnicode_FromString(((LimiterObject *)self)->spec);
}

static PyObject *get_prefix(PyObject *self, void *unused)
{
	const char *p = ((LimiterObject *)self)->prefix;

	if (p == NULL)
		Py_RETURN_NONE;
	return PyUnicode_FromString(p);
}

static PyObject *get_store(PyObject *self, void *unused)
{
	return Py_NewRef((PyObject *)((LimiterObject *)self)->store);
}

static PyGetSetDef getset[] = {
	{"spec", get_spec, NULL, "the spec, as given", NULL},
	{"prefix", get_prefix, NULL, "the key prefix, or None", NULL},
	{"store", get_store, NULL, "the drl.Store it decides on", NULL},
	{NULL},
};

PyTypeObject Limiter_Type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "drl.Limiter",
	.tp_doc = "Limiter(store, spec, prefix=None): a limit or policy.",
	.tp_basicsize = sizeof(LimiterObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_new = PyType_GenericNew,
	.tp_init = limiter_init,
	.tp_dealloc = limiter_dealloc,
	.tp_methods = methods,
	.tp_getset = getset,
};
