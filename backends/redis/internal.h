/*
 * The Redis store's internals (internal: nothing here is part of the API),
 * by layer. A file calls and includes only files of its own layer or of
 * layers below it; no two files call each other.
 *
 *   layer  files (backends/redis/)   what
 *   6      cluster.c, sentinel.c     the stores over many servers: each
 *                                    call forwarded to a node store (5)
 *          resolver.c                the resolver's Redis source
 *                                    (drl_resolver_redis_new): HGET on a
 *                                    store (5), invalidation by sub.c
 *   5      store.c                   open and destroy, the methods chosen
 *                                    once; the node stores of 6
 *          sub.c                     a subscribed connection (Sentinel's
 *                                    +switch-master), over conn.c
 *          forward.c                 a store method called with its
 *                                    arguments packed: how cluster.c and
 *                                    sentinel.c forward every call
 *   4      counter.c                 incr, get_many, add_read(_start),
 *                                    trim(_start): counters
 *          state.c                   load, cas: WATCH, MULTI/SET/EXEC
 *          script.c                  eval, eval_start: EVALSHA (or,
 *                                    started under tx=module, DRL.TWIN
 *                                    as module.c formats it)
 *          module.c                  eval under tx=module: DRL.TWIN of
 *                                    the Redis module (redis_module/)
 *          command.c                 del, now: single commands
 *   3      call.c                    where a call goes (a pooled
 *                                    connection of its own, or the shared
 *                                    ones: drl__redis_append/_collect),
 *                                    the pool, the threads' holds, keys
 *   2      chan.c                    channels (DRL_CAP_CHANNEL): started
 *                                    calls on a connection an async
 *                                    context's loop drives;
 *                                    drl__redis_req_queue() sends a started
 *                                    call to its channel or to the pipes
 *          pipe.c, bell.c            the shared, pipelined connections
 *                                    and the word their waiters sleep on
 *   1      conn.c                    one connection and a call's round
 *                                    trip on it: knows no pool, no pipe
 *          resp.c, uri.c, tls.c      RESP formatting, the URI into
 *                                    settings, TLS under hiredis
 *
 * Headers: redis.h is the store to registry.c and the layer-6 stores;
 * this one is the rest; codes.h, uri.h, tls.h, cluster.h, sentinel.h,
 * forward.h, bell.h belong to their files; thread.h (a thread started
 * with every signal blocked) is every layer's.
 *
 * A conn is one hiredis blocking context with the state of the call on
 * it (or, for a shared call, a proxy with no context: the store formats
 * its commands into qbuf and hands them to a pipe); an rstore is one
 * Redis server (a plain store, or a node of a Redis Cluster store).
 * Threading: a conn is used by one thread at a time; an rstore by any
 * number (its pool and pipes have locks of their own).
 */
#ifndef DRL_REDIS_CONN_H
#define DRL_REDIS_CONN_H

#include "codes.h"
#include "tls.h"

#include <drl/sys/backend.h>

#include <hiredis/hiredis.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define SCRIPT_CACHE 32  /* SHA1s remembered per store */
#define MSG_ERR_MAX 200  /* bytes of a Redis error quoted in a message */
#define ARGS_MAX 1000000 /* keys or args of one eval */
#define KEY_STACK 512    /* prefixed keys up to this size need no malloc */

typedef struct conn conn;
typedef struct rstore rstore;
typedef struct rreq rreq;
/* A started or shared call whose command depends on the connection it
 * goes out on (rreq.form). */
typedef int (*rreq_form_fn)(rstore *s, rreq *q, bool twin, drl_error *err);

/* What a connection's server said of DRL.TWIN (conn.twin, tx=auto). */
enum { TWIN_UNASKED = 0, TWIN_YES, TWIN_NO };

