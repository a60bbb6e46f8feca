/*
 * The loop adapters' tests, written once: an adapter test describes its
 * event loop (make, attach, run, stop, detach, free) and runs these
 * against it, on memory:// and a real redis-server (tx=lua): callbacks run
 * on the loop's thread, requests started from callbacks keep 64 in flight,
 * a hot key admits exactly the limit, bad attach arguments are DRL_EINVAL.
 */
#ifndef DRL_ASYNC_LOOP_H
#define DRL_ASYNC_LOOP_H

#include <drl/async.h>

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
	void (*free)(void *loop); /* after detach */
} async_loop;

/* Run the tests (cmocka) on loop L; main()'s exit status. */
int async_loop_main(const async_loop *L);

#endif
