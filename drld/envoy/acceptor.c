/* drld's own listening socket for its gRPC shards: see acceptor.h. */
#include "acceptor.h"

#include "listen_addr.h"
#include "stopper.h"

#include <drl/drl.h>

#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* How long the thread waits before accepting again after an error that
 * lasts (out of descriptors: EMFILE): the listening socket stays
 * readable, so retrying at once would spin. */
#define ACCEPT_RETRY_MS 100

/* What every HTTP/2 client sends first (RFC 9113, 3.4): a connection is
 * dealt to grpc only once these bytes have arrived. */
static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define PREFACE_LEN (sizeof preface - 1)

/* Connections that may wait for their preface at once; one more closes
 * the one that has waited longest. */
#define PENDING_MAX 1024

/* How soon a connection that sent part of its preface is looked at again
 * (a unix socket, whose poll ignores SO_RCVLOWAT, stays readable). */
#define PARTIAL_RECHECK_MS 20

/* Descriptors never given to a gRPC connection: max(RESERVE_MIN, the
 * limit / RESERVE_DIV) below RLIMIT_NOFILE stay for the HTTP port, the
 * store's connections and reloads. */
#define RESERVE_MIN 16
#define RESERVE_DIV 8

/* A connection accepted whose preface has not arrived yet. */
struct pending {
	int fd;
	int64_t deadline_ms; /* closed then (monotonic) */
	int64_t recheck_ms;  /* partial preface: peek again then; 0: poll */
};

struct drld_acceptor {
	int fd;                   /* the listening socket */
	struct drld_stopper stop; /* its fd readable once stopping began */
	bool tcp;
	unsigned port;
	char path[DRLD_UNIX_PATH_MAX + 1]; /* a unix socket's file, or "" */
	drld_accept_fn *deal;
	void *arg;
	bool failing; /* said so on stderr; until a connection is accepted */
	unsigned preface_ms; /* a connection's time to send its preface */
	int fd_line;         /* a descriptor from here on is over the reserve */
	/* most connections waiting: the descriptors free below fd_line at
	 * start (at most PENDING_MAX) */
	size_t budget;
	/* accept order, so deadlines are in order too */
	struct pending pend[PENDING_MAX];
	size_t npend;
	struct pollfd pfd[2 + PENDING_MAX];
	drld_closed_fn *closed;
};

/* CLOCK_MONOTONIC in ms (drl_mono_us(): the library's, in µs). */
static int64_t now_ms(void)
{
	return drl_mono_us() / 1000;
}

/* Close pending connection i (it sent no preface in time, or another
 * needs its place) and take it out of the list. */
static void drop_pending(struct drld_acceptor *a, size_t i)
{
	close(a->pend[i].fd);
	a->closed(a->arg, DRLD_CLOSED_NO_PREFACE);
	memmove(&a->pend[i], &a->pend[i + 1],
		(a->npend - i - 1) * sizeof a->pend[0]);
	a->npend--;
}

/* Hand pending connection i to the server (its preface is in). */
static void deal_pending(struct drld_acceptor *a, size_t i)
{
	int fd = a->pend[i].fd, one = 1;

	if (a->tcp)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
	memmove(&a->pend[i], &a->pend[i + 1],
		(a->npend - i - 1) * sizeof a->pend[0]);
	a->npend--;
	a->deal(a->arg, fd);
}

/* Look at what pending connection i has sent: deal it once the whole
 * preface is in, close it when it sent something else or hung up, else
 * let it wait. Returns whether it left the list. */
static bool look(struct drld_acceptor *a, size_t i, int64_t now)
{
	char buf[PREFACE_LEN];
	ssize_t got =
		recv(a->pend[i].fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);

	a->pend[i].recheck_ms = 0;
	if (got < 0 &&
	    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return false;
	if (got <= 0 || memcmp(buf, preface, (size_t)got) != 0) {
		drop_pending(a, i); /* hung up, failed, or not HTTP/2 */
		return true;
	}
	if ((size_t)got == PREFACE_LEN) {
		deal_pending(a, i);
		return true;
	}
	a->pend[i].recheck_ms = now + PARTIAL_RECHECK_MS;
	return false;
}

/* One connection of listening socket lfd, or -1 (errno). Its own function
 * so that tests/fixtures/tsan_grpc.supp can name it: the descriptor goes to
 * grpc, which closes it where ThreadSanitizer does not look, and TSan would
 * report the next user of the same number as racing with this accept. */
static int acceptor_accept4(int lfd)
{
	return accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

/* Whether accept(2)'s errno is one to try again at once: a signal, or an
 * error of the connection that was waiting (Linux passes pending network
 * errors of the new socket to accept, which should be retried). */
static bool retry_at_once(int e)
{
	switch (e) {
	case EINTR:
	case ECONNABORTED:
	case EPROTO:
	case ENETDOWN:
	case ENOPROTOOPT:
	case EHOSTDOWN:
	case ENONET:
	case EHOSTUNREACH:
	case EOPNOTSUPP:
	case ENETUNREACH:
		return true;
	default:
		return false;
	}
}

/* Take connection fd into the list of those waiting for their preface.
 * Past the descriptor reserve or PENDING_MAX, the connection that has
 * waited longest makes room (a flood of silent connections only closes
 * its own, and a client that speaks at once gets through); with none
 * waiting, the new one is refused: every descriptor left is held by
 * connections grpc serves. */
static void take(struct drld_acceptor *a, int fd, int64_t now)
{
	if (fd >= a->fd_line || a->npend >= a->budget) {
		if (a->npend == 0) {
			close(fd);
			a->closed(a->arg, DRLD_CLOSED_NO_DESCRIPTOR);
			return;
		}
		drop_pending(a, 0);
	}
	if (a->tcp) {
		/* what grpc's own listener sets on a connection: an
		 * answer leaves at once, not after the peer's delayed
		 * ACK; and poll wakes once the whole preface is in */
		int one = 1, lowat = (int)PREFACE_LEN;
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
				 sizeof one);
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat,
				 sizeof lowat);
	}
	a->pend[a->npend++] = (struct pending){
		fd,                  /* fd */
		now + a->preface_ms, /* deadline_ms */
		0,                   /* recheck_ms */
	};
}

