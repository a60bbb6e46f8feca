/*
 * The Redis store's channels (drl/sys/backend.h, DRL_CAP_CHANNEL): a
 * connection of its own per channel whose started calls (EVALSHA, the
 * counters' INCRBY/PEXPIRE/GETs) the caller's thread drives, as hiredis's
 * async adapters do: the async API's event loop watches its socket, and
 * chan_process() reads the replies, runs each call's completion inline and
 * writes what was queued meanwhile in one sendmsg(). No thread of the
 * store's takes part: the pipes' I/O thread (backends/redis/pipe.c) is not
 * started for them.
 *
 * The calls are the pipes' started calls (rreq, formatted by
 * script.c and counter.c with q->chan set), kept in the order
 * they were queued: everything before `unsent` was written (replies come
 * in that order), `unsent` and after are queued (woff bytes of `unsent`
 * written). A call's replies are matched by position, as on the pipes.
 *
 * Plaintext single-node stores only (redis://, redis+unix://): a TLS
 * record layer and a Cluster's redirects stay on the pipes.
 *
 * Failures, as on the pipes: a call whose deadline passes unsent is
 * refused unsent (DRL_ETIMEDOUT); a call sent whose reply does not come by
 * its deadline, an I/O error, the server closing the connection or a
 * reply hiredis cannot parse fail every call sent on the connection
 * (their replies can no longer be told apart) and drop it; calls not yet
 * written stay queued and go out on a new connection, opened at the next
 * chan_process() by their deadline (the one blocking step: a connect and
 * its AUTH/SELECT/PING, on the caller's thread).
 *
 * Threading: one thread at a time (the caller serialises, see the
 * header); completions may queue calls on the same channel (a NOSCRIPT's
 * EVAL, a counter's give-back): they go out at the end of that
 * chan_process().
 */
#include "internal.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

struct drl_channel {
	rstore *s;
	conn *c;           /* NULL: connect when calls are queued */
	rreq *head, *tail; /* every call on the channel, in order */
	rreq *unsent;      /* the first not wholly written, or NULL */
	size_t woff;       /* bytes of *unsent written */
	size_t nread;      /* replies of *head read */
	bool want_out;     /* a write would block: wait for POLLOUT */
	bool ready;        /* the connection's setup was answered */
	/* A connection dropped, closed at the next chan_process(): its
	 * descriptor's number is not reused by a new connection before the
	 * caller has seen chan_poll()'s number change (its epoll registration). */
	conn *dead;
};

/* A connection's setup (AUTH, SELECT, PING; tx=auto: COMMAND INFO
 * drl.twin, whose answer goes to the connection's twin), sent ahead of
 * the calls on it: the first call on the channel's list then. */
typedef struct setup {
	rreq q; /* first */
	redisReply *r[DRL__REDIS_SETUP_MAX];
	char *cmd;
} setup;

static void setup_free(rstore *s, rreq *q)
{
	(void)s; /* its replies were freed where it ended */
	setup *u = (setup *)q;
	free(u->cmd);
	free(u);
}

/* A list of calls that are over, to be completed once the channel's
 * state is whole again (a completion may queue calls on it). */
typedef struct ended {
	rreq *head, *tail;
} ended;

static void ended_add(ended *e, rreq *q)
{
	q->next = NULL;
	if (e->tail)
		e->tail->next = q;
	else
		e->head = q;
	e->tail = q;
}

static void ended_run(rstore *s, ended *e)
{
	for (rreq *q = e->head; q;) {
		rreq *nx = q->next;
		q->next = NULL;
		q->complete(s, q);
		q = nx;
	}
	e->head = e->tail = NULL;
}

static int64_t ts_us(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000 + t->tv_nsec / 1000;
}

/* Take the head call off the channel. */
static rreq *pop_head(drl_channel *ch)
{
	rreq *q = ch->head;
	ch->head = q->next;
	if (ch->head == NULL)
		ch->tail = NULL;
	if (ch->unsent == q) {
		ch->unsent = q->next;
		ch->woff = 0;
	}
	ch->nread = 0;
	return q;
}

