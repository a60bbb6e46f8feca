/*
 * libdrl — the store (backend) vtable, for people who write a store.
 *
 * Applications need only <drl/drl.h>. A store fills a drl_backend (embed it
 * as the first member of your own struct) and hands it to
 * drl_store_from_backend(). Algorithms are written once against these
 * primitives; a store never learns which algorithm calls it.
 *
 * Versioning (as SQLite's sqlite3_vfs): `version` is the first field, new
 * slots are only ever appended, and the core checks version and capability
 * bits before calling an optional slot. A store built against version N
 * keeps working with a core that knows N+1.
 *
 * Keys are byte strings (not NUL-terminated; may hold any byte). Every
 * primitive that writes also sets a TTL: the store may forget the key after
 * ttl_us microseconds without changing any decision (window identity lives
 * in the key, the TTL only cleans up).
 *
 * Every method returns 0 or a negative DRL_E* code and, on failure, may fill
 * `err` (which may be NULL) through drl_error_set().
 */
#ifndef DRL_BACKEND_H
#define DRL_BACKEND_H

#include "drl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1: destroy .. now. 2: DRL_CAP_BATCH (no new slot: a promise about
 * eval(), which the core trusts only from stores of version >= 2).
 * 3: DRL_CAP_DECLARED_KEYS (a demand about eval(), heeded from any
 * version: a store of version < 3 does not set the bit).
 * 4: del (optional; read only from stores of version >= 4: drl_reset()
 * on a store of an older version is DRL_ENOTSUP). */
#define DRL_BACKEND_VERSION 4

typedef struct drl_bytes {
	const void *data;
	size_t len;
} drl_bytes;

/* Capability bits: what a store can do. */
enum {
	DRL_CAP_COUNTER = 1u << 0, /* incr, get_many (required) */
	DRL_CAP_CAS = 1u << 1,     /* load, cas (required) */
	DRL_CAP_UPDATE = 1u << 2,  /* update: in-process atomic step */
	DRL_CAP_SCRIPT = 1u << 3,  /* eval: server-side script */
	DRL_CAP_CLOCK = 1u << 4,   /* now: the store's own clock */
	DRL_CAP_BATCH = 1u << 5,   /* eval: many keys of any slot at once */
	/* eval() must be handed every key a script touches (version >= 3):
	 * a store that routes and migrates by key (Redis Cluster) cannot
	 * see keys a script derives. The core then knows the time before
	 * a script runs (reading the store's clock first under a store
	 * clock) and names each key. */
	DRL_CAP_DECLARED_KEYS = 1u << 6
};

/* What eval() of a store with DRL_CAP_DECLARED_KEYS may return when it
 * cannot run a script now because its keys are split (Redis Cluster's
 * TRYAGAIN: a slot in migration holds some of them). Nothing ran; the
 * core decides with the other primitives instead (one key per command,
 * which a migration does not stop). Never returned to applications. */
#define DRL_BACKEND_ESPLIT (-100)

/* A step run by update(): given the current blob (old == NULL, oldlen == 0
 * when absent), either leave it (return 0), or point *newblob and *newlen at the
 * replacement, which stays valid until the step's caller returns, set
 * *ttl_us, and return 1. A negative return aborts with that error. */
typedef int (*drl_update_fn)(void *arg, const void *old, size_t oldlen,
			     const void **newblob, size_t *newlen,
			     int64_t *ttl_us);

/* A server-side script handed over by an algorithm (its Lua twin). The
 * store may cache whatever it needs (e.g. the SHA1) itself. */
typedef struct drl_script {
	const char *name;   /* for messages */
	const char *source; /* Lua source */
} drl_script;

typedef struct drl_backend drl_backend;
struct drl_backend {
	int version;      /* DRL_BACKEND_VERSION the store was written for */
	unsigned caps;    /* DRL_CAP_* */
	const char *name; /* "memory", "redis", ... */

