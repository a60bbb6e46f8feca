/*
 * libdrl — distributed rate limiting.
 *
 * The application API: open a store from a URI, make a limiter from a spec,
 * ask for decisions. See docs/api.md for the whole story and
 * docs/threading.md for which objects may be shared between threads.
 *
 * Conventions (every function below):
 * - 0 is success, errors are negative DRL_E* codes. Being rate limited is
 *   not an error: the call returns 0 with result->allowed == 0.
 * - The last argument is an optional caller-owned drl_error (may be NULL);
 *   on failure it receives the code and a message naming the bad part.
 * - Every _new/_open has a _free; _free(NULL) is a no-op.
 */
#ifndef DRL_DRL_H
#define DRL_DRL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(DRL_BUILDING) && defined(__GNUC__)
#define DRL_EXPORT __attribute__((visibility("default")))
#else
#define DRL_EXPORT
#endif

#define DRL_VERSION_MAJOR 0
#define DRL_VERSION_MINOR 3
#define DRL_VERSION_PATCH 0
#define DRL_VERSION_STRING "0.3.0"

/* The one list of error codes: the enum, drl_strerror() and drl_err_name()
 * are all generated from it, so they cannot drift apart. */
#define DRL_ERRNO_MAP(X)                                                       \
	X(EINVAL, -1, "invalid argument")                                      \
	X(ENOMEM, -2, "out of memory")                                         \
	X(ESTORE, -3, "store error")                                           \
	X(ETIMEDOUT, -4, "store timed out")                                    \
	X(ECONFLICT, -5, "too many concurrent updates, retry budget spent")    \
	X(ENOTSUP, -6, "operation not supported by this store")                \
	X(ECORRUPT, -7, "malformed state found in the store")                  \
	X(ERANGE, -8, "value out of range")                                    \
	X(EINTERNAL, -9, "internal error")                                     \
	X(EUNAVAILABLE, -10,                                                   \
	  "store unavailable (connection failed or circuit open)")             \
	X(ECANCELED, -11, "request canceled: its async context was freed")     \
	X(EBUSY, -12, "too many requests in flight on this async context")

typedef enum drl_errno {
	DRL_OK = 0,
#define DRL__ERRNO_ENUM(name, value, text) DRL_##name = value,
	DRL_ERRNO_MAP(DRL__ERRNO_ENUM)
#undef DRL__ERRNO_ENUM
} drl_errno;

/* Caller-owned error detail. `message` is always NUL-terminated. */
#define DRL_ERROR_MESSAGE_MAX 256
typedef struct drl_error {
	int code;
	char message[DRL_ERROR_MESSAGE_MAX];
} drl_error;

/* Static text for a code ("invalid argument"); never NULL. */
DRL_EXPORT const char *drl_strerror(int code);
/* Static name for a code ("DRL_EINVAL"); never NULL. */
DRL_EXPORT const char *drl_err_name(int code);
/* The library's version string, e.g. "0.2.0". */
DRL_EXPORT const char *drl_version(void);

/* Documented bounds. Anything outside them is DRL_EINVAL. */
#define DRL_KEY_MAX (1024 * 1024)         /* user key bytes, >= 1 */
#define DRL_LIMIT_MAX INT64_C(1000000000) /* LIMIT and burst */
#define DRL_PERIOD_MIN_US INT64_C(1000)   /* 1ms */
#define DRL_PERIOD_MAX_US (INT64_C(366) * 86400 * 1000000) /* 366d */
#define DRL_SLIDING_LOG_LIMIT_MAX 10000
#define DRL_SUBWINDOWS_MAX 60
#define DRL_POLICY_LIMITS_MAX 8
/* token_bucket, gcra: burst x PERIOD / LIMIT (the time to refill an empty
 * bucket) at most 2^52 µs, about 142 years. */
#define DRL_FILL_TIME_MAX_US (INT64_C(1) << 52)
/* Explicit times (drl_allow_at) run from 0 to 2^62 µs, ~146000 years. */
#define DRL_TIME_MAX_US (INT64_C(1) << 62)

