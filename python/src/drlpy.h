/*
 * drl._drl, the C part of the Python binding: what its files share.
 *
 * Threading: every object here is used with the GIL held, except the
 * native calls inside Py_BEGIN/END_ALLOW_THREADS, which touch only the
 * native handles pinned by Store.busy (close() refuses while it is > 0).
 *
 * Fork: a Store remembers the pid that opened it. Used in another pid it
 * reopens from its URI; its limiters remake their native limiter on the
 * new store the first time they are used. The parent's native handles are
 * leaked in the child on purpose: freeing them would free mutexes and
 * state that the parent's threads held at fork time, and write on
 * connections the parent still uses (a QUIT, a TLS close_notify).
 */
#ifndef DRLPY_H
#define DRLPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <drl/async.h>
#include <drl/drl.h>
#include <sys/types.h>

typedef struct LimiterObject LimiterObject;

typedef struct {
	PyObject_HEAD drl_store *store; /* NULL once closed */
	char *uri;               /* as given: reopened from it after a fork */
	pid_t pid;               /* the process that opened `store` */
	unsigned gen;            /* bumped at every reopen */
	Py_ssize_t busy;         /* native calls in flight on it */
	LimiterObject *limiters; /* live limiters (borrowed), for close() */
} StoreObject;

struct LimiterObject {
	PyObject_HEAD StoreObject *store; /* strong reference */
	drl_limiter *lim;                 /* NULL once its store is closed */
	unsigned gen; /* the store generation `lim` was made on */
	char *spec;
	char *prefix;        /* NULL: none */
	LimiterObject *next; /* in store->limiters */
	LimiterObject *prev;
};

extern PyTypeObject Store_Type;
extern PyTypeObject Limiter_Type;
extern PyTypeObject Result_Type;
extern PyTypeObject Async_Type;

/* module.c: this process's pid, kept current by a pthread_atfork child
 * handler (getpid() is a system call on every decision otherwise). */
extern pid_t drlpy_pid;

/* errors.c: the exception classes, one per DRL_E* code. */
int drlpy_errors_init(PyObject *module);
/* Raise the class of err->code (or rc when err is NULL) with the
 * library's message; returns NULL. */
PyObject *drlpy_raise(int rc, const drl_error *err);
/* The exception object for rc/err, not raised (new reference). */
PyObject *drlpy_exception(int rc, const drl_error *err);
/* Raise drl.InvalidError with a message of the binding's own. */
PyObject *drlpy_invalid(const char *message);

/* result.c: a Result from a drl_result (new reference). */
PyObject *drlpy_result(const drl_result *r);

/* limiter.c: the native limiter for a call, made current after a fork;
 * NULL with an exception set when the store is closed or cannot reopen.
 * Pins the store (busy++) on success: call drlpy_unpin() after. */
drl_limiter *drlpy_pin(LimiterObject *self);
void drlpy_unpin(LimiterObject *self);
/* key: str (UTF-8) or bytes; cost: an int 0..INT64_MAX. 0, or -1 with
 * TypeError / drl.InvalidError set. */
int drlpy_key(PyObject *key, const char **buf, size_t *len);
int drlpy_cost(PyObject *cost, int64_t *out);

/* store.c: make the native store current for this process (reopen after
 * a fork). 0, or -1 with an exception set. */
int drlpy_store_current(StoreObject *s);

#endif
