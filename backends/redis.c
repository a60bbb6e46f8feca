/*
 * The Redis store, over hiredis 0.14 blocking contexts.
 *
 * Connections. A redisContext is not thread-safe, so the store keeps a
 * small pool: a mutex, a LIFO free list, and at most `pool` connections
 * serving calls at once (callers wait up to timeout_ms for one). A
 * connection is opened on demand with the connect timeout, given the
 * command timeout, and AUTH/SELECT on every (re)connect. One that saw an
 * I/O error, a timeout or a reply we could not follow is freed, never
 * reused; the next checkout connects afresh. Every command goes through
 * redisAppendCommandArgv with explicit lengths (keys and blobs are binary)
 * and a call's commands are pipelined: one round trip per primitive.
 *
 * Shared connections. Calls that need no connection state of their own
 * (scripts, counters, GETs, TIME, DEL) go through `pipelines=N` connections
 * that all threads share (backends/redis_pipe.c), unless this thread holds
 * a connection of the store (below) or the call sends ASKING; they still
 * format their commands with append() and read them with collect(), on a
 * proxy conn (acquire_shared()). The connection layer both files use is
 * declared in backends/redis_conn.h.
 *
 * load -> cas. WATCH belongs to a connection, so cas() must run on the
 * connection its load() watched. load() leaves that connection "held" by
 * the calling thread (one per thread, across all stores): the thread's
 * hold records the store, the key and the version token load() returned.
 * cas() on the same thread, store, key and version takes it back and
 * sends MULTI/SET/EXEC on it. Any other call on that thread takes the held
 * connection too (same store) or gives it back to its pool (other store);
 * either way a connection whose WATCH may still be pending is marked
 * `watching` and its next user sends UNWATCH first, pipelined in front of
 * its own commands, so a leftover WATCH can never fail an unrelated EXEC.
 * A cas() with no matching hold cannot be checked: version 0 falls back to
 * SET NX (exactly "only if absent"), any other version is DRL_ECONFLICT
 * (the caller reloads). A thread's hold is given back when the thread
 * exits (a pthread key destructor).
 *
 * Pool size. New connections are opened only while fewer than `pool` are
 * idle or in a call; held connections do not count (a thread that never
 * calls again must not starve the others), and a connection released
 * while more than pool + held are idle or in a call is closed. So calls
 * never wait on an abandoned hold, threads cycling load/cas under load do
 * not churn connections, and a store has at most pool + 2 x (threads
 * holding one) connections, back towards `pool` as holds end.
 * Holds refer to their store by a never-reused id looked up in a registry
 * of live stores, so a hold that outlives its store (destroyed meanwhile,
 * which frees the held connection) is simply forgotten.
 *
 * Batches (tx=lua, DRL_CAP_BATCH). One Redis holds every key, so eval()
 * takes a script with any number of keys together: the core decides a
 * chunk of a batch with one EVALSHA of a twin's batch variant. (Redis
 * Cluster would need a script's keys in one hash slot; this store speaks
 * to one server.)
 *
 * Threading: every method may be called from any number of threads at
 * once; destroy() must not run concurrently with any other method.
 *
 * Errors: connect refused, error replies, WRONGTYPE, OOM: DRL_ESTORE with
 * Redis's text; a connect or command timeout: DRL_ETIMEDOUT; a counter or
 * TIME reply that is not an integer: DRL_ECORRUPT. The password is never
 * put into a message. Writes to a connection the server closed would raise
 * SIGPIPE (hiredis uses write()), so SIGPIPE is blocked in the calling
 * thread around each round trip and a SIGPIPE it caused is discarded.
 */
#include "redis.h"
#include "redis_conn.h"

#include <hiredis/hiredis.h>
#include <openssl/evp.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define DEFAULT_PORT 6379
#define DEFAULT_TIMEOUT_MS 1000
#define TIMEOUT_MS_MAX 3600000
#define DEFAULT_POOL 16
#define POOL_MAX 1024
#define DEFAULT_PIPELINES 1
#define PIPELINES_MAX 64
#define PREFIX_MAX 128 /* as memcached.c: keys stay well below Redis's limits */
#define DB_MAX INT32_MAX
#define KEY_STACK 512    /* prefixed keys up to this size need no malloc */
#define ARGV_STACK 32    /* EVALSHA argument vectors on the stack */
#define MEM_STACK 1024   /* EVALSHA argument bytes on the stack */
#define GET_STACK 16     /* get_many replies on the stack */
#define ARGS_MAX 1000000 /* keys or args of one eval */
#define MSG_ERR_MAX 200  /* bytes of a Redis error quoted in a message */

/* ---- types -------------------------------------------------------------- */

/* The connection a thread keeps between load() and cas(). */
typedef struct hold {
	rstore *store; /* compare only; dereference only after an id check */
	uint64_t store_id;
	conn *c; /* NULL: nothing held */
} hold;

/* ---- registry of live stores, thread holds ------------------------------ */

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static rstore *reg_head;
static uint64_t reg_last_id;

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t hold_key;
static bool hold_key_ok;

/* Unlink c from s's held list (s->mu held). */
static void held_unlink(rstore *s, conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		s->held = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->next = c->prev = NULL;
	s->nheld--;
}

/*
 * Give the connection h keeps back to its store's pool, WATCH possibly
 * still pending (its next user sends UNWATCH first). When the store is
 * gone (it freed the connection), just forget it. h is the calling
 * thread's own hold (or one of an exiting thread).
 */
