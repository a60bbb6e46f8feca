/*
 * `drl bench` without --json: a Markdown table of the cells, then errors,
 * missing ceilings and missing server figures said once below it, then the
 * commands behind the ceilings (with what a request cost the server).
 */
#include "shared.h"
#include "common/hist.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>

/* A ceiling's two Markdown cells: its rate and lib/ceiling. */
static void print_md_ceiling(FILE *out, const ceiling *cl, double lib)
{
	if (cl == NULL)
		fputs(" — | — |", out);
	else if (!cl->ok)
		fputs(" n/a | n/a |", out);
	else
		fprintf(out, " %.0f | %.2f |", cl->per_s, lib / cl->per_s);
}

/* A latency in µs with about three significant digits. */
static void fmt_us(char *buf, size_t cap, double us)
{
	if (us < 10)
		snprintf(buf, cap, "%.2f", us);
	else if (us < 100)
		snprintf(buf, cap, "%.1f", us);
	else
		snprintf(buf, cap, "%.0f", us);
}

/* The server's two figures per decision (or request) as Markdown cells:
 * "—" where they do not apply (not a single Redis), "n/a" where the
 * server could not be asked. */
static void print_md_srv(FILE *out, const srv_cost *s)
{
	for (int k = 0; k < 2; k++) {
		double per;
		char buf[16];
		if (!s->applies) {
			fputs(" — |", out);
		} else if (bench_srv_per(s, k == 0, &per)) {
			fmt_us(buf, sizeof buf, per);
			fprintf(out, " %s |", buf);
		} else {
			fputs(" n/a |", out);
		}
	}
}

