/* A fake Redis Sentinel: see fake_sentinel.h. RESP by hand: the few
 * lines a test server needs (hiredis parses replies, not requests). */
#include "fake_sentinel.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define CLIENTS 16
#define BUF 4096

typedef struct client {
	int fd; /* -1: free */
	size_t len;
	char buf[BUF];
} client;

struct fake_sentinel {
	int lfd, stopfd, port;
	pthread_t thread;
	pthread_mutex_t mu;
	char host[256];
	int master_port;
	client c[CLIENTS];
};

/* The first complete command in c->buf: its name into name (n bytes) and
 * its length in bytes; 0 when incomplete, -1 when it is not RESP. */
static long one_command(const client *c, char *name, size_t n)
{
	const char *p = c->buf, *end = c->buf + c->len, *nl;
	if (c->len == 0)
		return 0;
	if (*p != '*')
		return -1;
	if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
		return 0;
	long argc = strtol(p + 1, NULL, 10);
	if (argc < 1 || argc > 64)
		return -1;
	p = nl + 1;
	for (long i = 0; i < argc; i++) {
		if (p >= end)
			return 0;
		if (*p != '$')
			return -1;
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			return 0;
		long len = strtol(p + 1, NULL, 10);
		if (len < 0 || len > BUF)
			return -1;
		p = nl + 1;
		if (end - p < len + 2)
			return 0;
		if (i == 0)
			snprintf(name, n, "%.*s", (int)len, p);
		p += len + 2;
	}
	return p - c->buf;
}

/* Answer every complete command of c; false when c must be closed. */
static bool answer(fake_sentinel *fs, client *c)
{
	char name[32], out[400];
	long used;
	while ((used = one_command(c, name, sizeof name)) > 0) {
		if (strcasecmp(name, "SENTINEL") == 0) {
			char port[16];
			pthread_mutex_lock(&fs->mu);
			snprintf(port, sizeof port, "%d", fs->master_port);
			snprintf(out, sizeof out,
				 "*2\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n",
				 strlen(fs->host), fs->host, strlen(port),
				 port);
			pthread_mutex_unlock(&fs->mu);
		} else if (strcasecmp(name, "PING") == 0) {
			snprintf(out, sizeof out, "+PONG\r\n");
		} else if (strcasecmp(name, "SUBSCRIBE") == 0) {
			snprintf(out, sizeof out, "-ERR no pub/sub here\r\n");
		} else {
			snprintf(out, sizeof out, "+OK\r\n");
		}
		size_t len = strlen(out);
		if (write(c->fd, out, len) != (ssize_t)len)
			return false;
		memmove(c->buf, c->buf + used, c->len - (size_t)used);
		c->len -= (size_t)used;
	}
	return used == 0;
}

static void drop(client *c)
{
	close(c->fd);
	c->fd = -1;
	c->len = 0;
}

static void *serve(void *arg)
{
	fake_sentinel *fs = arg;
	for (;;) {
		struct pollfd p[CLIENTS + 2];
		int who[CLIENTS + 2];
		nfds_t n = 0;
		p[n++] = (struct pollfd){.fd = fs->stopfd, .events = POLLIN};
		p[n++] = (struct pollfd){.fd = fs->lfd, .events = POLLIN};
		for (int i = 0; i < CLIENTS; i++)
			if (fs->c[i].fd >= 0) {
				who[n] = i;
				p[n++] = (struct pollfd){.fd = fs->c[i].fd,
							 .events = POLLIN};
			}
		if (poll(p, n, -1) < 0)
			continue;
		if (p[0].revents)
			return NULL;
		if (p[1].revents) {
			int fd = accept(fs->lfd, NULL, NULL);
			int i = 0;
			while (fd >= 0 && i < CLIENTS && fs->c[i].fd >= 0)
				i++;
			if (fd >= 0 && i == CLIENTS)
				close(fd);
			else if (fd >= 0)
				fs->c[i].fd = fd;
		}
		for (nfds_t k = 2; k < n; k++) {
			client *c = &fs->c[who[k]];
			if (p[k].revents == 0)
				continue;
			ssize_t got = read(c->fd, c->buf + c->len,
					   sizeof c->buf - c->len);
			if (got <= 0) {
				drop(c);
				continue;
			}
			c->len += (size_t)got;
			if (!answer(fs, c) || c->len == sizeof c->buf)
				drop(c);
		}
	}
}

int fake_sentinel_start(fake_sentinel **out)
{
	fake_sentinel *fs = calloc(1, sizeof *fs);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof a;
	*out = NULL;
	if (fs == NULL)
		return -1;
	for (int i = 0; i < CLIENTS; i++)
		fs->c[i].fd = -1;
	pthread_mutex_init(&fs->mu, NULL);
	fs->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	fs->stopfd = eventfd(0, EFD_CLOEXEC);
	if (fs->lfd < 0 || fs->stopfd < 0 ||
	    bind(fs->lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
	    listen(fs->lfd, 16) != 0 ||
	    getsockname(fs->lfd, (struct sockaddr *)&a, &alen) != 0 ||
	    pthread_create(&fs->thread, NULL, serve, fs) != 0) {
		perror("fake_sentinel_start");
		if (fs->lfd >= 0)
			close(fs->lfd);
		if (fs->stopfd >= 0)
			close(fs->stopfd);
		pthread_mutex_destroy(&fs->mu);
		free(fs);
		return -1;
	}
	fs->port = ntohs(a.sin_port);
	*out = fs;
	return 0;
}

int fake_sentinel_port(const fake_sentinel *fs)
{
	return fs->port;
}

void fake_sentinel_set(fake_sentinel *fs, const char *host, int port)
{
	pthread_mutex_lock(&fs->mu);
	snprintf(fs->host, sizeof fs->host, "%s", host);
	fs->master_port = port;
	pthread_mutex_unlock(&fs->mu);
}

void fake_sentinel_stop(fake_sentinel *fs)
{
	uint64_t one = 1;
	if (fs == NULL)
		return;
	if (write(fs->stopfd, &one, sizeof one) != sizeof one)
		perror("fake_sentinel_stop");
	pthread_join(fs->thread, NULL);
	for (int i = 0; i < CLIENTS; i++)
		if (fs->c[i].fd >= 0)
			close(fs->c[i].fd);
	close(fs->lfd);
	close(fs->stopfd);
	pthread_mutex_destroy(&fs->mu);
	free(fs);
}
