/*
 * libdrl's asynchronous API, for programs that run an event loop: start a
 * decision, get a callback on the loop's thread when it is decided. The
 * caller's thread never waits for a store.
 *
 * A drl_async context owns a pool of worker threads. A started request is
 * decided on one of them by the blocking call it stands for (drl_allow(),
 * drl_allow_at(), drl_allow_batch(), drl_allow_batch_at()), or, when one
 * server-side script decides it on a store that can send one without
 * waiting (a single request or a batch of one script call, a policy of
 * one limit, Redis tx=lua), by that
 * call sent at start and finished through the same steps: on a store
 * with channels (Redis redis:// and redis+unix://, plaintext, one node),
 * by the thread in drl_async_process() itself, which reads the replies of
 * the context's own connection and writes what its callbacks started,
 * with no thread between (as hiredis's async adapters); on the others
 * (TLS, Sentinel), or with drl_async_notify() set, by the store's I/O
 * thread. Either way decisions, errors, timeouts, on_error policies,
 * the circuit breaker and the near cache are exactly those of the
 * blocking API (docs/threading.md says which store completes how). Finished
 * requests wait in the context until the application calls
 * drl_async_process(), which runs their callbacks on the calling thread.
 * drl_async_fd() is readable while finished requests wait: watch it from
 * any loop (poll, epoll, libuv, libevent; adapters in
 * <drl/adapters/libuv.h> and <drl/adapters/libevent.h>). See
 * docs/api.md ("Asynchronous decisions") and docs/threading.md.
 *
 * Every request whose start returned 0 gets exactly one callback: with its
 * decision, its error, or DRL_ECANCELED when drl_async_free() dropped it
 * before a worker began it. A start that returns an error gets none.
 *
 * To stop without blocking the loop, drl_async_drain() refuses new starts
 * and calls back once the requests in flight are decided and their
 * callbacks ran; drl_async_free() then returns at once.
 */
#ifndef DRL_ASYNC_H
#define DRL_ASYNC_H

#include <drl/drl.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct drl_async drl_async;

/* Defaults and bounds of drl_async_opts. */
#define DRL_ASYNC_THREADS_DEFAULT 16
#define DRL_ASYNC_THREADS_MAX 256
/* drl_async_opts.threads: no worker thread at all (see drl_async_new) */
#define DRL_ASYNC_THREADS_NONE (-1)
#define DRL_ASYNC_QUEUE_DEFAULT 4096
#define DRL_ASYNC_QUEUE_MAX (1024 * 1024)

/* How a context is made; zeroed fields take the defaults. */
typedef struct drl_async_opts {
	/* the most worker threads, 1..DRL_ASYNC_THREADS_MAX (0: 16): the
	 * most requests in a blocking store call at once. Workers start
	 * when a request first needs one (never, when every request is
	 * decided at start or sent without a worker: drl_async_direct());
	 * DRL_ASYNC_THREADS_NONE: never, and a request that would need
	 * one is refused at start (DRL_ENOTSUP) */
	int threads;
	/* most requests started whose callback has not begun,
	 * 1..DRL_ASYNC_QUEUE_MAX (0: 4096); one more start is DRL_EBUSY */
	size_t queue;
} drl_async_opts;

/* Make a context with opts (NULL: the defaults). Its worker threads
 * (every signal blocked in them) start one at a time, when a request
 * finds none idle, up to opts->threads. Owned by the caller; free it
 * with drl_async_free(). */
DRL_EXPORT int drl_async_new(drl_async **out, const drl_async_opts *opts,
			     drl_error *err);

/* Stop the context: requests no worker has begun get their callback with
 * DRL_ECANCELED (nothing of them reached the store); requests a worker is
 * deciding, and those sent without a worker, are waited for (each at most
 * as long as its blocking call, bounded by the store's timeout_ms) and get
 * their decision; then every callback not yet run runs, on the calling
 * thread, before this returns. A start from such a callback returns
 * DRL_ECANCELED. During a drain (drl_async_drain()) whose done callback
 * has not run, it runs last of all, here. Then a loop adapter still
 * attached is detached (its cleanup: drl_async_adapter), so there is no
 * need to detach first; with one attached, call this on the loop's
 * thread (or with the loop not running). Never call this from one of the
 * context's own callbacks (or the drain's), and let every other thread's
 * starts on the context have returned first (it is gone when this
 * returns). NULL is a no-op. */
