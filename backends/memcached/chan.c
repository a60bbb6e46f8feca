/*
 * The memcached store's channels (drl/sys/backend.h, DRL_CAP_CHANNEL):
 * started counter calls (add_read_start) on connections of the channel's
 * own, driven by the caller's thread (the async API's event loop), with
 * no thread of the store's.
 *
 * Why by hand: libmemcached has no call that returns before its reply
 * (its "no block" mode still waits inside each call), so the requests are
 * written here in memcached's text protocol, exactly as the blocking
 * store's ASCII path (binary=0) writes them, so that blocking and started
 * calls share every item: the same keys (drl__mc_map_key), the counter's
 * bias and decimal text, flags 0 and expiries (drl__mc_expiry). An
 * increment is `incr` (or `decr`) by |delta|; on NOT_FOUND it is `add`
 * of BIAS + delta with the expiry, and when another client's add won
 * the race (NOT_STORED), `incr` again (MC_ADD_RACE_RETRIES at most); an
 * increment by 0 of an absent key reads 0 and creates nothing. The
 * neighbours' reads are one `get` each. The binary protocol's
 * increments store the same decimal text, so binary=1 blocking calls
 * interoperate too.
 *
 * Connections. One socket per server of the pool, made when a call is
 * queued for it (a blocking connect, bounded by the earliest call's
 * deadline: the one wait of a channel); a key goes to the server the
 * blocking calls send it to (drl__mc_server_of: libmemcached's own
 * ketama map, of a clone as the blocking calls' handles are). An epoll descriptor over the sockets is what chan_poll()
 * gives: one number for the channel's whole life, whatever the sockets.
 * Requests go out in order and memcached answers a connection's
 * requests in order: a reply is matched to the oldest request sent on
 * its connection. Replies are parsed as they come (a partial line or
 * value waits for its rest), in a buffer of at most RBUF_MAX bytes (a
 * reply that cannot fit is a protocol error); a connection holds at most
 * WBUF_MAX bytes unwritten (a start beyond that fails).
 *
 * Failures. A call not answered by its deadline (timeout_ms from its
 * start) drops the connections its requests wait on, failing every call
 * with a request on them (DRL_ETIMEDOUT: their replies can no longer be
 * told apart from late ones); a connection refused, lost or sending what
 * is not a reply fails its calls with DRL_EUNAVAILABLE. The next call
 * for that server connects afresh. As for blocking calls, an increment
 * that failed may have been applied: the safe direction.
 *
 * Threading: a channel is used by one thread at a time (its caller
 * serialises); done callbacks run inside chan_process() and may start
 * calls on the same channel, which go out at its end.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define RBUF_MAX ((size_t)2 << 20) /* a value of memcached's 1 MiB max */
#define WBUF_MAX ((size_t)8 << 20)
#define INLINE_KEYS 12

enum op_kind { OP_INCR, OP_ADD, OP_GET };

typedef struct mcall mcall;

/* One request on one connection, for one value of a call. */
typedef struct op {
	struct op *next;
	mcall *call;
	enum op_kind kind;
	size_t slot; /* the call's value it fills */
} op;

/* A started add_read(): done runs once `left` (requests unanswered) is 0. */
struct mcall {
	TAILQ_ENTRY(mcall) link; /* the channel's calls, oldest first */
	drl_eval_done_fn done;
	void *arg;
	int64_t deadline; /* µs, CLOCK_MONOTONIC */
	int64_t delta;
	time_t exp;
	int attempts; /* adds lost to another client's */
	size_t left, n;
	int rc;
	drl_error err;
	mkey k0;
	int64_t values[];
};

/* A connection to one server. */
typedef struct mconn {
	int fd;          /* -1: none */
	op *head, *tail; /* requests in order, the written ones first */
	char *wbuf;      /* formatted, not yet written: wbuf[woff..wlen) */
	size_t wlen, woff, wcap;
	char *rbuf; /* read, not yet parsed: rbuf[roff..rlen) */
	size_t rlen, roff, rcap;
	bool want_out;
	const char *name; /* host or socket path (the master's) */
	int port;
	bool unix_socket;
} mconn;

struct drl_channel {
	mc_backend *m;
	int ep;
	TAILQ_HEAD(, mcall) calls; /* oldest (earliest deadline) first */
	size_t n;
	mconn conns[];
};

