/*
 * The Node.js addon's shared state (docs/node.md). One idea per file:
 *   addon.c     module init, the per-environment state and its cleanup
 *   loop.c      the drl_async context on Node's own libuv loop
 *   limiter.c   opening a store and limiter off the JS thread; lifetime
 *   decide.c    consume() and get(): decisions through the async API
 *   batch.c     consume()s of one tick decided together
 *   blocking.c  delete(), penalty(), reward(): blocking calls on the
 *               thread pool (napi_create_async_work)
 *   args.c      checking JS arguments, turning drl errors into JS errors
 *
 * Threading: everything here runs on the JS thread of one environment
 * (the main thread or a worker_thread), except the execute callbacks of
 * async work (blocking.c, limiter.c), which touch only their own request
 * and the limiter it holds a reference to.
 */
#ifndef DRL_NODE_ADDON_H
#define DRL_NODE_ADDON_H

/* The async context's worker threads (loop.c): the most blocking store
 * calls (memcached) at once. batch.c deals a tick's consume()s into at
 * least this many chunks when there are as many items, so batching never
 * leaves a worker idle that would have decided one. */
#define NODE_WORKERS 16
/* drl_async_write_parts() of the addon's context (loop.c): 2, not the
 * library's 5. A Node callback (settle a promise, run the next
 * consume()) costs several times a C one, and each write is a loopback
 * send that wakes the server (~10 us of the Node process's CPU here), so
 * fewer, larger writes give Node on Redis and memcached more decisions a
 * second, idle or loaded (docs/performance.md, "A loop whose callbacks
 * cost more: Node"). A build may set another (-DNODE_WRITE_PARTS=5) to
 * compare. */
#ifndef NODE_WRITE_PARTS
#define NODE_WRITE_PARTS 2
#endif

#define NAPI_VERSION 8
#include <node_api.h>

#include <drl/async.h>
#include <drl/drl.h>

/* One environment's state (napi_set_instance_data). */
typedef struct addon {
	napi_env env;
	drl_async *async;     /* made at the first decision; NULL before */
	struct drl_libuv *uv; /* its attachment to Node's loop (loop.c) */
	drl_store *check;     /* memory:// store the constructor checks
				  specs on (no I/O) */
	napi_ref res_class;   /* RateLimiterRes, from index.js */
	napi_ref out_ref;     /* keeps `out` alive */
	double *out;          /* init()'s Float64Array(5): decideNow()'s
				  result fields and outcome (decide.c) */
	napi_ref bout_ref;    /* keeps `bout` alive */
	double *bout;         /* init()'s batch Float64Array: 6 numbers a
				  row (batch.c) */
	uint32_t bout_items;  /* the most items of one decideBatch() */
	napi_ref settle;      /* index.js's settle(q, n, errs) */
	napi_ref
		settle_one; /* index.js's settleOne(id, code, err) (decide.c) */
	napi_ref resource;  /* the async resource of our callbacks */
	napi_async_context actx;
	int closing;         /* the environment is being torn down */
	struct lim *handles; /* limiters a JS handle holds (limiter.c) */
} addon;

/* A limiter and the store it alone uses, shared by the JS object that
 * wraps it and by each request in flight: freed when the last of them
 * lets go (lim_release), on the JS thread. */
typedef struct lim {
	drl_store *store;
	drl_limiter *limiter;
	int refs;
	/* While a JS handle holds it: in its addon's `handles` list. */
	struct lim *next, **pprev;
	int inproc; /* memory://: decided at once on the JS thread (decide.c) */
	/* The last batch's store calls failed (an error, or an on_error=
	 * decision): batches go one item a chunk until one is decided by
	 * the store again (batch.c). */
	int trouble;
} lim;

void lim_release(lim *l);

/* The environment ends: drop what every JS handle still holds. */
void lim_release_handles(addon *ad);

/* release(handle): index.js's FinalizationRegistry let go of a handle. */
napi_value js_release(napi_env env, napi_callback_info info);

/* ---- args.c ---------------------------------------------------------- */