	/* Free everything the store owns, including `b` itself. */
	void (*destroy)(drl_backend *b);

	/* Atomically add `delta` (may be negative) to the integer at `key`
	 * (absent counts as 0), set its TTL to ttl_us, and return the new
	 * value in *value. */
	int (*incr)(drl_backend *b, drl_bytes key, int64_t delta,
		    int64_t ttl_us, int64_t *value, drl_error *err);

	/* Read n counters in one go; absent keys read as 0. */
	int (*get_many)(drl_backend *b, size_t n, const drl_bytes *keys,
			int64_t *values, drl_error *err);

	/* Copy the blob at `key` into buf (cap bytes), its length into *len
	 * and its version into *version (nonzero). Absent: *version = 0 and
	 * *len = 0. When cap is too small: DRL_ERANGE with *len = the size
	 * needed, nothing else changed. */
	int (*load)(drl_backend *b, drl_bytes key, void *buf, size_t cap,
		    size_t *len, uint64_t *version, drl_error *err);

	/* Store `blob` at `key` with ttl_us only if the key still has
	 * `version` (0: only if absent). DRL_ECONFLICT when it changed. */
	int (*cas)(drl_backend *b, drl_bytes key, const void *blob, size_t len,
		   uint64_t version, int64_t ttl_us, drl_error *err);

	/* Optional (DRL_CAP_UPDATE): run `fn` on the blob at `key` atomically
	 * with respect to every other method on that key. */
	int (*update)(drl_backend *b, drl_bytes key, drl_update_fn fn,
		      void *arg, drl_error *err);

	/* Optional (DRL_CAP_SCRIPT): run `script` atomically on the server
	 * with `nkeys` keys and `nargs` integer arguments; up to `nout` integer
	 * results go to out[] (*nret gets how many came back). A store that
	 * caches scripts on the server (Redis's EVALSHA) loads one the server
	 * lost (NOSCRIPT) and sends it again: a call runs at most once.
	 *
	 * DRL_CAP_BATCH (version >= 2, needs DRL_CAP_SCRIPT) promises that
	 * eval() takes many keys in one call whatever they are: every key
	 * lives on the one server that runs the script (a single Redis, not
	 * a Cluster, where a script's keys must share a hash slot). The core
	 * then decides up to hundreds of requests in one call (a twin's batch
	 * variant, nkeys = the number of requests; see docs/algorithms.md). */
	int (*eval)(drl_backend *b, const drl_script *script, size_t nkeys,
		    const drl_bytes *keys, size_t nargs, const int64_t *args,
		    int64_t *out, size_t nout, size_t *nret, drl_error *err);

	/* Optional (DRL_CAP_CLOCK): the store's clock, µs since the epoch. */
	int (*now)(drl_backend *b, int64_t *now_us, drl_error *err);

	/* Optional (version >= 4; NULL: drl_reset() is DRL_ENOTSUP): delete
	 * the n keys (absent ones are no error), as one atomic step where
	 * the store can, so a decision sees all of them or none gone; a
	 * store that cannot (memcached: one delete per key) says so in its
	 * documentation. On an error some keys may be gone. */
	int (*del)(drl_backend *b, size_t n, const drl_bytes *keys,
		   drl_error *err);
};

/* Wrap a backend in a drl_store. On success the store owns `b` and calls
 * b->destroy(b) from drl_store_free(); on failure b is untouched. */
DRL_EXPORT int drl_store_from_backend(drl_store **out, drl_backend *b,
				      drl_error *err);

/* Fill `err` (may be NULL) with code and a printf-style message; returns
 * `code`, so a store can write `return drl_error_set(err, DRL_ESTORE, ...)`. */
DRL_EXPORT int drl_error_set(drl_error *err, int code, const char *fmt, ...)
#ifdef __GNUC__
	__attribute__((format(printf, 3, 4)))
#endif
	;

#ifdef __cplusplus
}
#endif
#endif /* DRL_BACKEND_H */