struct conn {
	/* hiredis formats commands and reads replies; the bytes go through
	 * the socket (plaintext: hiredis's own read/write, and writev for
	 * the pipes) or through ssl (TLS: backends/redis/tls.c; hiredis 0.14 has
	 * none), see drl__redis_writev() and the reads in conn.c. */
	redisContext *ctx;
	SSL *ssl;    /* NULL: plaintext */
	short want;  /* poll events a TLS call waits for */
	int io_code; /* the failed write's drl code (io_msg says why) */
	char io_msg[160];
	conn *next, *prev;   /* free list (next only) or held list */
	bool watching;       /* a WATCH may be pending: UNWATCH before use */
	bool unwatch_queued; /* an UNWATCH is pipelined ahead of a call */
	bool broken;         /* failed or desynced: free, never reuse */
	redisReplyObjectFunctions fn; /* the reader's, see limit_reader() */
	int64_t idle_since;           /* ms (CLOCK_MONOTONIC_COARSE), pooled */
	/* When the current call must be over (CLOCK_MONOTONIC): timeout_ms
	 * after the call asked for a connection. */
	struct timespec deadline;
	/* The current call's commands (since drl__redis_begin()): how many
	 * were queued and read, which of them went behind an ASKING (bit i:
	 * command i; Redis Cluster, see drl__redis_append()), and whether a
	 * MULTI is open. */
	unsigned nqueued, nread;
	uint64_t ask_bits;
	bool asking; /* this call sends ASKING before its commands */
	bool in_multi;
	/* While held between load() and cas(): what was loaded. */
	uint64_t hold_version;
	unsigned char *wkey;
	size_t wkeylen, wkeycap;
	/* A call on the shared connections (backends/redis/pipe.c): no
	 * ctx; the store's drl__redis_append() formats into qbuf, its
	 * drl__redis_collect() hands qbuf to a pipe. The connection layer
	 * never sees such a proxy. */
	bool shared;
	char *qbuf;
	size_t qlen, qcap;
	/* A shared call's rreq.form and its argument (NULL: none). */
	rreq_form_fn form;
	void *form_arg;
	/* tx=auto: whether this connection's server has the module's
	 * DRL.TWIN (TWIN_*), asked once per connection (COMMAND INFO
	 * drl.twin, drl__redis_conn_probe): a reconnect asks again. */
	unsigned char twin;
};

typedef struct rpipe rpipe;

/* A waiting call's state (rreq.state). */
enum { RREQ_WAITING, RREQ_DONE, RREQ_LEAD };

/* One call on the shared connections (backends/redis/pipe.c): its
 * formatted commands, where their replies go, and how its owner learns
 * that they came. A waited-for call (drl__redis_pipe_call) has a thread
 * asleep on its pipe's bell (state, bells); a started one
 * (drl__redis_pipe_start) has `complete`, run by whichever thread leads
 * its pipe once rc, err and r[] are final. */
struct rreq {
	rreq *next;
	const char *buf; /* formatted commands */
	size_t len;
	size_t n;       /* replies expected */
	redisReply **r; /* where they go */
	struct timespec deadline;
	const char *what;
	int rc;
	drl_error err;
	bool unsent; /* it failed before any of it was sent */
	/* A waited-for call: RREQ_WAITING, then once RREQ_DONE (rc, err
	 * and r[] are final) or RREQ_LEAD (this call leads next), stored
	 * (release) before its pipe's bell rings for one of `bells`: the
	 * bit of its batch and the bit of its thread (pipe.c). */
	_Atomic int state;
	uint32_t bells;
	/* A started call: run once, outside every lock of the pipe; it may
	 * start the call again (a NOSCRIPT's second round trip) or free
	 * it. */
	void (*complete)(rstore *s, rreq *q);
	/* A started call on a channel (backends/redis/chan.c), or NULL: on
	 * the pipes. Where drl__redis_req_queue() sends it, again too. */
	drl_channel *chan;
	/* tx=auto: a call whose command depends on its connection's server
	 * (DRL.TWIN when it has the module, EVALSHA otherwise), or NULL:
	 * buf is final. Whoever writes q calls form(s, q, twin, err) first,
	 * each time q is to go out, with whether that connection has
	 * DRL.TWIN: 0 with buf, len and what set for it, or an error (on
	 * a pipe q fails unsent; a channel sends q as it was formatted:
	 * the error is out of memory, and a DRL.TWIN on a server without
	 * it is refused unrun). */
	rreq_form_fn form;
	void *form_arg;
};

typedef struct script_sha {
	const drl_script *script;
	const char *source;
	char hex[41];
} script_sha;

struct rstore {
	drl_backend parent; /* first: the core sees only this */
	uint64_t id;        /* never reused; holds find their store by it */
	rstore *reg_next;   /* registry of live stores */