DRL_EXPORT void drl_async_free(drl_async *a);

/* A descriptor that is readable (POLLIN) while drl_async_process() has
 * work: finished requests (or a drain's done callback) wait, a reply came
 * on one of the context's store connections, or a deadline of a call on
 * one passed (an epoll set of the context's eventfd, those connections'
 * sockets and a timerfd: Linux). The context's only event: a loop that
 * watches it and calls drl_async_process() when it is readable does the
 * store's I/O for the context's started calls. Owned by the context:
 * valid and unchanged until drl_async_free(); only watch it. -1 for a
 * NULL context. */
DRL_EXPORT int drl_async_fd(const drl_async *a);

/* Call notify(arg) where the context would make drl_async_fd() readable:
 * once each time finished requests begin to wait for drl_async_process()
 * (none waited before), and at a drain with nothing pending. For a loop that cannot watch a descriptor but can
 * be woken another way (grpc's completion queues: drld posts a
 * grpc::Alarm; a loop with its own wake-up call): notify asks it to call
 * drl_async_process() soon, on its thread. notify runs on the thread that
 * finished the request (a worker, a store's I/O thread, or the starting
 * thread for a request decided at start), possibly with the context's
 * lock held: it must return quickly and call no drl_async function. With
 * notify set the fd is never made readable, and started calls are
 * finished by the store's I/O thread (nobody watches the context's own
 * connections). Set it before the first
 * start (NULL: back to the fd); not thread-safe against starts. 0, or
 * DRL_EINVAL for a NULL context. */
DRL_EXPORT int drl_async_notify(drl_async *a, void (*notify)(void *arg),
				void *arg);

/* How many writes the requests that one drl_async_process() round's
 * callbacks start go out in, when many are in flight on a store with
 * channels: one write every pending / parts callbacks (at least 2
 * apart), 1..DRL_ASYNC_WRITE_PARTS_MAX; DRL_ASYNC_WRITE_PARTS_DEFAULT
 * (5) until set. More parts keep the server deciding one part while the
 * loop runs the next part's callbacks, which pays where a callback costs
 * about what the server's decision does (C); fewer parts cost the loop
 * fewer writes, which pays only where the loop is the busy side (heavy
 * callbacks on a loaded machine; on an idle one they lose rate).
 * docs/performance.md, "The loop writes in parts", has the measurements. Call it on the
 * loop's thread, or before the loop runs. 0, or DRL_EINVAL (nothing
 * changed) for a NULL context or parts out of range. */
#define DRL_ASYNC_WRITE_PARTS_DEFAULT 5
#define DRL_ASYNC_WRITE_PARTS_MAX 64
DRL_EXPORT int drl_async_write_parts(drl_async *a, int parts);

/* Run the callbacks of the requests finished so far, in the order they
 * finished, on the calling thread, and return how many ran (0 when none
 * waited; DRL_EINVAL for a NULL context). Requests that finish while it
 * runs wait for the next call (the fd stays readable), so a callback that
 * starts requests cannot keep it running. May be called from any thread
 * and at any time; from inside one of the context's own callbacks it runs
 * nothing and returns DRL_EINVAL. */
DRL_EXPORT int drl_async_process(drl_async *a);

/* Requests started whose callback has not begun: 0 when nothing is in
 * flight (then the limiters used may be freed). */
DRL_EXPORT size_t drl_async_pending(const drl_async *a);

/* A drain's done callback, on the thread running drl_async_process() (or
 * drl_async_free()); the same rules as a request's callback. */
typedef void (*drl_async_drained_cb)(drl_async *a, void *arg);

