/*
 * The ceiling of blocking callers on one shared connection (a benchmark's
 * tool, built by scripts/bench_client.sh): THREADS threads each make
 * decisions one at a time, blocking, as drl_allow() callers do; a
 * decision sends what a fixed-window decision sends with tx=auto, INCRBY
 * and PEXPIRE of one key of 10,000, formatted before the clock starts,
 * and nothing else is done per decision. The calls meet on one
 * connection the way libdrl's pipes meet them, minus the library: a call
 * queues itself; whoever finds no leader leads: takes every queued call,
 * writes them with one writev(), reads their replies, wakes their
 * threads (WAKE "sem": a semaphore each; "ring": one futex wake for the
 * batch, by the batch's bit; "yield": ring, and a waiting caller yields
 * its CPU 8 times before it sleeps, as libdrl's pipes do), and leads
 * again while calls are queued. Every decision is one
 * thread asleep and woken: what any blocking client pays here. Prints
 * "decisions seconds".
 *
 *   threads_ceiling PORT SECONDS THREADS WAKE
 */
#include "ceiling_cmds.h"

#include <hiredis/hiredis.h>

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

typedef struct call {
	struct call *next;
	int k;
	_Atomic int state; /* 0 waiting, 1 done */
	uint32_t bit;      /* its batch's bit (ring) */
	sem_t sem;
} call;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static call *head, *tail;
static unsigned batches; /* taken so far (mu) */
static bool leading;
static redisContext *ctx;
static bool ring;  /* WAKE: ring or yield, else sem */
static int yields; /* WAKE yield: 8 */
static _Atomic uint32_t bell;
static _Atomic bool stop;
static _Atomic long decisions;

static void wake(call *c, int state)
{
	atomic_store(&c->state, state);
	if (!ring)
		sem_post(&c->sem);
}

static void await(call *c)
{
	for (int i = 0; i < yields; i++) {
		if (atomic_load(&c->state))
			return;
		sched_yield();
	}
	for (;;) {
		uint32_t seen = atomic_load(&bell);
		if (atomic_load(&c->state))
			return;
		if (ring)
			syscall(SYS_futex, &bell, FUTEX_WAIT_BITSET_PRIVATE,
				seen, NULL, NULL, c->bit);
		else
			while (sem_wait(&c->sem) != 0)
				;
	}
}

/* Lead: run batches while calls are queued (exits on any error). */
static void lead(void)
{
	pthread_mutex_lock(&mu);
	for (;;) {
		call *batch = head;
		head = tail = NULL;
		uint32_t bit = 1u << (++batches & 31);
		if (batch == NULL) {
			leading = false;
			pthread_mutex_unlock(&mu);
			return;
		}
		pthread_mutex_unlock(&mu);
		struct iovec iov[64];
		int n = 0, ncalls = 0;
		for (call *c = batch; c; c = c->next, ncalls++)
			iov[n++] = (struct iovec){cmds[c->k], lens[c->k]};
		if (writev(ctx->fd, iov, n) < 0) /* small: one write */
			exit(1);
		for (int i = 0; i < 2 * ncalls; i++) {
			void *r;
			if (redisGetReply(ctx, &r) != REDIS_OK)
				exit(1);
			freeReplyObject(r);
		}
		for (call *c = batch; c;) {
			call *nx = c->next;
			wake(c, 1);
			c = nx;
		}
		if (ring) {
			atomic_fetch_add(&bell, 1);
			syscall(SYS_futex, &bell, FUTEX_WAKE_BITSET_PRIVATE,
				INT_MAX, NULL, NULL, bit);
		}
		pthread_mutex_lock(&mu);
	}
}

static void *caller(void *arg)
{
	unsigned seed = (unsigned)(size_t)arg;
	call c;
	sem_init(&c.sem, 0, 0);
	while (!atomic_load(&stop)) {
		c.k = (int)(rand_r(&seed) % KEYS);
		c.next = NULL;
		atomic_store(&c.state, 0);
		pthread_mutex_lock(&mu);
		if (tail)
			tail->next = &c;
		else
			head = &c;
		tail = &c;
		c.bit = 1u << ((batches + 1) & 31);
		bool me = !leading;
		leading = true;
		pthread_mutex_unlock(&mu);
		if (me)
			lead();
		else
			await(&c);
		atomic_fetch_add(&decisions, 1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 5)
		return 2;
	double secs = atof(argv[2]);
	int threads = atoi(argv[3]);
	yields = strcmp(argv[4], "yield") == 0 ? 8 : 0;
	ring = yields || strcmp(argv[4], "ring") == 0;
	if (threads < 1 || threads > 64)
		return 2;
	ctx = redisConnect("127.0.0.1", atoi(argv[1]));
	if (ctx == NULL || ctx->err)
		return 1;
	format_all();
	pthread_t t[64];
	double t0 = now_s();
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, caller, (void *)(size_t)(i + 1));
	usleep((useconds_t)(secs * 1e6));
	long done = atomic_load(&decisions);
	double took = now_s() - t0;
	atomic_store(&stop, true);
	printf("%ld %f\n", done, took);
	fflush(stdout);
	_exit(0); /* callers may be asleep in a batch: no join */
}
