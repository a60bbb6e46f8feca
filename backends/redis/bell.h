/*
 * A bell: one word that many threads sleep on, each for bits of its own,
 * rung for some bits at once (internal; Linux futexes: FUTEX_WAIT_BITSET
 * and FUTEX_WAKE_BITSET).
 *
 * Why not a semaphore per sleeper: the shared pipes (backends/redis/pipe.c)
 * wake every caller of a batch at once, and one ring is one system call
 * for the whole batch where semaphores take one each, with the ringing
 * thread preempted by the first woken (16 threads on one pipe: 2.1 futex
 * calls and 1.5 context switches a decision with semaphores, 1.2 and 1.25
 * with the bell; perf stat of scripts/bench_client.sh's "threads 16").
 *
 * Contract: a sleeper waits for a condition of its own that the ringer
 * makes true (an atomic store, release) before it rings. The sleeper
 * peeks, checks its condition (acquire), and waits with what it peeked;
 * the wait returns at once if the bell rang since, and may return
 * spuriously: check the condition again. No wake-up is lost.
 */
#ifndef DRL_BELL_H
#define DRL_BELL_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct drl__bell {
	_Atomic uint32_t word; /* how many times it rang (wraps) */
} drl__bell;

/* The bell's count, to give drl__bell_wait(). */
uint32_t drl__bell_peek(drl__bell *b);
/* Sleep until a ring for one of `bits` (nonzero), unless the bell rang
 * since it counted `seen`; EINTR and spurious returns are the caller's
 * to loop over. */
void drl__bell_wait(drl__bell *b, uint32_t seen, uint32_t bits);
/* Ring: wake every thread waiting for one of `bits`. */
void drl__bell_ring(drl__bell *b, uint32_t bits);

#endif
