/* Whole-request deadlines for HTTP connections: see deadline.h. */
#include "deadline.h"

#include "list.h"

#include <drl/drl.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

/* How often the thread looks for connections past their deadline: a
 * connection may outlive its deadline by this much. */
#define SCAN_MS 250

struct drld_deadline {
	int fd;
	/* CLOCK_MONOTONIC ms by which the request must be in; 0: none */
	atomic_int_fast64_t due;
	struct drld_deadline *prev, *next; /* under the list's lock */
	bool pushed; /* shut down to make room (under the lock) */
};

struct drld_deadlines {
	pthread_mutex_t lock; /* the list and stop */
	pthread_cond_t wake;  /* stop */
	struct drld_deadline *head;
	size_t open;   /* connections in the list */
	size_t pushed; /* of those, shut down to make room, not yet gone */
	bool stop;
	int64_t timeout_ms;
	pthread_t thread;
};

/* CLOCK_MONOTONIC in ms (drl_mono_us(): the library's, in µs). */
static int64_t now_ms(void)
{
	return drl_mono_us() / 1000;
}

/* Every SCAN_MS until stopped: shut down the sockets past their
 * deadline. Under the lock, so a connection removed (and its socket
 * closed, the number free for another) is never touched. */
static void *run(void *arg)
{
	struct drld_deadlines *ds = arg;

	(void)pthread_setname_np(pthread_self(), "drld-deadline");
	pthread_mutex_lock(&ds->lock);
	while (!ds->stop) {
		int64_t now = now_ms();
		for (struct drld_deadline *c = ds->head; c != NULL;
		     c = c->next) {
			int64_t due = atomic_load_explicit(
				&c->due, memory_order_relaxed);
			if (due != 0 && due <= now) {
				atomic_store_explicit(&c->due, 0,
						      memory_order_relaxed);
				(void)shutdown(c->fd, SHUT_RDWR);
			}
		}
		/* on the condition's clock, CLOCK_MONOTONIC: drl_mono_us()'s */
		int64_t wake_us = drl_mono_us() + SCAN_MS * 1000;
		struct timespec until = {(time_t)(wake_us / 1000000),
					 (long)(wake_us % 1000000) * 1000};
		while (!ds->stop && pthread_cond_timedwait(&ds->wake, &ds->lock,
							   &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&ds->lock);
	return NULL;
}

int drld_deadlines_start(struct drld_deadlines **out, unsigned timeout_s)
{
	struct drld_deadlines *ds = calloc(1, sizeof *ds);
	pthread_condattr_t ca;

	*out = NULL;
	if (ds == NULL)
		return -1;
	ds->timeout_ms = (int64_t)timeout_s * 1000;
	pthread_mutex_init(&ds->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ds->wake, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&ds->thread, NULL, run, ds) != 0) {
		pthread_cond_destroy(&ds->wake);
		pthread_mutex_destroy(&ds->lock);
		free(ds);
		return -1;
	}
	*out = ds;
	return 0;
}

struct drld_deadline *drld_deadline_add(struct drld_deadlines *ds, int fd)
{
	struct drld_deadline *c = calloc(1, sizeof *c);

	if (c == NULL)
		return NULL;
	c->fd = fd;
	atomic_init(&c->due, now_ms() + ds->timeout_ms);
	pthread_mutex_lock(&ds->lock);
	DRLD_LIST_PUSH(ds->head, c, prev, next);
	ds->open++;
	pthread_mutex_unlock(&ds->lock);
	return c;
}

void drld_deadline_arm(struct drld_deadlines *ds, struct drld_deadline *c)
{
	if (c != NULL)
		atomic_store_explicit(&c->due, now_ms() + ds->timeout_ms,
				      memory_order_relaxed);
}

void drld_deadline_disarm(struct drld_deadline *c)
{
	if (c != NULL)
		atomic_store_explicit(&c->due, 0, memory_order_relaxed);
}

void drld_deadline_remove(struct drld_deadlines *ds, struct drld_deadline *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&ds->lock);
	DRLD_LIST_UNLINK(ds->head, c, prev, next);
	ds->open--;
	if (c->pushed)
		ds->pushed--;
	pthread_mutex_unlock(&ds->lock);
	free(c);
}

bool drld_deadlines_make_room(struct drld_deadlines *ds, size_t soft)
{
	struct drld_deadline *oldest = NULL;
	int64_t oldest_due = 0;

	pthread_mutex_lock(&ds->lock);
	if (ds->open - ds->pushed >= soft) {
		/* armed the earliest: all deadlines are timeout_ms long */
		for (struct drld_deadline *c = ds->head; c != NULL;
		     c = c->next) {
			int64_t due = atomic_load_explicit(
				&c->due, memory_order_relaxed);
			if (due != 0 && !c->pushed &&
			    (oldest == NULL || due < oldest_due)) {
				oldest = c;
				oldest_due = due;
			}
		}
	}
	if (oldest != NULL) {
		oldest->pushed = true;
		ds->pushed++;
		atomic_store_explicit(&oldest->due, 0, memory_order_relaxed);
		(void)shutdown(oldest->fd, SHUT_RDWR);
	}
	pthread_mutex_unlock(&ds->lock);
	return oldest != NULL;
}

void drld_deadlines_stop(struct drld_deadlines *ds)
{
	if (ds == NULL)
		return;
	pthread_mutex_lock(&ds->lock);
	ds->stop = true;
	pthread_cond_signal(&ds->wake);
	pthread_mutex_unlock(&ds->lock);
	pthread_join(ds->thread, NULL);
	pthread_cond_destroy(&ds->wake);
	pthread_mutex_destroy(&ds->lock);
	free(ds);
}
