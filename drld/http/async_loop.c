/* A drl_async context and its callbacks' thread: see async_loop.h. */
#include "async_loop.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct drld_async_loop {
	drl_async *a;
	int stop; /* eventfd: readable once drld_async_loop_stop() began */
	pthread_t thread;
};

/* Run callbacks whenever the context's fd is readable; once told to stop,
 * go on until nothing is in flight. */
static void *run(void *arg)
{
	struct drld_async_loop *l = arg;
	bool stopping = false;
	(void)pthread_setname_np(pthread_self(), "drld-async");
	for (;;) {
		struct pollfd p[2] = {
			{.fd = drl_async_fd(l->a), .events = POLLIN},
			{.fd = l->stop, .events = POLLIN},
		};
		/* stopping: the stop fd stays readable, so wait on the
		 * context alone, a little at a time */
		int n = poll(p, stopping ? 1 : 2, stopping ? 10 : -1);
		if (n < 0 && errno != EINTR)
			break;
		if (n > 0 && (p[0].revents & POLLIN))
			drl_async_process(l->a);
		if (!stopping && n > 0 && (p[1].revents & POLLIN))
			stopping = true;
		if (stopping && drl_async_pending(l->a) == 0)
			break;
	}
	return NULL;
}

int drld_async_loop_start(struct drld_async_loop **out, size_t queue, char *msg,
			  size_t n)
{
	struct drld_async_loop *l = calloc(1, sizeof *l);
	drl_error err = {0};
	/* one worker, the minimum: direct decisions need none */
	drl_async_opts o = {.threads = 1, .queue = queue};

	*out = NULL;
	if (l == NULL) {
		snprintf(msg, n, "out of memory");
		return -1;
	}
	l->stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->stop < 0 || drl_async_new(&l->a, &o, &err) != 0) {
		snprintf(msg, n, "async context: %s",
			 l->stop < 0 ? "no eventfd" : err.message);
		if (l->stop >= 0)
			close(l->stop);
		free(l);
		return -1;
	}
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&l->thread, NULL, run, l);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		snprintf(msg, n, "cannot start the async loop's thread");
		drl_async_free(l->a);
		close(l->stop);
		free(l);
		return -1;
	}
	*out = l;
	return 0;
}

drl_async *drld_async_loop_context(struct drld_async_loop *l)
{
	return l->a;
}

void drld_async_loop_stop(struct drld_async_loop *l)
{
	if (l == NULL)
		return;
	uint64_t one = 1;
	ssize_t w = write(l->stop, &one, sizeof one);
	(void)w;
	pthread_join(l->thread, NULL);
	drl_async_free(l->a);
	close(l->stop);
	free(l);
}
