/*
 * A fake peer that answers with fixed bytes (see fake_server.h for the
 * contract). One thread polls the listening socket, a wake-up pipe and
 * every open connection; each connection walks through
 *
 *   [WAIT (request bytes) -> [SETTLE (until quiet)]] -> SEND (a piece)
 *   -> ... (WAIT, SEND for each later piece) -> DRAIN | HANG | closed
 *
 * as its plan says. Sockets are non-blocking, writes use MSG_NOSIGNAL, and
 * every wait is bounded by the poll timeout (at most POLL_MAX_MS), so the
 * thread notices a stop within one round.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4, pipe2 */
#endif
#include "fake_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define POLL_MAX_MS 200   /* longest poll: bounds reaction to timers */
#define DRAIN_MAX_MS 5000 /* a closing connection is drained this long */
#define READ_CHUNK 65536

/* A plan as kept by the server: the caller's with reply pointing at its
 * own copy of the bytes (`bytes`). */
typedef struct plan {
	fake_plan p;
	unsigned char *bytes;
} plan;

typedef enum phase {
	PH_WAIT,   /* for request bytes */
	PH_SETTLE, /* got some: until the peer is quiet (pieces only) */
	PH_SEND,   /* the current piece */
	PH_DRAIN,  /* write side shut: read until EOF */
	PH_HANG    /* read, never answer */
} phase;

/* One open connection; fd -1 marks a free slot. Touched only by the
 * server thread (and by stop after the join). */
typedef struct conn {
	int fd;
	phase ph;
	plan p;           /* this connection's copy */
	size_t sent;      /* bytes of the reply sent so far */
	size_t piece_end; /* where the current piece ends */
	size_t npiece;    /* pieces started */
	int64_t next_ms;  /* SEND dribbling: next byte; SETTLE: quiet until */
	int64_t until_ms; /* DRAIN: when to give up on the peer */
} conn;

struct fake_server {
	int lfd;
	int wake[2]; /* stop() writes a byte to wake[1] */
	int port;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	pthread_t thread;
	atomic_int stopping;
	atomic_uint accepted;

	pthread_mutex_t mu; /* guards plans, nplans, next_plan */
	plan plans[FAKE_SERVER_PLANS];
	size_t nplans;
	size_t next_plan;

	conn conns[FAKE_SERVER_CONNS];
	unsigned char scratch[READ_CHUNK]; /* discarded request bytes */
};

/* ---- small helpers -------------------------------------------------------- */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void plans_free(plan *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(p[i].bytes);
		p[i].bytes = NULL;
	}
}

/* Copy `in` into `out`: 0, or -1 when out of memory (nothing kept). */
static int plan_copy(plan *out, const fake_plan *in)
{
	out->p = *in;
	out->bytes = NULL;
	if (in->len > 0) {
		out->bytes = malloc(in->len);
		if (out->bytes == NULL)
			return -1;
		memcpy(out->bytes, in->reply, in->len);
	}
	out->p.reply = out->bytes;
	if (out->p.dribble_ms < 0)
		out->p.dribble_ms = 0;
	return 0;
}

/* Copy n plans into fresh storage `out` (FAKE_SERVER_PLANS slots). */
static int plans_copy(plan *out, const fake_plan *in, size_t n)
{
	if (in == NULL || n == 0 || n > FAKE_SERVER_PLANS) {
		fprintf(stderr, "fake_server: need 1..%d plans, got %zu\n",
			FAKE_SERVER_PLANS, n);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (plan_copy(&out[i], &in[i]) != 0) {
			plans_free(out, i);
			fprintf(stderr, "fake_server: out of memory\n");
			return -1;
		}
	}
	return 0;
}

/* ---- connections ---------------------------------------------------------- */

static void conn_close(conn *c, int abortive)
{
	if (abortive) {
		struct linger lg = {1, 0};
		(void)setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	}
	close(c->fd);
	c->fd = -1;
	free(c->p.bytes);
	memset(&c->p, 0, sizeof c->p);
}

/* Whether the plan cuts its reply into pieces. */
static int has_pieces(const conn *c)
{
	return c->p.p.split[0] > 0;
}

/* Where the piece after offset `from` ends: the next split, or the end. */
static size_t piece_end(const conn *c, size_t from)
{
	for (size_t i = 0; i < FAKE_PLAN_SPLITS && c->p.p.split[i] > 0; i++)
		if (c->p.p.split[i] > from && c->p.p.split[i] < c->p.p.len)
			return c->p.p.split[i];
	return c->p.p.len;
}

