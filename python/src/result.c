/*
 * drl.Result: every field of drl_result, read-only; true when allowed.
 * Times are integer microseconds, as in C (retry_after_us is drl.NEVER,
 * -1, when the request can never be allowed).
 */
#include "drlpy.h"

#include <structmember.h>

typedef struct {
	PyObject_HEAD drl_result r;
} ResultObject;

PyObject *drlpy_result(const drl_result *r)
{
	ResultObject *o = PyObject_New(ResultObject, &Result_Type);

	if (o != NULL)
		o->r = *r;
	return (PyObject *)o;
}

static PyObject *get_bool(PyObject *self, void *field)
{
	return PyBool_FromLong(
		*(int *)((char *)&((ResultObject *)self)->r + (size_t)field));
}

#define R(f) ((void *)offsetof(drl_result, f))
static PyGetSetDef getset[] = {
	{"allowed", get_bool, NULL, "True when the request was allowed",
	 R(allowed)},
	{"would_allow", get_bool, NULL,
	 "the real decision (differs from allowed only under shadow=1)",
	 R(would_allow)},
	{NULL},
};

#define M(f, type, doc)                                                        \
	{                                                                      \
#f, type, offsetof(ResultObject, r) + offsetof(drl_result, f), \
			READONLY, doc                                          \
	}
static PyMemberDef members[] = {
	M(limit, T_LONGLONG, "capacity of the limit that decided"),
	M(remaining, T_LONGLONG, "cost-1 requests still allowed now"),
	M(reset_after_us, T_LONGLONG, "until that limit is back to full quota"),
	M(retry_after_us, T_LONGLONG,
	  "0 when allowed; drl.NEVER when impossible"),
	M(limit_index, T_INT, "which limit of a policy decided (0-based)"),
	M(path, T_INT, "who decided: drl.PATH_STORE, PATH_LOCAL, ..."),
	{NULL},
};

static int result_bool(PyObject *self)
{
	return ((ResultObject *)self)->r.allowed != 0;
}

static PyObject *result_repr(PyObject *self)
{
	const drl_result *r = &((ResultObject *)self)->r;

	return PyUnicode_FromFormat(
		"drl.Result(allowed=%s, limit=%lld, remaining=%lld, "
		"reset_after_us=%lld, retry_after_us=%lld, limit_index=%d, "
		"path=%d, would_allow=%s)",
		r->allowed ? "True" : "False", (long long)r->limit,
		(long long)r->remaining, (long long)r->reset_after_us,
		(long long)r->retry_after_us, r->limit_index, r->path,
		r->would_allow ? "True" : "False");
}

static PyNumberMethods as_number = {.nb_bool = result_bool};

PyTypeObject Result_Type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "drl.Result",
	.tp_doc = "One decision: the fields of drl_result.",
	.tp_basicsize = sizeof(ResultObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_members = members,
	.tp_getset = getset,
	.tp_as_number = &as_number,
	.tp_repr = result_repr,
};