static void drop_hold(hold *h)
{
	conn *c = h->c;
	conn *dead = NULL;
	if (c == NULL)
		return;
	h->c = NULL;
	pthread_mutex_lock(&reg_mu);
	rstore *s = reg_head;
	while (s && s->id != h->store_id)
		s = s->reg_next;
	if (s) {
		pthread_mutex_lock(&s->mu);
		held_unlink(s, c);
		if (!c->broken && s->nconn < s->cap + s->nheld) {
			c->next = s->free;
			s->free = c;
			s->nconn++;
			pthread_cond_signal(&s->cv);
		} else {
			dead = c;
		}
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_unlock(&reg_mu);
	if (dead)
		drl__redis_conn_free(dead);
}

/* Thread exit: give back what the thread still holds. */
static void hold_destructor(void *p)
{
	hold *h = p;
	drop_hold(h);
	free(h);
}

static void make_hold_key(void)
{
	hold_key_ok = pthread_key_create(&hold_key, hold_destructor) == 0;
}

/* The calling thread's hold; created when `create` (NULL when that fails
 * or when there is none). */
static hold *thread_hold(bool create)
{
	hold *h = pthread_getspecific(hold_key);
	if (h || !create)
		return h;
	h = calloc(1, sizeof *h);
	if (h && pthread_setspecific(hold_key, h) != 0) {
		free(h);
		h = NULL;
	}
	return h;
}

/* 1 when h holds a connection of s. */
static bool holds_for(const hold *h, const rstore *s)
{
	return h && h->c && h->store == s && h->store_id == s->id;
}

/* Take the connection h holds for s into the calling call (counted in
 * the pool again; it may exceed `cap` until released), with a fresh
 * deadline. */
static conn *take_own(rstore *s, hold *h)
{
	conn *c = h->c;
	h->c = NULL;
	c->deadline = drl__redis_deadline_in(s->timeout_ms);
	pthread_mutex_lock(&s->mu);
	held_unlink(s, c);
	s->nconn++;
	pthread_mutex_unlock(&s->mu);
	return c;
}

/* ---- errors ------------------------------------------------------------- */

/* 1 when a hiredis I/O error means a timeout (connect or command). */
static bool is_timeout(const redisContext *ctx, int saved_errno)
{
	if (ctx->err != REDIS_ERR_IO)
		return false;
	if (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK ||
	    saved_errno == ETIMEDOUT || saved_errno == EINPROGRESS)
		return true;
	/* hiredis formats errno into errstr: trust it over a clobbered
	 * errno. */
	return strstr(ctx->errstr, "temporarily unavailable") != NULL ||
	       strstr(ctx->errstr, "timed out") != NULL;
}

/* Mark c broken and report its context error: DRL_ETIMEDOUT for a
 * timeout, DRL_ENOMEM for hiredis OOM, DRL_EUNAVAILABLE otherwise (refused,
 * reset, closed: the server cannot be talked to). */
static int ctx_error(rstore *s, conn *c, const char *what, int saved_errno,
		     drl_error *err)
{
	redisContext *ctx = c->ctx;
	int code = DRL_EUNAVAILABLE;
	c->broken = true;
	if (is_timeout(ctx, saved_errno))
		code = DRL_ETIMEDOUT;
	else if (ctx->err == REDIS_ERR_OOM)
		code = DRL_ENOMEM;
	return drl_error_set(err, code, "redis %s: %s: %s%s", s->where, what,
			     ctx->errstr[0] ? ctx->errstr : "connection error",
			     code == DRL_ETIMEDOUT ? " (timeout_ms exceeded)"
						   : "");
}

/* The call on c ran out of time: DRL_ETIMEDOUT, c broken (a late reply
 * would desync it). */
int drl__redis_timeout_error(rstore *s, conn *c, const char *what,
			     drl_error *err)
{
	c->broken = true;
	return drl_error_set(
		err, DRL_ETIMEDOUT,
		"redis %s: %s: no reply within timeout_ms=%" PRId64, s->where,
		what, s->timeout_ms);
}

/*
 * Arrays in replies. hiredis 0.14 allocates an array's element table as
 * soon as it reads the header, so "*536870911" from a hostile or broken
 * server costs 4 GiB and seconds (to allocate and to free), whatever the
 * timeout. No reply of ours is much longer than the nout of an eval()
 * (a batch chunk's answers: 1280 integers today): every connection's
 * reader gets hiredis's own functions with createArray refusing more than
 * ARRAY_MAX elements, which the reader reports as out of memory and
 * reader_error() as DRL_EUNAVAILABLE. (hiredis 1.x has maxelements for
 * this; Debian 12 ships 0.14.)
 */
#define ARRAY_MAX 65536
typedef void *(*create_array_fn)(const redisReadTask *, int);
static _Atomic(create_array_fn) hiredis_create_array;
static _Thread_local int array_refused; /* elements of the refused array */

static void *limited_array(const redisReadTask *task, int elements)
{
	if (elements > ARRAY_MAX) {
		array_refused = elements;
		return NULL;
	}
	return atomic_load(&hiredis_create_array)(task, elements);
}

/* Give c's reader the limited functions (kept in c). */
static void limit_reader(conn *c)
{
	redisReader *r = c->ctx->reader;
	atomic_store(&hiredis_create_array, r->fn->createArray);
	c->fn = *r->fn;
	c->fn.createArray = limited_array;
	r->fn = &c->fn;
}

/* The bytes the server sent are not RESP we can read (a server that is
 * not Redis, or garbage, or an absurd array): DRL_EUNAVAILABLE (DRL_ENOMEM
 * when hiredis ran out of memory), c broken. hiredis quotes a bad byte
 * escaped. */
static int reader_error(rstore *s, conn *c, const char *what, drl_error *err)
{
	const redisReader *r = c->ctx->reader;
	c->broken = true;
	if (array_refused) {
		int n = array_refused;
		array_refused = 0;
		return drl_error_set(err, DRL_EUNAVAILABLE,
				     "redis %s: %s: unreadable reply: an array "
				     "of %d elements (ours have at most %d)",
				     s->where, what, n, ARRAY_MAX);
	}
	return drl_error_set(
		err, r->err == REDIS_ERR_OOM ? DRL_ENOMEM : DRL_EUNAVAILABLE,
		"redis %s: %s: unreadable reply: %s", s->where, what,
		r->errstr[0] ? r->errstr : "protocol error");
}

static const char *reply_type_name(int type)
{
	switch (type) {
	case REDIS_REPLY_STRING:
		return "string";
	case REDIS_REPLY_ARRAY:
		return "array";
	case REDIS_REPLY_INTEGER:
		return "integer";
	case REDIS_REPLY_NIL:
		return "nil";
	case REDIS_REPLY_STATUS:
		return "status";
	case REDIS_REPLY_ERROR:
		return "error";
	}
	return "unknown";
}

/* ---- Redis Cluster: redirects and ASKING -------------------------------- */

/* The calling thread's last redirect (set with DRL__EREDIRECT) and
 * whether its calls send ASKING; see redis.h. Thread-local because the
 * vtable has no room for either, and a call runs on one thread. */
static _Thread_local drl__redis_redirect last_redirect;
static _Thread_local bool asking_calls;

void drl__redis_asking(bool on)
{
	asking_calls = on;
}

const drl__redis_redirect *drl__redis_last_redirect(void)
{
	return &last_redirect;
}

/* "host:port" (an IPv6 host may be bare, the port is after the last ':')
 * of a MOVED or ASK into r; false when it does not parse. */
static bool parse_target(drl__redis_redirect *r, const char *p, size_t n)
{
	const char *colon = NULL;
	for (size_t i = 0; i < n; i++)
		if (p[i] == ':')
			colon = p + i;
	if (colon == NULL)
		return false;
	size_t hlen = (size_t)(colon - p);
	int64_t port;
	if (hlen == 0 || hlen >= sizeof r->host ||
	    drl_parse_int(colon + 1, n - hlen - 1, 1, 65535, &port) != 0)
		return false;
	memcpy(r->host, p, hlen);
	r->host[hlen] = '\0';
	r->port = (int)port;
	return true;
}

/* When s is a cluster node and r is "MOVED slot host:port", "ASK slot
 * host:port", "TRYAGAIN ..." or "CLUSTERDOWN ...": the thread's redirect
 * says which, and DRL__EREDIRECT is returned (err gets Redis's text for
 * when the cluster store gives up); otherwise 0. */
static int cluster_reply(rstore *s, const redisReply *r, drl_error *err)
{
	if (!s->cluster || r == NULL || r->type != REDIS_REPLY_ERROR ||
	    r->str == NULL)
		return 0;
	drl__redis_redirect *d = &last_redirect;
	const char *str = r->str;
	size_t len = r->len;
	memset(d, 0, sizeof *d);
	if (len > 6 &&
	    (strncmp(str, "MOVED ", 6) == 0 || strncmp(str, "ASK ", 4) == 0)) {
		bool ask = str[1] == 'S';
		const char *p = str + (ask ? 4 : 6), *end = str + len;
		const char *sp = memchr(p, ' ', (size_t)(end - p));
		int64_t slot;
		if (sp == NULL ||
		    drl_parse_int(p, (size_t)(sp - p), 0, 16383, &slot) != 0 ||
		    !parse_target(d, sp + 1, (size_t)(end - sp - 1)))
			return 0; /* not a redirect we can follow */
		d->kind = ask ? DRL__REDIS_ASK : DRL__REDIS_MOVED;
		d->slot = (int)slot;
	} else if (strncmp(str, "TRYAGAIN", 8) == 0) {
		d->kind = DRL__REDIS_TRYAGAIN;
	} else if (strncmp(str, "CLUSTERDOWN", 11) == 0) {
		d->kind = DRL__REDIS_CLUSTERDOWN;
	} else {
		return 0;
	}
	int n = (int)(len < MSG_ERR_MAX ? len : MSG_ERR_MAX);
	drl_error_set(err, DRL_ESTORE, "redis %s: %.*s", s->where, n, str);
	return DRL__EREDIRECT;
}

/*
 * Report reply r of command `what` as a failure: an error reply with
 * Redis's text (DRL_ESTORE; DRL_ERANGE for an overflow; DRL_ECORRUPT when
 * `value_err_corrupt` and Redis says the stored value is not an integer),
 * anything else as an unexpected reply (DRL_ESTORE).
 */
static int reply_error(rstore *s, const char *what, const redisReply *r,
		       bool value_err_corrupt, drl_error *err)
{
	if (r == NULL)
		return drl_error_set(err, DRL_ESTORE, "redis %s: %s: no reply",
				     s->where, what);
	int redirect = cluster_reply(s, r, err);
	if (redirect)
		return redirect;
	if (r->type != REDIS_REPLY_ERROR || r->str == NULL)
		return drl_error_set(err, DRL_ESTORE,
				     "redis %s: %s: unexpected %s reply",
				     s->where, what, reply_type_name(r->type));
	int code = DRL_ESTORE;
	if (strstr(r->str, "overflow"))
		code = DRL_ERANGE;
	else if (value_err_corrupt &&
		 strncmp(r->str, "ERR value is not an integer", 27) == 0)
		code = DRL_ECORRUPT;
	int n = (int)(r->len < MSG_ERR_MAX ? r->len : MSG_ERR_MAX);
	return drl_error_set(err, code, "redis %s: %s: %.*s", s->where, what, n,
			     r->str);
}

/* A failed AUTH. Only the reply's first word (WRONGPASS, NOAUTH, ERR...) is
 * quoted: a server that does not know AUTH (renamed, a proxy) answers
 * "unknown command ... with args beginning with: 'user' 'password'", and
 * the password must never reach a message. */
static int auth_error(rstore *s, const redisReply *r, drl_error *err)
{
	if (r == NULL || r->type != REDIS_REPLY_ERROR || r->str == NULL)
		return reply_error(s, "AUTH", r, false, err);
	size_t n = strcspn(r->str, " ");
	if (n > 32)
		n = 32;
	return drl_error_set(
		err, DRL_ESTORE,
		"redis %s: AUTH refused (%.*s; the server's text is "
		"not shown, it may quote the password)",
		s->where, (int)n, r->str);
}

/* 1 when r is the status reply `text` ("OK", "QUEUED"). */
static bool is_status(const redisReply *r, const char *text)
{
	return r && r->type == REDIS_REPLY_STATUS && r->str &&
	       strcmp(r->str, text) == 0;
}

/* ---- one round trip ----------------------------------------------------- */

void drl__redis_sigpipe_block(pipe_guard *g)
{
	sigset_t set, pend;
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, &g->old);
	/* Only a signal that was already blocked can already be pending. */
	g->pending_before = sigismember(&g->old, SIGPIPE) &&
			    sigpending(&pend) == 0 &&
			    sigismember(&pend, SIGPIPE);
}

/* Restore the mask; after a failed write, discard the SIGPIPE it raised
 * (never one that was pending before). */
void drl__redis_sigpipe_restore(pipe_guard *g, bool failed)
{
	if (failed && !g->pending_before) {
		sigset_t set, pend;
		sigemptyset(&set);
		sigaddset(&set, SIGPIPE);
		if (sigpending(&pend) == 0 && sigismember(&pend, SIGPIPE)) {
			struct timespec zero = {0, 0};
			while (sigtimedwait(&set, NULL, &zero) < 0 &&
			       errno == EINTR)
				;
		}
	}
	pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* Start a call on c: a connection that may still watch something gets an
 * UNWATCH in front of the call's commands. `watching` is cleared now, not
 * when the reply arrives: the call may queue a WATCH of its own after the
 * UNWATCH (load), and if the round trip fails c is dropped anyway. */
/* A call's count of queued and read commands starts over; it sends
 * ASKING when the thread says so (drl__redis_asking). */
static void call_start(conn *c)
{
	c->nqueued = c->nread = 0;
	c->ask_bits = 0;
	c->in_multi = false;
	c->asking = asking_calls;
}

static int begin(rstore *s, conn *c, drl_error *err)
{
	call_start(c);
	c->unwatch_queued = false;
	if (c->shared)
		c->qlen = 0;
	if (!c->watching)
		return 0;
	if (redisAppendCommand(c->ctx, "UNWATCH") != REDIS_OK)
		return ctx_error(s, c, "UNWATCH", errno, err);
	c->unwatch_queued = true;
	c->watching = false;
	return 0;
}

/* Queue one command of a call on the shared connections: formatted (RESP)
 * at the end of c->qbuf, which collect() hands to a pipe. */
static int append_shared(rstore *s, conn *c, int argc, const char **argv,
			 const size_t *lens, drl_error *err)
{
	char *cmd = NULL;
	int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
	if (len < 0 || cmd == NULL)
		return drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				     s->where);
	if (c->qlen == 0) {
		/* The first command: its buffer becomes the call's. */
		free(c->qbuf);
		c->qbuf = cmd;
		c->qlen = c->qcap = (size_t)len;
		c->nqueued++;
		return 0;
	}
	if (c->qcap - c->qlen < (size_t)len) {
		size_t cap = c->qcap;
		while (cap - c->qlen < (size_t)len)
			cap *= 2;
		char *q = realloc(c->qbuf, cap);
		if (q == NULL) {
			free(cmd);
			return drl_error_set(err, DRL_ENOMEM,
					     "redis %s: out of memory",
					     s->where);
		}
		c->qbuf = q;
		c->qcap = cap;
	}
	memcpy(c->qbuf + c->qlen, cmd, (size_t)len);
	c->qlen += (size_t)len;
	c->nqueued++;
	free(cmd);
	return 0;
}

/* 1 when argv[0] is `name`. */
static bool is_command(const char *const *argv, const size_t *lens,
		       const char *name)
{
	return lens[0] == strlen(name) && memcmp(argv[0], name, lens[0]) == 0;
}

/*
 * Queue one command (argv with explicit lengths; nothing is sent yet).
 *
 * In a call that asks (a cluster slot being imported: the node serves it
 * only to a client that says ASKING first), ASKING goes in front of every
 * command outside MULTI; inside, the flag ASKING set before the MULTI
 * lasts until EXEC. Bit i of ask_bits records that command i has an
 * ASKING reply in front of its own, for collect().
 */
static int append(rstore *s, conn *c, int argc, const char **argv,
		  const size_t *lens, drl_error *err)
{
	if (c->shared)
		return append_shared(s, c, argc, argv, lens, err);
	if (c->asking && !c->in_multi) {
		if (c->nqueued >= 64) {
			c->broken = true; /* what is queued must not be sent */
			return drl_error_set(err, DRL_EINTERNAL,
					     "redis %s: more than 64 commands "
					     "in one call behind ASKING",
					     s->where);
		}
		if (redisAppendCommand(c->ctx, "ASKING") != REDIS_OK)
			return ctx_error(s, c, "ASKING", errno, err);
		c->ask_bits |= UINT64_C(1) << c->nqueued;
	}
	if (redisAppendCommandArgv(c->ctx, argc, argv, lens) != REDIS_OK)
		return ctx_error(s, c, argv[0], errno, err);
	if (is_command(argv, lens, "MULTI"))
		c->in_multi = true;
	else if (is_command(argv, lens, "EXEC"))
		c->in_multi = false;
	c->nqueued++;
	return 0;
}