/* retry_after value meaning "this request can never be allowed"
 * (its cost exceeds the limit's capacity). */
#define DRL_NEVER INT64_C(-1)

/* Which path made a decision (drl_result.path). Only DRL_PATH_STORE
 * consulted the shared store; LOCAL, FAIL_OPEN and FAIL_CLOSED are the
 * limiter's failure policy (on_error=, docs/failure.md) deciding because
 * the store could not; NEAR is a denial repeated from the store's own
 * earlier answer (block_on_exceed=, near_cache=, docs/accuracy.md). */
typedef enum drl_path {
	DRL_PATH_STORE = 0,       /* the store decided: the shared limit */
	DRL_PATH_LOCAL = 1,       /* on_error=local: this process's own limit */
	DRL_PATH_FAIL_OPEN = 2,   /* on_error=allow: allowed, nothing counted */
	DRL_PATH_FAIL_CLOSED = 3, /* on_error=deny: denied */
	/* denied by this process from an earlier answer of the store (near
	 * cache or block_on_exceed); no store call */
	DRL_PATH_NEAR = 4
} drl_path;

/* One decision. Filled by drl_allow*(); all times are microseconds,
 * relative to the decision's time. When a call fails (returns an error),
 * *result is still written: a denial (allowed 0, would_allow 0,
 * retry_after_us 0, path DRL_PATH_STORE), so a caller that forgets the
 * return code never admits on an error.
 *
 * Shadow mode (policy option shadow=1): the limiter decides and consumes
 * exactly as without it, but `allowed` is always 1; `would_allow` is the
 * real decision and every other field describes it (a would-be denial
 * keeps its limit_index, remaining, retry_after_us and path). Without
 * shadow=1, would_allow == allowed. */
typedef struct drl_result {
	int allowed;            /* 1 allowed, 0 denied */
	int64_t limit;          /* capacity of the limit that decided */
	int64_t remaining;      /* cost-1 requests still allowed now */
	int64_t reset_after_us; /* until that limit is back to full quota */
	int64_t retry_after_us; /* 0 when allowed; DRL_NEVER when impossible */
	int limit_index;        /* which limit of a policy decided (0-based) */
	int path;               /* drl_path: who decided */
	int would_allow;        /* the real decision (differs from allowed
				   only under shadow=1) */
} drl_result;

typedef struct drl_store drl_store;
typedef struct drl_limiter drl_limiter;

/* Open a store from a URI: "memory://" (the default when uri is NULL or
 * ""), "redis://...", "redis+unix://...", "memcached://...",
 * "memcached+unix://..." (README, "Store URIs"). The store is owned by the
 * caller and must outlive every limiter made on it. */
DRL_EXPORT int drl_store_open(drl_store **out, const char *uri, drl_error *err);
DRL_EXPORT void drl_store_free(drl_store *store);

/* Make a limiter on `store` from a spec (see README, "Spec grammar"):
 *   "token_bucket:100/1m,burst=20"
 * or a policy of several limits separated by ';', all checked together:
 *   "sliding_window:60/1m;fixed_window:10000/1d"
 * `prefix` (may be NULL) namespaces the keys this limiter writes; it is
 * copied. The limiter borrows `store`. */
DRL_EXPORT int drl_limiter_new(drl_limiter **out, drl_store *store,
			       const char *spec, const char *prefix,
			       drl_error *err);
DRL_EXPORT void drl_limiter_free(drl_limiter *limiter);

/* Decide one request of `cost` units for `key` (keylen bytes, any bytes,
 * 1..DRL_KEY_MAX) at the real-time clock. cost 0 consumes nothing and is
 * always allowed: it reports the current quota. A denied request consumes
 * nothing, from any limit of a policy. */
DRL_EXPORT int drl_allow(drl_limiter *limiter, const void *key, size_t keylen,
			 int64_t cost, drl_result *result, drl_error *err);

/* The same at an explicit time (microseconds since the Unix epoch, >= 0),
 * for simulation and tests. */
DRL_EXPORT int drl_allow_at(drl_limiter *limiter, const void *key,
			    size_t keylen, int64_t cost, int64_t now_us,
			    drl_result *result, drl_error *err);