static int64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- calls ---------------------------------------------------------------- */

/* The oldest call's deadline (the earliest), or none when no call waits. */
static int64_t oldest_deadline(const drl_channel *ch, int64_t none)
{
	const mcall *c = TAILQ_FIRST(&ch->calls);
	return c ? c->deadline : none;
}

/* c's request ended with rc (0: answered); c ends once all have. */
static void call_step(drl_channel *ch, mcall *c, int rc, const drl_error *e)
{
	if (rc && c->rc == 0) {
		c->rc = rc;
		if (e)
			c->err = *e;
		else
			drl_error_set(&c->err, rc, "memcached: call failed");
	}
	if (--c->left > 0)
		return;
	TAILQ_REMOVE(&ch->calls, c, link);
	c->done(c->arg, c->rc, c->rc ? NULL : c->values, c->rc ? 0 : c->n,
		c->rc ? &c->err : NULL);
	free(c);
}

/* ---- writing requests ----------------------------------------------------- */

/* What an add that creates a counter for an increment by delta stores:
 * BIAS + delta (as the blocking store's). */
static uint64_t initial(int64_t delta)
{
	return delta >= 0 ? MC_BIAS + (uint64_t)delta
			  : MC_BIAS - ((uint64_t)0 - (uint64_t)delta);
}

static int wreserve(mconn *k, size_t more)
{
	if (k->wcap - k->wlen >= more)
		return 0;
	if (k->woff > 0) {
		memmove(k->wbuf, k->wbuf + k->woff, k->wlen - k->woff);
		k->wlen -= k->woff;
		k->woff = 0;
		if (k->wcap - k->wlen >= more)
			return 0;
	}
	size_t cap = k->wcap ? k->wcap : 4096;
	while (cap - k->wlen < more)
		cap *= 2;
	char *p = realloc(k->wbuf, cap);
	if (p == NULL)
		return -1;
	k->wbuf = p;
	k->wcap = cap;
	return 0;
}

/* Queue request `kind` of c's value `slot` (key k) on connection k. The
 * text: "incr K D" / "decr K D", "add K 0 EXP LEN" + value, "get K". */
static int queue_op(mconn *k, mcall *c, enum op_kind kind, size_t slot,
		    const mkey *key)
{
	op *o = malloc(sizeof *o);
	char line[MC_KEY_MAX + 96], val[24];
	int n = 0, vn = 0;
	if (o == NULL)
		return DRL_ENOMEM;
	uint64_t mag = c->delta >= 0 ? (uint64_t)c->delta
				     : (uint64_t)0 - (uint64_t)c->delta;
	switch (kind) {
	case OP_INCR:
		n = snprintf(line, sizeof line, "%s %s %" PRIu64 "\r\n",
			     c->delta >= 0 ? "incr" : "decr", key->buf, mag);
		break;
	case OP_ADD:
		vn = snprintf(val, sizeof val, "%" PRIu64, initial(c->delta));
		n = snprintf(line, sizeof line, "add %s 0 %lld %d\r\n%s\r\n",
			     key->buf, (long long)c->exp, vn, val);
		break;
	case OP_GET:
		n = snprintf(line, sizeof line, "get %s\r\n", key->buf);
		break;
	}
	if (wreserve(k, (size_t)n) != 0) {
		free(o);
		return DRL_ENOMEM;
	}
	memcpy(k->wbuf + k->wlen, line, (size_t)n);
	k->wlen += (size_t)n;
	*o = (op){.call = c, .kind = kind, .slot = slot};
	if (k->tail)
		k->tail->next = o;
	else
		k->head = o;
	k->tail = o;
	return 0;
}

