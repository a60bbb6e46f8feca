/*
 * A bell on a Linux futex, see backends/redis/bell.h. glibc has no wrapper for
 * futex(2): the system call is made directly.
 */
#include "bell.h"

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

uint32_t drl__bell_peek(drl__bell *b)
{
	return atomic_load_explicit(&b->word, memory_order_seq_cst);
}

void drl__bell_wait(drl__bell *b, uint32_t seen, uint32_t bits)
{
	/* EAGAIN (it rang since `seen`), EINTR, a wake: all return. */
	(void)syscall(SYS_futex, &b->word, FUTEX_WAIT_BITSET_PRIVATE, seen,
		      NULL, NULL, bits);
}

void drl__bell_ring(drl__bell *b, uint32_t bits)
{
	atomic_fetch_add_explicit(&b->word, 1, memory_order_seq_cst);
	(void)syscall(SYS_futex, &b->word, FUTEX_WAKE_BITSET_PRIVATE, INT_MAX,
		      NULL, NULL, bits);
}