/* Whether any byte of q went out on the connection. */
static bool began(const drl_channel *ch, const rreq *q)
{
	for (const rreq *it = ch->unsent; it; it = it->next)
		if (it == q)
			return it == ch->unsent && ch->woff > 0;
	return true;
}

static void fail_queued(drl_channel *ch, const drl_error *e, ended *out);

/* The connection failed (e): every call that began to go out on it ends
 * with e (into *out); the others stay queued for the next connection. */
static void drop_conn(drl_channel *ch, const drl_error *e, ended *out)
{
	while (ch->head && began(ch, ch->head)) {
		bool first = ch->nread > 0;
		size_t nread = ch->nread;
		rreq *q = pop_head(ch);
		if (first)
			drl__redis_free_replies(q->r, nread);
		q->rc = e->code;
		q->err = *e;
		ended_add(out, q);
	}
	ch->unsent = ch->head;
	ch->woff = 0;
	ch->nread = 0;
	ch->want_out = false;
	drl__redis_conn_free(ch->dead);
	ch->dead = ch->c;
	ch->c = NULL;
	/* Never ready (refused, not answering, AUTH refused): the calls
	 * queued behind would meet the same. */
	if (!ch->ready)
		fail_queued(ch, e, out);
	ch->ready = false;
}

/* Fail every queued call (none began) with e: no connection. */
static void fail_queued(drl_channel *ch, const drl_error *e, ended *out)
{
	while (ch->head) {
		rreq *q = pop_head(ch);
		q->rc = e->code;
		q->err = *e;
		q->unsent = true;
		ended_add(out, q);
	}
	ch->unsent = NULL;
}

/* The setup's replies (all in, freed here): 0, or the error. */
static int setup_check(drl_channel *ch, rreq *q, drl_error *err)
{
	int rc = drl__redis_setup_check(ch->s, ch->c, q->r, q->n, err);
	ch->ready = rc == 0;
	return rc;
}

/* Begin a connection (nothing waited for) with its setup queued ahead of
 * the calls (all of them unsent: a channel without a connection has no
 * call that began). 0, or the error (no connection). */
static int chan_connect(drl_channel *ch, drl_error *err)
{
	rstore *s = ch->s;
	setup *u = calloc(1, sizeof *u);
	if (u == NULL)
		return drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				     s->where);
	drl__redis_setup cmds;
	drl__redis_setup_make(s, &cmds, s->auto_twin);
	size_t len = 0, cap = 0;
	int rc = 0;
	for (size_t i = 0; i < cmds.n && rc == 0; i++)
		if (drl__redis_resp_append(&u->cmd, &len, &cap, cmds.argc[i],
					   cmds.argv[i], cmds.lens[i]) != 0)
			rc = drl_error_set(err, DRL_ENOMEM,
					   "redis %s: out of memory", s->where);
	if (rc == 0)
		rc = drl__redis_conn_start(s, &ch->c, err);
	if (rc) {
		free(u->cmd);
		free(u);
		return rc;
	}
	u->q = (rreq){.buf = u->cmd,
		      .len = len,
		      .n = cmds.n,
		      .r = u->r,
		      .deadline = ch->head->deadline,
		      .what = "connection setup",
		      .complete = setup_free,
		      .chan = ch,
		      .next = ch->head};
	ch->head = &u->q;
	ch->unsent = &u->q;
	ch->woff = 0;
	ch->nread = 0;
	ch->ready = false;
	return 0;
}

