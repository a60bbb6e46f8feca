/* A latency histogram for the drl tools: see hist.h. */
#include "hist.h"

/* The middle of bucket i, in ns. */
static double hist_value(int i)
{
	if (i < TL_HIST_SUB)
		return i;
	int e = i / TL_HIST_SUB + TL_HIST_SUB_BITS - 1;
	int sub = i % TL_HIST_SUB;
	double width = (double)(INT64_C(1) << (e - TL_HIST_SUB_BITS));
	return (double)(TL_HIST_SUB + sub) * width + width / 2;
}

void tl_hist_merge(tl_hist *into, const tl_hist *h)
{
	for (int i = 0; i < TL_HIST_BUCKETS; i++)
		into->n[i] += h->n[i];
	into->count += h->count;
	if (h->max_ns > into->max_ns)
		into->max_ns = h->max_ns;
}

double tl_hist_quantile_us(const tl_hist *h, double q)
{
	if (h->count == 0)
		return 0;
	uint64_t rank = (uint64_t)(q * (double)h->count);
	if ((double)rank < q * (double)h->count)
		rank++;
	if (rank == 0)
		rank = 1;
	uint64_t seen = 0;
	for (int i = 0; i < TL_HIST_BUCKETS; i++) {
		seen += h->n[i];
		if (seen >= rank) {
			double v = hist_value(i);
			if (v > (double)h->max_ns)
				v = (double)h->max_ns;
			return v / 1000;
		}
	}
	return (double)h->max_ns / 1000;
}