	/* Where and how to connect; constant after open. */
	bool is_unix;
	drl__tls *tls; /* rediss: TLS settings (shared by reference); NULL:
			  plaintext */
	char *host;    /* TCP host, or the unix socket path */
	int port;
	char *user;     /* NULL: AUTH <password> */
	char *password; /* NULL: no AUTH */
	int64_t db;
	int64_t timeout_ms;
	struct timeval timeout;
	bool watch_tx;
	/* tx=module: eval() by the Redis module's DRL.TWIN (module.c) */
	bool module_tx;
	/* tx=auto: the counters by add_read (backends/redis/counter.c) */
	bool plain_counters;
	/* tx=auto: eval() sends DRL.TWIN on a connection whose server has
	 * the module (script.c, drl__redis_auto_eval), EVALSHA elsewhere */
	bool auto_twin;
	/* The last answer of a connection of s to the probe: how a started
	 * call is formatted first (it is formatted again when the
	 * connection it goes out on says otherwise). */
	_Atomic bool twin_seen;
	bool lazy; /* connect=lazy: no connection at open */
	/* A node of a Redis Cluster store (backends/redis/cluster.c):
	 * MOVED, ASK, TRYAGAIN and CLUSTERDOWN replies become
	 * DRL__EREDIRECT with the details in the thread's redirect. */
	bool cluster;
	/* A template of a Redis Sentinel store (redis-sentinel://): its
	 * hosts are sentinels, its path the master's name. */
	bool sentinel;
	/* Called (from any thread, no lock of s held) when a call on s met
	 * what may mean a failover: the server cannot be reached, a
	 * connection broke or timed out, a READONLY reply. Set by the
	 * sentinel store on its master's store (backends/redis/sentinel.c);
	 * NULL: nobody asks. */
	void (*trouble)(void *arg);
	void *trouble_arg;
	/* Blocking calls say DRL__UNSENT(code) (redis.h) for a failure
	 * after which nothing ran; set with `trouble`. */
	bool mark_unsent;
	char *prefix;
	size_t prefixlen;
	char where[128]; /* "host:port" or the socket path, for messages */

	/* Pool; guarded by mu. nconn counts free and in-call connections,
	 * nheld the ones threads keep between load() and cas() (on `held`). */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	conn *free;
	conn *held;
	size_t nconn;
	size_t nheld;
	size_t cap;

	_Atomic uint64_t next_version;

	pthread_mutex_t script_mu;
	script_sha scripts[SCRIPT_CACHE];
	size_t script_next;

	/* Shared, pipelined connections (pipelines=N; none when 0). */
	rpipe *pipes;
	size_t npipes;
};

/* SIGPIPE blocked in the calling thread around socket writes. */
typedef struct pipe_guard {
	sigset_t old;
	bool pending_before;
} pipe_guard;

/* ---- the connection layer (conn.c) --------------------------------------- */

/* Deadline `ms` from now on CLOCK_MONOTONIC. */
struct timespec drl__redis_deadline_in(int64_t ms);
/* Milliseconds on CLOCK_MONOTONIC_COARSE. */
int64_t drl__redis_coarse_ms(void);
/* Connect to s, AUTH/SELECT/PING, all by dl. */
int drl__redis_conn_open(rstore *s, conn **out, const struct timespec *dl,
			 drl_error *err);
void drl__redis_conn_free(conn *c);
/* A new connection's setup: AUTH (with a password), SELECT (a db other
 * than 0), PING, and with `probe` (tx=auto) COMMAND INFO drl.twin: n
 * commands, argv[i][0..argc[i]) with lens (pointing into s and db), for a
 * connection's own append or a channel's RESP buffer. */
#define DRL__REDIS_SETUP_MAX 4
typedef struct drl__redis_setup {
	size_t n;
	int argc[DRL__REDIS_SETUP_MAX];
	const char *argv[DRL__REDIS_SETUP_MAX][3];
	size_t lens[DRL__REDIS_SETUP_MAX][3];
	char db[24];
} drl__redis_setup;
void drl__redis_setup_make(rstore *s, drl__redis_setup *u, bool probe);
/* The setup's n replies r[] (freed here): 0, or the error (an AUTH
 * refused never quotes the server's text: it may hold the password).
 * When the setup had the probe (n says so), its answer goes to c->twin. */
int drl__redis_setup_check(rstore *s, conn *c, redisReply **r, size_t n,
			   drl_error *err);
/* tx=auto: ask c's server once whether it has DRL.TWIN (COMMAND INFO
 * drl.twin, one round trip on c by c->deadline) unless c->twin says it
 * was asked; c->twin set. 0, or the failure (c broken). */
int drl__redis_conn_probe(rstore *s, conn *c, drl_error *err);
/* Begin connecting to s (plaintext) without waiting: a non-blocking
 * socket whose connect may still be under way (a write waits for
 * POLLOUT); the caller sends AUTH/SELECT/PING itself. 0 and *out, or the
 * error (the address refused at once, no memory). */
int drl__redis_conn_start(rstore *s, conn **out, drl_error *err);
/* A pooled connection idle for a while that the server closed. */
bool drl__redis_conn_stale(const conn *c);
/* Wait for c's socket (poll events) until c->deadline: 1 ready, 0 out of
 * time, -1 poll failed (errno). */
int drl__redis_wait_ready(conn *c, short events);
/* Write iov[0..n) on c's transport without waiting: > 0 bytes taken; 0:
 * wait for c->want (drl__redis_wait_ready) and call again with the bytes
 * not yet taken; -1: failed (c->io_code, c->io_msg; see
 * drl__redis_io_error). */