/* Forget `key` (keylen bytes, 1..DRL_KEY_MAX) on every limit of the
 * limiter's policy: afterwards it decides as if it had never been seen
 * (a full quota, an empty log). Deletes every store key the algorithms
 * write for it (windows a decision can still read, as of the real-time
 * clock, or the store's with clock=server) and drops this process's near
 * cache blocks for it; keys of other users, limiters and prefixes are
 * untouched. One atomic step on memory, Redis and Redis Cluster (a
 * decision sees the key either reset or not); on memcached key by key
 * (docs/api.md, "Reset"). DRL_ENOTSUP on a store written for a vtable
 * version before 4, DRL_EINVAL (nothing deleted) for bad arguments. A
 * limiter with on_error=local also forgets the key locally. */
DRL_EXPORT int drl_reset(drl_limiter *limiter, const void *key, size_t keylen,
			 drl_error *err);

/* The same as of an explicit time (as drl_allow_at(): the windows a
 * decision at now_us reads). */
DRL_EXPORT int drl_reset_at(drl_limiter *limiter, const void *key,
			    size_t keylen, int64_t now_us, drl_error *err);

/* Adjust `key` (keylen bytes, 1..DRL_KEY_MAX) by `delta` units on every
 * limit of the limiter's policy, at the real-time clock (or the store's,
 * as drl_allow() chooses): rate-limiter-flexible's penalty and reward.
 * - delta > 0 (penalty): delta units consumed unconditionally, as if a
 *   request of that cost had been admitted now, even past the limit (later
 *   requests are then denied until the key recovers). Bound: a penalty
 *   never leaves more than twice the limit's capacity (2 x LIMIT, or
 *   2 x burst) used: exact while the usage it finds plus delta stays
 *   within that, capped there otherwise (never lowered).
 * - delta < 0 (reward): -delta units given back, never beyond a full
 *   quota (a counter never below 0, a bucket never above burst, a GCRA
 *   TAT never before now, a sliding log drops its newest units).
 * - delta == 0: nothing changes.
 * docs/algorithms.md says what each algorithm's state does.
 * *result is then filled as a decision of cost 1 that consumes nothing
 * (limit_index, remaining, reset_after_us, retry_after_us as for
 * drl_allow(); allowed: whether a request of cost 1 would now be
 * admitted), over every limit of the policy. Atomic per limit on every
 * store and strategy (the twin, WATCH, counter commands, memcached cas,
 * the memory store's lock): a concurrent decision sees the adjustment
 * whole or not at all. A policy's limits are adjusted one after another:
 * when the store fails on one, the ones before it stay adjusted and the
 * call returns the error. on_error= does not apply (a failed adjustment
 * returns the store's error; the on_error=local copy is not adjusted);
 * the near cache forgets the key. DRL_EINVAL (nothing changed) for a NULL
 * limiter or result, a bad key, delta beyond +-DRL_LIMIT_MAX. On failure
 * *result is a denial, as for drl_allow(). */
DRL_EXPORT int drl_adjust(drl_limiter *limiter, const void *key, size_t keylen,
			  int64_t delta, drl_result *result, drl_error *err);

/* The same at an explicit time (as drl_allow_at(); a time outside
 * 0..DRL_TIME_MAX_US is DRL_EINVAL, nothing changed). */
DRL_EXPORT int drl_adjust_at(drl_limiter *limiter, const void *key,
			     size_t keylen, int64_t delta, int64_t now_us,
			     drl_result *result, drl_error *err);

/* ---- batches ---------------------------------------------------------- */

/* Most items one drl_allow_batch() call takes. */
#define DRL_BATCH_MAX 4096

/* One request of a batch: key and cost in, result and rc out. */
typedef struct drl_batch_item {
	const void *key;   /* in: keylen bytes, as for drl_allow() */
	size_t keylen;     /* in: 1..DRL_KEY_MAX */
	int64_t cost;      /* in: >= 0 */
	drl_result result; /* out: valid when rc == 0 (zeroed otherwise) */
	int rc;            /* out: 0 or this item's DRL_E* code */
} drl_batch_item;

