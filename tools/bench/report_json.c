/*
 * `drl bench --json`: one JSON array of cells on stdout, one cell per
 * line, every field always present (null when it does not apply; the
 * server_* fields only measured on a single Redis); strings
 * through the tools' one JSON escaper (common/json.h).
 */
#include "shared.h"
#include "common/hist.h"
#include "common/json.h"

#include <inttypes.h>
#include <stdio.h>

/* What the server spent, per decision (or request): the fields
 * server_exec_us, server_cpu_us (null when not measured or not a single
 * Redis) and server_note (why not, or null). */
static void print_json_srv(FILE *out, const srv_cost *s)
{
	static const char *const names[] = {"server_exec_us", "server_cpu_us"};
	for (int k = 0; k < 2; k++) {
		double per;
		if (s->applies && bench_srv_per(s, k == 0, &per))
			fprintf(out, ",\"%s\":%.3f", names[k], per);
		else
			fprintf(out, ",\"%s\":null", names[k]);
	}
	fputs(",\"server_note\":", out);
	if (s->applies && s->note[0])
		tl_json_str(out, s->note);
	else
		fputs("null", out);
}

/* A ceiling as JSON: null (none applies), its note (not measured), or
 * its rate, latency, rounds, command and cost to the server; `lib` is the
 * cell's rate. */
static void print_json_ceiling(FILE *out, const ceiling *cl, double lib)
{
	if (cl == NULL) {
		fputs("null", out);
		return;
	}
	if (!cl->ok) {
		fputs("{\"per_s\":null,\"ratio\":null,\"note\":", out);
		tl_json_str(out, cl->note);
		print_json_srv(out, &(srv_cost){0});
		putc('}', out);
		return;
	}
	fputs("{\"tool\":", out);
	tl_json_str(out, cl->tool);
	fprintf(out,
		",\"per_s\":%.1f,\"p50_us\":%.3f,\"p99_us\":%.3f"
		",\"ratio\":%.4f,\"per_s_rounds\":[",
		cl->per_s, cl->p50_us, cl->p99_us, lib / cl->per_s);
	for (int k = 0; k < cl->nrounds; k++)
		fprintf(out, "%s%.1f", k ? "," : "", cl->rate[k]);
	fputs("],\"command\":", out);
	tl_json_str(out, cl->command);
	print_json_srv(out, &cl->srv);
	putc('}', out);
}

void bench_print_json(FILE *out, const cell *cells, size_t n)
{
	fputs("[\n", out);
	for (size_t i = 0; i < n; i++) {
		const cell *c = &cells[i];
		const tally *t = &c->r.t;
		const drl_store_stats *d = &c->r.d;
		int rt = bench_round_trips(c);

		shown_uri su;
		fputs("  {\"store\":", out);
		tl_json_str(out, bench_show_uri(&su, c->cfg.store));
		fputs(",\"spec\":", out);
		tl_json_str(out, c->cfg.spec);
		fprintf(out,
			",\"keys\":%" PRId64 ",\"concurrency\":%d,\"procs\":%d"
			",\"async_workers\":%d"
			",\"duration_s\":%.3f,\"decisions\":%" PRIu64
			",\"decisions_per_s\":%.1f,\"allowed\":%" PRIu64
			",\"errors\":%" PRIu64 ",\"first_error\":",
			c->cfg.keys, c->cfg.conc, c->cfg.nprocs,
			c->cfg.async_workers, c->r.elapsed_s, t->calls,
			bench_rate(c), t->allowed, t->errors);
		if (t->first_err || c->r.open_rc) {
			tl_json_str(out, c->r.open_rc ? c->r.open_msg
						      : t->first_msg);
		} else {
			fputs("null", out);
		}
		fprintf(out, ",\"rounds\":%d,\"decisions_per_s_rounds\":[",
			c->nrounds);
		for (int k = 0; k < c->nrounds; k++)
			fprintf(out, "%s%.1f", k ? "," : "", c->rates[k]);
		putc(']', out);
		fprintf(out,
			",\"latency_us\":{\"p50\":%.3f,\"p99\":%.3f,"
			"\"p999\":%.3f,\"max\":%.3f}",
			tl_hist_quantile_us(&t->lat, 0.5),
			tl_hist_quantile_us(&t->lat, 0.99),
			tl_hist_quantile_us(&t->lat, 0.999),
			(double)t->lat.max_ns / 1000);
		if (rt >= 0)
			fprintf(out, ",\"round_trips_per_decision\":%d", rt);
		else
			fputs(",\"round_trips_per_decision\":null", out);
		fprintf(out,
			",\"store_decisions\":%" PRIu64
			",\"scripts_per_decision\":%.4f"
			",\"cas_attempts_per_decision\":%.4f"
			",\"cas_retries_per_decision\":%.4f"
			",\"cas_exhausted\":%" PRIu64,
			d->decisions, bench_per(d->scripts, d->decisions),
			bench_per(d->cas_attempts, d->decisions),
			bench_per(d->cas_conflicts, d->decisions),
			d->cas_exhausted);
		print_json_srv(out, &c->r.srv);
		fputs(",\"exact\":", out);
		if (c->cfg.xspec == NULL) {
			fputs("null", out);
		} else {
			fputs("{\"spec\":", out);
			tl_json_str(out, c->cfg.xspec);
			fprintf(out,
				",\"capacity\":%" PRId64 ",\"allowed\":%" PRIu64
				",\"denied\":%" PRIu64
				",\"over_admission\":%" PRId64
				",\"complete\":%s,\"errors\":%" PRIu64
				",\"error\":",
				c->r.x_capacity, t->x_allowed, t->x_denied,
				bench_over_admission(c),
				(int64_t)t->x_allowed >= c->r.x_capacity
					? "true"
					: "false",
				t->x_errors);
			if (c->r.x_rc)
				tl_json_str(out, c->r.x_msg);
			else if (t->x_first_err)
				tl_json_str(out, t->x_first_msg);
			else
				fputs("null", out);
			putc('}', out);
		}
		fputs(",\"ceiling\":", out);
		print_json_ceiling(out, c->ceil, bench_rate(c));
		fputs(",\"ceiling_pipelined\":", out);
		print_json_ceiling(out, c->ceil_p, bench_rate(c));
		fprintf(out, "}%s\n", i + 1 < n ? "," : "");
	}
	fputs("]\n", out);
}