ssize_t drl__redis_writev(conn *c, const struct iovec *iov, int n);
/* Mark c broken and report its failed transport call (c->io_code,
 * c->io_msg) for command `what`. */
int drl__redis_io_error(rstore *s, conn *c, const char *what, drl_error *err);
/* Send what is queued on c, read one reply, by c->deadline; on failure c
 * is broken and err set. */
int drl__redis_get_reply(rstore *s, conn *c, void **reply, const char *what,
			 drl_error *err);
/* What c's socket holds now (poll said readable), into c's reader,
 * without waiting; 0, or the error that ended the connection (c broken,
 * err set). For a connection that only listens (backends/redis/sub.c). */
int drl__redis_read_now(rstore *s, conn *c, const char *what, drl_error *err);
void drl__redis_free_replies(redisReply **r, size_t n);
/* The next reply c's reader holds, without reading or waiting: 0 and
 * *reply (NULL: none yet), or the reader's error (c broken, err set). */
int drl__redis_reply_now(rstore *s, conn *c, void **reply, const char *what,
			 drl_error *err);
/* The call on c ran out of time: DRL_ETIMEDOUT, c broken. */
int drl__redis_timeout_error(rstore *s, conn *c, const char *what,
			     drl_error *err);
/* SIGPIPE blocked in the calling thread around socket writes. */
void drl__redis_sigpipe_block(pipe_guard *g);
void drl__redis_sigpipe_restore(pipe_guard *g, bool failed);
/* Mark c broken and report its context error (errno saved_errno):
 * DRL_ETIMEDOUT for a timeout, DRL_ENOMEM for hiredis OOM,
 * DRL_EUNAVAILABLE otherwise. */
int drl__redis_ctx_error(rstore *s, conn *c, const char *what, int saved_errno,
			 drl_error *err);
/* Queue one command of c's call on c's context (argv with explicit
 * lengths; nothing is sent yet), behind ASKING when c->asking (outside
 * MULTI). On failure err is set. */
int drl__redis_conn_append(rstore *s, conn *c, int argc, const char **argv,
			   const size_t *lens, drl_error *err);
/* Send what was queued on c and read n replies into r[] by c's deadline,
 * checking the replies to a queued UNWATCH and to ASKING on the way. On
 * failure nothing is left in r[], c is broken and err is set. */
int drl__redis_conn_collect(rstore *s, conn *c, size_t n, redisReply **r,
			    const char *what, drl_error *err);
/* 1 when r is the status reply `text` ("OK", "QUEUED"). */
bool drl__redis_is_status(const redisReply *r, const char *text);
/* Reply r (NULL: none) of command `what` as a failure: DRL__EREDIRECT as
 * drl__redis_cluster_reply() says, an error reply with Redis's text
 * (DRL_ESTORE; DRL_ERANGE for an overflow; DRL_ECORRUPT when
 * `value_err_corrupt` and the stored value is not an integer), anything
 * else DRL_ESTORE. */
int drl__redis_reply_error(rstore *s, const char *what, const redisReply *r,
			   bool value_err_corrupt, drl_error *err);
/* On a cluster node, an error reply r that is a MOVED, ASK, TRYAGAIN or
 * CLUSTERDOWN: the thread's redirect set (drl__redis_last_redirect()),
 * err set, DRL__EREDIRECT returned; otherwise 0. */
int drl__redis_cluster_reply(rstore *s, const redisReply *r, drl_error *err);
/* Tell s's watcher (s->trouble) that a call met what may mean a
 * failover; a no-op when nobody watches. */
void drl__redis_trouble(rstore *s);
/* drl__redis_trouble(s) when error reply r is READONLY (s's server is a
 * replica now). */
void drl__redis_readonly_check(rstore *s, const redisReply *r);
/* Failure rc of a call after which nothing of it ran on the server:
 * DRL__UNSENT(rc) when s->mark_unsent, rc otherwise. */
int drl__redis_unsent_mark(rstore *s, int rc);
/* Failure rc of a call whose reply r (the first of its writes, or any
 * in MULTI) was an error: marked unsent when r is READONLY (the write
 * was refused: nothing ran), rc otherwise. */
int drl__redis_refused(rstore *s, const redisReply *r, int rc);
/* A reply type's name ("string", "array", ...) for messages. */
const char *drl__redis_reply_type_name(int type);

/* ---- the call layer (call.c) ------------------------------------------- */

/* Whether the calling thread's next calls on node stores send ASKING
 * before their commands (an ASK redirect). */
void drl__redis_asking(bool on);

