/*
 * The Redis store's threads (the pipes' I/O, Sentinel's resolver, the
 * resolver source's listener), started as the library's others: with
 * every signal blocked, so the program's signals go to its own threads.
 * Every layer's (internal.h).
 */
#ifndef DRL_REDIS_THREAD_H
#define DRL_REDIS_THREAD_H

#include <pthread.h>
#include <signal.h>

/* Start thread *t running fn(arg) with every signal blocked; the
 * caller's mask is restored. pthread_create's answer: 0, or an error
 * number. */
static inline int drl__redis_thread_start(pthread_t *t, void *(*fn)(void *),
					  void *arg)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

#endif /* DRL_REDIS_THREAD_H */