/* Milliseconds until dl, rounded up; 0 once it has passed. */
static int64_t ms_until(const struct timespec *dl)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	int64_t ns = (int64_t)(dl->tv_sec - now.tv_sec) * 1000000000 +
		     (dl->tv_nsec - now.tv_nsec);
	return ns <= 0 ? 0 : (ns + 999999) / 1000000;
}

/* Wait until c's socket is ready for `events` or c's deadline passes:
 * 1 ready (or in error: the read or write that follows reports it), 0
 * out of time, -1 poll() failed (errno). */
int drl__redis_wait_ready(conn *c, short events)
{
	for (;;) {
		int64_t left = ms_until(&c->deadline);
		if (left == 0)
			return 0;
		struct pollfd p = {.fd = c->ctx->fd, .events = events};
		int n = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (n > 0)
			return 1;
		if (n < 0 && errno != EINTR)
			return -1;
	}
}

/*
 * Send what is queued on c and read one reply, all by c's deadline.
 *
 * Written here rather than using redisGetReply(): its blocking loop bounds
 * each read() by the socket timeout, not the call, so a server that
 * trickles a byte at a time (or a huge bulk length) could hold the caller
 * for ever. Reads wait in poll() for the time left; the write is one
 * write() of a request of at most a few hundred KB, bounded by the
 * socket's send timeout, and further writes wait in poll() too.
 */
int drl__redis_get_reply(rstore *s, conn *c, void **reply, const char *what,
			 drl_error *err)
{
	redisContext *ctx = c->ctx;
	int done = 0;
	*reply = NULL;
	if (redisReaderGetReply(ctx->reader, reply) != REDIS_OK)
		return reader_error(s, c, what, err);
	if (*reply)
		return 0;
	for (;;) {
		if (redisBufferWrite(ctx, &done) != REDIS_OK)
			return ctx_error(s, c, what, errno, err);
		if (done)
			break;
		int w = drl__redis_wait_ready(c, POLLOUT);
		if (w <= 0)
			return w == 0 ? drl__redis_timeout_error(s, c, what,
								 err)
				      : ctx_error(s, c, what, errno, err);
	}
	for (;;) {
		int w = drl__redis_wait_ready(c, POLLIN);
		if (w <= 0)
			return w == 0 ? drl__redis_timeout_error(s, c, what,
								 err)
				      : ctx_error(s, c, what, errno, err);
		if (redisBufferRead(ctx) != REDIS_OK)
			return ctx_error(s, c, what, errno, err);
		if (redisReaderGetReply(ctx->reader, reply) != REDIS_OK)
			return reader_error(s, c, what, err);
		if (*reply)
			return 0;
	}
}

void drl__redis_free_replies(redisReply **r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		freeReplyObject(r[i]);
}

/*
 * Send what was queued and read n replies into r[] (the caller frees them
 * with freeReplyObject). The reply to a queued UNWATCH is read and checked
 * first. On failure nothing is left in r[], c is broken, the error set.
 */
static int collect(rstore *s, conn *c, size_t n, redisReply **r,
		   const char *what, drl_error *err)
{
	pipe_guard g;
	size_t got = 0;
	int rc = 0;
	if (c->shared) {
		rc = drl__redis_pipe_call(s, c, n, r, what, err);
		c->qlen = 0;
		c->nqueued = 0;
		return rc;
	}
	drl__redis_sigpipe_block(&g);
	if (c->unwatch_queued) {
		void *u = NULL;
		c->unwatch_queued = false;
		rc = drl__redis_get_reply(s, c, &u, what, err);
		if (rc == 0) {
			if (!is_status(u, "OK"))
				c->broken = true; /* WATCH state unknown */
			freeReplyObject(u);
		}
	}
	for (; rc == 0 && got < n; got++) {
		void *p = NULL;
		if (c->nread < 64 && (c->ask_bits >> c->nread & 1)) {
			rc = drl__redis_get_reply(s, c, &p, "ASKING", err);
			if (rc)
				break;
			if (!is_status(p, "OK")) {
				c->broken = true;
				rc = reply_error(s, "ASKING", p, false, err);
				freeReplyObject(p);
				break;
			}
			freeReplyObject(p);
			p = NULL;
		}
		rc = drl__redis_get_reply(s, c, &p, what, err);
		if (rc)
			break;
		c->nread++;
		r[got] = p;
	}
	drl__redis_sigpipe_restore(&g, rc != 0);
	if (rc)
		drl__redis_free_replies(r, got);
	return rc;
}

/*
 * Check the replies of MULTI, n-2 queued commands, EXEC (r[0..n)). The
 * first error wins (a command refused at queue time, e.g. OOM, beats
 * EXECABORT). On success *exec is the EXEC array (n-2 elements) or NULL
 * when EXEC returned nil (a watched key changed).
 */
static int exec_result(rstore *s, conn *c, redisReply **r, size_t n,
		       const char *what, bool value_err_corrupt,
		       redisReply **exec, drl_error *err)
{
	redisReply *e = r[n - 1];
	*exec = NULL;
	if (!is_status(r[0], "OK")) {
		c->broken = true;
		return reply_error(s, "MULTI", r[0], false, err);
	}
	for (size_t i = 1; i + 1 < n; i++)
		if (!is_status(r[i], "QUEUED")) {
			if (r[i]->type != REDIS_REPLY_ERROR)
				c->broken = true;
			return reply_error(s, what, r[i], value_err_corrupt,
					   err);
		}
	if (e->type == REDIS_REPLY_NIL) {
		c->watching = false; /* EXEC always ends the WATCH */
		return 0;
	}
	if (e->type == REDIS_REPLY_ARRAY && e->elements == n - 2) {
		c->watching = false;
		*exec = e;
		return 0;
	}
	if (e->type != REDIS_REPLY_ERROR)
		c->broken = true;
	return reply_error(s, "EXEC", e, false, err);
}

/* ---- connections and the pool ------------------------------------------ */

void drl__redis_conn_free(conn *c)
{
	if (c == NULL)
		return;
	if (c->ctx)
		redisFree(c->ctx);
	free(c->wkey);
	free(c);
}

/* Connect, set the command timeout; AUTH, SELECT and PING pipelined in
 * one round trip (PING: a server that wants a password we lack, or is not
 * Redis, fails here rather than in the first call). All by the call's
 * deadline `dl`. */