/* One command of a transaction: argv with explicit lengths. */
typedef struct tx_cmd {
	int argc;
	const char **argv;
	const size_t *lens;
} tx_cmd;

/* A store key: prefix + user key, on the stack when small. */
typedef struct keybuf {
	const char *p;
	size_t len;
	char *heap;
	size_t heapcap;
	char stack[KEY_STACK];
} keybuf;

/* Whether threads can hold connections (made at the first store's open);
 * false only when the process has no thread-specific key left. */
bool drl__redis_holds_ready(void);
/* Enter s in the registry of live stores (holds find it by its id); take
 * it out (no hold can reach it after; this thread's hold of it is
 * forgotten: its connection is on s->held, freed with s). */
void drl__redis_register(rstore *s);
void drl__redis_unregister(rstore *s);
/* A pooled connection of s by *dl (opened when fewer than s->pool are in
 * use), or DRL_ETIMEDOUT. */
int drl__redis_checkout(rstore *s, conn **out, const struct timespec *dl,
			drl_error *err);
/* A connection of s's own for a call: the one this thread holds for s,
 * or one from the pool (a hold of another store's is given back). */
int drl__redis_acquire(rstore *s, conn **out, drl_error *err);
/* After a successful load(): keep c, watching `key`, for this thread's
 * cas(). On failure c goes back to the pool and DRL_ENOMEM is returned. */
int drl__redis_hold(rstore *s, conn *c, drl_bytes key, uint64_t version,
		    drl_error *err);
/* For cas(): the connection this thread holds when it watches `key` of s
 * since the load() that returned `version`, or NULL (a hold that does not
 * match is ended). */
conn *drl__redis_take_held(rstore *s, drl_bytes key, uint64_t version);
/* Start a call on c keeping its WATCH (drl__redis_begin() without the
 * UNWATCH): for cas() on the held connection. */
void drl__redis_call_start(conn *c);
/* MULTI; cmd[0..n); EXEC on c's call in one round trip (see call.c). */
int drl__redis_tx_call(rstore *s, conn *c, size_t n, const tx_cmd *cmd,
		       redisReply **r, const char *what, bool value_err_corrupt,
		       redisReply **exec, drl_error *err);
/* Reads the reply of drl__redis_ask's command (never NULL): 0 or an
 * error code, returned by drl__redis_ask. */
typedef int (*drl__redis_read_fn)(rstore *s, const redisReply *r, void *arg,
				  drl_error *err);
/* One command on a connection of s (a shared one when s has them), one
 * round trip; read(s, reply, arg, err) reads its reply, and what read
 * returns is returned. The reply and the connection are given back after
 * read, whatever it returns. */
int drl__redis_ask(rstore *s, int argc, const char **argv, const size_t *lens,
		   drl__redis_read_fn read, void *arg, drl_error *err);
/* A store key (s's prefix + key) in k: init, make (DRL_ENOMEM), done. */
void drl__redis_key_init(keybuf *k);
int drl__redis_key_make(rstore *s, keybuf *k, drl_bytes key, drl_error *err);
void drl__redis_key_done(keybuf *k);

/* A connection for a call that needs no connection state of its own: on
 * success *out is `proxy`, set up for s's shared connections, when s has
 * them, this thread holds no connection of s and its calls send no
 * ASKING; else one of s's own (the one this thread holds for s, or one
 * from the pool, waited for until s's timeout). A connection this thread
 * holds for another store is given back first. The caller starts its
 * call with drl__redis_begin() and ends it with drl__redis_release(). */
int drl__redis_acquire_shared(rstore *s, conn *proxy, conn **out,
			      drl_error *err);
/* Queue one command of c's call (argv with explicit lengths; nothing is
 * sent yet): on c's own connection (drl__redis_conn_append), or
 * formatted into c->qbuf when c->shared. On failure err is set. */
int drl__redis_append(rstore *s, conn *c, int argc, const char **argv,
		      const size_t *lens, drl_error *err);
/* Send what was queued on c and read n replies into r[] by c's deadline:
 * on c's own connection (drl__redis_conn_collect), or on s's shared
 * connections when c->shared (drl__redis_pipe_call). On failure nothing
 * is left in r[] and err is set. */
int drl__redis_collect(rstore *s, conn *c, size_t n, redisReply **r,
		       const char *what, drl_error *err);
/* Start a call on c, before its first drl__redis_append(): its counts
 * start over, it sends ASKING when the thread says so
 * (drl__redis_asking), a shared call's buffer is emptied, and an UNWATCH
 * is queued ahead of its commands when c may still watch a key. On
 * failure c is broken and err set. */
int drl__redis_begin(rstore *s, conn *c, drl_error *err);
/* End a call on c: c goes back to s's pool, or is freed when broken or
 * surplus; a call on the shared connections (c->shared) frees only its
 * buffer. */