/* Accept what is waiting; false after an error that lasts (out of
 * descriptors with no waiting connection to close, and anything
 * unexpected): wait, then try again. The first of a run of such errors
 * is said on stderr. */
static bool accept_all(struct drld_acceptor *a)
{
	for (;;) {
		int fd = acceptor_accept4(a->fd);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return true; /* none left */
			if (retry_at_once(errno))
				continue;
			if ((errno == EMFILE || errno == ENFILE) &&
			    a->npend > 0) {
				drop_pending(a, 0); /* room for this one */
				continue;
			}
			if (!a->failing)
				fprintf(stderr,
					"drld: grpc: cannot accept a "
					"connection: %s (trying again every "
					"%d ms)\n",
					strerror(errno), ACCEPT_RETRY_MS);
			a->failing = true;
			return false;
		}
		a->failing = false;
		take(a, fd, now_ms());
	}
}

/* Close the connections whose preface is late (the oldest come first),
 * and return the ms until the next deadline or recheck (-1: none). */
static int expire(struct drld_acceptor *a, int64_t now)
{
	int64_t next = -1;

	while (a->npend > 0 && a->pend[0].deadline_ms <= now)
		drop_pending(a, 0);
	for (size_t i = 0; i < a->npend; i++) {
		int64_t t = a->pend[i].recheck_ms;
		if (t == 0 || t > a->pend[i].deadline_ms)
			t = a->pend[i].deadline_ms;
		if (next < 0 || t < next)
			next = t;
	}
	if (next < 0)
		return -1;
	return next <= now ? 0 : (int)(next - now);
}

/* Until the stop descriptor is readable: accept whatever the listening
 * socket has (or, backing off, wait ACCEPT_RETRY_MS), and deal each
 * connection once its preface is in, closing those whose preface is
 * late. */
static void *run(void *arg)
{
	struct drld_acceptor *a = arg;
	bool backoff = false;

	(void)pthread_setname_np(pthread_self(), "drld-accept");
	for (;;) {
		int64_t now = now_ms();
		int wait = expire(a, now);
		struct pollfd *p = a->pfd;
		size_t np = a->npend;

		p[0] = (struct pollfd){a->stop.fd, POLLIN, 0};
		p[1] = (struct pollfd){a->fd, backoff ? 0 : POLLIN, 0};
		for (size_t i = 0; i < np; i++)
			p[2 + i] = (struct pollfd){
				a->pend[i].fd,
				a->pend[i].recheck_ms ? 0 : POLLIN, 0};
		if (backoff && (wait < 0 || wait > ACCEPT_RETRY_MS))
			wait = ACCEPT_RETRY_MS;
		int got = poll(p, 2 + np, wait);
		if (got < 0) {
			if (errno != EINTR) {
				/* ENOMEM, the only one that can be: wait
				 * without poll, then try again */
				struct timespec ts = {0, ACCEPT_RETRY_MS *
								 1000000L};
				nanosleep(&ts, NULL);
			}
			continue;
		}
		if (p[0].revents != 0)
			break;
		now = now_ms();
		/* the waiting connections, newest first: one that leaves
		 * moves only those after it, already looked at */
		for (size_t i = np; i-- > 0;) {
			struct pending *w = &a->pend[i];
			if (p[2 + i].revents != 0 ||
			    (w->recheck_ms != 0 && w->recheck_ms <= now))
				(void)look(a, i, now);
		}
		if (backoff)
			backoff = false; /* waited: accept again */
		else if (p[1].revents != 0)
			backoff = !accept_all(a);
	}
	for (size_t i = 0; i < a->npend; i++)
		close(a->pend[i].fd);
	a->npend = 0;
	return NULL;
}