int drl__redis_conn_open(rstore *s, conn **out, const struct timespec *dl,
			 drl_error *err)
{
	int64_t left = ms_until(dl);
	*out = NULL;
	if (left == 0)
		return drl_error_set(err, DRL_ETIMEDOUT,
				     "redis %s: connect: no time left within "
				     "timeout_ms=%" PRId64,
				     s->where, s->timeout_ms);
	struct timeval tv = {.tv_sec = (time_t)(left / 1000),
			     .tv_usec = (suseconds_t)(left % 1000) * 1000};
	redisContext *ctx =
		s->is_unix ? redisConnectUnixWithTimeout(s->host, tv)
			   : redisConnectWithTimeout(s->host, s->port, tv);
	int saved = errno;
	if (ctx == NULL)
		return drl_error_set(err, DRL_ENOMEM,
				     "redis %s: out of memory connecting",
				     s->where);
	conn *c = calloc(1, sizeof *c);
	if (c == NULL) {
		redisFree(ctx);
		return drl_error_set(err, DRL_ENOMEM,
				     "redis %s: out of memory connecting",
				     s->where);
	}
	c->ctx = ctx;
	c->deadline = *dl;
	if (ctx->reader != NULL)
		limit_reader(c);
	if (ctx->err) {
		int rc = ctx_error(s, c, "connect", saved, err);
		drl__redis_conn_free(c);
		return rc;
	}
	if (redisSetTimeout(ctx, s->timeout) != REDIS_OK) {
		int rc = ctx_error(s, c, "setting the timeout", errno, err);
		drl__redis_conn_free(c);
		return rc;
	}
	if (!s->is_unix)
		(void)redisEnableKeepAlive(ctx);

	redisReply *r[3];
	size_t n = 0;
	int rc = 0;
	if (s->password) {
		/* AUTH [user] password (a user: Redis 6 ACL). */
		const char *argv[3] = {"AUTH", s->user, s->password};
		size_t lens[3] = {4, s->user ? strlen(s->user) : 0,
				  strlen(s->password)};
		if (s->user == NULL) {
			argv[1] = s->password;
			lens[1] = lens[2];
		}
		rc = append(s, c, s->user ? 3 : 2, argv, lens, err);
		n++;
	}
	if (rc == 0 && s->db != 0) {
		char db[24];
		int dblen = snprintf(db, sizeof db, "%" PRId64, s->db);
		const char *argv[2] = {"SELECT", db};
		size_t lens[2] = {6, (size_t)dblen};
		rc = append(s, c, 2, argv, lens, err);
		n++;
	}
	if (rc == 0) {
		const char *argv[1] = {"PING"};
		size_t lens[1] = {4};
		rc = append(s, c, 1, argv, lens, err);
		n++;
	}
	if (rc == 0)
		rc = collect(s, c, n, r, "connection setup", err);
	if (rc) {
		drl__redis_conn_free(c);
		return rc;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		bool ping = i == n - 1;
		if (is_status(r[i], ping ? "PONG" : "OK"))
			continue;
		bool auth = s->password && i == 0;
		rc = auth ? auth_error(s, r[i], err)
			  : reply_error(s, ping ? "PING" : "SELECT", r[i],
					false, err);
	}
	drl__redis_free_replies(r, n);
	if (rc) {
		drl__redis_conn_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* Deadline `ms` from now on CLOCK_MONOTONIC. */
struct timespec drl__redis_deadline_in(int64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

/* Milliseconds on CLOCK_MONOTONIC_COARSE (a few ns; ms resolution). */
int64_t drl__redis_coarse_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether pooled connection c, idle for IDLE_CHECK_MS or more, was closed
 * by the server meanwhile (restart, timeout, CLIENT KILL): an idle
 * connection has nothing to read, so a readable socket means EOF (or
 * bytes nobody asked for) and c is of no use. Checked without sending
 * anything, so after a server restart the pool's stale connections are
 * replaced instead of failing one call each. Connections in steady use
 * are not checked: no system call on the hot path. */
#define IDLE_CHECK_MS 10
bool drl__redis_conn_stale(const conn *c)
{
	if (drl__redis_coarse_ms() - c->idle_since < IDLE_CHECK_MS)
		return false;
	struct pollfd p = {.fd = c->ctx->fd, .events = POLLIN};
	return poll(&p, 1, 0) != 0; /* readable, hung up, or poll failed */
}

/* A connection from the pool for a call that must be over by `dl`,
 * opening one when below `cap`, else waiting for one (DRL_ETIMEDOUT when
 * none frees up in time). The connection carries dl as its deadline. */
static int checkout(rstore *s, conn **out, const struct timespec *dl,
		    drl_error *err)
{
	pthread_mutex_lock(&s->mu);
	for (;;) {
		if (s->free) {
			conn *c = s->free;
			s->free = c->next;
			c->next = NULL;
			pthread_mutex_unlock(&s->mu);
			if (drl__redis_conn_stale(c)) {
				pthread_mutex_lock(&s->mu);
				s->nconn--;
				pthread_mutex_unlock(&s->mu);
				drl__redis_conn_free(c);
				pthread_mutex_lock(&s->mu);
				continue;
			}
			c->deadline = *dl;
			*out = c;
			return 0;
		}
		if (s->nconn < s->cap) {
			s->nconn++;
			pthread_mutex_unlock(&s->mu);
			int rc = drl__redis_conn_open(s, out, dl, err);
			if (rc) {
				pthread_mutex_lock(&s->mu);
				s->nconn--;
				pthread_cond_signal(&s->cv);
				pthread_mutex_unlock(&s->mu);
			}
			return rc;
		}
		if (pthread_cond_timedwait(&s->cv, &s->mu, dl) == ETIMEDOUT) {
			pthread_mutex_unlock(&s->mu);
			return drl_error_set(
				err, DRL_ETIMEDOUT,
				"redis %s: no free connection within %" PRId64
				" ms (pool=%zu)",
				s->where, s->timeout_ms, s->cap);
		}
	}
}

/* Give c back to the pool, or free it when broken or surplus. A call on
 * the shared connections frees only its buffer. */
static void release(rstore *s, conn *c)
{
	bool drop;
	if (c->shared) {
		free(c->qbuf);
		c->qbuf = NULL;
		c->qlen = c->qcap = 0;
		return;
	}
	pthread_mutex_lock(&s->mu);
	drop = c->broken || s->nconn > s->cap + s->nheld;
	if (drop) {
		s->nconn--;
	} else {
		c->idle_since = drl__redis_coarse_ms();
		c->next = s->free;
		s->free = c;
	}
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	if (drop)
		drl__redis_conn_free(c);
}

/* A connection for one call: the one this thread holds for s (its WATCH
 * is cleared by begin()), else one from the pool (after giving back what
 * this thread holds for another store). */
static int acquire(rstore *s, conn **out, drl_error *err)
{
	hold *h = pthread_getspecific(hold_key);
	if (h && h->c) {
		if (holds_for(h, s)) {
			*out = take_own(s, h);
			return 0;
		}
		drop_hold(h);
	}
	struct timespec dl = drl__redis_deadline_in(s->timeout_ms);
	return checkout(s, out, &dl, err);
}

/* After a successful load(): keep c, watching `key`, for this thread's
 * cas(). On failure c goes back to the pool and DRL_ENOMEM is returned. */
static int hold_conn(rstore *s, conn *c, drl_bytes key, uint64_t version,
		     drl_error *err)
{
	hold *h = thread_hold(true);
	if (h && c->wkeycap < key.len) {
		unsigned char *k = realloc(c->wkey, key.len);
		if (k) {
			c->wkey = k;
			c->wkeycap = key.len;
		} else {
			h = NULL;
		}
	}
	if (h == NULL) {
		release(s, c);
		return drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				     s->where);
	}
	if (key.len)
		memcpy(c->wkey, key.data, key.len);
	c->wkeylen = key.len;
	c->hold_version = version;
	pthread_mutex_lock(&s->mu);
	s->nconn--;
	s->nheld++;
	c->prev = NULL;
	c->next = s->held;
	if (s->held)
		s->held->prev = c;
	s->held = c;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	h->store = s;
	h->store_id = s->id;
	h->c = c;
	return 0;
}

/* A connection for a call that needs no connection state of its own:
 * `proxy` set up for the shared connections when the store has them, this
 * thread holds no connection of s (a held one is taken, as acquire()
 * does) and the call sends no ASKING; else acquire(). A connection this
 * thread holds for another store is given back, as acquire() does. */
static int acquire_shared(rstore *s, conn *proxy, conn **out, drl_error *err)
{
	hold *h = s->npipes ? pthread_getspecific(hold_key) : NULL;
	if (s->npipes == 0 || asking_calls || (h && holds_for(h, s)))
		return acquire(s, out, err);
	if (h && h->c)
		drop_hold(h); /* as acquire(): a hold ends at another store */
	memset(proxy, 0, sizeof *proxy);
	/* Its deadline is set by drl__redis_pipe_call(). */
	proxy->shared = true;
	*out = proxy;
	return 0;
}

/* ---- keys and arguments ------------------------------------------------- */

/* A store key: prefix + user key, on the stack when small. */
typedef struct keybuf {
	const char *p;
	size_t len;
	char *heap;
	size_t heapcap;
	char stack[KEY_STACK];
} keybuf;

static void key_init(keybuf *k)
{
	k->p = "";
	k->len = 0;
	k->heap = NULL;
	k->heapcap = 0;
}

static void key_done(keybuf *k)
{
	free(k->heap);
}

/* Point k at prefix + key (reusing k's memory). */
static int key_make(rstore *s, keybuf *k, drl_bytes key, drl_error *err)
{
	const char *data = key.len ? key.data : "";
	if (s->prefixlen == 0) {
		k->p = data;
		k->len = key.len;
		return 0;
	}
	if (key.len > SIZE_MAX - s->prefixlen)
		return drl_error_set(err, DRL_EINVAL, "redis: key too long");
	size_t need = s->prefixlen + key.len;
	char *dst = k->stack;
	if (need > sizeof k->stack) {
		if (k->heapcap < need) {
			char *n = realloc(k->heap, need);
			if (n == NULL)
				return drl_error_set(err, DRL_ENOMEM,
						     "redis %s: out of memory",
						     s->where);
			k->heap = n;
			k->heapcap = need;
		}
		dst = k->heap;
	}
	memcpy(dst, s->prefix, s->prefixlen);
	memcpy(dst + s->prefixlen, data, key.len);
	k->p = dst;
	k->len = need;
	return 0;
}

/* PX argument: ttl_us rounded up to whole milliseconds (>= 1). */
static int ttl_arg(rstore *s, int64_t ttl_us, char ms[24], size_t *len,
		   drl_error *err)
{
	if (ttl_us <= 0)
		return drl_error_set(err, DRL_EINVAL,
				     "redis %s: ttl %" PRId64
				     " us is not positive",
				     s->where, ttl_us);
	int64_t v = ttl_us / 1000 + (ttl_us % 1000 != 0);
	*len = (size_t)snprintf(ms, 24, "%" PRId64, v);
	return 0;
}

/* ---- counters ----------------------------------------------------------- */

/* MULTI; INCRBY k delta; PEXPIRE k ttl; EXEC — one round trip. */
static int r_incr(drl_backend *b, drl_bytes key, int64_t delta, int64_t ttl_us,
		  int64_t *value, drl_error *err)
{
	rstore *s = (rstore *)b;
	char ms[24], d[24];
	size_t mslen = 0, dlen;
	keybuf k;
	conn proxy, *c;
	int rc = ttl_arg(s, ttl_us, ms, &mslen, err);
	if (rc)
		return rc;
	dlen = (size_t)snprintf(d, sizeof d, "%" PRId64, delta);
	key_init(&k);
	rc = key_make(s, &k, key, err);
	if (rc == 0)
		rc = acquire_shared(s, &proxy, &c, err);
	if (rc) {
		key_done(&k);
		return rc;
	}

	const char *multi[1] = {"MULTI"}, *exec[1] = {"EXEC"};
	size_t multil[1] = {5}, execl[1] = {4};
	const char *incr[3] = {"INCRBY", k.p, d};
	size_t incrl[3] = {6, k.len, dlen};
	const char *pexp[3] = {"PEXPIRE", k.p, ms};
	size_t pexpl[3] = {7, k.len, mslen};
	redisReply *r[4];
	rc = begin(s, c, err);
	if (rc == 0)
		rc = append(s, c, 1, multi, multil, err);
	if (rc == 0)
		rc = append(s, c, 3, incr, incrl, err);
	if (rc == 0)
		rc = append(s, c, 3, pexp, pexpl, err);
	if (rc == 0)
		rc = append(s, c, 1, exec, execl, err);
	if (rc == 0)
		rc = collect(s, c, 4, r, "INCRBY", err);
	key_done(&k);
	if (rc) {
		release(s, c);
		return rc;
	}
	redisReply *e;
	rc = exec_result(s, c, r, 4, "INCRBY", true, &e, err);
	if (rc == 0 && e == NULL)
		rc = drl_error_set(err, DRL_ESTORE,
				   "redis %s: INCRBY: transaction aborted",
				   s->where);
	if (rc == 0) {
		redisReply *v = e->element[0], *x = e->element[1];
		if (v->type != REDIS_REPLY_INTEGER)
			rc = reply_error(s, "INCRBY", v, true, err);
		else if (x->type != REDIS_REPLY_INTEGER)
			rc = reply_error(s, "PEXPIRE", x, false, err);
		else
			*value = v->integer;
	}
	drl__redis_free_replies(r, 4);
	release(s, c);
	return rc;
}

/* Parse a counter reply into *v: nil 0, a decimal string, an integer. */
static int counter_value(rstore *s, const redisReply *r, int64_t *v,
			 drl_error *err)
{
	switch (r->type) {
	case REDIS_REPLY_NIL:
		*v = 0;
		return 0;
	case REDIS_REPLY_INTEGER:
		*v = r->integer;
		return 0;
	case REDIS_REPLY_STRING:
		if (r->str &&
		    drl_parse_int(r->str, r->len, INT64_MIN, INT64_MAX, v) == 0)
			return 0;
		return drl_error_set(err, DRL_ECORRUPT,
				     "redis %s: a counter holds a %zu-byte "
				     "value that is not an integer",
				     s->where, r->len);
	}
	return reply_error(s, "GET", r, false, err);
}

/*
 * n pipelined GETs, one round trip. Not MGET: MGET reads a key of another
 * type (a list, a hash) as nil, i.e. as a zero counter; GET reports it
 * (WRONGTYPE), so a damaged key can never look like an unused one.
 */
static int r_get_many(drl_backend *b, size_t n, const drl_bytes *keys,
		      int64_t *values, drl_error *err)
{
	rstore *s = (rstore *)b;
	redisReply *stack[GET_STACK];
	redisReply **r = stack;
	keybuf k;
	conn proxy, *c;
	int rc;
	if (n == 0)
		return 0;
	if (n > SIZE_MAX / sizeof *r)
		return drl_error_set(err, DRL_EINVAL, "redis: too many keys");
	if (n > GET_STACK) {
		r = malloc(n * sizeof *r);
		if (r == NULL)
			return drl_error_set(err, DRL_ENOMEM,
					     "redis %s: out of memory",
					     s->where);
	}
	rc = acquire_shared(s, &proxy, &c, err);
	if (rc) {
		if (r != stack)
			free(r);
		return rc;
	}
	key_init(&k);
	rc = begin(s, c, err);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		rc = key_make(s, &k, keys[i], err);
		if (rc == 0) {
			const char *argv[2] = {"GET", k.p};
			size_t lens[2] = {3, k.len};
			rc = append(s, c, 2, argv, lens, err);
		}
	}
	key_done(&k);
	if (rc) {
		/* Queued but unsent commands would desync the next call. */
		c->broken = true;
	} else {
		rc = collect(s, c, n, r, "GET", err);
		if (rc == 0) {
			for (size_t i = 0; i < n && rc == 0; i++)
				rc = counter_value(s, r[i], &values[i], err);
			drl__redis_free_replies(r, n);
		}
	}
	release(s, c);
	if (r != stack)
		free(r);
	return rc;
}

/* ---- optimistic state: WATCH/GET, MULTI/SET/EXEC ------------------------ */

/* A nonzero version token. */
static uint64_t new_version(rstore *s)
{
	uint64_t v;
	do
		v = atomic_fetch_add(&s->next_version, 1) + 1;
	while (v == 0);
	return v;
}

/*
 * WATCH k; GET k, one round trip, and keep the connection for this
 * thread's cas(). The version is a token for "what this thread watched":
 * the WATCH itself is the check.
 */
static int r_load(drl_backend *b, drl_bytes key, void *buf, size_t cap,
		  size_t *len, uint64_t *version, drl_error *err)
{
	rstore *s = (rstore *)b;
	keybuf k;
	conn *c;
	key_init(&k);
	int rc = key_make(s, &k, key, err);
	if (rc == 0)
		rc = acquire(s, &c, err);
	if (rc) {
		key_done(&k);
		return rc;
	}
	const char *watch[2] = {"WATCH", k.p}, *get[2] = {"GET", k.p};
	size_t watchl[2] = {5, k.len}, getl[2] = {3, k.len};
	redisReply *r[2];
	rc = begin(s, c, err);
	if (rc == 0)
		rc = append(s, c, 2, watch, watchl, err);
	if (rc == 0) {
		c->watching = true;
		rc = append(s, c, 2, get, getl, err);
	}
	if (rc == 0)
		rc = collect(s, c, 2, r, "WATCH/GET", err);
	key_done(&k);
	if (rc) {
		release(s, c);
		return rc;
	}

	uint64_t v = 0;
	bool keep = false;
	if (!is_status(r[0], "OK")) {
		if (r[0]->type != REDIS_REPLY_ERROR)
			c->broken = true;
		rc = reply_error(s, "WATCH", r[0], false, err);
	} else if (r[1]->type == REDIS_REPLY_NIL) {
		*len = 0;
		keep = true;
	} else if (r[1]->type == REDIS_REPLY_STRING) {
		if (r[1]->len > cap) {
			*len = r[1]->len;
			rc = drl_error_set(err, DRL_ERANGE,
					   "redis %s: state of %zu bytes does "
					   "not fit %zu",
					   s->where, r[1]->len, cap);
		} else {
			if (r[1]->len)
				memcpy(buf, r[1]->str, r[1]->len);
			*len = r[1]->len;
			v = new_version(s);
			keep = true;
		}
	} else {
		if (r[1]->type != REDIS_REPLY_ERROR)
			c->broken = true;
		rc = reply_error(s, "GET", r[1], false, err);
	}
	drl__redis_free_replies(r, 2);
	if (!keep) {
		release(s, c);
		return rc;
	}
	*version = v;
	return hold_conn(s, c, key, v, err);
}

/*
 * Store blob at key if it is unchanged since this thread's load() of it
 * (MULTI; SET k blob PX ttl; EXEC on the watching connection; nil EXEC:
 * DRL_ECONFLICT). Without that load: version 0 is SET NX, anything else
 * DRL_ECONFLICT.
 */
static int r_cas(drl_backend *b, drl_bytes key, const void *blob, size_t len,
		 uint64_t version, int64_t ttl_us, drl_error *err)
{
	rstore *s = (rstore *)b;
	char ms[24];
	size_t mslen = 0;
	conn *c = NULL;
	keybuf k;
	int rc = ttl_arg(s, ttl_us, ms, &mslen, err);
	if (rc)
		return rc;
	hold *h = pthread_getspecific(hold_key);
	bool checked = false; /* c watches key since the matching load */
	if (h && h->c) {
		conn *hc = h->c;
		if (holds_for(h, s) && hc->hold_version == version &&
		    hc->wkeylen == key.len &&
		    (key.len == 0 ||
		     memcmp(hc->wkey, key.data, key.len) == 0)) {
			c = take_own(s, h);
			checked = true;
		} else if (holds_for(h, s)) {
			release(s, take_own(s, h)); /* UNWATCH comes lazily */
		} else {
			drop_hold(h);
		}
	}
	if (c == NULL && version != 0)
		return drl_error_set(err, DRL_ECONFLICT,
				     "redis %s: cas without a matching load "
				     "on this thread",
				     s->where);
	key_init(&k);
	rc = key_make(s, &k, key, err);
	if (rc == 0 && c == NULL)
		rc = acquire(s, &c, err);
	if (rc) {
		if (c)
			release(s, c);
		key_done(&k);
		return rc;
	}

	const char *data = len ? blob : "";
	const char *set[6] = {"SET", k.p, data, "PX", ms, "NX"};
	size_t setl[6] = {3, k.len, len, 2, mslen, 2};
	redisReply *r[3];
	if (checked) {
		/* The held connection: its WATCH is the check. */
		const char *multi[1] = {"MULTI"}, *exec[1] = {"EXEC"};
		size_t multil[1] = {5}, execl[1] = {4};
		call_start(c);
		rc = append(s, c, 1, multi, multil, err);
		if (rc == 0)
			rc = append(s, c, 5, set, setl, err);
		if (rc == 0)
			rc = append(s, c, 1, exec, execl, err);
		if (rc == 0)
			rc = collect(s, c, 3, r, "SET", err);
		key_done(&k);
		if (rc) {
			release(s, c);
			return rc;
		}
		redisReply *e;
		rc = exec_result(s, c, r, 3, "SET", false, &e, err);
		if (rc == 0 && e == NULL)
			rc = drl_error_set(err, DRL_ECONFLICT,
					   "redis %s: the state changed "
					   "since it was loaded",
					   s->where);
		else if (rc == 0 && !is_status(e->element[0], "OK"))
			rc = reply_error(s, "SET", e->element[0], false, err);
		drl__redis_free_replies(r, 3);
		release(s, c);
		return rc;
	}

	/* No load to check against, version 0: only if absent. */
	rc = begin(s, c, err);
	if (rc == 0)
		rc = append(s, c, 6, set, setl, err);
	if (rc == 0)
		rc = collect(s, c, 1, r, "SET NX", err);
	key_done(&k);
	if (rc) {
		release(s, c);
		return rc;
	}
	if (r[0]->type == REDIS_REPLY_NIL)
		rc = drl_error_set(err, DRL_ECONFLICT,
				   "redis %s: the state appeared since it was "
				   "loaded",
				   s->where);
	else if (!is_status(r[0], "OK"))
		rc = reply_error(s, "SET", r[0], false, err);
	drl__redis_free_replies(r, 1);
	release(s, c);
	return rc;
}

/* ---- scripts (tx=lua) --------------------------------------------------- */

/* The lowercase hex SHA1 of script's source, cached per (script, source)
 * pointer: a drl_script and its source must stay unchanged while the
 * store is open. */
static int script_sha1(rstore *s, const drl_script *sc, char hex[41],
		       drl_error *err)
{
	pthread_mutex_lock(&s->script_mu);
	for (size_t i = 0; i < SCRIPT_CACHE; i++) {
		if (s->scripts[i].script == sc &&
		    s->scripts[i].source == sc->source) {
			memcpy(hex, s->scripts[i].hex, 41);
			pthread_mutex_unlock(&s->script_mu);
			return 0;
		}
	}
	pthread_mutex_unlock(&s->script_mu);

	static const char digits[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (!EVP_Digest(sc->source, strlen(sc->source), md, &mdlen, EVP_sha1(),
			NULL) ||
	    mdlen != 20)
		return drl_error_set(err, DRL_EINTERNAL,
				     "redis: SHA1 of script %s failed",
				     sc->name ? sc->name : "?");
	for (unsigned i = 0; i < 20; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[40] = '\0';

	pthread_mutex_lock(&s->script_mu);
	script_sha *e = &s->scripts[s->script_next++ % SCRIPT_CACHE];
	e->script = sc;
	e->source = sc->source;
	memcpy(e->hex, hex, 41);
	pthread_mutex_unlock(&s->script_mu);
	return 0;
}

/* A script's reply into out[]: an array of integers, one integer, or nil
 * (no values). */
static int script_result(rstore *s, const drl_script *sc, const redisReply *r,
			 int64_t *out, size_t nout, size_t *nret,
			 drl_error *err)
{
	const char *name = sc->name ? sc->name : "?";
	switch (r->type) {
	case REDIS_REPLY_NIL:
		*nret = 0;
		return 0;
	case REDIS_REPLY_INTEGER:
		if (nout < 1)
			break;
		out[0] = r->integer;
		*nret = 1;
		return 0;
	case REDIS_REPLY_ARRAY:
		if (r->elements > nout)
			break;
		for (size_t i = 0; i < r->elements; i++) {
			if (r->element[i]->type != REDIS_REPLY_INTEGER)
				return drl_error_set(
					err, DRL_EINTERNAL,
					"redis %s: script %s: result %zu is a "
					"%s, not an integer",
					s->where, name, i,
					reply_type_name(r->element[i]->type));
			out[i] = r->element[i]->integer;
		}
		*nret = r->elements;
		return 0;
	case REDIS_REPLY_ERROR: {
		int redirect = cluster_reply(s, r, err);
		if (redirect)
			return redirect;
		/* A twin that finds malformed state answers "ECORRUPT ...". */
		int n = (int)(r->len < MSG_ERR_MAX ? r->len : MSG_ERR_MAX);
		bool corrupt = r->str && strncmp(r->str, "ECORRUPT ", 9) == 0;
		return drl_error_set(err, corrupt ? DRL_ECORRUPT : DRL_ESTORE,
				     "redis %s: script %s: %.*s", s->where,
				     name, n, r->str ? r->str : "");
	}
	default:
		return drl_error_set(err, DRL_EINTERNAL,
				     "redis %s: script %s returned a %s, not "
				     "integers",
				     s->where, name, reply_type_name(r->type));
	}
	return drl_error_set(err, DRL_ERANGE,
			     "redis %s: script %s returned %zu values; room "
			     "for %zu",
			     s->where, name,
			     r->type == REDIS_REPLY_ARRAY ? r->elements : 1,
			     nout);
}

/* 1 when r is a NOSCRIPT error (script cache flushed, failover). */
static bool is_noscript(const redisReply *r)
{
	return r->type == REDIS_REPLY_ERROR && r->str &&
	       strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/* Check a script call's shape; its SHA1 into hex. */
static int script_prepare(rstore *s, const drl_script *script, size_t nkeys,
			  size_t nargs, char hex[41], drl_error *err)
{
	if (script == NULL || script->source == NULL)
		return drl_error_set(err, DRL_EINVAL, "redis: no script");
	if (nkeys > ARGS_MAX || nargs > ARGS_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "redis: script %s: too many keys or "
				     "arguments",
				     script->name ? script->name : "?");
	return script_sha1(s, script, hex, err);
}

/*
 * Queue EVALSHA hex nkeys keys... args... on c (or, with `source`, EVAL
 * source ...): keys with the store's prefix, integers as decimal strings,
 * the argument vector on the stack when small (hiredis copies it at
 * once). On failure c is broken: what was queued before must never reach
 * the server out of step.
 */
static int append_script_call(rstore *s, conn *c, const char hex[41],
			      const char *source, size_t nkeys,
			      const drl_bytes *keys, size_t nargs,
			      const int64_t *args, drl_error *err)
{
	size_t argc = 3 + nkeys + nargs;
	size_t mem = 24 + nargs * 24;
	if (s->prefixlen)
		for (size_t i = 0; i < nkeys; i++)
			mem += s->prefixlen + keys[i].len;
	const char *sargv[ARGV_STACK];
	size_t slens[ARGV_STACK];
	char smem[MEM_STACK];
	const char **argv = sargv;
	size_t *lens = slens;
	char *m = smem, *p;
	int rc;
	if (argc > ARGV_STACK) {
		argv = malloc(argc * sizeof *argv);
		lens = malloc(argc * sizeof *lens);
	}
	if (mem > sizeof smem)
		m = malloc(mem);
	if (argv == NULL || lens == NULL || m == NULL) {
		c->broken = true;
		rc = drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				   s->where);
		goto out;
	}
	p = m;
	argv[0] = source ? "EVAL" : "EVALSHA";
	lens[0] = strlen(argv[0]);
	argv[1] = source ? source : hex;
	lens[1] = source ? strlen(source) : 40;
	argv[2] = p;
	lens[2] = (size_t)snprintf(p, 24, "%zu", nkeys);
	p += lens[2];
	for (size_t i = 0; i < nkeys; i++) {
		const char *kd = keys[i].len ? keys[i].data : "";
		if (s->prefixlen) {
			memcpy(p, s->prefix, s->prefixlen);
			memcpy(p + s->prefixlen, kd, keys[i].len);
			argv[3 + i] = p;
			lens[3 + i] = s->prefixlen + keys[i].len;
			p += lens[3 + i];
		} else {
			argv[3 + i] = kd;
			lens[3 + i] = keys[i].len;
		}
	}
	for (size_t i = 0; i < nargs; i++) {
		argv[3 + nkeys + i] = p;
		lens[3 + nkeys + i] =
			(size_t)snprintf(p, 24, "%" PRId64, args[i]);
		p += lens[3 + nkeys + i];
	}
	rc = append(s, c, (int)argc, argv, lens, err);
out:
	if (argv != sargv)
		free((void *)argv);
	if (lens != slens)
		free(lens);
	if (m != smem)
		free(m);
	return rc;
}

/* Queue SCRIPT LOAD source. */
static int append_script_load(rstore *s, conn *c, const drl_script *script,
			      drl_error *err)
{
	const char *argv[3] = {"SCRIPT", "LOAD", script->source};
	size_t lens[3] = {6, 4, strlen(script->source)};
	return append(s, c, 3, argv, lens, err);
}

/* SCRIPT LOAD's reply r: the SHA1 we send with EVALSHA, or an error. */
static int script_loaded(rstore *s, const drl_script *script,
			 const char hex[41], const redisReply *r,
			 drl_error *err)
{
	if (r->type != REDIS_REPLY_STRING)
		return reply_error(s, "SCRIPT LOAD", r, false, err);
	if (r->len != 40 || strncasecmp(r->str, hex, 40) != 0)
		return drl_error_set(err, DRL_EINTERNAL,
				     "redis %s: SCRIPT LOAD of %s gave "
				     "another SHA1",
				     s->where,
				     script->name ? script->name : "?");
	return 0;
}

/*
 * EVALSHA sha nkeys keys... args... (integers as decimal strings). On
 * NOSCRIPT: SCRIPT LOAD and EVALSHA again, pipelined, once.
 */
static int r_eval(drl_backend *b, const drl_script *script, size_t nkeys,
		  const drl_bytes *keys, size_t nargs, const int64_t *args,
		  int64_t *out, size_t nout, size_t *nret, drl_error *err)
{
	rstore *s = (rstore *)b;
	char hex[41];
	conn proxy, *c;
	redisReply *r[2] = {NULL, NULL};
	int rc = script_prepare(s, script, nkeys, nargs, hex, err);
	if (rc == 0)
		rc = acquire_shared(s, &proxy, &c, err);
	if (rc)
		return rc;
	rc = begin(s, c, err);
	if (rc == 0)
		rc = append_script_call(s, c, hex, NULL, nkeys, keys, nargs,
					args, err);
	if (rc == 0)
		rc = collect(s, c, 1, r, "EVALSHA", err);
	if (rc == 0 && is_noscript(r[0])) {
		freeReplyObject(r[0]);
		r[0] = NULL;
		rc = append_script_load(s, c, script, err);
		if (rc == 0)
			rc = append_script_call(s, c, hex, NULL, nkeys, keys,
						nargs, args, err);
		if (rc == 0)
			rc = collect(s, c, 2, r, "SCRIPT LOAD/EVALSHA", err);
		if (rc != 0)
			r[0] = r[1] = NULL; /* collect() freed what it read */
		if (rc == 0) {
			rc = script_loaded(s, script, hex, r[0], err);
			freeReplyObject(r[0]);
			r[0] = r[1];
			r[1] = NULL;
		}
		/* A SCRIPT FLUSH between the two: EVAL with the source
		 * cannot meet NOSCRIPT (the script did not run: once). */
		if (rc == 0 && is_noscript(r[0])) {
			freeReplyObject(r[0]);
			r[0] = NULL;
			rc = append_script_call(s, c, hex, script->source,
						nkeys, keys, nargs, args, err);
			if (rc == 0)
				rc = collect(s, c, 1, r, "EVAL", err);
			if (rc != 0)
				r[0] = NULL;
		}
	}
	if (rc == 0)
		rc = script_result(s, script, r[0], out, nout, nret, err);
	if (r[0])
		freeReplyObject(r[0]);
	release(s, c);
	return rc;
}

/*
 * A script call started by r_eval_start(): EVALSHA formatted at start,
 * sent on the shared connections with other calls, and finished by
 * whichever thread leads its pipe (eval_complete). The keys and arguments
 * are copied (the caller's need not outlive the start) for the one case
 * that formats again: a NOSCRIPT, answered by EVAL with the source (one
 * round trip that cannot meet NOSCRIPT, and Redis keeps the script for
 * the EVALSHAs after it). Owned by the pipes from the start until
 * eval_complete frees it; one allocation.
 */
typedef struct eval_call {
	rreq q; /* first: the pipe hands back &q */
	redisReply *r[1];
	const drl_script *script;
	char *cmd; /* the formatted command in flight */
	bool by_source;
	drl_eval_done_fn done;
	void *arg;
	size_t nkeys, nargs, nout;
	drl_bytes *keys; /* copies, in the allocation */
	int64_t *args;
	int64_t *out;
} eval_call;

static void eval_call_free(eval_call *e)
{
	if (e->r[0])
		freeReplyObject(e->r[0]);
	free(e->cmd);
	free(e);
}

/* Format e's script call (EVALSHA hex, or EVAL with the source) into
 * e->cmd and point e->q at it. */
static int eval_format(rstore *s, eval_call *e, const char hex[41],
		       drl_error *err)
{
	conn pc = {.shared = true};
	int rc = begin(s, &pc, err);
	if (rc == 0)
		rc = append_script_call(
			s, &pc, hex, e->by_source ? e->script->source : NULL,
			e->nkeys, e->keys, e->nargs, e->args, err);
	if (rc) {
		free(pc.qbuf);
		return rc;
	}
	free(e->cmd);
	e->cmd = pc.qbuf;
	e->q.buf = e->cmd;
	e->q.len = pc.qlen;
	e->q.n = 1;
	e->q.r = e->r;
	e->q.what = e->by_source ? "EVAL" : "EVALSHA";
	return 0;
}

/* A started script call's reply is in (or it failed): hand its outcome
 * to its owner, as r_eval would have returned it. */
static void eval_complete(rstore *s, rreq *q)
{
	eval_call *e = (eval_call *)q;
	drl_error err = q->err;
	int rc = q->rc;
	size_t nret = 0;
	if (rc) /* the pipe freed what it had read */
		e->r[0] = NULL;
	if (rc == 0 && !e->by_source && is_noscript(e->r[0])) {
		freeReplyObject(e->r[0]);
		e->r[0] = NULL;
		e->by_source = true;
		q->rc = 0;
		rc = eval_format(s, e, NULL, &err);
		if (rc == 0)
			rc = drl__redis_pipe_start(s, q, &err);
		if (rc == 0)
			return; /* back here when its reply is in */
	}
	if (rc == 0)
		rc = script_result(s, e->script, e->r[0], e->out, e->nout,
				   &nret, &err);
	e->done(e->arg, rc, e->out, nret, rc ? &err : NULL);
	eval_call_free(e);
}

/* An eval_call with room for copies of keys and args and nout results. */
static eval_call *eval_call_new(size_t nkeys, const drl_bytes *keys,
				size_t nargs, const int64_t *args, size_t nout)
{
	size_t keybytes = 0;
	for (size_t i = 0; i < nkeys; i++)
		keybytes += keys[i].len;
	eval_call *e =
		calloc(1, sizeof *e + nkeys * sizeof *keys +
				  (nargs + nout) * sizeof *args + keybytes);
	if (e == NULL)
		return NULL;
	e->keys = (drl_bytes *)(e + 1);
	e->args = (int64_t *)(e->keys + nkeys);
	e->out = e->args + nargs;
	char *kd = (char *)(e->out + nout);
	for (size_t i = 0; i < nkeys; i++) {
		if (keys[i].len)
			memcpy(kd, keys[i].data, keys[i].len);
		e->keys[i] = (drl_bytes){kd, keys[i].len};
		kd += keys[i].len;
	}
	if (nargs)
		memcpy(e->args, args, nargs * sizeof *args);
	e->nkeys = nkeys;
	e->nargs = nargs;
	e->nout = nout;
	return e;
}

/*
 * r_eval() without waiting: EVALSHA formatted now and queued on a pipe;
 * eval_complete() hands the outcome to done(arg, ...) on the thread that
 * leads the pipe (the pipe's I/O thread, or a blocking caller's).
 */
static int r_eval_start(drl_backend *b, const drl_script *script, size_t nkeys,
			const drl_bytes *keys, size_t nargs,
			const int64_t *args, size_t nout, drl_eval_done_fn done,
			void *arg, drl_error *err)
{
	rstore *s = (rstore *)b;
	char hex[41];
	if (done == NULL || nout > ARGS_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "redis: eval_start: no callback, or "
				     "%zu results",
				     nout);
	int rc = script_prepare(s, script, nkeys, nargs, hex, err);
	if (rc)
		return rc;
	eval_call *e = eval_call_new(nkeys, keys, nargs, args, nout);
	if (e == NULL)
		return drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				     s->where);
	e->script = script;
	e->done = done;
	e->arg = arg;
	e->q.complete = eval_complete;
	e->q.deadline = drl__redis_deadline_in(s->timeout_ms);
	rc = eval_format(s, e, hex, err);
	if (rc == 0)
		rc = drl__redis_pipe_start(s, &e->q, err);
	if (rc)
		eval_call_free(e);
	return rc;
}

/* ---- single commands: DEL (drl_reset), TIME (clock=server) -------------- */

/* One command on a connection of s (a shared one when s has them, set up
 * in *proxy), one round trip: on success *r is its reply and *c the
 * connection, both for the caller to give back (drl__redis_free_replies, release). */
static int one_command(rstore *s, int argc, const char **argv,
		       const size_t *lens, conn *proxy, conn **c,
		       redisReply **r, drl_error *err)
{
	int rc = acquire_shared(s, proxy, c, err);
	if (rc)
		return rc;
	rc = begin(s, *c, err);
	if (rc == 0)
		rc = append(s, *c, argc, argv, lens, err);
	if (rc == 0)
		rc = collect(s, *c, 1, r, argv[0], err);
	if (rc)
		release(s, *c);
	return rc;
}

/* One DEL of every key: atomic on the server (a script or a transaction
 * sees all of them or none gone). On a cluster node the keys must share a
 * slot (backends/redis_cluster.c groups them). */
static int r_del(drl_backend *b, size_t n, const drl_bytes *keys,
		 drl_error *err)
{
	rstore *s = (rstore *)b;
	if (n == 0)
		return 0;
	if (keys == NULL || n > ARGS_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "redis %s: DEL of %zu keys", s->where, n);
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += s->prefixlen + keys[i].len;
	const char **argv = malloc((n + 1) * sizeof *argv);
	size_t *lens = malloc((n + 1) * sizeof *lens);
	char *buf = malloc(total ? total : 1);
	conn proxy, *c = NULL;
	int rc = 0;
	if (argv == NULL || lens == NULL || buf == NULL)
		rc = drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				   s->where);
	if (rc == 0) {
		char *p = buf;
		argv[0] = "DEL";
		lens[0] = 3;
		for (size_t i = 0; i < n; i++) {
			if (s->prefixlen)
				memcpy(p, s->prefix, s->prefixlen);
			if (keys[i].len)
				memcpy(p + s->prefixlen, keys[i].data,
				       keys[i].len);
			argv[i + 1] = p;
			lens[i + 1] = s->prefixlen + keys[i].len;
			p += lens[i + 1];
		}
		redisReply *r;
		rc = one_command(s, (int)(n + 1), argv, lens, &proxy, &c, &r,
				 err);
		if (rc == 0) {
			if (r->type != REDIS_REPLY_INTEGER)
				rc = reply_error(s, "DEL", r, false, err);
			freeReplyObject(r);
			release(s, c);
		}
	}
	free(argv);
	free(lens);
	free(buf);
	return rc;
}

/* Redis TIME, in microseconds since the epoch. */
static int r_now(drl_backend *b, int64_t *now_us, drl_error *err)
{
	rstore *s = (rstore *)b;
	const char *argv[1] = {"TIME"};
	size_t lens[1] = {4};
	redisReply *r[1];
	conn proxy, *c;
	int rc = one_command(s, 1, argv, lens, &proxy, &c, r, err);
	if (rc)
		return rc;
	int64_t sec, usec;
	const redisReply *t = r[0];
	if (t->type == REDIS_REPLY_ARRAY && t->elements == 2 &&
	    t->element[0]->type == REDIS_REPLY_STRING &&
	    t->element[1]->type == REDIS_REPLY_STRING &&
	    drl_parse_int(t->element[0]->str, t->element[0]->len, 0,
			  INT64_C(9000000000), &sec) == 0 &&
	    drl_parse_int(t->element[1]->str, t->element[1]->len, 0, 999999,
			  &usec) == 0)
		*now_us = sec * 1000000 + usec;
	else if (t->type == REDIS_REPLY_ERROR)
		rc = reply_error(s, "TIME", t, false, err);
	else
		rc = drl_error_set(err, DRL_ECORRUPT,
				   "redis %s: TIME: malformed reply", s->where);
	drl__redis_free_replies(r, 1);
	release(s, c);
	return rc;
}

/* ---- open, destroy ------------------------------------------------------ */

/* Zero and free a secret. */
static void free_secret(char *p)
{
	if (p == NULL)
		return;
	volatile char *v = p;
	while (*v)
		*v++ = '\0';
	free(p);
}

/* Free everything; safe on a half-opened store (registered or not). */
static void r_destroy(drl_backend *b)
{
	rstore *s = (rstore *)b;
	if (s == NULL)
		return;
	pthread_mutex_lock(&reg_mu);
	for (rstore **pp = &reg_head; *pp; pp = &(*pp)->reg_next) {
		if (*pp == s) {
			*pp = s->reg_next;
			break;
		}
	}
	pthread_mutex_unlock(&reg_mu);
	/* No hold can reach s now: free what they held too. */
	hold *h = hold_key_ok ? pthread_getspecific(hold_key) : NULL;
	if (holds_for(h, s))
		h->c = NULL;
	while (s->free) {
		conn *c = s->free;
		s->free = c->next;
		drl__redis_conn_free(c);
	}
	while (s->held) {
		conn *c = s->held;
		s->held = c->next;
		drl__redis_conn_free(c);
	}
	drl__redis_pipes_free(s);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->script_mu);
	free(s->host);
	free(s->user);
	free_secret(s->password);
	free(s->prefix);
	free(s);
}