/* Begin a graceful stop: from now on every start returns DRL_ECANCELED
 * (nothing started, no callback), callbacks' starts included; the
 * requests already started go on as usual (none is canceled: queued,
 * deciding or sent, each is decided and its callback runs through
 * drl_async_process()); once nothing is pending and no callback runs,
 * drl_async_process() calls done(a, arg), once, after the last callback
 * (the fd is made readable for it when nothing was pending). A server
 * stops this way without blocking its loop for a store's timeout_ms, and
 * frees the context after done. The context stays draining: starts are
 * refused until drl_async_free(), which runs done itself if it has not
 * run yet (after every callback), so done runs exactly once. A loop
 * adapter keeps its loop alive until done has run. Any thread. 0, or
 * DRL_EINVAL (NULL context or done; a drain has begun already),
 * DRL_ECANCELED (drl_async_free() has begun). */
DRL_EXPORT int drl_async_drain(drl_async *a, drl_async_drained_cb done,
			       void *arg, drl_error *err);

/* 1 when a single request on `limiter` (drl_async_allow(),
 * drl_async_allow_at() at a time the store can take) needs no worker
 * thread: decided at start on a store inside the process (memory://), or
 * sent to the store at start and finished by the thread in
 * drl_async_process() or by the store's I/O thread (Redis tx=auto and
 * tx=lua with shared connections, a policy of one
 * limit whose numbers the server-side step computes exactly:
 * docs/threading.md has the full list); 0 when a worker decides it (or
 * for NULL). For a service that chooses between its own threads and the
 * async API. */
DRL_EXPORT int drl_async_direct(const drl_limiter *limiter);

/* drl_async_direct(limiter), and in *why (when not NULL) the reason, as a
 * sentence for logs and operators (static: valid for the process), e.g.
 * "the limit's numbers (max(LIMIT, burst) x PERIOD in us) pass 2^52, ...:
 * a worker decides by the exact C step". The path is the limiter's and
 * its store's, fixed at creation: ask once, after drl_limiter_new(). */
DRL_EXPORT int drl_async_path(const drl_limiter *limiter, const char **why);

/* A single decision's callback, on the thread running
 * drl_async_process() (or drl_async_free()). rc, *result and *err are what
 * the blocking call returned and wrote (DRL_ECANCELED: a denial, path
 * DRL_PATH_STORE, nothing consumed); result and err are valid only during
 * the call. It may start new requests on any context; it must not call
 * drl_async_free() on its own context (drl_async_process() on it is
 * DRL_EINVAL). */
typedef void (*drl_async_cb)(drl_async *a, int rc, const drl_result *result,
			     const drl_error *err, void *arg);

/* Start drl_allow(limiter, key, keylen, cost) (the real-time clock, read
 * when a worker decides it, or at start when no worker is needed);
 * cb(a, ..., arg) gets its outcome. key is
 * copied: the caller's buffer need not outlive the call. Returns 0
 * (started: exactly one callback follows), or, with no callback and
 * nothing started: DRL_EINVAL for a NULL context, limiter or cb and for
 * what drl_allow() rejects as bad input (same message), DRL_EBUSY when
 * the context holds its `queue` requests already, DRL_ENOMEM, and
 * DRL_ECANCELED once drl_async_free() has begun. Any thread may start
 * requests. The limiter and its store must outlive the callback. */
DRL_EXPORT int drl_async_allow(drl_async *a, drl_limiter *limiter,
			       const void *key, size_t keylen, int64_t cost,
			       drl_async_cb cb, void *arg, drl_error *err);

/* The same as drl_allow_at() at now_us (checked at start, as there). */
DRL_EXPORT int drl_async_allow_at(drl_async *a, drl_limiter *limiter,
				  const void *key, size_t keylen, int64_t cost,
				  int64_t now_us, drl_async_cb cb, void *arg,
				  drl_error *err);

