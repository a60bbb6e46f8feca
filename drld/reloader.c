/* The reload thread: see reloader.h. */
#include "reloader.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct drld_reloader {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	void (*fn)(void *arg);
	void *arg;
	bool pending; /* a kick not yet served */
	bool running; /* fn is running */
	bool quit;    /* drld_reloader_stop() was called */
};

static void *loop(void *p)
{
	struct drld_reloader *r = p;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		while (!r->pending && !r->quit)
			pthread_cond_wait(&r->cond, &r->lock);
		if (r->quit)
			break;
		r->pending = false;
		r->running = true;
		pthread_mutex_unlock(&r->lock);
		r->fn(r->arg);
		pthread_mutex_lock(&r->lock);
		r->running = false;
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int drld_reloader_start(struct drld_reloader **out, void (*fn)(void *arg),
			void *arg)
{
	struct drld_reloader *r = calloc(1, sizeof *r);
	int rc;

	*out = NULL;
	if (r == NULL)
		return ENOMEM;
	r->fn = fn;
	r->arg = arg;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	rc = pthread_create(&r->thread, NULL, loop, r);
	if (rc != 0) {
		pthread_cond_destroy(&r->cond);
		pthread_mutex_destroy(&r->lock);
		free(r);
		return rc;
	}
	*out = r;
	return 0;
}

void drld_reloader_kick(struct drld_reloader *r)
{
	pthread_mutex_lock(&r->lock);
	r->pending = true;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

bool drld_reloader_stop(struct drld_reloader *r)
{
	if (r == NULL)
		return true;
	pthread_mutex_lock(&r->lock);
	r->quit = true;
	bool busy = r->running;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	if (busy) {
		/* left to the process's exit, which ends it: detached, it
		 * is not a thread leak (TSan says so of a joinable one) */
		pthread_detach(r->thread);
		return false;
	}
	/* not running, and it will not start: quit is seen first */
	pthread_join(r->thread, NULL);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	free(r);
	return true;
}