/* Copy of s[0..n) as a C string, or NULL. */
static char *dup_n(const char *p, size_t n)
{
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, p, n);
		d[n] = '\0';
	}
	return d;
}

/* Parse "host", "host:port", "[v6]" or "[v6]:port" into s->host, s->port. */
static int parse_hosts(rstore *s, const char *hosts, drl_error *err)
{
	if (hosts == NULL || hosts[0] == '\0')
		return drl_error_set(err, DRL_EINVAL,
				     "redis URI has no host (expected "
				     "redis://host[:port][/db])");
	if (strchr(hosts, ','))
		return drl_error_set(err, DRL_EINVAL,
				     "redis URI names several hosts "
				     "(\"%.64s\"); a redis store takes one",
				     hosts);
	drl_hostport hp;
	int rc = drl_hostport_parse(hosts, strlen(hosts), DEFAULT_PORT,
				    "redis URI", &hp, err);
	if (rc)
		return rc;
	s->host = dup_n(hp.host, strlen(hp.host));
	if (s->host == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	s->port = hp.port;
	snprintf(s->where, sizeof s->where, "%s%.96s%s:%d", hp.ipv6 ? "[" : "",
		 s->host, hp.ipv6 ? "]" : "", s->port);
	return 0;
}

/* Everything the URI says, checked before any connection is made. */
static int parse_uri(rstore *s, drl_uri *u, drl_error *err)
{
	int64_t v;
	int rc;
	s->is_unix = strcmp(drl_uri_scheme(u), "redis+unix") == 0;
	s->cluster = strcmp(drl_uri_scheme(u), "redis-cluster") == 0;
	if (!s->is_unix && !s->cluster &&
	    strcmp(drl_uri_scheme(u), "redis") != 0)
		return drl_error_set(err, DRL_EINVAL,
				     "scheme \"%.32s\" is not redis, "
				     "redis+unix or redis-cluster",
				     drl_uri_scheme(u));

	const char *tx = drl_uri_option(u, "tx");
	if (tx == NULL || strcmp(tx, "lua") == 0)
		s->watch_tx = false;
	else if (strcmp(tx, "watch") == 0)
		s->watch_tx = true;
	else
		return drl_error_set(err, DRL_EINVAL,
				     "URI option tx=\"%.32s\": expected lua or "
				     "watch",
				     tx);

	const char *clock = drl_uri_option(u, "clock");
	bool server_clock = false;
	if (clock == NULL || strcmp(clock, "client") == 0)
		server_clock = false;
	else if (strcmp(clock, "server") == 0)
		server_clock = true;
	else
		return drl_error_set(err, DRL_EINVAL,
				     "URI option clock=\"%.32s\": expected "
				     "client or server",
				     clock);

	rc = drl_uri_option_int(u, "timeout_ms", 1, TIMEOUT_MS_MAX,
				DEFAULT_TIMEOUT_MS, &s->timeout_ms, err);
	if (rc)
		return rc;
	s->timeout.tv_sec = (time_t)(s->timeout_ms / 1000);
	s->timeout.tv_usec = (suseconds_t)(s->timeout_ms % 1000) * 1000;

	rc = drl_uri_option_int(u, "pool", 1, POOL_MAX, DEFAULT_POOL, &v, err);
	if (rc == 0)
		rc = drl_uri_option_lazy(u, &s->lazy, err);
	if (rc)
		return rc;
	s->cap = (size_t)v;
	rc = drl_uri_option_int(u, "pipelines", 0, PIPELINES_MAX,
				DEFAULT_PIPELINES, &v, err);
	if (rc)
		return rc;
	s->npipes = (size_t)v;

	const char *prefix = drl_uri_option(u, "prefix");
	if (prefix) {
		s->prefixlen = strlen(prefix);
		if (s->prefixlen > PREFIX_MAX)
			return drl_error_set(err, DRL_EINVAL,
					     "URI option prefix is %zu bytes; "
					     "at most %d",
					     s->prefixlen, PREFIX_MAX);
		s->prefix = dup_n(prefix, s->prefixlen);
		if (s->prefix == NULL)
			return drl_error_set(err, DRL_ENOMEM, "out of memory");
		/* A cluster routes by the key's {hash tag}: a brace in
		 * the prefix would make the prefix the tag. */
		if (s->cluster && strpbrk(s->prefix, "{}"))
			return drl_error_set(err, DRL_EINVAL,
					     "URI option prefix holds '{' or "
					     "'}' (a Redis Cluster routes by "
					     "the key's hash tag)");
	}

	bool db_option = drl_uri_option(u, "db") != NULL;
	rc = drl_uri_option_int(u, "db", 0, DB_MAX, 0, &s->db, err);
	if (rc)
		return rc;

	rc = drl_uri_check_all_used(u, err);
	if (rc)
		return rc;

	if (s->cluster) {
		/* The hosts are the cluster store's (seed nodes). */
		if (s->db != 0 ||
		    (drl_uri_path(u) && drl_uri_path(u)[0] != '\0'))
			return drl_error_set(err, DRL_EINVAL,
					     "redis-cluster URI names a "
					     "database; a Redis Cluster has "
					     "only database 0");
		snprintf(s->where, sizeof s->where, "cluster");
	} else if (s->is_unix) {
		if (drl_uri_hosts(u))
			return drl_error_set(err, DRL_EINVAL,
					     "redis+unix URI takes no host "
					     "(expected redis+unix:///path/to/"
					     "redis.sock)");
		if (drl_uri_path(u) == NULL || drl_uri_path(u)[0] != '/' ||
		    drl_uri_path(u)[1] == '\0')
			return drl_error_set(err, DRL_EINVAL,
					     "redis+unix URI needs an absolute "
					     "socket path (redis+unix:///path/"
					     "to/redis.sock)");
		s->host = dup_n(drl_uri_path(u), strlen(drl_uri_path(u)));
		if (s->host == NULL)
			return drl_error_set(err, DRL_ENOMEM, "out of memory");
		snprintf(s->where, sizeof s->where, "%.120s", s->host);
	} else {
		rc = parse_hosts(s, drl_uri_hosts(u), err);
		if (rc)
			return rc;
		if (drl_uri_path(u) && drl_uri_path(u)[0] != '\0') {
			if (db_option)
				return drl_error_set(err, DRL_EINVAL,
						     "redis URI names the "
						     "database twice (path "
						     "and db=)");
			if (drl_parse_int(drl_uri_path(u),
					  strlen(drl_uri_path(u)), 0, DB_MAX,
					  &s->db) != 0)
				return drl_error_set(
					err, DRL_EINVAL,
					"redis URI database \"%.32s\": "
					"expected an integer in [0, %d]",
					drl_uri_path(u), DB_MAX);
		}
	}

	if (drl_uri_user(u) && drl_uri_password(u) == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "redis URI names a user but no password "
				     "(redis://user:password@host)");
	if (drl_uri_password(u)) {
		s->password =
			dup_n(drl_uri_password(u), strlen(drl_uri_password(u)));
		if (drl_uri_user(u))
			s->user =
				dup_n(drl_uri_user(u), strlen(drl_uri_user(u)));
		if (s->password == NULL || (drl_uri_user(u) && s->user == NULL))
			return drl_error_set(err, DRL_ENOMEM, "out of memory");
	}

	s->parent.version = 5; /* the vtable version this file fills */
	s->parent.caps = DRL_CAP_COUNTER | DRL_CAP_CAS;
	s->parent.name = s->cluster ? "redis-cluster" : "redis";
	s->parent.destroy = r_destroy;
	s->parent.incr = r_incr;
	s->parent.get_many = r_get_many;
	s->parent.load = r_load;
	s->parent.cas = r_cas;
	s->parent.update = NULL; /* no in-process atomic step */
	s->parent.del = r_del;
	if (!s->watch_tx) {
		s->parent.caps |= DRL_CAP_SCRIPT | DRL_CAP_BATCH;
		s->parent.eval = r_eval;
	}
	/* A started script needs a shared connection to travel on; a
	 * Cluster node's calls may need ASKING, which the pipes never send. */
	if (!s->watch_tx && !s->cluster && s->npipes > 0) {
		s->parent.caps |= DRL_CAP_EVAL_START;
		s->parent.eval_start = r_eval_start;
	}
	if (server_clock) {
		s->parent.caps |= DRL_CAP_CLOCK;
		s->parent.now = r_now;
	}
	return 0;
}

/* Mutexes and the condition variable (on CLOCK_MONOTONIC). */
static int init_sync(rstore *s)
{
	pthread_condattr_t ca;
	if (pthread_condattr_init(&ca) != 0)
		return -1;
	int rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (rc == 0)
		rc = pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (rc != 0)
		return -1;
	if (pthread_mutex_init(&s->mu, NULL) != 0) {
		pthread_cond_destroy(&s->cv);
		return -1;
	}
	if (pthread_mutex_init(&s->script_mu, NULL) != 0) {
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->cv);
		return -1;
	}
	return 0;
}