/* Everything was sent: end as the plan says. */
static void conn_finish(conn *c)
{
	switch (c->p.p.end) {
	case FAKE_END_HANG:
		c->ph = PH_HANG;
		break;
	case FAKE_END_RESET:
		conn_close(c, 1);
		break;
	case FAKE_END_CLOSE:
	default:
		(void)shutdown(c->fd, SHUT_WR);
		c->ph = PH_DRAIN;
		c->until_ms = now_ms() + DRAIN_MAX_MS;
		break;
	}
}

/* Start sending the next piece (or end, when there is nothing left). */
static void conn_next_piece(conn *c, int64_t now)
{
	if (c->sent == c->p.p.len && (c->npiece > 0 || c->p.p.len == 0)) {
		conn_finish(c);
		return;
	}
	c->npiece++;
	c->piece_end = piece_end(c, c->sent);
	c->ph = PH_SEND;
	c->next_ms = now;
}

/* How long the peer must be quiet before its request counts as complete
 * (0: at once). */
static int settle_ms(const conn *c)
{
	if (!has_pieces(c) || c->p.p.settle_ms < 0)
		return 0;
	return c->p.p.settle_ms > 0 ? c->p.p.settle_ms : FAKE_SERVER_SETTLE_MS;
}

/* Request bytes arrived while waiting for them. */
static void conn_request(conn *c, int64_t now)
{
	if (c->ph == PH_WAIT && settle_ms(c) > 0) {
		c->ph = PH_SETTLE;
		c->next_ms = now + settle_ms(c);
	} else if (c->ph == PH_SETTLE) {
		c->next_ms = now + settle_ms(c);
	} else if (c->ph == PH_WAIT) {
		conn_next_piece(c, now);
	}
}

/* Take over accepted descriptor fd with the next plan. */
static void conn_open(fake_server *fs, int fd)
{
	conn *c = NULL;
	for (size_t i = 0; i < FAKE_SERVER_CONNS && c == NULL; i++)
		if (fs->conns[i].fd < 0)
			c = &fs->conns[i];
	if (c == NULL) {
		close(fd); /* too many at once: closed, still counted */
		return;
	}
	pthread_mutex_lock(&fs->mu);
	size_t i = fs->next_plan < fs->nplans ? fs->next_plan : fs->nplans - 1;
	fs->next_plan++;
	int rc = plan_copy(&c->p, &fs->plans[i].p);
	pthread_mutex_unlock(&fs->mu);
	c->fd = fd;
	c->sent = 0;
	c->npiece = 0;
	if (rc != 0) {
		conn_close(c, 0);
		return;
	}
	const fake_plan *p = &c->p.p;
	if (p->len == 0 && !p->wait_request && p->end == FAKE_END_CLOSE) {
		conn_close(c, 0); /* "close at once" */
		return;
	}
	c->ph = PH_WAIT;
	if (!p->wait_request)
		conn_next_piece(c, now_ms());
}

/* Read what the peer sent (discarded). 1 something read, 0 nothing now,
 * -1 the peer closed or the socket failed. */