/* Bind a->fd to addr; -1 with errno on failure. */
static int bind_addr(struct drld_acceptor *a, const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len;

	if (drld_is_unix_listen(addr)) {
		struct sockaddr_un *un = (struct sockaddr_un *)&ss;
		struct stat st;
		memset(un, 0, sizeof *un);
		un->sun_family = AF_UNIX;
		strcpy(un->sun_path, addr + 5); /* length checked */
		/* a stale socket (a killed drld's) goes, as grpc's own
		 * listener does it; any other file stays and the bind
		 * fails */
		if (lstat(un->sun_path, &st) == 0 && S_ISSOCK(st.st_mode))
			(void)unlink(un->sun_path);
		len = sizeof *un;
		a->fd = socket(AF_UNIX,
			       SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (a->fd < 0 || bind(a->fd, (struct sockaddr *)un, len) != 0)
			return -1;
		strcpy(a->path, un->sun_path);
		return 0;
	}
	if (!drld_parse_listen(addr, &ss)) {
		errno = EINVAL;
		return -1;
	}
	a->tcp = true;
	len = ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
				       : sizeof(struct sockaddr_in);
	a->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		       0);
	int one = 1, zero = 0;
	/* [::]:PORT takes IPv4 too, as with grpc's own listener (which
	 * makes every IPv6 socket dual-stack), whatever the host's
	 * net.ipv6.bindv6only */
	if (a->fd >= 0 && ss.ss_family == AF_INET6)
		(void)setsockopt(a->fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero,
				 sizeof zero);
	if (a->fd < 0 ||
	    setsockopt(a->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) !=
		    0 ||
	    bind(a->fd, (struct sockaddr *)&ss, len) != 0 ||
	    getsockname(a->fd, (struct sockaddr *)&ss, &len) != 0)
		return -1;
	a->port = ntohs(ss.ss_family == AF_INET6
				? ((struct sockaddr_in6 *)&ss)->sin6_port
				: ((struct sockaddr_in *)&ss)->sin_port);
	return 0;
}

/* How many descriptors the process has open (-1: unknown). */
static int open_descriptors(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = -1; /* the directory's own */

	if (d == NULL)
		return -1;
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n - 2; /* . and .. */
}

/* The first descriptor over the reserve (see RESERVE_MIN). */
static int fd_line(void)
{
	struct rlimit rl;
	rlim_t lim = 1024;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		lim = rl.rlim_cur;
	if (lim > INT32_MAX)
		lim = INT32_MAX;
	rlim_t reserve = lim / RESERVE_DIV;
	if (reserve < RESERVE_MIN)
		reserve = RESERVE_MIN;
	return lim > reserve ? (int)(lim - reserve) : 0;
}

int drld_acceptor_start(struct drld_acceptor **out, const char *addr,
			unsigned preface_s, drld_accept_fn *deal,
			drld_closed_fn *closed, void *arg, char *msg, size_t n)
{
	struct drld_acceptor *a = calloc(1, sizeof *a);

	*out = NULL;
	if (a == NULL) {
		snprintf(msg, n, "out of memory");
		return -1;
	}
	a->fd = -1;
	a->deal = deal;
	a->closed = closed;
	a->arg = arg;
	a->preface_ms = preface_s * 1000;
	a->fd_line = fd_line();
	/* Waiting connections may take the descriptors free below the
	 * line now, no more: a number under the line says nothing of how
	 * many are open (closing the oldest frees a low one), and counting
	 * only numbers let them creep up to the limit. */
	int open = open_descriptors();
	int room = open < 0 ? a->fd_line / 2 : a->fd_line - open;
	a->budget = room < 1             ? 1
		    : room > PENDING_MAX ? PENDING_MAX
					 : (size_t)room;
	if (bind_addr(a, addr) != 0 || listen(a->fd, SOMAXCONN) != 0) {
		snprintf(msg, n, "cannot listen (%s)", strerror(errno));
		goto fail;
	}
	int rc = drld_stopper_start(&a->stop, run, a);
	if (rc != 0) {
		snprintf(msg, n, "cannot start the acceptor: %s", strerror(rc));
		goto fail;
	}
	*out = a;
	return 0;
fail:
	if (a->fd >= 0)
		close(a->fd);
	if (a->path[0] != '\0')
		(void)unlink(a->path);
	free(a);
	return -1;
}

unsigned drld_acceptor_port(const struct drld_acceptor *a)
{
	return a->port;
}

void drld_acceptor_stop(struct drld_acceptor *a)
{
	if (a == NULL)
		return;
	drld_stopper_stop(&a->stop, "the gRPC acceptor");
	close(a->fd);
	if (a->path[0] != '\0')
		(void)unlink(a->path);
	free(a);
}
