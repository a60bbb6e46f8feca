/*
 * drl._drl: the module. Import refuses (ImportError) when the libdrl it
 * loaded is not the version it was compiled against: drl_result and the
 * other structs this module passes by address are laid out as that
 * version's headers say, and a library of another version may lay them
 * out otherwise (the soname changes only with a release that changes them;
 * a rebuilt libdrl of another version under the same soname must not be
 * trusted).
 */
#include "drlpy.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

pid_t drlpy_pid;

static void forked_child(void)
{
	drlpy_pid = getpid();
}

static PyObject *now_us(PyObject *m, PyObject *unused)
{
	return PyLong_FromLongLong(drl_now_us());
}

static PyMethodDef functions[] = {
	{"now_us", now_us, METH_NOARGS,
	 "Microseconds since the Unix epoch (the library's real-time clock)."},
	{NULL},
};

static struct PyModuleDef module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "drl._drl",
	.m_doc = "libdrl's decisions, in-process (see the drl package).",
	.m_size = -1,
	.m_methods = functions,
};

static int check_version(void)
{
	const char *loaded = drl_version();

	if (strcmp(loaded, DRL_VERSION_STRING) == 0)
		return 0;
	PyErr_Format(
		PyExc_ImportError,
		"drl: this module was built against libdrl %s but loaded "
		"libdrl %s; its structs may be laid out differently, so it "
		"refuses to load: rebuild the binding against the installed "
		"libdrl (meson compile), or point LD_LIBRARY_PATH at the "
		"libdrl it was built with",
		DRL_VERSION_STRING, loaded);
	return -1;
}

static int add_constants(PyObject *m)
{
	static const struct {
		const char *name;
		long long value;
	} c[] = {
		{"NEVER", DRL_NEVER},
		{"PATH_STORE", DRL_PATH_STORE},
		{"PATH_LOCAL", DRL_PATH_LOCAL},
		{"PATH_FAIL_OPEN", DRL_PATH_FAIL_OPEN},
		{"PATH_FAIL_CLOSED", DRL_PATH_FAIL_CLOSED},
		{"PATH_NEAR", DRL_PATH_NEAR},
		{"KEY_MAX", DRL_KEY_MAX},
		{"LIMIT_MAX", DRL_LIMIT_MAX},
	};

	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		PyObject *v = PyLong_FromLongLong(c[i].value);

		if (v == NULL || PyModule_AddObject(m, c[i].name, v) < 0) {
			Py_XDECREF(v);
			return -1;
		}
	}
	return PyModule_AddStringConstant(m, "LIBDRL_VERSION", drl_version());
}

PyMODINIT_FUNC PyInit__drl(void);
PyMODINIT_FUNC PyInit__drl(void)
{
	PyTypeObject *types[] = {&Store_Type, &Limiter_Type, &Result_Type,
				 &Async_Type};
	const char *names[] = {"Store", "Limiter", "Result", "Async"};
	PyObject *m;

	if (check_version() < 0)
		return NULL;
	drlpy_pid = getpid();
	if (pthread_atfork(NULL, NULL, forked_child) != 0)
		return PyErr_Format(PyExc_ImportError, "drl: pthread_atfork");
	m = PyModule_Create(&module);
	if (m == NULL)
		return NULL;
	for (size_t i = 0; i < 4; i++)
		if (PyType_Ready(types[i]) < 0 ||
		    PyModule_AddObjectRef(m, names[i], (PyObject *)types[i]) <
			    0)
			goto fail;
	if (drlpy_errors_init(m) < 0 || add_constants(m) < 0)
		goto fail;
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