/* Throw a JS error for drl code `code` with `message`: TypeError for
 * DRL_EINVAL when `type_error` is set, RangeError for DRL_EINVAL
 * otherwise and for DRL_ERANGE, Error for the rest; .code is the drl
 * name ("DRL_ETIMEDOUT"). Returns NULL (for `return throw_drl(...)`). */
napi_value throw_drl(napi_env env, int code, const char *message,
		     int type_error);
/* The same error as a value (for a promise's rejection). */
napi_value make_drl_error(napi_env env, int code, const char *message,
			  int type_error);

/* A key: a string (its UTF-8 bytes) or a Buffer/Uint8Array. 0 and *bytes,
 * *len set (*owned: to free() after use, else NULL), or -1 with a
 * TypeError thrown. Buffer bytes stay valid for this call only. */
typedef struct keybuf {
	char small[256];
	char *owned;
	const char *bytes;
	size_t len;
} keybuf;
int get_key(napi_env env, napi_value v, keybuf *k);
void keybuf_free(keybuf *k);

/* Points: a whole Number in 0..2^53-1 (a negative one is passed on, for
 * the library's own message). 0 and *out, or -1 with a TypeError (not a
 * number) or RangeError (fractional, not finite, above 2^53) thrown.
 * `what` names the argument in messages. */
int get_points(napi_env env, napi_value v, const char *what, int64_t *out);
/* The same checks on a Number's value d (a points argument passed in a
 * Float64Array: its type checked in JS). */
int points_of(napi_env env, double d, const char *what, int64_t *out);

/* A string argument copied into malloc'd memory (free() it); NULL with a
 * TypeError thrown when v is not a string. */
char *get_string(napi_env env, napi_value v, const char *what);

/* The Error for a batch item drl_allow() refuses as bad input (a
 * negative cost, an empty or too long key), with drl_allow()'s own
 * message (a batch's would name the item's index): asked of drl_allow()
 * itself, which refuses it before reading the store. NULL for a good
 * item (batch.c). */
napi_value refused(napi_env env, lim *l, const char *key, size_t len,
		   int64_t cost);

/* The lim held by a limiter handle (made by limiter.c); NULL with a
 * TypeError thrown for anything else. */
lim *get_lim(napi_env env, napi_value v);

/* ---- loop.c ---------------------------------------------------------- */

/* The environment's drl_async context, made and attached to Node's loop
 * at the first call; NULL with an Error thrown when that fails. */
drl_async *addon_async(napi_env env, addon *ad);

/* The environment ends (ad->closing set): free its async context (the
 * callbacks of its requests run now, waiting for those in flight at most
 * their timeout_ms) and detach it from the loop. 1 when closed(arg) will
 * be called, on the loop's thread, once the loop has closed the
 * attachment's handles (their close callbacks are this addon's code);
 * 0 when nothing was on the loop (closed is never called). */
int addon_async_free(addon *ad, void (*closed)(void *arg), void *arg);

/* Open a handle scope and a callback scope (so promise reactions run
 * when it closes), run fn(arg), close both. For code called by libuv
 * rather than by JS. */
void with_callback_scope(addon *ad, void (*fn)(void *), void *arg);

/* ---- the exported functions ------------------------------------------ */
napi_value js_open(napi_env env, napi_callback_info info);
napi_value js_decide(napi_env env, napi_callback_info info);
napi_value js_decide_now(napi_env env, napi_callback_info info);
napi_value js_decide_now_many(napi_env env, napi_callback_info info);
napi_value js_decide_batch(napi_env env, napi_callback_info info);
napi_value js_direct(napi_env env, napi_callback_info info);

/* RateLimiterRes's fields (remainingPoints, msBeforeNext,
 * consumedPoints, isFirstInDuration) for result r of a request of
 * `cost`, into f[0..3] (decide.c). */
void decision_fields(const drl_result *r, int64_t cost, double f[4]);
napi_value js_reset(napi_env env, napi_callback_info info);
napi_value js_adjust(napi_env env, napi_callback_info info);
/* Whether the libdrl loaded has drl_adjust() (blocking.c). */
int addon_has_adjust(void);

/* The handle's type tag (limiter.c). */
extern const napi_type_tag lim_tag;

#endif /* DRL_NODE_ADDON_H */
