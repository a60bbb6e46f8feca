/*
 * A store that wraps a real one (memory, Redis, memcached) and counts the
 * calls that reach it, by method, and can record the keys written. Not a
 * mock: every call goes on to the real store unchanged. Tests use it to
 * prove that a bad input reached no store at all (not even a read or the
 * clock), and to see the exact store keys a limiter writes.
 */
#ifndef DRL_TESTS_SPY_BACKEND_H
#define DRL_TESTS_SPY_BACKEND_H

#include <drl/backend.h>

#include <stddef.h>

/* Calls that reached the wrapped store since the last spy_reset(). */
typedef struct spy_counts {
	unsigned long incr, get_many, load, cas, update, eval, now, del;
} spy_counts;

typedef struct spy spy;

/* Wrap `inner` (owned from now on: freed with the store) in a store of
 * the same version and capabilities. Returns 0 and sets *out (freed with
 * drl_store_free) and *sp (valid until then), or a DRL_E* code with
 * `inner` destroyed. */
int spy_store(drl_store **out, spy **sp, drl_backend *inner, drl_error *err);

/* Open `uri` through the library's own openers and wrap it; fails the
 * running cmocka test when the store does not open. */
drl_store *spy_open(const char *uri, spy **sp);

/* From now on the spy says it was written for vtable `version` (< 4: the
 * core must not read del(), and drl_reset() is DRL_ENOTSUP). */
void spy_set_version(spy *sp, int version);

/* The wrapped store (still owned by the spy). */
drl_backend *spy_inner(spy *sp);

void spy_reset(spy *sp);
/* From now on every call is counted and then fails with `code` (a DRL_E*
 * store failure such as DRL_EUNAVAILABLE), without reaching the wrapped
 * store; 0 lets calls through again. */
void spy_fail(spy *sp, int code);
spy_counts spy_get(const spy *sp);
/* Every call of any method since the last reset. */
unsigned long spy_total(const spy *sp);
/* Calls that may write: incr, cas, update, eval, del. */
unsigned long spy_writes(const spy *sp);

/* Recording the keys of writes (incr, cas, update, every key of eval):
 * off by default. spy_keys() gives the n-th distinct key recorded
 * (NULL past the end); spy_nkeys() how many; the bytes stay valid until
 * the store is freed. */
void spy_record(spy *sp, int on);
size_t spy_nkeys(const spy *sp);
const drl_bytes *spy_key(const spy *sp, size_t i);
void spy_forget_keys(spy *sp);

#endif
