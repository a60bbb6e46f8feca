/*
 * Small helpers of drl bench's files: bounded message copies and the
 * keys callers pick (a seeded xorshift64*, no lock: one state per caller).
 */
#include "shared.h"
#include "common/clock.h"

#include <drl/sys/backend.h>

#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* xorshift64*: key choice only. */
static uint64_t rand_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * UINT64_C(2685821657736338717);
}

uint64_t bench_rand_seed(uint64_t a, uint64_t b)
{
	uint64_t s = (a * UINT64_C(0x9e3779b97f4a7c15)) ^ b ^
		     (uint64_t)tl_mono_ns() ^ ((uint64_t)getpid() << 32);
	return s ? s : 1;
}

/* The decimal digits of v at p (up to 20, no NUL); returns how many. */
static size_t put_uint(char *p, uint64_t v)
{
	char tmp[20], *end = tmp + sizeof tmp, *d = end;

	do
		*--d = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	memcpy(p, d, (size_t)(end - d));
	return (size_t)(end - d);
}

/* The key of one call into buf (>= 24 bytes): "hot" for a single key, else
 * "k<i>" with i uniform in [0, nkeys). Returns its length. */
size_t bench_pick_key(char *buf, int64_t nkeys, uint64_t *rng)
{
	if (nkeys == 1) {
		memcpy(buf, "hot", 3);
		return 3;
	}
	uint64_t i = ((rand_next(rng) >> 32) * (uint64_t)nkeys) >> 32;
	buf[0] = 'k';
	return 1 + put_uint(buf + 1, i);
}

/* Copy a message, truncating. */
void bench_copy_msg(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

bool bench_uri_parse(drl_uri **u, const char *uri, char *why, size_t whycap)
{
	drl_error err = {0};
	if (drl_uri_parse(u, uri, &err) == 0)
		return true;
	bench_copy_msg(why, whycap, err.message);
	return false;
}