/* Read what the socket holds and hand out every whole reply. */
static void chan_read(drl_channel *ch, ended *out)
{
	rstore *s = ch->s;
	conn *c = ch->c;
	drl_error e = {0};
	const char *what = ch->head ? ch->head->what : "reply";
	char buf[16384]; /* as hiredis's own reads */
	for (;;) {
		ssize_t n = recv(c->ctx->fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n > 0) {
			if (redisReaderFeed(c->ctx->reader, buf, (size_t)n) !=
			    REDIS_OK) {
				drl_error_set(&e, DRL_ENOMEM,
					      "redis %s: %s: out of memory "
					      "reading a reply",
					      s->where, what);
				c->broken = true;
				drop_conn(ch, &e, out);
				return;
			}
			if ((size_t)n < sizeof buf)
				break;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		/* 0: the server closed the connection; < 0: it failed. */
		drl__redis_trouble(s);
		drl_error_set(&e, DRL_EUNAVAILABLE, "redis %s: %s: %s",
			      s->where, what,
			      n == 0 ? "the server closed the connection"
				     : strerror(errno));
		drop_conn(ch, &e, out);
		return;
	}
	for (;;) {
		void *p = NULL;
		if (ch->head == NULL || !began(ch, ch->head)) {
			/* Nothing awaits a reply: one now is not ours (a
			 * call partly written may be answered in part). */
			if (drl__redis_reply_now(s, c, &p, what, &e) != 0) {
				drop_conn(ch, &e, out);
				return;
			}
			if (p == NULL)
				return;
			freeReplyObject(p);
			drl_error_set(&e, DRL_EUNAVAILABLE,
				      "redis %s: a reply nobody asked for",
				      s->where);
			c->broken = true;
			drop_conn(ch, &e, out);
			return;
		}
		rreq *q = ch->head;
		if (drl__redis_reply_now(s, c, &p, q->what, &e) != 0) {
			drop_conn(ch, &e, out);
			return;
		}
		if (p == NULL)
			return;
		q->r[ch->nread++] = p;
		if (ch->nread < q->n)
			continue;
		pop_head(ch);
		q->rc = 0;
		if (q->complete != setup_free) {
			ended_add(out, q);
		} else if (setup_check(ch, q, &e) != 0) {
			setup_free(s, q);
			c->broken = true;
			drop_conn(ch, &e, out);
			return;
		} else {
			setup_free(s, q);
		}
	}
}

/* Fail the calls whose deadline passed: one unsent is taken off alone;
 * one sent ends the connection. */
static void chan_expire(drl_channel *ch, ended *out)
{
	rstore *s = ch->s;
	int64_t now = drl_mono_us();
	drl_error e = {0};
	rreq *prev = NULL;
	for (rreq *q = ch->head; q;) {
		rreq *nx = q->next;
		if (ts_us(&q->deadline) > now) {
			prev = q;
			q = nx;
			continue;
		}
		if (began(ch, q)) {
			drl__redis_timeout_error(s, ch->c, q->what, &e);
			drop_conn(ch, &e, out);
			chan_expire(ch, out); /* the queued ones, alone */
			return;
		}
		if (prev)
			prev->next = nx;
		else
			ch->head = nx;
		if (ch->tail == q)
			ch->tail = prev;
		if (ch->unsent == q)
			ch->unsent = nx;
		drl_error_set(&e, DRL_ETIMEDOUT,
			      "redis %s: %s: not sent within "
			      "timeout_ms=%" PRId64,
			      s->where, q->what, s->timeout_ms);
		q->rc = e.code;
		q->err = e;
		q->unsent = true;
		ended_add(out, q);
		q = nx;
	}
}

/* Write what is queued, without waiting (connecting first when there is
 * no connection). */
static void chan_write(drl_channel *ch, ended *out)
{
	rstore *s = ch->s;
	drl_error e = {0};
	ch->want_out = false;
	if (ch->unsent && ch->c == NULL && chan_connect(ch, &e) != 0) {
		fail_queued(ch, &e, out);
		return;
	}
	/* Until the setup is answered only the setup goes out: calls
	 * behind a server that does not answer stay unsent (DRL_ETIMEDOUT,
	 * nothing ran), as the blocking connect keeps them. */
	while (ch->unsent &&
	       (ch->ready || ch->unsent->complete == setup_free)) {
		struct iovec iov[64];
		int n = 0;
		for (rreq *it = ch->unsent; it && n < 64; it = it->next) {
			size_t off = it == ch->unsent ? ch->woff : 0;
			/* tx=auto: its form for this connection (a failure,
			 * out of memory, leaves the one it has) */
			if (off == 0 && it->form)
				(void)it->form(s, it, ch->c->twin == TWIN_YES,
					       &e);
			iov[n].iov_base = (char *)it->buf + off;
			iov[n].iov_len = it->len - off;
			n++;
			if (!ch->ready)
				break;
		}
		/* sendmsg with MSG_NOSIGNAL: a peer that closed costs no
		 * SIGPIPE, and no signal mask change per write. */
		struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
		ssize_t w = sendmsg(ch->c->ctx->fd, &m,
				    MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			ch->want_out = true;
			return;
		}
		if (w < 0) {
			ch->c->broken = true;
			drl__redis_trouble(s);
			/* Its first write is where a connect that failed
			 * says so: as the blocking connect words it. */
			bool connecting = !ch->ready && ch->woff == 0 &&
					  ch->unsent->complete == setup_free;
			drl_error_set(&e, DRL_EUNAVAILABLE,
				      connecting ? "redis %s: connect%s: %s"
						 : "redis %s: %s: write: %s",
				      s->where,
				      connecting ? "" : ch->unsent->what,
				      strerror(errno));
			drop_conn(ch, &e, out);
			return;
		}
		size_t left = (size_t)w;
		while (ch->unsent && left > 0) {
			size_t rest = ch->unsent->len - ch->woff;
			if (left < rest) {
				ch->woff += left;
				left = 0;
			} else {
				left -= rest;
				ch->unsent = ch->unsent->next;
				ch->woff = 0;
			}
		}
	}
}

static void r_chan_process(drl_channel *ch, short revents)
{
	ended out = {0};
	drl__redis_conn_free(ch->dead);
	ch->dead = NULL;
	if (ch->c && (revents & (POLLIN | POLLERR | POLLHUP)))
		chan_read(ch, &out);
	if (ch->head)
		chan_expire(ch, &out);
	/* Completions first: what they queue goes out in this write. */
	ended_run(ch->s, &out);
	if (ch->unsent) {
		chan_write(ch, &out);
		ended_run(ch->s, &out);
		/* A completion of a failed write may have queued again: it
		 * goes out at the next chan_process() (the caller asks
		 * chan_poll() after this one). */
	}
}

static int r_chan_open(drl_backend *b, drl_channel **out, drl_error *err)
{
	rstore *s = (rstore *)b;
	drl_channel *ch = calloc(1, sizeof *ch);
	if (ch == NULL)
		return drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				     s->where);
	ch->s = s;
	*out = ch;
	return 0;
}

