/*
 * The Redis store's connection layer, declared in backends/redis/internal.h:
 * one hiredis connection and a call's round trip on it.
 *
 * A connection is opened within what is left of the call's deadline,
 * given the command timeout, and set up with AUTH, SELECT and PING in one
 * round trip (drl__redis_conn_open); a pooled one idle for a while is
 * checked for a server that closed it (drl__redis_conn_stale). Under
 * tx=auto a connection asks its server once whether it has the module's
 * DRL.TWIN (drl__redis_conn_probe, or in a channel's setup). A call
 * queues its commands (drl__redis_conn_append: on the context, behind
 * ASKING when the call asks) and reads their replies by its deadline
 * (drl__redis_conn_collect, drl__redis_get_reply). Context errors, unreadable
 * replies and error replies become drl errors here, Redis Cluster
 * redirects included (DRL__EREDIRECT, codes.h); every reader refuses
 * absurd arrays; SIGPIPE is blocked around a round trip's writes.
 *
 * This layer knows one connection at a time and calls nothing above it:
 * the shared connections (backends/redis/pipe.c) use it, and the choice
 * between a shared call and a connection of the call's own is the
 * store's (backends/redis/store.c), as are the pool, the holds and the
 * commands.
 * Threading: a conn is used by one thread at a time; the thread-locals
 * here (the last redirect, the size of a refused array) are the calling
 * thread's.
 */
#include "codes.h"
#include "internal.h"

#include <hiredis/hiredis.h>

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
#include <sys/uio.h>
#include <time.h>

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

void drl__redis_trouble(rstore *s)
{
	if (s->trouble)
		s->trouble(s->trouble_arg);
}

/* An error reply with Redis's READONLY code: a write sent to a
 * replica. */
static bool is_readonly(const redisReply *r)
{
	return r && r->type == REDIS_REPLY_ERROR && r->str &&
	       strncmp(r->str, "READONLY", 8) == 0;
}

void drl__redis_readonly_check(rstore *s, const redisReply *r)
{
	if (is_readonly(r))
		drl__redis_trouble(s);
}

int drl__redis_unsent_mark(rstore *s, int rc)
{
	if (!s->mark_unsent || rc >= 0 || rc == DRL__EREDIRECT ||
	    drl__redis_unsent(rc))
		return rc;
	return DRL__UNSENT(rc);
}

int drl__redis_refused(rstore *s, const redisReply *r, int rc)
{
	return is_readonly(r) ? drl__redis_unsent_mark(s, rc) : rc;
}

/* Mark c broken and report its context error: DRL_ETIMEDOUT for a
 * timeout, DRL_ENOMEM for hiredis OOM, DRL_EUNAVAILABLE otherwise (refused,
 * reset, closed: the server cannot be talked to). */