static int conn_read(fake_server *fs, conn *c)
{
	ssize_t n = recv(c->fd, fs->scratch, sizeof fs->scratch, MSG_DONTWAIT);
	if (n > 0)
		return 1;
	if (n < 0 &&
	    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	return -1;
}

/* 1 when c sends its next byte on its own (dribbling). */
static int dribbling(const conn *c)
{
	return c->p.p.dribble_ms > 0 && c->sent >= c->p.p.dribble_from;
}

/* Send what is due of the current piece: all of it (up to dribble_from
 * when dribbling starts there), or one byte when dribbling. */
static void conn_write(conn *c, int64_t now)
{
	if (dribbling(c) && now < c->next_ms)
		return;
	size_t want = c->piece_end - c->sent;
	if (dribbling(c))
		want = 1;
	else if (c->p.p.dribble_ms > 0 && c->p.p.dribble_from > c->sent &&
		 c->p.p.dribble_from - c->sent < want)
		want = c->p.p.dribble_from - c->sent;
	ssize_t n = send(c->fd, c->p.bytes + c->sent, want,
			 MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			conn_close(c, 0);
		return;
	}
	c->sent += (size_t)n;
	c->next_ms = now + c->p.p.dribble_ms;
	if (c->sent == c->p.p.len) {
		conn_finish(c);
	} else if (c->sent == c->piece_end) {
		c->ph = PH_WAIT;
		c->next_ms = now + c->p.p.piece_wait_ms;
	}
}

/* Whether c waits for a request with a time limit (piece_wait_ms). */
static int waits_timed(const conn *c)
{
	return c->ph == PH_WAIT && c->npiece > 0 && c->p.p.piece_wait_ms > 0;
}

/* One round of work for c after poll said `revents`. */
static void conn_step(fake_server *fs, conn *c, short revents, int64_t now)
{
	if (revents & (POLLIN | POLLHUP | POLLERR)) {
		int r = conn_read(fs, c);
		if (r < 0) {
			conn_close(c, 0);
			return;
		}
		if (r > 0)
			conn_request(c, now);
	}
	if (c->fd >= 0 && (c->ph == PH_SETTLE || waits_timed(c)) &&
	    now >= c->next_ms)
		conn_next_piece(c, now);
	if (c->fd >= 0 && c->ph == PH_SEND && (revents & POLLOUT))
		conn_write(c, now);
	if (c->fd >= 0 && c->ph == PH_DRAIN && now >= c->until_ms)
		conn_close(c, 0);
}

/* What poll should wait for on c, and the latest poll timeout its timers
 * allow (*timeout lowered as needed). */
static short conn_events(const conn *c, int64_t now, int *timeout)
{
	short ev = POLLIN;
	int64_t due = -1;
	if (c->ph == PH_SEND) {
		if (!dribbling(c) || now >= c->next_ms)
			ev |= POLLOUT;
		else
			due = c->next_ms;
	} else if (c->ph == PH_SETTLE || waits_timed(c)) {
		due = c->next_ms;
	} else if (c->ph == PH_DRAIN) {
		due = c->until_ms;
	}
	if (due >= 0) {
		int64_t wait = due > now ? due - now : 0;
		if (wait < *timeout)
			*timeout = (int)wait;
	}
	return ev;
}

/* ---- the thread ----------------------------------------------------------- */

static void accept_all(fake_server *fs)
{
	for (int i = 0; i < FAKE_SERVER_CONNS; i++) {
		int fd = accept4(fs->lfd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		atomic_fetch_add(&fs->accepted, 1);
		conn_open(fs, fd);
	}
}

static void *serve(void *arg)
{
	fake_server *fs = arg;
	struct pollfd pfd[2 + FAKE_SERVER_CONNS];
	conn *who[2 + FAKE_SERVER_CONNS];

	while (!atomic_load(&fs->stopping)) {
		int64_t now = now_ms();
		int timeout = POLL_MAX_MS;
		nfds_t n = 0;
		pfd[n++] = (struct pollfd){fs->wake[0], POLLIN, 0};
		pfd[n++] = (struct pollfd){fs->lfd, POLLIN, 0};
		for (size_t i = 0; i < FAKE_SERVER_CONNS; i++) {
			conn *c = &fs->conns[i];
			if (c->fd < 0)
				continue;
			who[n] = c;
			pfd[n++] = (struct pollfd){
				c->fd, conn_events(c, now, &timeout), 0};
		}
		if (poll(pfd, n, timeout) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents)
			break; /* stop() woke us */
		now = now_ms();
		for (nfds_t i = 2; i < n; i++)
			conn_step(fs, who[i], pfd[i].revents, now);
		if (pfd[1].revents & POLLIN)
			accept_all(fs);
	}
	return NULL;
}

/* ---- start and stop ------------------------------------------------------- */

/* Allocate fs with n plans, a wake-up pipe and no listener yet. */
static fake_server *fs_new(const fake_plan *plans, size_t n)
{
	fake_server *fs = calloc(1, sizeof *fs);
	if (fs == NULL) {
		fprintf(stderr, "fake_server: out of memory\n");
		return NULL;
	}
	fs->lfd = -1;
	for (size_t i = 0; i < FAKE_SERVER_CONNS; i++)
		fs->conns[i].fd = -1;
	if (plans_copy(fs->plans, plans, n) != 0) {
		free(fs);
		return NULL;
	}
	fs->nplans = n;
	if (pipe2(fs->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		fprintf(stderr, "fake_server: pipe: %s\n", strerror(errno));
		plans_free(fs->plans, n);
		free(fs);
		return NULL;
	}
	pthread_mutex_init(&fs->mu, NULL);
	atomic_init(&fs->stopping, 0);
	atomic_init(&fs->accepted, 0);
	return fs;
}

/* Free what fs_new and a listener made (thread not running). */
static void fs_free(fake_server *fs)
{
	for (size_t i = 0; i < FAKE_SERVER_CONNS; i++)
		if (fs->conns[i].fd >= 0)
			conn_close(&fs->conns[i], 0);
	if (fs->lfd >= 0)
		close(fs->lfd);
	if (fs->path[0] != '\0')
		unlink(fs->path);
	close(fs->wake[0]);
	close(fs->wake[1]);
	plans_free(fs->plans, fs->nplans);
	pthread_mutex_destroy(&fs->mu);
	free(fs);
}

/* listen() on fs->lfd and start the thread; on failure free fs. */
static int fs_run(fake_server **out, fake_server *fs)
{
	int rc;
	if (listen(fs->lfd, FAKE_SERVER_CONNS) != 0) {
		fprintf(stderr, "fake_server: listen: %s\n", strerror(errno));
		fs_free(fs);
		return -1;
	}
	rc = pthread_create(&fs->thread, NULL, serve, fs);
	if (rc != 0) {
		fprintf(stderr, "fake_server: thread: %s\n", strerror(rc));
		fs_free(fs);
		return -1;
	}
	*out = fs;
	return 0;
}

int fake_server_start_tcp(fake_server **out, const fake_plan *plans, size_t n)
{
	struct sockaddr_in a;
	socklen_t alen = sizeof a;
	fake_server *fs = fs_new(plans, n);
	*out = NULL;
	if (fs == NULL)
		return -1;
	fs->lfd =
		socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fs->lfd < 0 || bind(fs->lfd, (struct sockaddr *)&a, sizeof a) ||
	    getsockname(fs->lfd, (struct sockaddr *)&a, &alen)) {
		fprintf(stderr, "fake_server: bind 127.0.0.1:0: %s\n",
			strerror(errno));
		fs_free(fs);
		return -1;
	}
	fs->port = ntohs(a.sin_port);
	return fs_run(out, fs);
}

int fake_server_start_unix(fake_server **out, const char *path,
			   const fake_plan *plans, size_t n)
{
	struct sockaddr_un a;
	struct stat st;
	fake_server *fs;
	*out = NULL;
	if (path == NULL || strlen(path) >= sizeof a.sun_path) {
		fprintf(stderr, "fake_server: bad unix socket path\n");
		return -1;
	}
	if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
		fprintf(stderr, "fake_server: %s exists, not a socket\n", path);
		return -1;
	}
	fs = fs_new(plans, n);
	if (fs == NULL)
		return -1;
	unlink(path);
	memset(&a, 0, sizeof a);
	a.sun_family = AF_UNIX;
	memcpy(a.sun_path, path, strlen(path) + 1);
	fs->lfd =
		socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fs->lfd < 0 || bind(fs->lfd, (struct sockaddr *)&a, sizeof a)) {
		fprintf(stderr, "fake_server: bind %s: %s\n", path,
			strerror(errno));
		fs_free(fs);
		return -1;
	}
	memcpy(fs->path, path, strlen(path) + 1);
	return fs_run(out, fs);
}

int fake_server_port(const fake_server *fs)
{
	return fs->port;
}

int fake_server_set_plans(fake_server *fs, const fake_plan *plans, size_t n)
{
	plan fresh[FAKE_SERVER_PLANS];
	if (plans_copy(fresh, plans, n) != 0)
		return -1;
	pthread_mutex_lock(&fs->mu);
	plans_free(fs->plans, fs->nplans);
	memcpy(fs->plans, fresh, n * sizeof fresh[0]);
	fs->nplans = n;
	fs->next_plan = 0;
	pthread_mutex_unlock(&fs->mu);
	return 0;
}

unsigned fake_server_accepted(const fake_server *fs)
{
	return atomic_load(&((fake_server *)fs)->accepted);
}

void fake_server_stop(fake_server *fs)
{
	if (fs == NULL)
		return;
	atomic_store(&fs->stopping, 1);
	while (write(fs->wake[1], "x", 1) < 0 && errno == EINTR)
		;
	pthread_join(fs->thread, NULL);
	fs_free(fs);
}
