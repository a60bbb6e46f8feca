/*
 * sliding_window: the weighted approximation of a sliding window
 * (Cloudflare, Criteo): count = current window + previous window weighted
 * by the share of it the sliding window still covers,
 *   floor(prev * (PERIOD - elapsed) / PERIOD) + cur.
 *
 * The counter engine of subwindow.c with one sub-window and the trailing
 * weight on: two counters per key, no transactions needed.
 */
#include "internal.h"

static int finish(drl__limit *lim, drl_error *err)
{
	(void)err;
	lim->subwindows = 1;
	lim->trailing = 1;
	return 0;
}

const drl__algorithm drl__sliding_window = {
	.name = "sliding_window",
	.tag = "sw",
	.counts_usage = true,
	.why_not = DRL__COUNTERS_WHY_NOT,
	.option = NULL, /* no options */
	.finish = finish,
	.decide = drl__counter_decide,
	.refund = drl__counter_refund,
	.adjust = drl__counter_adjust,
	.lua = &drl__lua_counter,
	.lua_batch = &drl__lua_batch_counter,
	.keys = drl__counter_keys,
	.startable = drl__counter_startable,
	.start = drl__counter_start,
	.grouped = drl__counter_grouped,
};
