/*
 * `drl bench`: the cost of each store and strategy, measured (the grid:
 * tools/bench/grid.c; its parts in tools/bench/, listed in shared.h).
 *
 * A cell is one (store URI, limit spec, key count, concurrency). For each
 * cell, C callers (threads, or --procs processes x threads) call drl_allow()
 * in a loop for --duration seconds, on one hot key or on keys drawn
 * uniformly from N, under a key prefix of the cell's own (cells never share
 * state; nothing is preloaded). Every call is timed into a per-thread
 * log-linear histogram (no lock, no allocation on the hot path); the
 * histograms are merged afterwards. The store's drl_store_stats counters,
 * read before and after, give the optimistic-concurrency cost per decision.
 *
 * Exactness: on a hot key, a second short phase has every caller decide at
 * one fixed time (drl_allow_at with a constant now) until the quota is gone,
 * and counts what was admitted against the capacity the limit reports: any
 * excess is over-admission, a bug, whatever the algorithm. The phase uses
 * the spec with LIMIT (and burst) capped at --exact-limit, so it ends in a
 * moment even on a slow store.
 *
 * Ceilings (--ceiling): the same server driven without the library, in the
 * same run. redis://: redis-benchmark at the same concurrency sending
 * EVALSHA of the very Lua twin the library runs for that spec, with the
 * arguments the library would send (but now = -1: the script reads the
 * server's clock). memcached://: a raw libmemcached increment loop (one
 * handle per thread). The script, its key and its arguments come from the
 * core's drl__twin_call_make (core/twin_call.h, for the tools), built by
 * the code the library decides with; everything else goes through the
 * public API.
 *
 * Server cost: on a single Redis, this process asks the server (INFO
 * commandstats after CONFIG RESETSTAT, INFO cpu) around each round's
 * throughput phase, whatever the number of processes, and around each
 * ceiling run: command time and CPU per decision or request
 * (bench/server_cost.c). Whole-server figures: the cell must be the only
 * load on that server.
 */
#include "bench.h"
#include "common/insecure.h"
#include "shared.h"

#include <drl/drl.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Run round `round` of a cell under a key prefix of its own (rounds share
 * no state either); only round 0 checks exactness. */
static void run_round(cell *c, int round, int rounds, size_t nth, size_t total)
{
	static cell_result r; /* large: not on the stack */
	cell_cfg cfg = c->cfg;

	snprintf(cfg.prefix, sizeof cfg.prefix, "%s%d:", c->cfg.prefix, round);
	if (round > 0)
		cfg.xspec = NULL;
	cfg.exact_now_us = drl_now_us();
	shown_uri su;
	snprintf(cfg.label, sizeof cfg.label,
		 "[%zu/%zu] %.50s %.40s keys=%" PRId64 " C=%d round %d/%d", nth,
		 total, bench_show_uri(&su, cfg.store), cfg.spec, cfg.keys,
		 cfg.conc, round + 1, rounds);
	bench_run_cell(&cfg, &r);
	if (c->nrounds == 0) {
		c->r = r;
	} else {
		bench_result_merge(&c->r, &r);
	}
	c->rates[c->nrounds++] =
		r.elapsed_s > 0 ? (double)r.t.calls / r.elapsed_s : 0;
}

/* Open every store and make every limiter once, so a typo fails before
 * any load is generated. Returns -1 to go on, or an exit status. */
static int validate(const bench_opts *o)
{
	for (size_t s = 0; s < o->nstores; s++) {
		drl_store *store = NULL;
		drl_error err = {0};
		tl_warn_insecure("drl bench", o->stores[s]);
		int rc = drl_store_open(&store, o->stores[s], &err);
		if (rc != 0) {
			shown_uri su;
			fprintf(stderr, "drl bench: --store '%s': %s (%s)\n",
				bench_show_uri(&su, o->stores[s]),
				err.message[0] ? err.message : drl_strerror(rc),
				drl_err_name(rc));
			return rc == DRL_EINVAL ? EXIT_USAGE : EXIT_STORE;
		}
		for (size_t l = 0; l < o->nspecs && s == 0; l++) {
			drl_limiter *lim = NULL;
			rc = drl_limiter_new(&lim, store, o->specs[l], NULL,
					     &err);
			drl_limiter_free(lim);
			if (rc != 0) {
				fprintf(stderr,
					"drl bench: --limit '%s': %s (%s)\n",
					o->specs[l], err.message,
					drl_err_name(rc));
				drl_store_free(store);
				return rc == DRL_EINVAL ? EXIT_USAGE
							: EXIT_STORE;
			}
		}
		drl_store_free(store);
	}
	return -1;
}

