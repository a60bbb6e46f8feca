/*
 * A latency histogram for the drl tools (tools/common/hist.c).
 *
 * Log-linear (HdrHistogram-like): values below 64 ns are exact; above,
 * each power of two is split into 64 buckets, so any bucket is within
 * 1/64 (1.6%) of the values in it. Values above 2^41 ns (~37 min) clamp.
 * A tl_hist is plain memory (zero it to start; no allocation, no lock):
 * one per thread, merged afterwards. Adding is inline, for hot loops.
 */
#ifndef TL_HIST_H
#define TL_HIST_H

#include <stdint.h>

#define TL_HIST_SUB_BITS 6
#define TL_HIST_SUB (1 << TL_HIST_SUB_BITS)
#define TL_HIST_EXP_MAX 40
#define TL_HIST_BUCKETS ((TL_HIST_EXP_MAX - TL_HIST_SUB_BITS + 2) * TL_HIST_SUB)

typedef struct tl_hist {
	uint64_t n[TL_HIST_BUCKETS];
	uint64_t count;
	int64_t max_ns;
} tl_hist;

/* The bucket of v ns. */
static inline int tl_hist_index(int64_t v)
{
	if (v < TL_HIST_SUB)
		return v < 0 ? 0 : (int)v;
	int e = 63 - __builtin_clzll((unsigned long long)v);
	if (e > TL_HIST_EXP_MAX)
		return TL_HIST_BUCKETS - 1;
	return (e - TL_HIST_SUB_BITS + 1) * TL_HIST_SUB +
	       (int)((v >> (e - TL_HIST_SUB_BITS)) & (TL_HIST_SUB - 1));
}

/* Count one value of v ns. */
static inline void tl_hist_add(tl_hist *h, int64_t v)
{
	h->n[tl_hist_index(v)]++;
	h->count++;
	if (v > h->max_ns)
		h->max_ns = v;
}

/* Add every value counted in h to into. */
void tl_hist_merge(tl_hist *into, const tl_hist *h);

/* The q-quantile (0 < q <= 1) in µs, never above the largest value
 * counted; 0 when empty. */
double tl_hist_quantile_us(const tl_hist *h, double q);

#endif /* TL_HIST_H */