/* Enter s in the registry of live stores (holds find it by its id). */
static void register_store(rstore *s)
{
	atomic_init(&s->next_version, 0);
	pthread_mutex_lock(&reg_mu);
	s->id = ++reg_last_id;
	s->reg_next = reg_head;
	reg_head = s;
	pthread_mutex_unlock(&reg_mu);
}

/* Free the strings of a store that never made it to the registry. */
static void free_unregistered(rstore *s)
{
	drl__redis_pipes_free(s);
	free(s->host);
	free(s->user);
	free_secret(s->password);
	free(s->prefix);
	free(s);
}

int drl__redis_open(drl_backend **out, drl_uri *uri, drl_error *err)
{
	if (out == NULL || uri == NULL || drl_uri_scheme(uri) == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl__redis_open: NULL argument");
	*out = NULL;
	pthread_once(&key_once, make_hold_key);
	if (!hold_key_ok)
		return drl_error_set(err, DRL_ENOMEM,
				     "redis: no thread-specific key left");
	rstore *s = calloc(1, sizeof *s);
	if (s == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	int rc = parse_uri(s, uri, err);
	if (rc == 0 && init_sync(s) != 0)
		rc = drl_error_set(err, DRL_ENOMEM,
				   "redis: cannot make a mutex");
	else if (rc == 0 && drl__redis_pipes_init(s) != 0)
		rc = drl_error_set(err, DRL_ENOMEM,
				   "redis: out of memory for pipelines");
	if (rc == 0 && s->cluster)
		rc = drl_error_set(err, DRL_EINVAL,
				   "drl__redis_open: a redis-cluster URI");
	if (rc) {
		free_unregistered(s);
		return rc;
	}
	register_store(s);

	/* Connect now, so a wrong address or password fails at open
	 * (unless connect=lazy). */
	if (s->lazy) {
		*out = &s->parent;
		return 0;
	}
	conn *c;
	struct timespec dl = drl__redis_deadline_in(s->timeout_ms);
	rc = checkout(s, &c, &dl, err);
	if (rc) {
		r_destroy(&s->parent);
		return rc;
	}
	release(s, c);
	*out = &s->parent;
	return 0;
}

/* ---- Redis Cluster nodes (backends/redis_cluster.c) --------------------- */

int drl__redis_cluster_template(drl_backend **out, drl_uri *uri, drl_error *err)
{
	*out = NULL;
	pthread_once(&key_once, make_hold_key);
	if (!hold_key_ok)
		return drl_error_set(err, DRL_ENOMEM,
				     "redis: no thread-specific key left");
	rstore *s = calloc(1, sizeof *s);
	if (s == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	int rc = parse_uri(s, uri, err);
	if (rc == 0 && !s->cluster)
		rc = drl_error_set(err, DRL_EINVAL,
				   "drl__redis_cluster_template: not a "
				   "redis-cluster URI");
	if (rc == 0 && init_sync(s) != 0)
		rc = drl_error_set(err, DRL_ENOMEM,
				   "redis: cannot make a mutex");
	if (rc) {
		free_unregistered(s);
		return rc;
	}
	register_store(s);
	*out = &s->parent;
	return 0;
}

bool drl__redis_template_lazy(const drl_backend *tmpl)
{
	return ((const rstore *)tmpl)->lazy;
}

int64_t drl__redis_timeout_ms(const drl_backend *tmpl)
{
	return ((const rstore *)tmpl)->timeout_ms;
}

const char *drl__redis_prefix(const drl_backend *tmpl, size_t *len)
{
	const rstore *t = (const rstore *)tmpl;
	*len = t->prefixlen;
	return t->prefix ? t->prefix : "";
}

int drl__redis_cluster_node(drl_backend **out, const drl_backend *tmpl,
			    const char *host, int port, drl_error *err)
{
	const rstore *t = (const rstore *)tmpl;
	*out = NULL;
	rstore *s = calloc(1, sizeof *s);
	if (s == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	s->parent = t->parent;
	s->cluster = true;
	s->host = dup_n(host, strlen(host));
	s->port = port;
	s->user = t->user ? dup_n(t->user, strlen(t->user)) : NULL;
	s->password =
		t->password ? dup_n(t->password, strlen(t->password)) : NULL;
	s->prefix = t->prefix ? dup_n(t->prefix, t->prefixlen) : NULL;
	s->prefixlen = t->prefixlen;
	s->timeout_ms = t->timeout_ms;
	s->timeout = t->timeout;
	s->watch_tx = t->watch_tx;
	s->lazy = true;
	s->cap = t->cap;
	s->npipes = t->npipes;
	snprintf(s->where, sizeof s->where, "%s%.96s%s:%d",
		 strchr(host, ':') ? "[" : "", host,
		 strchr(host, ':') ? "]" : "", port);
	if (s->host == NULL || (t->user && s->user == NULL) ||
	    (t->password && s->password == NULL) ||
	    (t->prefix && s->prefix == NULL) || init_sync(s) != 0) {
		free_unregistered(s);
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	}
	if (drl__redis_pipes_init(s) != 0) {
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->cv);
		pthread_mutex_destroy(&s->script_mu);
		free_unregistered(s);
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	}
	register_store(s);
	*out = &s->parent;
	return 0;
}

/* One "host, port, id..." entry of a CLUSTER SLOTS range. */
static bool slots_endpoint(const redisReply *e, const char *asked,
			   const char **host, int *port)
{
	if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 ||
	    e->element[0]->type != REDIS_REPLY_STRING ||
	    e->element[1]->type != REDIS_REPLY_INTEGER ||
	    e->element[1]->integer < 1 || e->element[1]->integer > 65535)
		return false;
	/* An empty or "?" endpoint: the node we asked. */
	const char *h = e->element[0]->str;
	*host = (h[0] == '\0' || strcmp(h, "?") == 0) ? asked : h;
	*port = (int)e->element[1]->integer;
	return strlen(*host) < 256;
}

int drl__redis_cluster_slots(drl_backend *node, drl__redis_slots_fn fn,
			     void *arg, drl_error *err)
{
	rstore *s = (rstore *)node;
	const char *argv[2] = {"CLUSTER", "SLOTS"};
	size_t lens[2] = {7, 5};
	redisReply *r[1];
	conn proxy, *c;
	int rc = one_command(s, 2, argv, lens, &proxy, &c, r, err);
	if (rc)
		return rc;
	const redisReply *t = r[0];
	if (t->type != REDIS_REPLY_ARRAY)
		rc = reply_error(s, "CLUSTER SLOTS", t, false, err);
	for (size_t i = 0; rc == 0 && i < t->elements; i++) {
		const redisReply *e = t->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
		    e->element[0]->type != REDIS_REPLY_INTEGER ||
		    e->element[1]->type != REDIS_REPLY_INTEGER ||
		    e->element[0]->integer < 0 ||
		    e->element[1]->integer > 16383 ||
		    e->element[0]->integer > e->element[1]->integer) {
			rc = drl_error_set(err, DRL_ESTORE,
					   "redis %s: CLUSTER SLOTS: malformed "
					   "range %zu",
					   s->where, i);
			break;
		}
		for (size_t j = 2; rc == 0 && j < e->elements; j++) {
			const char *host;
			int port;
			if (!slots_endpoint(e->element[j], s->host, &host,
					    &port)) {
				rc = drl_error_set(err, DRL_ESTORE,
						   "redis %s: CLUSTER SLOTS: "
						   "malformed node in range "
						   "%zu",
						   s->where, i);
				break;
			}
			rc = fn(arg, (int)e->element[0]->integer,
				(int)e->element[1]->integer, host, port,
				j == 2);
		}
	}
	drl__redis_free_replies(r, 1);
	release(s, c);
	return rc;
}
