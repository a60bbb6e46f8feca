/*
 * fixed_window: one counter per aligned window [k*PERIOD, (k+1)*PERIOD).
 *
 * The counter engine of subwindow.c with a single sub-window and no
 * trailing weight. Exact within a window; across a window edge a client
 * can get LIMIT just before and LIMIT just after (up to 2x in any sliding
 * PERIOD; see docs/algorithms.md).
 */
#include "internal.h"

static int finish(drl__limit *lim, drl_error *err)
{
	(void)err;
	lim->subwindows = 1;
	lim->trailing = 0;
	return 0;
}

const drl__algorithm drl__fixed_window = {
	.name = "fixed_window",
	.tag = "fw",
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