int drl__redis_ctx_error(rstore *s, conn *c, const char *what, int saved_errno,
			 drl_error *err)
{
	redisContext *ctx = c->ctx;
	int code = DRL_EUNAVAILABLE;
	c->broken = true;
	if (is_timeout(ctx, saved_errno))
		code = DRL_ETIMEDOUT;
	else if (ctx->err == REDIS_ERR_OOM)
		code = DRL_ENOMEM;
	if (code != DRL_ENOMEM)
		drl__redis_trouble(s);
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
	drl__redis_trouble(s);
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

/* The names of hiredis's reply types, by type. */
static const char *const reply_type_names[] = {
	[REDIS_REPLY_STRING] = "string",   [REDIS_REPLY_ARRAY] = "array",
	[REDIS_REPLY_INTEGER] = "integer", [REDIS_REPLY_NIL] = "nil",
	[REDIS_REPLY_STATUS] = "status",   [REDIS_REPLY_ERROR] = "error",
};

const char *drl__redis_reply_type_name(int type)
{
	size_t n = sizeof reply_type_names / sizeof reply_type_names[0];
	if (type < 0 || (size_t)type >= n || reply_type_names[type] == NULL)
		return "unknown";
	return reply_type_names[type];
}

/* ---- Redis Cluster: redirects ------------------------------------------- */

/* The calling thread's last redirect (set with DRL__EREDIRECT); see
 * redis.h. Thread-local because the vtable has no room for it, and a
 * call runs on one thread. (Whether its calls send ASKING is
 * backends/redis/store.c's.) */
static _Thread_local drl__redis_redirect last_redirect;

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
int drl__redis_cluster_reply(rstore *s, const redisReply *r, drl_error *err)
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
int drl__redis_reply_error(rstore *s, const char *what, const redisReply *r,
			   bool value_err_corrupt, drl_error *err)
{
	if (r == NULL)
		return drl_error_set(err, DRL_ESTORE, "redis %s: %s: no reply",
				     s->where, what);
	int redirect = drl__redis_cluster_reply(s, r, err);
	if (redirect)
		return redirect;
	drl__redis_readonly_check(s, r);
	if (r->type != REDIS_REPLY_ERROR || r->str == NULL)
		return drl_error_set(
			err, DRL_ESTORE, "redis %s: %s: unexpected %s reply",
			s->where, what, drl__redis_reply_type_name(r->type));
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
		return drl__redis_reply_error(s, "AUTH", r, false, err);
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
bool drl__redis_is_status(const redisReply *r, const char *text)
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
 * ASKING reply in front of its own, for drl__redis_conn_collect().
 */
int drl__redis_conn_append(rstore *s, conn *c, int argc, const char **argv,
			   const size_t *lens, drl_error *err)
{
	if (c->asking && !c->in_multi) {
		if (c->nqueued >= 64) {
			c->broken = true; /* what is queued must not be sent */
			return drl_error_set(err, DRL_EINTERNAL,
					     "redis %s: more than 64 commands "
					     "in one call behind ASKING",
					     s->where);
		}
		if (redisAppendCommand(c->ctx, "ASKING") != REDIS_OK)
			return drl__redis_ctx_error(s, c, "ASKING", errno, err);
		c->ask_bits |= UINT64_C(1) << c->nqueued;
	}
	if (redisAppendCommandArgv(c->ctx, argc, argv, lens) != REDIS_OK)
		return drl__redis_ctx_error(s, c, argv[0], errno, err);
	if (is_command(argv, lens, "MULTI"))
		c->in_multi = true;
	else if (is_command(argv, lens, "EXEC"))
		c->in_multi = false;
	c->nqueued++;
	return 0;
}

/* Wait until c's socket is ready for `events` or c's deadline passes:
 * 1 ready (or in error: the read or write that follows reports it), 0
 * out of time, -1 poll() failed (errno). */
int drl__redis_wait_ready(conn *c, short events)
{
	return drl__poll_until(c->ctx->fd, events, &c->deadline);
}

/* ---- the transport: plaintext or TLS ------------------------------------ */

ssize_t drl__redis_writev(conn *c, const struct iovec *iov, int n)
{
	if (c->ssl) {
		return drl__tls_writev(c->ssl, iov, n, &c->want, &c->io_code,
				       c->io_msg, sizeof c->io_msg);
	}
	ssize_t w = writev(c->ctx->fd, iov, n);
	if (w >= 0)
		return w;
	if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) {
		c->want = POLLOUT;
		return 0;
	}
	c->io_code = DRL_EUNAVAILABLE;
	snprintf(c->io_msg, sizeof c->io_msg, "write: %s", strerror(errno));
	return -1;
}

int drl__redis_io_error(rstore *s, conn *c, const char *what, drl_error *err)
{
	c->broken = true;
	drl__redis_trouble(s);
	return drl_error_set(err, c->io_code ? c->io_code : DRL_EUNAVAILABLE,
			     "redis %s: %s: %s", s->where, what, c->io_msg);
}

/* A wait for c's socket that did not end ready (drl__redis_wait_ready's
 * w <= 0) as the call's error. */
static int wait_error(rstore *s, conn *c, int w, const char *what,
		      drl_error *err)
{
	return w == 0 ? drl__redis_timeout_error(s, c, what, err)
		      : drl__redis_ctx_error(s, c, what, errno, err);
}

/* Send what hiredis queued in c's output buffer, by c's deadline: on a
 * plaintext socket by hiredis (a blocking write bounded by the socket's
 * send timeout; more waits in poll()), on TLS through c->ssl. */
static int send_queued(rstore *s, conn *c, const char *what, drl_error *err)
{
	redisContext *ctx = c->ctx;
	int done = 0;
	while (c->ssl == NULL) {
		if (redisBufferWrite(ctx, &done) != REDIS_OK)
			return drl__redis_ctx_error(s, c, what, errno, err);
		if (done)
			return 0;
		int w = drl__redis_wait_ready(c, POLLOUT);
		if (w <= 0)
			return wait_error(s, c, w, what, err);
	}
	while (sdslen(ctx->obuf) > 0) {
		struct iovec iov = {ctx->obuf, sdslen(ctx->obuf)};
		ssize_t n = drl__redis_writev(c, &iov, 1);
		if (n < 0)
			return drl__redis_io_error(s, c, what, err);
		if (n > 0) {
			sdsrange(ctx->obuf, (ssize_t)n, -1);
			continue;
		}
		int w = drl__redis_wait_ready(c, c->want);
		if (w <= 0)
			return wait_error(s, c, w, what, err);
	}
	return 0;
}

/* Wait for what the server sends, by c's deadline, and hand it to c's
 * reader. On TLS, bytes OpenSSL already holds are read before any wait
 * (the socket may have nothing more to say). */
static int receive(rstore *s, conn *c, const char *what, drl_error *err)
{
	redisContext *ctx = c->ctx;
	if (c->ssl == NULL) {
		int w = drl__redis_wait_ready(c, POLLIN);
		if (w <= 0)
			return wait_error(s, c, w, what, err);
		if (redisBufferRead(ctx) != REDIS_OK)
			return drl__redis_ctx_error(s, c, what, errno, err);
		return 0;
	}
	char buf[16384]; /* as hiredis's own reads */
	for (;;) {
		short ev = POLLIN;
		ssize_t n =
			drl__tls_read(c->ssl, buf, sizeof buf, &ev, &c->io_code,
				      c->io_msg, sizeof c->io_msg);
		if (n > 0) {
			if (redisReaderFeed(ctx->reader, buf, (size_t)n) !=
			    REDIS_OK)
				return reader_error(s, c, what, err);
			return 0;
		}
		if (n < 0)
			return drl__redis_io_error(s, c, what, err);
		int w = drl__redis_wait_ready(c, ev);
		if (w <= 0)
			return wait_error(s, c, w, what, err);
	}
}

/* What c's socket holds now, into c's reader, without waiting: one
 * read() on plaintext (poll said readable), and on TLS every record
 * OpenSSL can give until it would wait. 0, or the error that ended the
 * connection (the server closed it, a TLS or reader error; c broken). */
int drl__redis_read_now(rstore *s, conn *c, const char *what, drl_error *err)
{
	if (c->ssl == NULL) {
		if (redisBufferRead(c->ctx) != REDIS_OK)
			return drl__redis_ctx_error(s, c, what, errno, err);
		return 0;
	}
	char buf[16384];
	for (;;) {
		short ev = POLLIN;
		ssize_t n =
			drl__tls_read(c->ssl, buf, sizeof buf, &ev, &c->io_code,
				      c->io_msg, sizeof c->io_msg);
		if (n == 0)
			return 0;
		if (n < 0)
			return drl__redis_io_error(s, c, what, err);
		if (redisReaderFeed(c->ctx->reader, buf, (size_t)n) != REDIS_OK)
			return reader_error(s, c, what, err);
	}
}

int drl__redis_reply_now(rstore *s, conn *c, void **reply, const char *what,
			 drl_error *err)
{
	*reply = NULL;
	if (redisReaderGetReply(c->ctx->reader, reply) != REDIS_OK)
		return reader_error(s, c, what, err);
	return 0;
}

/*
 * Send what is queued on c and read one reply, all by c's deadline.
 *
 * Written here rather than using redisGetReply(): its blocking loop bounds
 * each read() by the socket timeout, not the call, so a server that
 * trickles a byte at a time (or a huge bulk length) could hold the caller
 * for ever. Reads wait in poll() for the time left; the write is one
 * write() of a request of at most a few hundred KB, bounded by the
 * socket's send timeout, and further writes wait in poll() too (on TLS
 * the socket is non-blocking and every wait is a poll()).
 */
int drl__redis_get_reply(rstore *s, conn *c, void **reply, const char *what,
			 drl_error *err)
{
	redisContext *ctx = c->ctx;
	*reply = NULL;
	if (redisReaderGetReply(ctx->reader, reply) != REDIS_OK)
		return reader_error(s, c, what, err);
	if (*reply)
		return 0;
	int rc = send_queued(s, c, what, err);
	while (rc == 0) {
		rc = receive(s, c, what, err);
		if (rc)
			break;
		if (redisReaderGetReply(ctx->reader, reply) != REDIS_OK)
			return reader_error(s, c, what, err);
		if (*reply)
			return 0;
	}
	return rc;
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
int drl__redis_conn_collect(rstore *s, conn *c, size_t n, redisReply **r,
			    const char *what, drl_error *err)
{
	pipe_guard g;
	size_t got = 0;
	int rc = 0;
	drl__redis_sigpipe_block(&g);
	if (c->unwatch_queued) {
		void *u = NULL;
		c->unwatch_queued = false;
		rc = drl__redis_get_reply(s, c, &u, what, err);
		if (rc == 0) {
			if (!drl__redis_is_status(u, "OK"))
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
			if (!drl__redis_is_status(p, "OK")) {
				c->broken = true;
				rc = drl__redis_reply_error(s, "ASKING", p,
							    false, err);
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

/* ---- connections -------------------------------------------------------- */

void drl__redis_conn_free(conn *c)
{
	if (c == NULL)
		return;
	if (c->ssl) {
		pipe_guard g; /* a close_notify is a write */
		drl__redis_sigpipe_block(&g);
		drl__tls_close(c->ssl, !c->broken);
		drl__redis_sigpipe_restore(&g, true);
	}
	if (c->ctx)
		redisFree(c->ctx);
	free(c->wkey);
	free(c);
}

/* A connection the server dropped at its first request: say what does
 * that. A TLS server reads a plaintext request as a broken handshake and
 * closes; a TLS server that wants a client certificate (or refuses ours)
 * closes right after the handshake (TLS 1.3 checks it then), and its
 * alert may be lost to the reset our request causes. DRL_EUNAVAILABLE,
 * err's message kept. */
static int setup_refused(rstore *s, drl_error *err)
{
	if (err == NULL)
		return DRL_EUNAVAILABLE;
	char was[sizeof err->message];
	memcpy(was, err->message, sizeof was);
	return drl_error_set(err, DRL_EUNAVAILABLE, "%.200s (%s)", was,
			     s->tls ? "does the server want a client "
				      "certificate (tls_cert=, tls_key=), or "
				      "refuse this one?"
				    : "if this port speaks TLS, use rediss://");
}

/* Connect, set the command timeout; AUTH, SELECT and PING pipelined in
 * one round trip (PING: a server that wants a password we lack, or is not
 * Redis, fails here rather than in the first call). All by the call's
 * deadline `dl`. */
/* A conn around the new context ctx (NULL: out of memory; saved: the
 * connect's errno), its reader limited: 0 and *out, or the connect's
 * error (ctx freed). */
static int conn_wrap(rstore *s, redisContext *ctx, int saved, conn **out,
		     drl_error *err)
{
	*out = NULL;
	conn *c = ctx ? calloc(1, sizeof *c) : NULL;
	if (c == NULL) {
		redisFree(ctx);
		return drl_error_set(err, DRL_ENOMEM,
				     "redis %s: out of memory connecting",
				     s->where);
	}
	c->ctx = ctx;
	if (ctx->reader != NULL)
		limit_reader(c);
	if (ctx->err) {
		int rc = drl__redis_ctx_error(s, c, "connect", saved, err);
		drl__redis_conn_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* COMMAND INFO drl.twin: an array of one element, nil when the server
 * has no such command (the module not loaded). Allowed where MODULE LIST
 * is not (managed Redis services). */
static const char *const probe_argv[3] = {"COMMAND", "INFO", "drl.twin"};
static const size_t probe_lens[3] = {7, 4, 8};

/* What the probe's reply r says: TWIN_YES for the command's description,
 * TWIN_NO for anything else (nil, or an error: a server that refuses
 * COMMAND, or is no Redis, is one without the module). */
static unsigned char probe_answer(const redisReply *r)
{
	return r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
			       r->element[0]->type == REDIS_REPLY_ARRAY &&
			       r->element[0]->elements > 0
		       ? TWIN_YES
		       : TWIN_NO;
}

void drl__redis_setup_make(rstore *s, drl__redis_setup *u, bool probe)
{
	u->n = 0;
	if (s->password) {
		/* AUTH [user] password (a user: Redis 6 ACL). */
		size_t i = u->n++;
		u->argc[i] = s->user ? 3 : 2;
		u->argv[i][0] = "AUTH";
		u->lens[i][0] = 4;
		if (s->user) {
			u->argv[i][1] = s->user;
			u->lens[i][1] = strlen(s->user);
		}
		u->argv[i][u->argc[i] - 1] = s->password;
		u->lens[i][u->argc[i] - 1] = strlen(s->password);
	}
	if (s->db != 0) {
		size_t i = u->n++;
		int dblen = snprintf(u->db, sizeof u->db, "%" PRId64, s->db);
		u->argc[i] = 2;
		u->argv[i][0] = "SELECT";
		u->lens[i][0] = 6;
		u->argv[i][1] = u->db;
		u->lens[i][1] = (size_t)dblen;
	}
	size_t i = u->n++;
	u->argc[i] = 1;
	u->argv[i][0] = "PING";
	u->lens[i][0] = 4;
	if (probe) {
		i = u->n++;
		u->argc[i] = 3;
		for (int j = 0; j < 3; j++) {
			u->argv[i][j] = probe_argv[j];
			u->lens[i][j] = probe_lens[j];
		}
	}
}

int drl__redis_setup_check(rstore *s, conn *c, redisReply **r, size_t n,
			   drl_error *err)
{
	int rc = 0;
	/* the probe, when sent, is the one after PING */
	size_t ping = (s->password != NULL) + (s->db != 0);
	if (n > ping + 1) {
		c->twin = probe_answer(r[ping + 1]);
		atomic_store(&s->twin_seen, c->twin == TWIN_YES);
	}
	for (size_t i = 0; i <= ping && i < n && rc == 0; i++) {
		if (drl__redis_is_status(r[i], i == ping ? "PONG" : "OK"))
			continue;
		bool auth = s->password && i == 0;
		rc = auth ? auth_error(s, r[i], err)
			  : drl__redis_reply_error(
				    s, i == ping ? "PING" : "SELECT", r[i],
				    false, err);
	}
	drl__redis_free_replies(r, n);
	return rc;
}

int drl__redis_conn_probe(rstore *s, conn *c, drl_error *err)
{
	if (c->twin != TWIN_UNASKED)
		return 0;
	redisReply *r = NULL;
	int rc = drl__redis_conn_append(s, c, 3, (const char **)probe_argv,
					probe_lens, err);
	if (rc == 0)
		rc = drl__redis_conn_collect(s, c, 1, &r, "COMMAND INFO", err);
	if (rc)
		return rc;
	c->twin = probe_answer(r);
	atomic_store(&s->twin_seen, c->twin == TWIN_YES);
	freeReplyObject(r);
	return 0;
}

int drl__redis_conn_open(rstore *s, conn **out, const struct timespec *dl,
			 drl_error *err)
{
	int64_t left = drl__ms_until(dl);
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
	conn *c;
	int rc = conn_wrap(s, ctx, errno, &c, err);
	if (rc)
		return rc;
	c->deadline = *dl;
	if (redisSetTimeout(ctx, s->timeout) != REDIS_OK) {
		rc = drl__redis_ctx_error(s, c, "setting the timeout", errno,
					  err);
		drl__redis_conn_free(c);
		return rc;
	}
	if (!s->is_unix)
		(void)redisEnableKeepAlive(ctx);
	if (s->tls) {
		/* The handshake, by the same deadline: a server that
		 * stalls it costs timeout_ms, as any other. */
		char msg[300];
		pipe_guard g;
		drl__redis_sigpipe_block(&g);
		rc = drl__tls_connect(s->tls, ctx->fd, s->host, dl, &c->ssl,
				      msg, sizeof msg);
		drl__redis_sigpipe_restore(&g, rc != 0);
		if (rc) {
			c->broken = true;
			drl__redis_conn_free(c);
			return drl_error_set(
				err, rc, "redis %s: %s%s", s->where, msg,
				rc == DRL_ETIMEDOUT ? " (timeout_ms exceeded)"
						    : "");
		}
	}

	redisReply *r[DRL__REDIS_SETUP_MAX];
	size_t n = 0;
	drl__redis_setup u;
	drl__redis_setup_make(s, &u, false);
	for (size_t i = 0; i < u.n && rc == 0; i++, n++)
		rc = drl__redis_conn_append(s, c, u.argc[i], u.argv[i],
					    u.lens[i], err);
	if (rc == 0)
		rc = drl__redis_conn_collect(s, c, n, r, "connection setup",
					     err);
	if (rc) {
		drl__redis_conn_free(c);
		return rc == DRL_EUNAVAILABLE ? setup_refused(s, err) : rc;
	}
	rc = drl__redis_setup_check(s, c, r, n, err);
	if (rc) {
		drl__redis_conn_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

int drl__redis_conn_start(rstore *s, conn **out, drl_error *err)
{
	redisContext *ctx = s->is_unix ? redisConnectUnixNonBlock(s->host)
				       : redisConnectNonBlock(s->host, s->port);
	int rc = conn_wrap(s, ctx, errno, out, err);
	if (rc == 0 && !s->is_unix)
		(void)redisEnableKeepAlive(ctx);
	return rc;
}

/* Deadline `ms` from now on CLOCK_MONOTONIC. A timespec, not
 * drl_mono_us()'s µs: what waits for it takes one (poll through
 * drl__poll_until, the pool's pthread_cond_timedwait). */
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

/* Milliseconds on CLOCK_MONOTONIC_COARSE (a few ns; ms resolution), not
 * drl_mono_us(): read at every release of a connection, and only
 * compared with IDLE_CHECK_MS, which a clock of a few ms serves. */
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
	if (c->ssl) {
		pipe_guard g; /* a record read may answer with a write */
		drl__redis_sigpipe_block(&g);
		bool ok = drl__tls_idle_ok(c->ssl);
		drl__redis_sigpipe_restore(&g, !ok);
		return !ok;
	}
	struct pollfd p = {.fd = c->ctx->fd, .events = POLLIN};
	return poll(&p, 1, 0) != 0; /* readable, hung up, or poll failed */
}
