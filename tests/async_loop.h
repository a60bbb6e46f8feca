/*
 * The loop adapters' tests, written once: an adapter test describes its
 * event loop (make, attach, run, stop, detach, free) and runs these
 * against it, on memory:// and a real redis-server (tx=lua): callbacks run
 * on the loop's thread, requests started from callbacks keep 64 in flight,
 * a hot key admits exactly the limit, bad attach arguments are DRL_EINVAL;
 * the loop returns by itself once every callback ran (the adapter keeps
 * it alive only while the context is busy), drl_async_free() without a
 * detach cleans the adapter up, a poll error reaches the error callback,
 * and a drain ends with the loop returning after its done callback.
 */
#ifndef DRL_ASYNC_LOOP_H
#define DRL_ASYNC_LOOP_H

#include <drl/async.h>

struct loop_error;

typedef struct async_loop {
	const char *name;
	void *(*make)(void); /* a new loop */
	/* attach a to loop: 0 and *h, or the adapter's error */
	int (*attach)(void *loop, drl_async *a, void **h, drl_error *err);
	/* the adapter's attach with NULL arguments: must be DRL_EINVAL */
	int (*attach_null)(drl_async *a, drl_error *err);
	void (*run)(void *loop);  /* until stop() */
	void (*stop)(void *loop); /* from a callback on the loop */
	void (*detach)(void *h);
	void (*free)(void *loop); /* after detach, or drl_async_free */
	/* set the adapter's error callback: counts into *e (NULL: none) */
	void (*on_error)(void *h, struct loop_error *e);
	/* whether something keeps the loop running (a referenced handle,
	 * an added event) */
	int (*alive)(void *loop);
	/* optional (NULL: the cross-thread test skips): something that
	 * keeps the loop running until release(token), which any thread
	 * may call */
	void *(*hold)(void *loop);
	void (*release)(void *token);
} async_loop;

/* What the adapter's error callback saw. */
typedef struct loop_error {
	int count;
	drl_error err;
} loop_error;

/* Run the tests (cmocka) on loop L; main()'s exit status. */
int async_loop_main(const async_loop *L);

#endif