/* Decide n requests (1..DRL_BATCH_MAX) at one time, the real-time clock
 * (or the store's, as drl_allow() chooses). Each item is decided as if
 * by drl_allow_at() in array order, and gets its own rc and result: a bad
 * key or cost is that item's DRL_EINVAL (nothing decided for it), a store
 * error that item's DRL_ESTORE/DRL_ETIMEDOUT/..., and the other items
 * proceed. The call returns 0 whenever it ran (look at each item's rc),
 * or DRL_EINVAL for a NULL limiter or items, n == 0 or n > DRL_BATCH_MAX,
 * before anything is decided and with no item touched. When it returns 0
 * and an item failed, `err` describes the first item that failed.
 *
 * One limit (no policy) on a store that runs scripts over many keys (Redis
 * tx=lua) decides the items in a few script calls, each deciding up to
 * 256 items in order on the server; otherwise the items are decided one
 * by one, with the same decisions. An item whose rc is DRL_ESTORE or
 * DRL_ETIMEDOUT because the connection failed during its script call may
 * or may not have been decided (and consumed) on the server, exactly as
 * for a drl_allow() that fails so.
 * The items array is the caller's; keys are only read during the call. */
DRL_EXPORT int drl_allow_batch(drl_limiter *limiter, drl_batch_item *items,
			       size_t n, drl_error *err);

/* The same at an explicit time (as drl_allow_at(); a time outside
 * 0..DRL_TIME_MAX_US is the call's DRL_EINVAL). */
DRL_EXPORT int drl_allow_batch_at(drl_limiter *limiter, drl_batch_item *items,
				  size_t n, int64_t now_us, drl_error *err);

/* What a store has been through since it was opened: the cost of
 * contention, for benchmarks and monitoring. Counters only grow. */
typedef struct drl_store_stats {
	uint64_t decisions;     /* limits decided (a policy counts each) */
	uint64_t cas_attempts;  /* optimistic load/cas rounds */
	uint64_t cas_conflicts; /* rounds lost to a concurrent writer */
	uint64_t cas_exhausted; /* decisions that gave up: DRL_ECONFLICT */
	uint64_t scripts;       /* decisions run server-side (Lua twins) */
	/* Failures and what the limiters did about them (docs/failure.md). */
	uint64_t store_failures;  /* calls failed by the store: DRL_ESTORE,
				     DRL_ETIMEDOUT, DRL_EUNAVAILABLE */
	uint64_t breaker_opens;   /* times the circuit breaker opened */
	uint64_t breaker_rejects; /* calls refused unsent while it was open */
	uint64_t fallbacks;       /* decisions made by an on_error policy */
	/* The near cache (block_on_exceed=, near_cache=) of its limiters. */
	uint64_t near_denials; /* decisions answered locally: DRL_PATH_NEAR */
	uint64_t near_syncs;   /* peeks the near_cache threads made */
	/* shadow=1: denials answered allowed (would_allow 0) */
	uint64_t shadow_denials;
} drl_store_stats;

/* Copy the store's counters into *out (safe while other threads decide). */
DRL_EXPORT int drl_store_stats_get(const drl_store *store,
				   drl_store_stats *out);

/* Microseconds since the Unix epoch from the real-time clock. */
DRL_EXPORT int64_t drl_now_us(void);
/* Microseconds on CLOCK_MONOTONIC: only differences mean anything; no
 * step of the wall clock moves it. For timing within one process (what the
 * library's breaker and near cache measure with); never a decision's time. */
DRL_EXPORT int64_t drl_mono_us(void);

/* A store URI (parseable or not) safe to log or print, as the library's
 * own messages show it: anything that may be a password replaced by
 * "***", control bytes escaped, cut to about 120 bytes. Writes buf (cap
 * bytes; DRL_URI_SHOW_MAX holds any result, below 8 it stays empty) and
 * returns it. */
#define DRL_URI_SHOW_MAX 128
DRL_EXPORT const char *drl_uri_redact(char *buf, size_t cap, const char *uri);

#ifdef __cplusplus
}
#endif
#endif /* DRL_DRL_H */
