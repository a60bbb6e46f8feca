/*
 * fixed_window and sliding_window: the counter engine of subwindow.c with
 * a single sub-window.
 *
 * fixed_window: one counter per aligned window [k*PERIOD, (k+1)*PERIOD),
 * no trailing weight. Exact within a window; across a window edge a
 * client can get LIMIT just before and LIMIT just after (up to 2x in any
 * sliding PERIOD; see docs/algorithms.md).
 *
 * sliding_window: the weighted approximation of a sliding window
 * (Cloudflare, Criteo): count = current window + previous window weighted
 * by the share of it the sliding window still covers,
 *   floor(prev * (PERIOD - elapsed) / PERIOD) + cur:
 * two counters per key, no transactions needed.
 */
#include "internal.h"

/* One sub-window, with or without the trailing one. */
static int one_window(drl__limit *lim, bool trailing)
{
	lim->subwindows = 1;
	lim->trailing = trailing;
	return 0;
}

static int finish_fixed(drl__limit *lim, drl_error *err)
{
	(void)err;
	return one_window(lim, false);
}

static int finish_sliding(drl__limit *lim, drl_error *err)
{
	(void)err;
	return one_window(lim, true);
}

const drl__algorithm drl__fixed_window = {
	.name = "fixed_window",
	.tag = "fw",
	.option = NULL, /* no options */
	.finish = finish_fixed,
	DRL__COUNTER_ENGINE,
};

const drl__algorithm drl__sliding_window = {
	.name = "sliding_window",
	.tag = "sw",
	.option = NULL, /* no options */
	.finish = finish_sliding,
	DRL__COUNTER_ENGINE,
};