int drl__mc_add_read_start(drl_backend *b, drl_channel *ch, size_t n,
			   const drl_bytes *keys, int64_t delta, int64_t ttl_us,
			   drl_eval_done_fn done, void *arg, drl_error *err)
{
	mc_backend *m = (mc_backend *)b;
	if (ch == NULL)
		return drl_error_set(err, DRL_ENOTSUP,
				     "memcached: calls start only on a "
				     "channel (the async API in fd mode)");
	if (n == 0 || keys == NULL || done == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "memcached add_read_start: no keys");
	if (delta <= -(int64_t)MC_BIAS)
		return drl_error_set(err, DRL_ERANGE,
				     "memcached incr: delta below -2^62");
	/* no allocation for the keys of up to INLINE_KEYS (sliding_window
	 * sends 2, subwindow its sub-windows) */
	mkey mk_inline[INLINE_KEYS];
	uint32_t srv_inline[INLINE_KEYS];
	mkey *mk = n <= INLINE_KEYS ? mk_inline : malloc(n * sizeof *mk);
	uint32_t *srv = n <= INLINE_KEYS ? srv_inline : malloc(n * sizeof *srv);
	mcall *c = calloc(1, sizeof *c + n * sizeof c->values[0]);
	int rc = 0;
	if (mk == NULL || srv == NULL || c == NULL) {
		rc = drl_error_set(err, DRL_ENOMEM, "memcached: no memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		drl__mc_map_key(m, keys[i], &mk[i]);
		srv[i] = drl__mc_server_of(m, &mk[i]);
		if (srv[i] >= ch->n ||
		    ch->conns[srv[i]].wlen - ch->conns[srv[i]].woff >
			    WBUF_MAX) {
			rc = drl_error_set(err, DRL_EUNAVAILABLE,
					   "memcached: more than %zu bytes "
					   "queued for a server",
					   WBUF_MAX);
			goto out;
		}
	}
	c->done = done;
	c->arg = arg;
	c->deadline = mono_us() + m->timeout_ms * 1000;
	c->delta = delta;
	c->exp = drl__mc_expiry(ttl_us);
	c->n = n;
	c->k0 = mk[0];
	/* Memory is the one way to fail here: when some requests were
	 * queued, the call is started and ends with DRL_ENOMEM. */
	size_t i = 0;
	for (; i < n && rc == 0; i++)
		rc = queue_op(&ch->conns[srv[i]], c, i ? OP_GET : OP_INCR, i,
			      &mk[i]);
	if (rc && i == 1) {
		rc = drl_error_set(err, DRL_ENOMEM, "memcached: no memory");
		goto out;
	}
	if (rc) {
		i--;
		c->rc = drl_error_set(&c->err, DRL_ENOMEM,
				      "memcached: no memory");
		n = i;
		rc = 0;
	}
	c->left = n; /* requests queued */
	TAILQ_INSERT_TAIL(&ch->calls, c, link);
	c = NULL;
out:
	free(c);
	if (mk != mk_inline)
		free(mk);
	if (srv != srv_inline)
		free(srv);
	return rc;
}

/* ---- connections ---------------------------------------------------------- */

/* Drop k's connection: every request on it fails with rc and msg. */
static void conn_drop(drl_channel *ch, mconn *k, int rc, const char *msg)
{
	op *o = k->head;
	drl_error e;
	if (k->fd >= 0)
		close(k->fd); /* leaves the epoll set with it */
	k->fd = -1;
	k->head = k->tail = NULL;
	k->wlen = k->woff = 0;
	k->rlen = k->roff = 0;
	k->want_out = false;
	if (k->unix_socket)
		drl_error_set(&e, rc, "memcached %s (server %s)", msg, k->name);
	else
		drl_error_set(&e, rc, "memcached %s (server %s:%d)", msg,
			      k->name, k->port);
	while (o) {
		op *next = o->next;
		mcall *c = o->call;
		free(o);
		call_step(ch, c, rc, &e);
		o = next;
	}
}

/* Connect k's socket (non-blocking once made), waiting at most until
 * `deadline`: 0, or -1 with *rc and *msg saying why. */
static int conn_open(drl_channel *ch, mconn *k, int64_t deadline, int *rc,
		     const char **msg)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	*rc = DRL_EUNAVAILABLE;
	*msg = "connect: refused or unreachable";
	memset(&ss, 0, sizeof ss);
	if (k->unix_socket) {
		struct sockaddr_un *un = (struct sockaddr_un *)&ss;
		un->sun_family = AF_UNIX;
		snprintf(un->sun_path, sizeof un->sun_path, "%s", k->name);
		sl = sizeof *un;
	} else {
		struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
		char port[8];
		snprintf(port, sizeof port, "%d", k->port);
		if (getaddrinfo(k->name, port, &hints, &ai) != 0) {
			*msg = "connect: host lookup failed";
			return -1;
		}
		memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
		sl = ai->ai_addrlen;
		freeaddrinfo(ai);
	}
	int fd = socket(ss.ss_family,
			SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&ss, sl) != 0) {
		if (errno != EINPROGRESS && errno != EAGAIN)
			goto fail;
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		int64_t wait = (deadline - mono_us()) / 1000;
		int soerr = 0;
		socklen_t el = sizeof soerr;
		if (poll(&p, 1,
			 wait > 0 ? (int)(wait < 600000 ? wait : 600000) : 0) !=
		    1) {
			*rc = DRL_ETIMEDOUT;
			*msg = "connect: no answer within timeout_ms";
			goto fail;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &el) != 0 ||
		    soerr != 0)
			goto fail;
	}
	if (!k->unix_socket) {
		int one = 1;
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
				 sizeof one);
	}
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = k};
	if (epoll_ctl(ch->ep, EPOLL_CTL_ADD, fd, &ev) != 0)
		goto fail;
	k->fd = fd;
	return 0;
