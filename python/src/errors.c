/*
 * The exceptions: drl.Error, and one subclass per DRL_E* code, each
 * carrying the library's message (str(e)), e.code (the negative code) and
 * e.name ("DRL_EINVAL"). Where a Python built-in means the same thing,
 * the class subclasses it too (InvalidError is a ValueError, so bad input
 * is caught the way Python code expects).
 */
#include "drlpy.h"

typedef struct {
	int code;
	const char *name; /* drl.<name> */
	PyObject **base;  /* a built-in to subclass too, or NULL */
	PyObject *cls;
} error_class;

static PyObject *Error;

static error_class classes[] = {
	{DRL_EINVAL, "InvalidError", &PyExc_ValueError, NULL},
	{DRL_ENOMEM, "NoMemoryError", &PyExc_MemoryError, NULL},
	{DRL_ESTORE, "StoreError", NULL, NULL},
	{DRL_ETIMEDOUT, "TimedOutError", &PyExc_TimeoutError, NULL},
	{DRL_ECONFLICT, "ConflictError", NULL, NULL},
	{DRL_ENOTSUP, "NotSupportedError", NULL, NULL},
	{DRL_ECORRUPT, "CorruptError", NULL, NULL},
	{DRL_ERANGE, "RangeError", NULL, NULL},
	{DRL_EINTERNAL, "InternalError", NULL, NULL},
	{DRL_EUNAVAILABLE, "UnavailableError", NULL, NULL},
	{DRL_ECANCELED, "CanceledError", NULL, NULL},
	{DRL_EBUSY, "BusyError", NULL, NULL},
};
#define NCLASSES (sizeof(classes) / sizeof(classes[0]))

/* One class per code of DRL_ERRNO_MAP: a new code fails the build here. */
#define COUNT_CODE(name, value, text) +1
_Static_assert(NCLASSES == 0 DRL_ERRNO_MAP(COUNT_CODE),
	       "python/src/errors.c: a DRL_E* code has no exception class");
#undef COUNT_CODE

int drlpy_errors_init(PyObject *module)
{
	Error = PyErr_NewExceptionWithDoc(
		"drl.Error", "Base of every libdrl error: code, name, message.",
		NULL, NULL);
	if (Error == NULL || PyModule_AddObjectRef(module, "Error", Error) < 0)
		return -1;
	for (size_t i = 0; i < NCLASSES; i++) {
		char qual[64];
		PyObject *bases;

		snprintf(qual, sizeof qual, "drl.%s", classes[i].name);
		bases = classes[i].base
				? PyTuple_Pack(2, Error, *classes[i].base)
				: PyTuple_Pack(1, Error);
		if (bases == NULL)
			return -1;
		classes[i].cls = PyErr_NewException(qual, bases, NULL);
		Py_DECREF(bases);
		if (classes[i].cls == NULL ||
		    PyModule_AddObjectRef(module, classes[i].name,
					  classes[i].cls) < 0)
			return -1;
	}
	return 0;
}

static PyObject *class_of(int code)
{
	for (size_t i = 0; i < NCLASSES; i++)
		if (classes[i].code == code)
			return classes[i].cls;
	return Error;
}

/* obj.name = value, stealing value. */
static int set_attr(PyObject *obj, const char *name, PyObject *value)
{
	int rc = value == NULL ? -1 : PyObject_SetAttrString(obj, name, value);

	Py_XDECREF(value);
	return rc;
}

PyObject *drlpy_exception(int rc, const drl_error *err)
{
	int code = err != NULL && err->code != 0 ? err->code : rc;
	const char *msg = err != NULL && err->message[0] != '\0'
				  ? err->message
				  : drl_strerror(code);
	PyObject *e = PyObject_CallFunction(class_of(code), "s", msg);

	if (e == NULL)
		return NULL;
	if (set_attr(e, "code", PyLong_FromLong(code)) < 0 ||
	    set_attr(e, "name", PyUnicode_FromString(drl_err_name(code))) < 0) {
		Py_DECREF(e);
		return NULL;
	}
	return e;
}

PyObject *drlpy_raise(int rc, const drl_error *err)
{
	PyObject *e = drlpy_exception(rc, err);

	if (e != NULL) {
		PyErr_SetObject((PyObject *)Py_TYPE(e), e);
		Py_DECREF(e);
	}
	return NULL;
}

PyObject *drlpy_invalid(const char *message)
{
	drl_error err = {.code = DRL_EINVAL};

	snprintf(err.message, sizeof err.message, "%s", message);
	return drlpy_raise(DRL_EINVAL, &err);
}