void drl__redis_release(rstore *s, conn *c);

/* ---- the operations (counter.c, state.c, command.c, script.c) ---------- */

/* s's methods of drl/sys/backend.h that store.c sets. */
int drl__redis_incr(drl_backend *b, drl_bytes key, int64_t delta,
		    int64_t ttl_us, int64_t *value, drl_error *err);
int drl__redis_get_many(drl_backend *b, size_t n, const drl_bytes *keys,
			int64_t *values, drl_error *err);
int drl__redis_load(drl_backend *b, drl_bytes key, void *buf, size_t cap,
		    size_t *len, uint64_t *version, drl_error *err);
int drl__redis_cas(drl_backend *b, drl_bytes key, const void *blob, size_t len,
		   uint64_t version, int64_t ttl_us, drl_error *err);
int drl__redis_del(drl_backend *b, size_t n, const drl_bytes *keys,
		   drl_error *err);
int drl__redis_now(drl_backend *b, int64_t *now_us, drl_error *err);

/* ---- server-side scripts (script.c) ------------------------------------ */

/* s's eval() (tx=lua; drl/sys/backend.h): EVALSHA of script with nkeys
 * keys (the store's prefix added) and nargs integer arguments, one round
 * trip; its reply (nil, an integer or an array of integers) into
 * out[0..nout), *nret of them. A NOSCRIPT is answered inside the call:
 * SCRIPT LOAD and EVALSHA again, pipelined, then EVAL with the source
 * should a flush land between those two (the script runs at most once).
 * A script and its source must stay unchanged while s is open (their
 * SHA1 is cached by pointer). */
int drl__redis_eval(drl_backend *b, const drl_script *script, size_t nkeys,
		    const drl_bytes *keys, size_t nargs, const int64_t *args,
		    int64_t *out, size_t nout, size_t *nret, drl_error *err);
/* s's eval() under tx=auto: DRL.TWIN (as drl__redis_module_eval) for a
 * call the module takes (drl__redis_twin_takes) on a connection whose
 * server has it (asked once per connection: conn.twin), else
 * drl__redis_eval(). A shared call is formatted again when the shared
 * connection it goes out on says otherwise (rreq.form). */
int drl__redis_auto_eval(drl_backend *b, const drl_script *script, size_t nkeys,
			 const drl_bytes *keys, size_t nargs,
			 const int64_t *args, int64_t *out, size_t nout,
			 size_t *nret, drl_error *err);
/* s's eval_start() (tx=lua, tx=auto or tx=module, s has shared connections and
 * is no Redis Cluster node; drl/sys/backend.h): drl__redis_eval() (under
 * tx=module drl__redis_module_eval(), no NOSCRIPT) without waiting.
 * The EVALSHA is formatted now (keys and args copied) and queued on
 * channel ch, or (NULL) on one of s's pipes (drl__redis_req_queue);
 * done(arg, ...) gets what
 * drl__redis_eval() would have returned, exactly once, on the thread that
 * leads the pipe, possibly before this returns. A NOSCRIPT is answered
 * there by EVAL with the source. Any other return than 0: nothing
 * started, done never runs. */
int drl__redis_eval_start(drl_backend *b, drl_channel *ch,
			  const drl_script *script, size_t nkeys,
			  const drl_bytes *keys, size_t nargs,
			  const int64_t *args, size_t nout,
			  drl_eval_done_fn done, void *arg, drl_error *err);

/* ---- the Redis module (module.c) --------------------------------------- */

/* The most integers a twin is sent for a decision (ARGV[1..7]); an
 * eighth is drl_adjust's delta, which DRL.TWIN does not take yet. */
#define DRL__TWIN_ARGS_MAX 7

/* s's eval() under tx=module (drl/sys/backend.h): DRL.TWIN keys[0]
 * script->name args..., one round trip; the module's answer (the twins'
 * common form) into out[0..nout), *nret. The other keys are not sent:
 * they share keys[0]'s hash tag, and the module derives them itself. A
 * server without the module: DRL_ESTORE saying to load it. drl_adjust
 * (an eighth argument): DRL_BACKEND_ESPLIT, nothing sent, and the core
 * decides it by the C step over WATCH/MULTI/EXEC or the counters. */
int drl__redis_module_eval(drl_backend *b, const drl_script *script,
			   size_t nkeys, const drl_bytes *keys, size_t nargs,
			   const int64_t *args, int64_t *out, size_t nout,
			   size_t *nret, drl_error *err);
/* The longest key DRL.TWIN takes, the store's prefix included (the
 * module's key buffer, DRL__KEY_BUF of core/internal.h). */