fail:
	close(fd);
	return -1;
}

/* Wait for POLLOUT on k or stop waiting for it. */
static void want_out(drl_channel *ch, mconn *k, bool on)
{
	if (k->want_out == on || k->fd < 0)
		return;
	struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0),
				 .data.ptr = k};
	(void)epoll_ctl(ch->ep, EPOLL_CTL_MOD, k->fd, &ev);
	k->want_out = on;
}

/* Write what k has queued, connecting first when needed. */
static void conn_write(drl_channel *ch, mconn *k)
{
	if (k->wlen == k->woff)
		return;
	if (k->fd < 0) {
		int rc;
		const char *msg;
		/* the requests' earliest deadline: the oldest call's */
		if (conn_open(ch, k, oldest_deadline(ch, 0), &rc, &msg) != 0) {
			conn_drop(ch, k, rc, msg);
			return;
		}
	}
	while (k->woff < k->wlen) {
		ssize_t w = send(k->fd, k->wbuf + k->woff, k->wlen - k->woff,
				 MSG_NOSIGNAL);
		if (w > 0) {
			k->woff += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			want_out(ch, k, true);
			return;
		}
		conn_drop(ch, k, DRL_EUNAVAILABLE, "write: connection lost");
		return;
	}
	k->wlen = k->woff = 0;
	want_out(ch, k, false);
}

/* ---- reading replies ------------------------------------------------------ */

/* The line at rbuf[roff..): its length without "\r\n" in *len, or false
 * when it has not all come yet. */
static bool line_at(const mconn *k, size_t from, size_t *len)
{
	const char *p = k->rbuf + from;
	const char *nl = memchr(p, '\n', k->rlen - from);
	if (nl == NULL)
		return false;
	*len = (size_t)(nl - p);
	if (*len > 0 && p[*len - 1] == '\r')
		--*len;
	return true;
}

static bool is(const char *s, size_t len, const char *word)
{
	size_t n = strlen(word);
	return len >= n && memcmp(s, word, n) == 0 && (len == n || s[n] == ' ');
}

/* Whether s[0..len) is one of memcached's error lines. */
static bool is_error(const char *s, size_t len)
{
	return is(s, len, "CLIENT_ERROR") || is(s, len, "SERVER_ERROR") ||
	       is(s, len, "ERROR");
}

/* The request o's reply to an error line s[0..len): the code. */
static int reply_error(const char *s, size_t len, const char *what,
		       drl_error *e)
{
	if (is(s, len, "CLIENT_ERROR"))
		return drl_error_set(e, DRL_ECORRUPT,
				     "memcached %s: the key holds something "
				     "that is not a counter (%.*s)",
				     what, (int)(len > 120 ? 120 : len), s);
	return drl_error_set(e, DRL_ESTORE, "memcached %s: %.*s", what,
			     (int)(len > 120 ? 120 : len), s);
}

/* Parse one reply for k's first request. 1: a reply was taken; 0: it
 * has not all come; -1: what came is not a reply (k must be dropped). */