/* Start drl_adjust(limiter, key, keylen, delta) (penalty > 0, reward
 * < 0; include/drl/drl.h), as drl_async_allow() starts a decision: the
 * same callback (its result the peek of cost 1 after the adjustment),
 * the same start errors (bad input as drl_adjust() rejects it). It is
 * made on a worker (or at start on a store inside the process): never
 * sent without one, so a context of DRL_ASYNC_THREADS_NONE refuses it
 * (DRL_ENOTSUP). */
DRL_EXPORT int drl_async_adjust(drl_async *a, drl_limiter *limiter,
				const void *key, size_t keylen, int64_t delta,
				drl_async_cb cb, void *arg, drl_error *err);

/* The same as drl_adjust_at() at now_us (checked at start, as there). */
DRL_EXPORT int drl_async_adjust_at(drl_async *a, drl_limiter *limiter,
				   const void *key, size_t keylen,
				   int64_t delta, int64_t now_us,
				   drl_async_cb cb, void *arg, drl_error *err);

/* A batch's callback: rc and *err as drl_allow_batch() returned and wrote
 * them; items[0..n) are copies of the started items with each rc and
 * result filled (their keys point at the library's copies), valid only
 * during the call. DRL_ECANCELED: the call's rc and every item's. */
typedef void (*drl_async_batch_cb)(drl_async *a, int rc,
				   const drl_batch_item *items, size_t n,
				   const drl_error *err, void *arg);

/* Start drl_allow_batch(limiter, items, n): the items (keys, lengths,
 * costs) are copied at start, so the caller's array and keys need not
 * outlive the call and are never written. Start errors as for
 * drl_async_allow(), and DRL_EINVAL for what drl_allow_batch() rejects
 * as a whole (NULL items, n outside 1..DRL_BATCH_MAX); a bad item is that
 * item's rc in the callback, as in drl_allow_batch(). One batch takes one
 * place of the queue. */
DRL_EXPORT int drl_async_batch(drl_async *a, drl_limiter *limiter,
			       const drl_batch_item *items, size_t n,
			       drl_async_batch_cb cb, void *arg,
			       drl_error *err);

/* The same as drl_allow_batch_at() at now_us (checked at start). */
DRL_EXPORT int drl_async_batch_at(drl_async *a, drl_limiter *limiter,
				  const drl_batch_item *items, size_t n,
				  int64_t now_us, drl_async_batch_cb cb,
				  void *arg, drl_error *err);

/* ---- for loop adapters ----------------------------------------------------
 *
 * What the adapter attached to a context (<drl/adapters/libuv.h>,
 * <drl/adapters/libevent.h>, or an application's own) learns from it, so
 * that its loop runs exactly while the context has work for it and is
 * cleaned up with the context. */
typedef struct drl_async_adapter {
	/* The context became busy (1: a request started while none was
	 * pending, or a drain began) or idle (0: the last pending request's
	 * callback began and no drain's done callback waits). An adapter
	 * keeps its loop alive while busy (libuv: uv_ref) and lets it end
	 * while idle (uv_unref), so uv_run(UV_RUN_DEFAULT) returns once
	 * every callback ran. Called once by drl_async_set_adapter() with
	 * the state then, and at each change, in order, on the thread that
	 * made it (a starting thread; the one in drl_async_process() or
	 * drl_async_free()), with the context's lock held: it must return
	 * quickly and call no drl_async function. May be NULL. */
	void (*busy)(void *arg, int busy);
	/* drl_async_free() is done with every callback and is about to free
	 * the context: stop watching drl_async_fd() and free what the
	 * adapter owns (on the thread calling drl_async_free()). The
	 * adapter is unhooked already. May be NULL. */
	void (*cleanup)(void *arg);
	void *arg;
} drl_async_adapter;

/* Hook *adapter (copied) to a, for loop adapters: 0, DRL_EINVAL (NULL
 * context), DRL_EBUSY (an adapter is hooked already: one per context).
 * NULL unhooks (detach): neither hook is called after this returns. */
DRL_EXPORT int drl_async_set_adapter(drl_async *a,
				     const drl_async_adapter *adapter,
				     drl_error *err);

#ifdef __cplusplus
}
#endif
#endif /* DRL_ASYNC_H */
