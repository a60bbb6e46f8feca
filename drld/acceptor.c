/* drld's own listening socket for its gRPC shards: see acceptor.h. */
#include "acceptor.h"

#include "listen_addr.h"

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
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* How long the thread waits before accepting again after an error that
 * lasts (out of descriptors: EMFILE): the listening socket stays
 * readable, so retrying at once would spin. */
#define ACCEPT_RETRY_MS 100

struct drld_acceptor {
	int fd;      /* the listening socket */
	int stop_fd; /* eventfd: readable once drld_acceptor_stop() began */
	bool tcp;
	unsigned port;
	char path[DRLD_UNIX_PATH_MAX + 1]; /* a unix socket's file, or "" */
	drld_accept_fn *deal;
	void *arg;
	pthread_t thread;
	bool failing; /* said so on stderr; until a connection is accepted */
};

/* One connection of listening socket lfd, or -1 (errno). Its own function
 * so that tests/tsan_grpc.supp can name it: the descriptor goes to grpc,
 * which closes it where ThreadSanitizer does not look, and TSan would
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

/* Accept what is waiting; false after an error that lasts (out of
 * descriptors, and anything unexpected): wait, then try again. The first
 * of a run of such errors is said on stderr. */
static bool accept_all(struct drld_acceptor *a)
{
	for (;;) {
		int fd = acceptor_accept4(a->fd);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return true; /* none left */
			if (retry_at_once(errno))
				continue;
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
		if (a->tcp) {
			/* what grpc's own listener sets on a connection:
			 * an answer leaves at once, not after the peer's
			 * delayed ACK */
			int one = 1;
			(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
					 sizeof one);
		}
		a->deal(a->arg, fd);
	}
}

/* Until the stop descriptor is readable: accept whatever the listening
 * socket has, or (backing off) wait ACCEPT_RETRY_MS for the stop alone. */
static void *run(void *arg)
{
	struct drld_acceptor *a = arg;
	bool backoff = false;

	(void)pthread_setname_np(pthread_self(), "drld-accept");
	for (;;) {
		struct pollfd p[2] = {{a->stop_fd, POLLIN, 0},
				      {a->fd, POLLIN, 0}};
		int got = poll(p, backoff ? 1 : 2,
			       backoff ? ACCEPT_RETRY_MS : -1);
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
		if (backoff)
			backoff = false; /* waited: accept again */
		else
			backoff = !accept_all(a);
	}
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

int drld_acceptor_start(struct drld_acceptor **out, const char *addr,
			drld_accept_fn *deal, void *arg, char *msg, size_t n)
{
	struct drld_acceptor *a = calloc(1, sizeof *a);

	*out = NULL;
	if (a == NULL) {
		snprintf(msg, n, "out of memory");
		return -1;
	}
	a->fd = a->stop_fd = -1;
	a->deal = deal;
	a->arg = arg;
	if (bind_addr(a, addr) != 0 || listen(a->fd, SOMAXCONN) != 0) {
		snprintf(msg, n, "cannot listen (%s)", strerror(errno));
		goto fail;
	}
	a->stop_fd = eventfd(0, EFD_CLOEXEC);
	int rc = a->stop_fd < 0 ? errno
				: pthread_create(&a->thread, NULL, run, a);
	if (rc != 0) {
		snprintf(msg, n, "cannot start the acceptor: %s", strerror(rc));
		goto fail;
	}
	*out = a;
	return 0;
fail:
	if (a->fd >= 0)
		close(a->fd);
	if (a->stop_fd >= 0)
		close(a->stop_fd);
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
	uint64_t one = 1;
	while (write(a->stop_fd, &one, sizeof one) < 0 && errno == EINTR)
		;
	pthread_join(a->thread, NULL);
	close(a->fd);
	close(a->stop_fd);
	if (a->path[0] != '\0')
		(void)unlink(a->path);
	free(a);
}