static int r_chan_poll(drl_channel *ch, short *events, int64_t *deadline)
{
	int64_t d = INT64_MAX;
	for (rreq *q = ch->head; q; q = q->next)
		if (ts_us(&q->deadline) < d)
			d = ts_us(&q->deadline);
	*deadline = d;
	*events = 0;
	if (ch->c == NULL)
		return -1;
	/* Always readable-watched: a server that closes an idle
	 * connection is noticed at once, not at the next call. */
	*events = POLLIN;
	if (ch->want_out)
		*events |= POLLOUT;
	return ch->c->ctx->fd;
}

static void r_chan_close(drl_channel *ch)
{
	ended out = {0};
	drl_error e = {0};
	drl_error_set(&e, DRL_ECANCELED,
		      "redis %s: the channel was closed with the call on it",
		      ch->s->where);
	if (ch->c)
		drop_conn(ch, &e, &out);
	fail_queued(ch, &e, &out);
	ended_run(ch->s, &out);
	/* A completion cannot queue on a closed channel: the caller
	 * closes it only when it starts no more calls. */
	drl__redis_conn_free(ch->c);
	drl__redis_conn_free(ch->dead);
	free(ch);
}

int drl__redis_req_queue(rstore *s, rreq *q, drl_error *err)
{
	drl_channel *ch = q->chan;
	if (ch == NULL)
		return drl__redis_pipe_start(s, q, err);
	q->next = NULL;
	q->rc = 0;
	if (ch->tail)
		ch->tail->next = q;
	else
		ch->head = q;
	ch->tail = q;
	if (ch->unsent == NULL) {
		ch->unsent = q;
		ch->woff = 0;
	}
	return 0;
}

void drl__redis_chan_methods(rstore *s)
{
	s->parent.caps |= DRL_CAP_CHANNEL;
	s->parent.chan_open = r_chan_open;
	s->parent.chan_poll = r_chan_poll;
	s->parent.chan_process = r_chan_process;
	s->parent.chan_close = r_chan_close;
}
