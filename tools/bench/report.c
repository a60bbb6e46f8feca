/*
 * What the reports of drl bench compute from a cell alike (JSON and
 * Markdown): rates, ratios, round trips, over-admission.
 */
#include "shared.h"

double bench_per(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0;
}

/* Round trips per decision where they are known: 0 in process, 1 when
 * every decision ran as a server-side script; -1 otherwise. */
int bench_round_trips(const cell *c)
{
	if (bench_is_memory_uri(c->cfg.store))
		return 0;
	if (c->r.d.decisions > 0 && c->r.d.scripts == c->r.d.decisions)
		return 1;
	return -1;
}

/* decisions/s: the median round. */
double bench_rate(const cell *c)
{
	return c->nrounds ? bench_median(c->rates, c->nrounds) : 0;
}

int64_t bench_over_admission(const cell *c)
{
	if (c->r.x_capacity < 0)
		return 0;
	int64_t over = (int64_t)c->r.t.x_allowed - c->r.x_capacity;
	return over > 0 ? over : 0;
}
