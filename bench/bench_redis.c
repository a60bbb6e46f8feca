/* The benchmarks' redis-server (bench_redis.h). */
#include "bench_redis.h"

#include <drl/drl.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double bench_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A loopback port nobody listens on right now. */
static int free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* Start redis-server on a free port; its pid, or -1. */
pid_t bench_redis_start(char *uri, size_t cap)
{
	int port = free_port();
	char ports[16];
	if (port < 0)
		return -1;
	snprintf(ports, sizeof ports, "%d", port);
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		if (null >= 0) {
			dup2(null, 1);
			dup2(null, 2);
		}
		execlp("redis-server", "redis-server", "--port", ports,
		       "--bind", "127.0.0.1", "--save", "", "--appendonly",
		       "no", "--daemonize", "no", (char *)NULL);
		_exit(127);
	}
	if (pid < 0)
		return -1;
	snprintf(uri, cap, "redis://127.0.0.1:%d?tx=lua", port);
	for (int i = 0; i < 100; i++) {
		drl_store *s = NULL;
		if (drl_store_open(&s, uri, NULL) == 0) {
			drl_store_free(s);
			return pid;
		}
		usleep(50000);
	}
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	return -1;
}

bool bench_target_open(bench_target *t, const char *given)
{
	t->store = NULL;
	t->server = -1;
	if (given != NULL) {
		snprintf(t->uri, sizeof t->uri, "%s", given);
	} else if ((t->server = bench_redis_start(t->uri, sizeof t->uri)) < 0) {
		fprintf(stderr, "cannot start redis-server\n");
		return false;
	}
	drl_error err = {0};
	if (drl_store_open(&t->store, t->uri, &err)) {
		fprintf(stderr, "%s: %s\n", t->uri, err.message);
		bench_redis_stop(t->server);
		return false;
	}
	return true;
}

void bench_target_close(bench_target *t)
{
	drl_store_free(t->store);
	bench_redis_stop(t->server);
}

void bench_redis_stop(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
}