void bench_print_markdown(FILE *out, const cell *cells, size_t n)
{
	bool any_ceiling = false, any_pipelined = false;
	bool any_srv = false, any_ceil_srv = false;
	for (size_t i = 0; i < n; i++) {
		any_ceiling |= cells[i].ceil != NULL;
		any_pipelined |= cells[i].ceil_p != NULL;
		any_srv |= cells[i].r.srv.applies;
		any_ceil_srv |= cells[i].ceil && cells[i].ceil->srv.applies;
	}
	/* the groups of two columns shown when a cell has them */
	const struct {
		bool shown;
		const char *head;
	} groups[] = {
		{any_srv, " srv exec µs | srv CPU µs |"},
		{any_ceiling, " ceiling/s | lib/ceiling |"},
		{any_ceil_srv, " ceiling srv exec µs | ceiling srv CPU µs |"},
		{any_pipelined, " ceiling -P16/s | lib/ceiling -P16 |"},
	};
	const size_t ngroups = sizeof groups / sizeof groups[0];
	fputs("| store | spec | keys | C | decisions/s | p50 µs | p99 µs | "
	      "p99.9 µs | RT/dec | CAS retries/dec | exhausted | errors | "
	      "allowed | exact (admitted/cap) |",
	      out);
	for (size_t g = 0; g < ngroups; g++)
		if (groups[g].shown)
			fputs(groups[g].head, out);
	fputs("\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
	      out);
	for (size_t g = 0; g < ngroups; g++)
		if (groups[g].shown)
			fputs("--:|--:|", out);
	putc('\n', out);
	for (size_t i = 0; i < n; i++) {
		const cell *c = &cells[i];
		shown_uri su;
		const tally *t = &c->r.t;
		char p50[16], p99[16], p999[16], rt[16], cas[16], exact[48];
		char conc[32];
		int r = bench_round_trips(c);

		/* --async: "64 async/16": in flight on a loop, workers */
		if (c->cfg.async_workers > 0)
			snprintf(conc, sizeof conc, "%d async/%d", c->cfg.conc,
				 c->cfg.async_workers);
		else
			snprintf(conc, sizeof conc, "%d", c->cfg.conc);

		fmt_us(p50, sizeof p50, tl_hist_quantile_us(&t->lat, 0.5));
		fmt_us(p99, sizeof p99, tl_hist_quantile_us(&t->lat, 0.99));
		fmt_us(p999, sizeof p999, tl_hist_quantile_us(&t->lat, 0.999));
		if (r >= 0)
			snprintf(rt, sizeof rt, "%d", r);
		else
			snprintf(rt, sizeof rt, "n/a");
		if (c->r.d.cas_attempts == 0)
			snprintf(cas, sizeof cas, "—");
		else
			snprintf(cas, sizeof cas, "%.3f",
				 bench_per(c->r.d.cas_conflicts,
					   c->r.d.decisions));
		if (c->cfg.xspec == NULL)
			snprintf(exact, sizeof exact, "—");
		else if (c->r.x_capacity < 0)
			snprintf(exact, sizeof exact, "failed");
		else
			snprintf(exact, sizeof exact,
				 "%" PRIu64 "/%" PRId64 "%s", t->x_allowed,
				 c->r.x_capacity,
				 bench_over_admission(c) ? " **OVER**"
				 : (int64_t)t->x_allowed < c->r.x_capacity
					 ? " (cut short)"
					 : "");
		fprintf(out,
			"| %s | %s | %" PRId64 " | %s | %.0f | %s | %s | %s | "
			"%s | %s | %" PRIu64 " | %" PRIu64 " | %.1f%% | %s |",
			bench_show_uri(&su, c->cfg.store), c->cfg.spec,
			c->cfg.keys, conc, bench_rate(c), p50, p99, p999, rt,
			cas, c->r.d.cas_exhausted,
			t->errors + (c->r.open_rc != 0),
			100 * bench_per(t->allowed, t->calls), exact);
		if (any_srv)
			print_md_srv(out, &c->r.srv);
		if (any_ceiling)
			print_md_ceiling(out, c->ceil, bench_rate(c));
		if (any_ceil_srv)
			print_md_srv(out,
				     c->ceil ? &c->ceil->srv : &(srv_cost){0});
		if (any_pipelined)
			print_md_ceiling(out, c->ceil_p, bench_rate(c));
		putc('\n', out);
	}
	/* Errors and missing ceilings, said once below the table. */
	for (size_t i = 0; i < n; i++) {
		const cell *c = &cells[i];
		shown_uri su;
		const char *store = bench_show_uri(&su, c->cfg.store);
		if (c->r.open_rc)
			fprintf(out, "\n- %s %s: %s", store, c->cfg.spec,
				c->r.open_msg);
		else if (c->r.t.first_err)
			fprintf(out, "\n- %s %s C=%d: first error: %s", store,
				c->cfg.spec, c->cfg.conc, c->r.t.first_msg);
		if (c->r.x_rc || c->r.t.x_first_err)
			fprintf(out, "\n- %s %s C=%d: exactness: %s", store,
				c->cfg.spec, c->cfg.conc,
				c->r.x_rc ? c->r.x_msg : c->r.t.x_first_msg);
		if (c->ceil && !c->ceil->ok &&
		    (i == 0 || cells[i - 1].ceil != c->ceil))
			fprintf(out, "\n- %s %s: no ceiling: %s", store,
				c->cfg.spec, c->ceil->note);
		if (c->r.srv.applies && c->r.srv.note[0])
			fprintf(out, "\n- %s %s C=%d: server cost: %s", store,
				c->cfg.spec, c->cfg.conc, c->r.srv.note);
	}
	/* The commands behind the ceilings. */
	bool header = false;
	size_t nceilings;
	const ceiling *ceilings = bench_ceilings(&nceilings);
	for (size_t i = 0; i < nceilings; i++) {
		if (!ceilings[i].ok || ceilings[i].command[0] == '\0')
			continue;
		if (!header)
			fputs("\n\nCeilings:\n", out);
		header = true;
		fprintf(out, "\n- `%s`: %.0f/s", ceilings[i].command,
			ceilings[i].per_s);
		const srv_cost *s = &ceilings[i].srv;
		double exec, cpu;
		bool e = bench_srv_per(s, true, &exec);
		bool u = bench_srv_per(s, false, &cpu);
		if (!s->applies)
			continue;
		if (e || u) {
			char be[16] = "n/a", bu[16] = "n/a";
			if (e)
				fmt_us(be, sizeof be, exec);
			if (u)
				fmt_us(bu, sizeof bu, cpu);
			fprintf(out,
				"; server per request: exec %s%s, CPU %s%s", be,
				e ? " µs" : "", bu, u ? " µs" : "");
		}
		if (s->note[0])
			fprintf(out, " (server cost: %s)", s->note);
	}
	putc('\n', out);
}