static int bench_run(const bench_opts *o)
{
	size_t ncells = o->nstores * o->nspecs * o->nkeys * o->nconc;
	cell *cells = calloc(ncells, sizeof *cells);
	bool progress = isatty(2) == 1;
	int64_t dur = o->duration_us * 1000;
	int64_t xcap =
		dur > EXACT_CAP_MIN_US * 1000 ? dur : EXACT_CAP_MIN_US * 1000;
	char run_prefix[48];
	size_t i = 0, nexact = 0, nceil = 0;
	int status = EXIT_DONE;

	if (cells == NULL) {
		fputs("drl bench: out of memory\n", stderr);
		return EXIT_STORE;
	}
	snprintf(run_prefix, sizeof run_prefix, "drlbench:%ld.%" PRId64 ":",
		 (long)getpid(), drl_now_us() / 1000000);
	for (size_t s = 0; s < o->nstores; s++)
		for (size_t l = 0; l < o->nspecs; l++)
			for (size_t k = 0; k < o->nkeys; k++)
				for (size_t c = 0; c < o->nconc; c++, i++) {
					cell_cfg *cfg = &cells[i].cfg;
					cfg->store = o->stores[s];
					cfg->spec = o->specs[l];
					cfg->keys = o->keys[k];
					cfg->conc = o->conc[c];
					cfg->nprocs = o->procs < cfg->conc
							      ? o->procs
							      : cfg->conc;
					cfg->duration_ns = dur;
					cfg->exact_cap_ns = xcap;
					cfg->progress = progress;
					cfg->async_workers = o->async_workers;
					snprintf(cfg->prefix,
						 sizeof cfg->prefix,
						 "%s%zu:", run_prefix, i);
					if (cfg->keys == 1 &&
					    o->exact_limit > 0) {
						cfg->xspec = bench_exact_spec(
							cfg->spec,
							o->exact_limit);
						nexact++;
					}
				}

	/* The plan, before any load. */
	if (o->ceiling) {
		char(*ids)[600] = calloc(ncells, sizeof *ids);
		for (i = 0; ids && i < ncells; i++) {
			bench_ceiling_id(ids[i], sizeof ids[i],
					 cells[i].cfg.store, cells[i].cfg.spec,
					 cells[i].cfg.keys, cells[i].cfg.conc,
					 1);
			bool seen = ids[i][0] == '\0';
			for (size_t j = 0; j < i && !seen; j++)
				seen = strcmp(ids[i], ids[j]) == 0;
			/* and its pipelined twin, for Redis */
			nceil += seen ? 0
				      : 1 + (strncmp(cells[i].cfg.store,
						     "redis", 5) == 0);
		}
		free(ids);
	}
	double d = (double)o->duration_us / 1e6, r = o->rounds;
	double plan = (double)ncells * r * d +
		      (double)nexact * (double)xcap / 1e9 +
		      (double)nceil * (r * d + 1);
	fprintf(stderr,
		"drl bench: %zu cells (%zu stores x %zu specs x %zu key "
		"counts x %zu concurrencies) x %d round%s x %.2f s = %.0f s "
		"of load",
		ncells, o->nstores, o->nspecs, o->nkeys, o->nconc, o->rounds,
		o->rounds > 1 ? "s" : "", d, (double)ncells * r * d);
	if (nexact)
		fprintf(stderr, "; %zu exactness checks <= %.1f s each", nexact,
			(double)xcap / 1e9);
	if (nceil)
		fprintf(stderr, "; %zu ceilings x %d x ~%.1f s", nceil,
			o->rounds, d);
	fprintf(stderr, "; planned total <= %.0f s\n", plan);

	/* One workload (spec, keys, concurrency) at a time, its stores in
	 * turn within each round, so the numbers compared with each other
	 * (and with the ceiling) are measured close together. */
	size_t group = o->nstores, stride = ncells / o->nstores;
	size_t done = 0;
	for (size_t w = 0; w < stride; w++) {
		for (int round = 0; round < o->rounds; round++) {
			for (size_t g = 0; g < group; g++) {
				cell *c = &cells[g * stride + w];
				run_round(c, round, o->rounds, ++done,
					  ncells * (size_t)o->rounds);
				if (round == 0 && bench_over_admission(c) > 0)
					status = EXIT_OVER;
				if (!o->ceiling)
					continue;
				if (progress)
					fprintf(stderr,
						"\r\033[K[%zu/%zu] ceiling",
						done,
						ncells * (size_t)o->rounds);
				c->ceil = bench_ceiling_for(
					c->cfg.store, c->cfg.spec, c->cfg.keys,
					c->cfg.conc, 1, dur, run_prefix, round);
				c->ceil_p = bench_ceiling_for(
					c->cfg.store, c->cfg.spec, c->cfg.keys,
					c->cfg.conc, CEILING_PIPELINE, dur,
					run_prefix, round);
				if (progress)
					fputs("\r\033[K", stderr);
			}
		}
	}

	if (o->json)
		bench_print_json(stdout, cells, ncells);
	else
		bench_print_markdown(stdout, cells, ncells);
	for (i = 0; i < ncells; i++)
		free(cells[i].cfg.xspec);
	free(cells);
	return status;
}

int tool_cmd_bench(int argc, char **argv)
{
	bench_opts o;
	int status = bench_parse(argc, argv, &o);

	if (status < 0)
		status = validate(&o);
	if (status < 0)
		status = bench_run(&o);
	bench_opts_free(&o);
	return status;
}
