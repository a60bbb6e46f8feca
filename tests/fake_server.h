/*
 * A fake peer for hostile-server tests and the reply fuzzers: an
 * in-process server on 127.0.0.1:<free port> or a unix socket that answers
 * each connection with fixed bytes, or never, or not at all.
 *
 * Every accepted connection follows one plan: the i-th connection since the
 * plans were set follows plans[i], the last plan repeats. A plan says what
 * to send (optionally only after the first request bytes arrived, optionally
 * in pieces each sent after the next request, optionally one byte every
 * dribble_ms) and how to end: close (write side shut, the
 * peer's bytes read until it closes), hang (read and never answer, until
 * the peer closes or the server stops), or reset (an abortive close, RST on
 * TCP). A plan with nothing to send, no wait and FAKE_END_CLOSE closes the
 * connection at once.
 *
 * One thread serves every connection (poll), so connections that hang do
 * not hold up new ones; at most FAKE_SERVER_CONNS are open at once (more are
 * closed at once, still counted). Everything is bounded: a connection that
 * is being closed is drained for at most 5 s, and fake_server_stop() ends
 * the thread within one poll round, joins it, closes every descriptor and
 * unlinks the unix socket.
 *
 * Threading: fake_server_set_plans(), fake_server_accepted() and
 * fake_server_stop() may be called from any one thread while the server
 * thread runs.
 */
#ifndef DRL_FAKE_SERVER_H
#define DRL_FAKE_SERVER_H

#include <stddef.h>

#define FAKE_SERVER_CONNS 64 /* connections open at once */
#define FAKE_SERVER_PLANS 16 /* plans per set */
#define FAKE_PLAN_SPLITS 8   /* pieces of one reply, less one */
#define FAKE_SERVER_SETTLE_MS 3

typedef enum fake_end {
	FAKE_END_CLOSE, /* shut the write side, read until the peer closes */
	FAKE_END_HANG,  /* read and discard; never answer again */
	FAKE_END_RESET  /* abortive close (SO_LINGER 0: RST on TCP) */
} fake_end;

typedef struct fake_plan {
	const void *reply; /* bytes to send (copied); may be NULL with len 0 */
	size_t len;        /* how many */
	/* Where the reply is cut into pieces (ascending offsets inside
	 * (0, len); a 0 ends the list). The first piece goes as wait_request
	 * says, each later one after more request bytes arrive. A plan with
	 * pieces takes a request as complete once the peer has been quiet
	 * for settle_ms. */
	size_t split[FAKE_PLAN_SPLITS];
	int settle_ms; /* 0: FAKE_SERVER_SETTLE_MS; < 0: a request is what one
			  read returns */
	int piece_wait_ms;   /* > 0: a later piece also goes after this long
			      without a request (a peer waiting for the rest
			      of a reply gets it) */
	int wait_request;    /* 1: send only after the first request bytes */
	int dribble_ms;      /* > 0: send one byte every dribble_ms... */
	size_t dribble_from; /* ...from this offset on (before: at once) */
	fake_end end;        /* after sending everything */
} fake_plan;

typedef struct fake_server fake_server;

/* Start on 127.0.0.1, port chosen by the kernel (fake_server_port()).
 * plans: 1..FAKE_SERVER_PLANS (copied). 0 on success, -1 with a message
 * on stderr. */
int fake_server_start_tcp(fake_server **out, const fake_plan *plans, size_t n);

/* Start on the unix socket `path` (created here, unlinked by stop; an
 * existing file at path is replaced). Same contract otherwise. */
int fake_server_start_unix(fake_server **out, const char *path,
			   const fake_plan *plans, size_t n);

/* The TCP port (0 for a unix socket server). */
int fake_server_port(const fake_server *fs);

/* Replace the plans (copied); the next connection follows plans[0]. Open
 * connections keep the plan they started with. 0, or -1 (bad n, no
 * memory: the old plans stay). */
int fake_server_set_plans(fake_server *fs, const fake_plan *plans, size_t n);

/* Connections accepted since start (whatever their plan said). */
unsigned fake_server_accepted(const fake_server *fs);

/* Stop the thread, close every descriptor, unlink the socket, free fs.
 * NULL is a no-op. */
void fake_server_stop(fake_server *fs);

#endif