static int take_reply(drl_channel *ch, mconn *k)
{
	op *o = k->head;
	mcall *c = o->call;
	const char *s = k->rbuf + k->roff;
	size_t len, used;
	int64_t v = 0;
	drl_error e;
	int rc = 0;
	if (!line_at(k, k->roff, &len))
		return k->rlen - k->roff > 4096 ? -1 : 0;
	used = (size_t)((const char *)memchr(s, '\n', k->rlen - k->roff) - s) +
	       1;
	enum op_kind next = OP_GET; /* OP_GET: no follow-up */
	/* an error line answers any request (no other reply starts so) */
	static const char *const op_name[] = {"incr", "add", "get"};
	if (is_error(s, len))
		rc = reply_error(s, len, op_name[o->kind], &e);
	else
		switch (o->kind) {
		case OP_INCR:
			if (len > 0 && s[0] >= '0' && s[0] <= '9') {
				uint64_t stored = 0;
				size_t i = 0;
				for (; i < len && s[i] >= '0' && s[i] <= '9';
				     i++) {
					unsigned d = (unsigned)(s[i] - '0');
					if (stored > (UINT64_MAX - d) / 10)
						return -1;
					stored = stored * 10 + d;
				}
				if (i != len)
					return -1;
				rc = drl__mc_incr_value(c->delta, stored, &v,
							&e);
			} else if (is(s, len, "NOT_FOUND")) {
				if (c->delta != 0)
					next = OP_ADD; /* absent and 0: reads 0 */
			} else {
				return -1;
			}
			break;
		case OP_ADD:
			if (is(s, len, "STORED")) {
				rc = drl__mc_incr_value(
					c->delta, initial(c->delta), &v, &e);
			} else if (is(s, len, "NOT_STORED") ||
				   is(s, len, "EXISTS")) {
				if (++c->attempts < MC_ADD_RACE_RETRIES)
					next = OP_INCR;
				else
					rc = drl_error_set(
						&e, DRL_ECONFLICT,
						"memcached incr: the key kept "
						"appearing and vanishing (%d "
						"attempts)",
						MC_ADD_RACE_RETRIES);
			} else {
				return -1;
			}
			break;
		case OP_GET:
			if (is(s, len, "VALUE")) {
				/* VALUE <key> <flags> <bytes> */
				const char *sp = s + len;
				while (sp > s && sp[-1] != ' ')
					sp--;
				int64_t bytes;
				if (drl_parse_int(sp, (size_t)(s + len - sp), 0,
						  (int64_t)RBUF_MAX - 4096,
						  &bytes) != 0)
					return -1;
				size_t end = used + (size_t)bytes + 2;
				size_t elen;
				if (k->rlen - k->roff <
				    end) /* the value's rest */
					return 0;
				if (!line_at(k, k->roff + end, &elen))
					return 0;
				if (!is(s + end, elen, "END"))
					return -1;
				rc = drl__mc_parse_counter(
					s + used, (size_t)bytes, &v, &e);
				if (rc == DRL_ECORRUPT)
					drl_error_set(
						&e, DRL_ECORRUPT,
						"memcached get: a counter key "
						"holds %lld bytes that are not "
						"a counter",
						(long long)bytes);
				used = end + elen + 1 +
				       (s[end + elen] == '\r' ? 1 : 0);
			} else if (is(s, len, "END")) {
				v = 0;
			} else {
				return -1;
			}
			break;
		}
	size_t slot = o->slot;
	k->roff += used;
	k->head = o->next;
	if (k->head == NULL)
		k->tail = NULL;
	free(o);
	if (next != OP_GET && rc == 0) {
		/* the follow-up goes out at the end of this chan_process() */
		if (queue_op(k, c, next, 0, &c->k0) == 0)
			return 1;
		rc = drl_error_set(&e, DRL_ENOMEM, "memcached: no memory");
	}
	if (rc == 0)
		c->values[slot] = v;
	call_step(ch, c, rc, rc ? &e : NULL);
	return 1;
}