#define DRL__TWIN_KEY_MAX 448
/* tx=auto: whether DRL.TWIN decides this eval() as the twin would: a twin
 * the module runs (counter, token_bucket, gcra, sliding_log; no batch
 * twin), with the client's time, no drl_adjust (at most
 * DRL__TWIN_ARGS_MAX integers), a PERIOD of whole ms and a key it takes.
 * Every other call is sent as EVALSHA. */
bool drl__redis_twin_takes(const rstore *s, const drl_script *script,
			   size_t nkeys, const drl_bytes *keys, size_t nargs,
			   const int64_t *args);
/* Queue DRL.TWIN keys[0] script->name args... on c's call (as
 * drl__redis_append): the one formatter of the blocking call above and
 * of a started one (script.c, drl__redis_eval_start under tx=module).
 * DRL_EINVAL for no key or more than DRL__TWIN_ARGS_MAX integers. */
int drl__redis_twin_append(rstore *s, conn *c, const drl_script *script,
			   size_t nkeys, const drl_bytes *keys, size_t nargs,
			   const int64_t *args, drl_error *err);
/* The reply r of the module's command cmd ("DRL.TWIN" for script, or
 * "DRL.POLICY": script NULL) into out[0..nout), *nret: an array of
 * integers (the common answer); an error reply as the store's error (a
 * server without the module: DRL_ESTORE saying to load it; ECORRUPT:
 * DRL_ECORRUPT). */
int drl__redis_twin_result(rstore *s, const char *cmd, const drl_script *script,
			   const redisReply *r, int64_t *out, size_t nout,
			   size_t *nret, drl_error *err);

/* s's blocking eval_policy() under tx=module and tx=auto (drl/sys/backend.h):
 * DRL.POLICY, per limit keys[0], its twin's name and its seven integers,
 * one round trip; the module's answer (six integers) into out. Under
 * tx=auto, and under either for a call the module does not take
 * (drl__redis_twin_takes), DRL_ENOTSUP with nothing run when the server
 * lacks the module (asked as for DRL.TWIN; a shared connection's server
 * answering "unknown command" ran nothing either). */
int drl__redis_module_policy(drl_backend *b, size_t n,
			     const drl_script_call *calls, int64_t *out,
			     size_t nout, size_t *nret, drl_error *err);

/* Queue DRL.POLICY on c's call: per limit i keys[i] (prefixed), its
 * twin's name and args[i * DRL__TWIN_ARGS_MAX ..] (n of 1..8): the one
 * formatter of the blocking call and of a started one
 * (drl__redis_policy_start). */
int drl__redis_policy_append(rstore *s, conn *c, size_t n,
			     const drl_script *const *scripts,
			     const drl_bytes *keys, const int64_t *args,
			     drl_error *err);
/* s's started eval_policy() under tx=module (script.c): DRL.POLICY started
 * as drl__redis_eval_start() starts DRL.TWIN; every call of 1 to 8
 * limits with DRL__TWIN_ARGS_MAX integers and a key is sent (the module
 * answers what it refuses). */
int drl__redis_policy_start(drl_backend *b, drl_channel *ch, size_t n,
			    const drl_script_call *calls, size_t nout,
			    drl_eval_done_fn done, void *arg, drl_error *err);

/* ---- keys (call.c) ----------------------------------------------------- */

/* Point argv[j], lens[j] at keys[j] behind s's prefix, for n keys: the
 * prefixed ones written into buf (room for the prefix and each key); a
 * key used as it is when s has no prefix. Returns the bytes of buf
 * used. */
size_t drl__redis_prefixed_keys(const rstore *s, size_t n,
				const drl_bytes *keys, char *buf,
				const char **argv, size_t *lens);

/* ---- counters (counter.c) --------------------------------------------- */

/* PX argument: ttl_us rounded up to whole milliseconds (>= 1), into ms
 * (*len bytes, no NUL needed); DRL_EINVAL when ttl_us is not positive. */
int drl__redis_ttl_arg(rstore *s, int64_t ttl_us, char ms[24], size_t *len,
		       drl_error *err);
/* A counter's reply r into *v: nil 0, a decimal string, an integer;
 * DRL_ECORRUPT for a string that is not one, the reply's error else. */
int drl__redis_counter_value(rstore *s, const redisReply *r, int64_t *v,
			     drl_error *err);
/* s's add_read() and add_read_start() (tx=auto; drl/sys/backend.h):
 * INCRBY, PEXPIRE and n - 1 GETs, pipelined; the started one on s's
 * pipes, as drl__redis_eval_start(). */
int drl__redis_add_read(drl_backend *b, size_t n, const drl_bytes *keys,
			int64_t delta, int64_t ttl_us, int64_t *values,
			drl_error *err);