/* Read what k's socket holds and take every whole reply in it. */
static void conn_read(drl_channel *ch, mconn *k)
{
	for (;;) {
		if (k->roff > 0 && k->roff == k->rlen)
			k->rlen = k->roff = 0;
		if (k->rcap - k->rlen < 4096) {
			if (k->roff > 0) {
				memmove(k->rbuf, k->rbuf + k->roff,
					k->rlen - k->roff);
				k->rlen -= k->roff;
				k->roff = 0;
			}
			size_t cap = k->rcap ? k->rcap * 2 : 16384;
			if (k->rcap - k->rlen < 4096 && cap <= RBUF_MAX) {
				char *p = realloc(k->rbuf, cap);
				if (p == NULL) {
					conn_drop(ch, k, DRL_ENOMEM,
						  "read: no memory");
					return;
				}
				k->rbuf = p;
				k->rcap = cap;
			}
			if (k->rcap == k->rlen) {
				conn_drop(ch, k, DRL_EUNAVAILABLE,
					  "read: a reply longer than the "
					  "channel's buffer");
				return;
			}
		}
		ssize_t r =
			recv(k->fd, k->rbuf + k->rlen, k->rcap - k->rlen, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (r <= 0) {
			conn_drop(ch, k, DRL_EUNAVAILABLE,
				  r == 0 ? "read: the server closed the "
					   "connection"
					 : "read: connection lost");
			return;
		}
		k->rlen += (size_t)r;
		for (;;) {
			int t;
			if (k->roff == k->rlen)
				break;
			if (k->head == NULL) {
				t = -1;
			} else {
				t = take_reply(ch, k);
				if (t == 0)
					break;
			}
			if (t < 0) {
				conn_drop(ch, k, DRL_EUNAVAILABLE,
					  "read: not a memcached reply");
				return;
			}
		}
		if ((size_t)r < 4096)
			return; /* likely all there was */
	}
}

/* ---- the channel's slots ---------------------------------------------------- */

int drl__mc_chan_open(drl_backend *b, drl_channel **out, drl_error *err)
{
	mc_backend *m = (mc_backend *)b;
	uint32_t n = memcached_server_count(m->hasher);
	drl_channel *ch = calloc(1, sizeof *ch + n * sizeof ch->conns[0]);
	if (ch == NULL)
		return drl_error_set(err, DRL_ENOMEM, "memcached: no memory");
	ch->ep = epoll_create1(EPOLL_CLOEXEC);
	if (ch->ep < 0) {
		free(ch);
		return drl_error_set(err, DRL_ENOMEM,
				     "memcached: no epoll descriptor");
	}
	ch->m = m;
	ch->n = n;
	TAILQ_INIT(&ch->calls);
	for (uint32_t i = 0; i < n; i++) {
		const memcached_instance_st *s =
			memcached_server_instance_by_position(m->hasher, i);
		mconn *k = &ch->conns[i];
		k->fd = -1;
		k->name = memcached_server_name(s);
		k->port = (int)memcached_server_port(s);
		k->unix_socket =
			memcached_server_type(s) != NULL &&
			strcmp(memcached_server_type(s), "SOCKET") == 0;
	}
	*out = ch;
	return 0;
}

int drl__mc_chan_poll(drl_channel *ch, short *events, int64_t *deadline)
{
	/* the oldest call's deadline is the earliest */
	*deadline = oldest_deadline(ch, INT64_MAX);
	*events = POLLIN;
	return ch->ep;
}

void drl__mc_chan_process(drl_channel *ch, short revents)
{
	if (revents) {
		struct epoll_event ev[16];
		int got = epoll_wait(ch->ep, ev, 16, 0);
		for (int i = 0; i < got; i++) {
			mconn *k = ev[i].data.ptr;
			if (k->fd >= 0 && (ev[i].events & ~EPOLLOUT))
				conn_read(ch, k);
		}
	}
	/* Deadlines: the oldest call's is the earliest. */
	int64_t now = mono_us();
	for (mcall *c; (c = TAILQ_FIRST(&ch->calls)) && c->deadline <= now;) {
		bool found = false;
		for (size_t i = 0; i < ch->n && TAILQ_FIRST(&ch->calls) == c;
		     i++) {
			mconn *k = &ch->conns[i];
			for (op *o = k->head; o; o = o->next)
				if (o->call == c) {
					found = true;
					conn_drop(ch, k, DRL_ETIMEDOUT,
						  "call: no reply within "
						  "timeout_ms");
					break;
				}
		}
		if (!found) /* cannot be: a call waits on a request */
			break;
	}
	for (size_t i = 0; i < ch->n; i++)
		conn_write(ch, &ch->conns[i]);
}

void drl__mc_chan_close(drl_channel *ch)
{
	if (ch == NULL)
		return;
	for (size_t i = 0; i < ch->n; i++) {
		conn_drop(ch, &ch->conns[i], DRL_ECANCELED,
			  "call: the channel was closed");
		free(ch->conns[i].wbuf);
		free(ch->conns[i].rbuf);
	}
	close(ch->ep);
	free(ch);
}