int drl__redis_add_read_start(drl_backend *b, drl_channel *ch, size_t n,
			      const drl_bytes *keys, int64_t delta,
			      int64_t ttl_us, drl_eval_done_fn done, void *arg,
			      drl_error *err);
/* get_many() of n >= 2 grouped counters of one group: one HMGET of
 * their fields instead of an HGET each (a peek of a sub-window limiter:
 * one key looked up, not n). false: they are not, and nothing was done;
 * true: *rc is the outcome (values[0..n) on 0). */
bool drl__redis_get_group(rstore *s, size_t n, const drl_bytes *keys,
			  int64_t *values, int *rc, drl_error *err);
/* trim() and trim_start() (DRL_CAP_COUNTER_GROUPS, counter.c). */
int drl__redis_trim(drl_backend *b, size_t n, const drl_bytes *keys,
		    int64_t ttl_us, drl_error *err);
int drl__redis_trim_start(drl_backend *b, drl_channel *ch, size_t n,
			  const drl_bytes *keys, int64_t ttl_us,
			  drl_eval_done_fn done, void *arg, drl_error *err);

/* ---- shared, pipelined connections (pipe.c) ----------------------------- */

/* Make s's s->npipes pipes; -1 when out of memory. */
int drl__redis_pipes_init(rstore *s);
/* Free s's pipes and their connections (no call may be running). */
void drl__redis_pipes_free(rstore *s);
/* Send the n commands formatted into proxy->qbuf on one of s's shared
 * connections, together with other threads' calls, and read their n
 * replies into r[] by the proxy's deadline (set here on its first call).
 * On failure nothing is left in r[] and err is set. */
int drl__redis_pipe_call(rstore *s, conn *proxy, size_t n, redisReply **r,
			 const char *what, drl_error *err);
/* Queue the started call q (buf, len, n, r, deadline, what and complete
 * set, rc 0) on one of s's pipes and return at once: q->complete(s, q)
 * runs exactly once, on the thread that leads the pipe (another caller's,
 * or the pipe's I/O thread, started here when the pipe has none yet),
 * possibly before this returns. 0, or DRL_ENOMEM when the I/O thread
 * cannot be started (q not queued, complete never runs). */
int drl__redis_pipe_start(rstore *s, rreq *q, drl_error *err);
/* Batches a leader reads before it passes the lead (pipe.c). */
#define DRL__PIPE_LEAD_BATCHES 4
/* Times a waiting caller yields its CPU before it sleeps (pipe.c,
 * pipe_await). */
#define DRL__PIPE_AWAIT_YIELDS 8
/* For tests: when set (while no call runs), a pipe's leader calls it
 * with what it does: DRL__PIPE_SENT (a batch of n calls written),
 * DRL__PIPE_FINISH (a batch of n calls about to be finished: callers
 * woken), DRL__PIPE_PASS (the lead passed to a waiting caller); a
 * call queued behind a leader calls it with DRL__PIPE_QUEUED under the
 * pipe's lock (that one must not block), and with DRL__PIPE_SLEEP (n:
 * the times it yielded first) when it goes to sleep on the pipe's bell.
 * NULL: nothing is called. */
enum {
	DRL__PIPE_QUEUED,
	DRL__PIPE_SENT,
	DRL__PIPE_FINISH,
	DRL__PIPE_PASS,
	DRL__PIPE_SLEEP
};
extern void (*drl__redis_pipe_hook)(int event, size_t n);

/* ---- RESP (resp.c) ------------------------------------------------------ */

/* v in decimal at buf (at most 20 bytes, not NUL-terminated): its
 * length. What snprintf("%" PRId64) writes, without the format parsing
 * that costs a few % of a started decision's client CPU (perf). */
size_t drl__redis_i64(char buf[24], int64_t v);

/* Append one command (argv with explicit lengths) in RESP at *buf + *len,
 * growing *buf (*cap bytes, realloc) as needed: 0, or -1 out of memory
 * (nothing changed). */
int drl__redis_resp_append(char **buf, size_t *len, size_t *cap, int argc,
			   const char **argv, const size_t *lens);

/* ---- channels (chan.c) -------------------------------------------------- */

/* The store's chan_* methods (drl/sys/backend.h), set by store.c on a
 * plaintext single-node store with shared connections. */
void drl__redis_chan_methods(rstore *s);
/* Queue the started call q (as drl__redis_pipe_start) where it goes: on
 * q->chan when set (written at that channel's next chan_process), else on
 * s's pipes. */
int drl__redis_req_queue(rstore *s, rreq *q, drl_error *err);

#endif /* DRL_REDIS_CONN_H */
