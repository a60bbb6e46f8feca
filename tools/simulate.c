/*
 * drl simulate — replay generated traffic against every algorithm and a
 * perfect sliding window, and measure how far each one is from it.
 *
 * One request stream (times in µs, a key each) is generated from a seeded
 * PRNG and decided, request by request, by:
 *   - the perfect window: per key, allowed iff fewer than LIMIT requests it
 *     admitted itself lie in (t - PERIOD, t] (the ideal limiter run on the
 *     same stream);
 *   - every algorithm of --limit, each on its own memory:// store, through
 *     the public API only (drl_allow_at, cost 1).
 * Each row keeps, per key, a deque of the times it admitted: the exact
 * count of its own allowed requests in the last PERIOD at every instant. A
 * decision is wrong when it differs from what a perfect window would decide
 * on that count: allowed although LIMIT requests already lie in the window
 * (wrongly allowed), or denied although there was room (wrongly denied).
 * Judging each decision against the row's own history, not against the
 * perfect row's, keeps one early difference from counting again in every
 * later decision. The deque also gives the most the row let through in any
 * true sliding PERIOD, exactly.
 *
 * Decisions never use floating point (the library decides in integers);
 * the traffic generator and the metrics do.
 */
#include "simulate.h"

#include "common/args.h"
#include "common/clock.h"
#include "common/json.h"
#include "common/opts.h"

#include <drl/drl.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
	EXIT_DONE = 0,
	EXIT_USAGE = 2,
	EXIT_STORE = 3,
};

#define DEFAULT_RATE_LIMIT "100/1m"
#define SPECS_MAX 16
#define KEYS_MAX 100000
#define ZIPF_DEFAULT_KEYS 1000
#define ZIPF_S 1.1
#define RATE_MAX 1e7
#define DURATION_MAX_US (INT64_C(366) * 86400 * 1000000)
#define REQUESTS_MAX 20000000.0 /* expected requests of one run */
#define BURST_FACTOR 10         /* bursty: on at 10x rate, 1/10 of a cycle */
#define BOUNDARY_SPREAD 100     /* boundary: bursts last PERIOD/100 */
#define PLOT_SAMPLES 2000

/* ---- options ---------------------------------------------------------- */

typedef enum traffic {
	TRAFFIC_POISSON,
	TRAFFIC_BURSTY,
	TRAFFIC_RAMP,
	TRAFFIC_ZIPF,
	TRAFFIC_BOUNDARY,
} traffic;

static const char *const traffic_names[] = {
	"poisson", "bursty", "ramp", "zipf", "boundary", NULL,
};

typedef struct sim_opts {
	char *specs[SPECS_MAX]; /* malloc'd */
	size_t nspecs;
	int64_t limit;
	int64_t period_us;
	traffic traffic;
	double rate;         /* requests/s; 0: default */
	int64_t duration_us; /* 0: default */
	int64_t keys;        /* 0: default */
	uint64_t seed;
	bool json;
	bool no_timing;
	const char *plot_dir;
	const char *rate_limit; /* --rate-limit; NULL: not given */
	bool have_limit;        /* --limit given */
} sim_opts;

#define usage_error(...) tl_opts_error(&tool_simulate_cli, __VA_ARGS__)

/* Add the ';'-separated specs of arg to o->specs. Returns -1 or an exit
 * status. */
static int add_specs(sim_opts *o, const char *arg)
{
	const char *p = arg;

	for (;;) {
		size_t len = strcspn(p, ";");
		if (len == 0)
			return usage_error("bad --limit '%s': empty spec", arg);
		if (o->nspecs == SPECS_MAX)
			return usage_error(
				"bad --limit '%s': more than %d specs", arg,
				SPECS_MAX);
		char *s = strndup(p, len);
		if (s == NULL) {
			fputs("drl simulate: out of memory\n", stderr);
			return EXIT_STORE;
		}
		o->specs[o->nspecs++] = s;
		if (p[len] == '\0')
			return -1;
		p += len + 1;
	}
}

/* Sub-windows for --rate-limit's subwindow: 6 (ten seconds of a minute),
 * or the most below 6 that split PERIOD into whole microseconds (1s: 5),
 * so that every PERIOD the option takes gives a valid spec. */
static int subwindows_for(int64_t period_us)
{
	int n = 6;
	while (period_us % n != 0)
		n--;
	return n;
}

/* The six algorithms at arg = "LIMIT/PERIOD". Returns -1 or an exit
 * status. */
static int add_rate_limit(sim_opts *o, const char *arg)
{
	static const char *const algos[] = {
		"fixed_window", "sliding_window", "subwindow",
		"token_bucket", "gcra",           "sliding_log",
	};
	int64_t limit, period;
	char spec[256];

	if (strlen(arg) > 64 || strchr(arg, ',') != NULL ||
	    !tl_parse_limit_period(arg, &limit, &period))
		return usage_error(
			"bad --rate-limit '%s': expected LIMIT/PERIOD "
			"as in 100/1m",
			arg);
	for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++) {
		if (strcmp(algos[i], "sliding_log") == 0 &&
		    limit > DRL_SLIDING_LOG_LIMIT_MAX) {
			fprintf(stderr,
				"drl simulate: note: sliding_log left out "
				"(LIMIT %" PRId64 " > %d)\n",
				limit, DRL_SLIDING_LOG_LIMIT_MAX);
			continue;
		}
		if (strcmp(algos[i], "subwindow") == 0)
			snprintf(spec, sizeof spec,
				 "subwindow:%s,subwindows=%d", arg,
				 subwindows_for(period));
		else
			snprintf(spec, sizeof spec, "%s:%s", algos[i], arg);
		int st = add_specs(o, spec);
		if (st >= 0)
			return st;
	}
	return -1;
}

static void opts_free(sim_opts *o)
{
	for (size_t i = 0; i < o->nspecs; i++)
		free(o->specs[i]);
	o->nspecs = 0;
}

/* --limit: add its specs. */
static int set_limit(void *target, const char *arg)
{
	((sim_opts *)target)->have_limit = true;
	return add_specs(target, arg);
}

#define O sim_opts
static const tl_opt sim_opts_table[] = {
	TL_STRING("rate-limit", 0, "L/P", O, rate_limit, DEFAULT_RATE_LIMIT,
		  "compare the six algorithms at LIMIT L per PERIOD P: "
		  "fixed_window, sliding_window, subwindow (6 sub-windows), "
		  "token_bucket, gcra, sliding_log (left out when L > "
		  "10000)"),
	TL_CALL("limit", 'l', "SPEC", set_limit, NULL,
		"compare these specs instead, one row each, joined by ';' "
		"(repeatable); all share one LIMIT/PERIOD"),
	TL_CHOICE("traffic", 't', "T", O, traffic, traffic_names,
		  "poisson   Poisson arrivals at --rate (default)\n"
		  "bursty    on/off: 10x --rate for the first 10% of\n"
		  "          each PERIOD-long cycle, idle otherwise\n"
		  "ramp      rate rising linearly from 0 to 2x --rate\n"
		  "zipf      Poisson arrivals over --keys keys with\n"
		  "          Zipf (s=1.1) popularity\n"
		  "boundary  LIMIT requests just before and LIMIT just\n"
		  "          after every other window edge\n"
		  "          (--rate unused)\n"),
	TL_DOUBLE("rate", 'r', "R", O, rate, 0, 1, RATE_MAX, "2 x LIMIT/PERIOD",
		  "mean requests per second"),
	TL_SECONDS("duration", 'd', "S", O, duration_us, 1000, DURATION_MAX_US,
		   "10 x PERIOD", "simulated seconds"),
	TL_UINT("keys", 'k', "N", O, keys, 1, KEYS_MAX, "1000",
		"keys of zipf traffic"),
	TL_UINT("seed", 0, "N", O, seed, 0, INT64_MAX, "1",
		"PRNG seed; the same seed gives the same stream and output "
		"(the PRNG is written out)"),
	TL_FLAG("json", 'j', O, json, "one JSON document"),
	TL_FLAG("no-timing", 0, O, no_timing,
		"leave out decisions/s (output then depends only on the "
		"options)"),
	TL_NONEMPTY("plot", 0, "DIR", O, plot_dir,
		    "write DIR/N-ALGORITHM.dat (time, admitted in the trailing "
		    "PERIOD for key 0, the perfect window's, LIMIT) and render "
		    "N-ALGORITHM.png and overview.png with gnuplot"),
};
#undef O

const tl_opts tool_simulate_cli = {
	.prog = "drl simulate",
	.synopsis = "usage: drl simulate [--rate-limit LIMIT/PERIOD | --limit "
		    "SPEC[;SPEC...]]\n"
		    "                    [--traffic "
		    "poisson|bursty|ramp|zipf|boundary]\n"
		    "                    [--rate R] [--duration S] [--keys N] "
		    "[--seed N]\n"
		    "                    [--json] [--no-timing] [--plot DIR]\n",
	.intro = "\n"
		 "Replay one seeded request stream against every algorithm "
		 "(each on\n"
		 "its own memory store, at simulated times) and against a "
		 "perfect\n"
		 "sliding window, and report how far each algorithm is from "
		 "it.\n"
		 "\n",
	TL_TABLE(sim_opts_table),
	.outro = "\n"
		 "Per row: requests allowed, % wrongly allowed (allowed "
		 "although the\n"
		 "row had already admitted LIMIT in the sliding PERIOD before "
		 "it),\n"
		 "% wrongly denied (denied although there was room), the most "
		 "admitted\n"
		 "in any sliding PERIOD of one key as a multiple of LIMIT, "
		 "and\n"
		 "decisions/s.\n"
		 "\n"
		 "Exit status: 0 done, 2 bad usage or spec, 3 store, output "
		 "or gnuplot\n"
		 "error (3 also when --plot is given and gnuplot is not "
		 "installed).\n",
};

/* Parse `drl simulate` arguments into *o. Returns -1 to go on, or an exit
 * status (0 after --help). */
static int sim_parse(int argc, char **argv, sim_opts *o)
{
	int first, st;

	*o = (sim_opts){.seed = 1};
	if ((st = tl_opts_parse(&tool_simulate_cli, argc, argv, o, &first)) >=
	    0)
		return st;
	if (first < argc)
		return usage_error("unexpected argument '%s'", argv[first]);
	if (o->rate_limit != NULL && o->have_limit)
		return usage_error("--rate-limit and --limit exclude each "
				   "other");
	if (!o->have_limit &&
	    (st = add_rate_limit(o, o->rate_limit ? o->rate_limit
						  : DEFAULT_RATE_LIMIT)) >= 0)
		return st;
	if (o->keys != 0 && o->traffic != TRAFFIC_ZIPF)
		return usage_error("--keys applies to --traffic zipf only");
	if (o->rate != 0 && o->traffic == TRAFFIC_BOUNDARY)
		return usage_error("--rate does not apply to --traffic "
				   "boundary (LIMIT per window edge)");
	return -1;
}

/* ---- PRNG --------------------------------------------------------------
 * splitmix64 (Steele, Lea, Flood 2014), written out: rand()/random() and
 * drand48() differ between libcs and versions, and no Debian library gives
 * a seeded stream that is the same everywhere. splitmix64 is a full-period
 * 2^64 generator that passes BigCrush, in four lines. */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Uniform in (0, 1]: 53 random bits. */
static double rng_unit(uint64_t *s)
{
	return (double)((rng_next(s) >> 11) + 1) * 0x1p-53;
}

/* Exponential with mean 1. */
static double rng_exp(uint64_t *s)
{
	return -log(rng_unit(s));
}

/* ---- traffic ------------------------------------------------------------ */

typedef struct gen {
	traffic kind;
	double rate;     /* requests/s */
	double duration; /* s */
	double period;   /* s */
	int64_t dur_us;
	int64_t period_us;
	int64_t limit;
	uint64_t rng;
	double x;         /* poisson/bursty/zipf: time so far (s); ramp:
			   * cumulative intensity so far */
	double *zipf_cdf; /* zipf: cumulative weights, keys entries */
	int64_t keys;
	int64_t edge, i; /* boundary: window edge number, request in it */
} gen;

static bool gen_init(gen *g, const sim_opts *o)
{
	*g = (gen){
		.kind = o->traffic,
		.rate = o->rate,
		.duration = (double)o->duration_us / 1e6,
		.period = (double)o->period_us / 1e6,
		.dur_us = o->duration_us,
		.period_us = o->period_us,
		.limit = o->limit,
		.rng = o->seed,
		.keys = o->keys,
		.edge = 1,
	};
	if (g->kind == TRAFFIC_ZIPF) {
		g->zipf_cdf = malloc((size_t)g->keys * sizeof(double));
		if (g->zipf_cdf == NULL)
			return false;
		double sum = 0;
		for (int64_t k = 0; k < g->keys; k++) {
			sum += 1.0 / pow((double)(k + 1), ZIPF_S);
			g->zipf_cdf[k] = sum;
		}
	}
	return true;
}

/* The next request: time (µs from the start) and key index. Returns false
 * at the end of the run. Times never decrease. */
static bool gen_next(gen *g, int64_t *t_us, uint32_t *key)
{
	double t = 0;

	*key = 0;
	switch (g->kind) {
	case TRAFFIC_POISSON:
		g->x += rng_exp(&g->rng) / g->rate;
		t = g->x;
		break;
	case TRAFFIC_ZIPF: {
		g->x += rng_exp(&g->rng) / g->rate;
		t = g->x;
		double u = (1.0 - rng_unit(&g->rng)) * g->zipf_cdf[g->keys - 1];
		int64_t lo = 0, hi = g->keys - 1; /* first cdf > u */
		while (lo < hi) {
			int64_t mid = lo + (hi - lo) / 2;
			if (g->zipf_cdf[mid] > u)
				hi = mid;
			else
				lo = mid + 1;
		}
		*key = (uint32_t)lo;
		break;
	}
	case TRAFFIC_BURSTY: {
		/* Poisson at 10x rate in "on" time, mapped onto the first
		 * tenth of every PERIOD-long cycle. */
		double on = g->period / BURST_FACTOR;
		g->x += rng_exp(&g->rng) / (g->rate * BURST_FACTOR);
		double cycle = floor(g->x / on);
		t = cycle * g->period + (g->x - cycle * on);
		break;
	}
	case TRAFFIC_RAMP:
		/* Intensity 2R t/D: cumulative R t^2/D, inverted. */
		g->x += rng_exp(&g->rng);
		t = sqrt(g->x * g->duration / g->rate);
		break;
	case TRAFFIC_BOUNDARY: {
		/* LIMIT requests evenly over [edge - w, edge), then LIMIT over
		 * [edge, edge + w), w = PERIOD/100, at every other window edge
		 * (so each burst meets an empty fixed window). */
		int64_t w = g->period_us / BOUNDARY_SPREAD;
		int64_t base = g->edge * g->period_us - w;
		if (g->i == 2 * g->limit) {
			g->edge += 2;
			g->i = 0;
			base += 2 * g->period_us;
		}
		int64_t half = g->i / g->limit, j = g->i % g->limit;
		*t_us = base + half * w + j * w / g->limit;
		g->i++;
		return *t_us < g->dur_us;
	}
	}
	*t_us = (int64_t)(t * 1e6);
	return *t_us < g->dur_us;
}

/* Requests expected from the options, to refuse runs that would not end. */
static double expected_requests(const sim_opts *o)
{
	double d = (double)o->duration_us / 1e6;

	if (o->traffic == TRAFFIC_BOUNDARY)
		return (double)o->limit *
		       ((double)o->duration_us / (double)o->period_us + 2);
	return o->rate * d;
}

/* ---- sliding counts ----------------------------------------------------- */

/* Admitted times of one key, oldest first: a ring of power-of-two size. */
typedef struct ring {
	int64_t *v;
	size_t head, len, cap;
} ring;

static int64_t ring_at(const ring *r, size_t i)
{
	return r->v[(r->head + i) & (r->cap - 1)];
}

static bool ring_push(ring *r, int64_t t)
{
	if (r->len == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 16;
		int64_t *v = malloc(cap * sizeof *v);
		if (v == NULL)
			return false;
		for (size_t i = 0; i < r->len; i++)
			v[i] = ring_at(r, i);
		free(r->v);
		r->v = v;
		r->head = 0;
		r->cap = cap;
	}
	r->v[(r->head + r->len) & (r->cap - 1)] = t;
	r->len++;
	return true;
}

/* Forget the times <= edge. */
static void ring_expire(ring *r, int64_t edge)
{
	while (r->len != 0 && r->v[r->head] <= edge) {
		r->head = (r->head + 1) & (r->cap - 1);
		r->len--;
	}
}

/* How many times are > edge. */
static size_t ring_count_after(const ring *r, int64_t edge)
{
	size_t lo = 0, hi = r->len;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ring_at(r, mid) > edge)
			hi = mid;
		else
			lo = mid + 1;
	}
	return r->len - lo;
}

/* ---- the run ------------------------------------------------------------ */

/* One row of the table: the perfect window (lim == NULL) or an algorithm. */
typedef struct row {
	const char *spec; /* "perfect" for the reference */
	drl_store *store;
	drl_limiter *lim;
	ring *admitted; /* per key */
	uint64_t allowed, wrong_allowed, wrong_denied;
	size_t max_in_period;
	int64_t ns;
	FILE *plot; /* --plot data file, or NULL */
} row;

/* Report a library error; returns the exit status (2 for DRL_EINVAL). */
static int report(const char *what, const char *spec, int rc,
		  const drl_error *err)
{
	fprintf(stderr, "drl simulate: %s '%s': %s (%s)\n", what, spec,
		err->message[0] ? err->message : drl_strerror(rc),
		drl_err_name(rc));
	return rc == DRL_EINVAL ? EXIT_USAGE : EXIT_STORE;
}

/* Make every algorithm row's store and limiter and check that all specs
 * share one LIMIT/PERIOD (into o->limit, o->period_us). */
static int rows_open(sim_opts *o, row *rows)
{
	drl_error err = {0};
	int rc;

	rows[0].spec = "perfect";
	for (size_t i = 0; i < o->nspecs; i++) {
		row *r = &rows[i + 1];
		int64_t limit, period;
		const char *colon = strchr(o->specs[i], ':');

		r->spec = o->specs[i];
		rc = drl_store_open(&r->store, "memory://", &err);
		if (rc != 0)
			return report("store for", r->spec, rc, &err);
		rc = drl_limiter_new(&r->lim, r->store, r->spec, NULL, &err);
		if (rc != 0)
			return report("bad --limit", r->spec, rc, &err);
		if (colon == NULL ||
		    !tl_parse_limit_period(colon + 1, &limit, &period))
			return usage_error("bad --limit '%s': expected "
					   "ALGORITHM:LIMIT/PERIOD[,...]",
					   r->spec);
		if (i == 0) {
			o->limit = limit;
			o->period_us = period;
		} else if (limit != o->limit || period != o->period_us) {
			return usage_error(
				"bad --limit '%s': LIMIT/PERIOD differs from "
				"'%s' (every row is compared with one perfect "
				"window)",
				r->spec, o->specs[0]);
		}
	}
	return -1;
}

static void rows_free(row *rows, size_t n, int64_t keys)
{
	for (size_t i = 0; i < n; i++) {
		drl_limiter_free(rows[i].lim);
		drl_store_free(rows[i].store);
		if (rows[i].admitted != NULL)
			for (int64_t k = 0; k < keys; k++)
				free(rows[i].admitted[k].v);
		free(rows[i].admitted);
		if (rows[i].plot != NULL)
			fclose(rows[i].plot);
	}
}

/* The algorithm name of a spec (before ':') into buf. */
static void spec_algo(char *buf, size_t cap, const char *spec)
{
	size_t n = strcspn(spec, ":");

	if (n >= cap)
		n = cap - 1;
	memcpy(buf, spec, n);
	buf[n] = '\0';
}

/* Write the plot samples at every step time < until (µs from start). */
static void plot_samples(row *rows, size_t nrows, const sim_opts *o,
			 int64_t *next, int64_t step, int64_t until)
{
	for (; *next < until && *next <= o->duration_us; *next += step) {
		int64_t edge = *next - o->period_us;
		size_t perfect = ring_count_after(&rows[0].admitted[0], edge);
		for (size_t i = 1; i < nrows; i++)
			fprintf(rows[i].plot, "%.6f %zu %zu %" PRId64 "\n",
				(double)*next / 1e6,
				ring_count_after(&rows[i].admitted[0], edge),
				perfect, o->limit);
	}
}

/* Decide the whole stream with every row. Returns -1 or an exit status. */
static int simulate(const sim_opts *o, row *rows, size_t nrows,
		    uint64_t *requests)
{
	drl_error err = {0};
	gen g;
	int64_t t, next_sample = 0;
	int64_t step = o->duration_us / PLOT_SAMPLES;
	/* Window edges are aligned to the Unix epoch: start on one. */
	int64_t base = o->period_us * 1000;
	uint32_t key;
	int status = -1;

	if (step < 1)
		step = 1;
	if (!gen_init(&g, o)) {
		fputs("drl simulate: out of memory\n", stderr);
		return EXIT_STORE;
	}
	while (gen_next(&g, &t, &key)) {
		char kbuf[16];
		size_t klen =
			(size_t)snprintf(kbuf, sizeof kbuf, "k%" PRIu32, key);

		if (o->plot_dir != NULL)
			plot_samples(rows, nrows, o, &next_sample, step, t);
		(*requests)++;
		for (size_t i = 0; i < nrows; i++) {
			row *r = &rows[i];
			ring *a = &r->admitted[key];
			int64_t t0 = tl_mono_ns();
			bool allowed;

			ring_expire(a, t - o->period_us);
			/* what a perfect window decides on this row's history */
			bool ideal = (int64_t)a->len < o->limit;
			if (r->lim == NULL) {
				allowed = ideal;
			} else {
				drl_result res;
				int rc = drl_allow_at(r->lim, kbuf, klen, 1,
						      base + t, &res, &err);
				if (rc != 0) {
					status = report("decision by", r->spec,
							rc, &err);
					goto out;
				}
				allowed = res.allowed != 0;
			}
			r->ns += tl_mono_ns() - t0;
			if (allowed && !ring_push(a, t)) {
				fputs("drl simulate: out of memory\n", stderr);
				status = EXIT_STORE;
				goto out;
			}
			if (allowed) {
				r->allowed++;
				if (a->len > r->max_in_period)
					r->max_in_period = a->len;
			}
			if (allowed && !ideal)
				r->wrong_allowed++;
			else if (!allowed && ideal)
				r->wrong_denied++;
		}
	}
	if (o->plot_dir != NULL)
		plot_samples(rows, nrows, o, &next_sample, step,
			     o->duration_us + 1);
out:
	free(g.zipf_cdf);
	return status;
}

/* ---- output ------------------------------------------------------------- */

static double pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0.0;
}

static double rate_of(const row *r, uint64_t requests)
{
	return r->ns > 0 ? (double)requests * 1e9 / (double)r->ns : 0.0;
}

static void print_json(FILE *out, const sim_opts *o, const row *rows,
		       size_t nrows, uint64_t requests)
{
	fprintf(out,
		"{\"traffic\":\"%s\",\"rate\":%.6g,\"duration_s\":%.6f,"
		"\"keys\":%" PRId64 ",\"seed\":%" PRIu64 ",\"limit\":%" PRId64
		",\"period_us\":%" PRId64 ",\"requests\":%" PRIu64
		",\"rows\":[",
		traffic_names[o->traffic], o->rate,
		(double)o->duration_us / 1e6, o->keys, o->seed, o->limit,
		o->period_us, requests);
	for (size_t i = 0; i < nrows; i++) {
		const row *r = &rows[i];
		fputs(i ? ",\n{\"spec\":" : "\n{\"spec\":", out);
		tl_json_str(out, r->spec);
		fprintf(out,
			",\"allowed\":%" PRIu64 ",\"wrongly_allowed\":%" PRIu64
			",\"wrongly_allowed_pct\":%.6f"
			",\"wrongly_denied\":%" PRIu64
			",\"wrongly_denied_pct\":%.6f"
			",\"max_in_period\":%zu,\"max_x_limit\":%.4f",
			r->allowed, r->wrong_allowed,
			pct(r->wrong_allowed, requests), r->wrong_denied,
			pct(r->wrong_denied, requests), r->max_in_period,
			(double)r->max_in_period / (double)o->limit);
		if (!o->no_timing)
			fprintf(out, ",\"decisions_per_s\":%.0f",
				rate_of(r, requests));
		putc('}', out);
	}
	fputs("]}\n", out);
}

static void print_table(FILE *out, const sim_opts *o, const row *rows,
			size_t nrows, uint64_t requests)
{
	int w = 9;

	for (size_t i = 0; i < nrows; i++)
		if ((int)strlen(rows[i].spec) > w)
			w = (int)strlen(rows[i].spec);
	fprintf(out,
		"traffic %s, rate %.6g/s, duration %.6gs, keys %" PRId64
		", seed %" PRIu64 ": %" PRIu64 " requests\n"
		"limit %" PRId64 " per %.6gs, compared with a perfect "
		"sliding window\n\n",
		traffic_names[o->traffic], o->rate,
		(double)o->duration_us / 1e6, o->keys, o->seed, requests,
		o->limit, (double)o->period_us / 1e6);
	fprintf(out, "%-*s %10s %9s %16s %15s %14s", w, "algorithm", "allowed",
		"allowed%", "wrongly allowed", "wrongly denied",
		"max in PERIOD");
	if (!o->no_timing)
		fprintf(out, " %12s", "decisions/s");
	putc('\n', out);
	for (size_t i = 0; i < nrows; i++) {
		const row *r = &rows[i];
		fprintf(out,
			"%-*s %10" PRIu64 " %8.2f%% %15.3f%% %14.3f%% %13.2fx",
			w, r->spec, r->allowed, pct(r->allowed, requests),
			pct(r->wrong_allowed, requests),
			pct(r->wrong_denied, requests),
			(double)r->max_in_period / (double)o->limit);
		if (!o->no_timing)
			fprintf(out, " %12.0f", rate_of(r, requests));
		putc('\n', out);
	}
}

/* ---- plots -------------------------------------------------------------- */

/* Whether an executable `name` is on PATH. */
static bool on_path(const char *name)
{
	const char *path = getenv("PATH");
	char buf[4096];

	if (path == NULL)
		return false;
	while (*path) {
		size_t n = strcspn(path, ":");
		if (n > 0 && n + strlen(name) + 2 <= sizeof buf) {
			memcpy(buf, path, n);
			buf[n] = '/';
			strcpy(buf + n + 1, name);
			if (access(buf, X_OK) == 0)
				return true;
		}
		path += n + (path[n] == ':');
	}
	return false;
}

/* Open one data file per algorithm row in o->plot_dir. */
static int plot_open(const sim_opts *o, row *rows, size_t nrows)
{
	char path[4096], algo[64];

	if (mkdir(o->plot_dir, 0777) != 0 && errno != EEXIST) {
		fprintf(stderr, "drl simulate: --plot '%s': %s\n", o->plot_dir,
			strerror(errno));
		return EXIT_STORE;
	}
	for (size_t i = 1; i < nrows; i++) {
		spec_algo(algo, sizeof algo, rows[i].spec);
		snprintf(path, sizeof path, "%s/%zu-%s.dat", o->plot_dir, i,
			 algo);
		rows[i].plot = fopen(path, "w");
		if (rows[i].plot == NULL) {
			fprintf(stderr, "drl simulate: %s: %s\n", path,
				strerror(errno));
			return EXIT_STORE;
		}
		fprintf(rows[i].plot,
			"# %s, traffic %s, key k0\n"
			"# time_s admitted_in_trailing_period "
			"perfect_window limit\n",
			rows[i].spec, traffic_names[o->traffic]);
	}
	return -1;
}

/* gnuplot commands for one panel: the algorithm's count, the perfect
 * window's and LIMIT over time. */
static void plot_panel(FILE *gp, const char *dat, const char *title)
{
	fprintf(gp, "set title \"%s\" noenhanced\n", title);
	fprintf(gp,
		"plot \"%s\" using 1:2 with steps lw 1.5 lc rgb '#d62728' "
		"title 'admitted in trailing PERIOD', \\\n"
		"     \"%s\" using 1:3 with steps lw 1 lc rgb '#1f77b4' "
		"title 'perfect window', \\\n"
		"     \"%s\" using 1:4 with lines dt 2 lc rgb 'black' "
		"title 'LIMIT'\n",
		dat, dat, dat);
}

/* Write DIR/plot.gp and run gnuplot on it. */
static int plot_render(const sim_opts *o, row *rows, size_t nrows)
{
	char path[4096], dat[4096], algo[64];
	size_t n = nrows - 1;
	int status;

	for (size_t i = 1; i < nrows; i++) {
		if (fclose(rows[i].plot) != 0) {
			rows[i].plot = NULL;
			fprintf(stderr, "drl simulate: writing --plot data\n");
			return EXIT_STORE;
		}
		rows[i].plot = NULL;
	}
	snprintf(path, sizeof path, "%s/plot.gp", o->plot_dir);
	FILE *gp = fopen(path, "w");
	if (gp == NULL) {
		fprintf(stderr, "drl simulate: %s: %s\n", path,
			strerror(errno));
		return EXIT_STORE;
	}
	fputs("# written by drl simulate --plot; run from this directory\n"
	      "set xlabel 'simulated time (s)'\n"
	      "set ylabel 'requests'\n"
	      "set key bottom right box opaque\n"
	      "set grid\n"
	      "set yrange [0:*]\n",
	      gp);
	fprintf(gp, "set xrange [0:%.6f]\n", (double)o->duration_us / 1e6);
	for (size_t i = 1; i < nrows; i++) {
		spec_algo(algo, sizeof algo, rows[i].spec);
		snprintf(dat, sizeof dat, "%zu-%s.dat", i, algo);
		fprintf(gp,
			"set terminal pngcairo size 900,400 font ',10'\n"
			"set output '%zu-%s.png'\n",
			i, algo);
		plot_panel(gp, dat, rows[i].spec);
	}
	fprintf(gp,
		"set terminal pngcairo size 1200,%zu font ',9'\n"
		"set output 'overview.png'\n"
		"set multiplot layout %zu,2 title \"traffic %s, key k0: "
		"admitted in the trailing PERIOD vs the perfect window\"\n"
		"set key font ',8'\n",
		((n + 1) / 2) * 300, (n + 1) / 2, traffic_names[o->traffic]);
	for (size_t i = 1; i < nrows; i++) {
		spec_algo(algo, sizeof algo, rows[i].spec);
		snprintf(dat, sizeof dat, "%zu-%s.dat", i, algo);
		plot_panel(gp, dat, rows[i].spec);
	}
	fputs("unset multiplot\n", gp);
	if (fclose(gp) != 0) {
		fprintf(stderr, "drl simulate: writing %s\n", path);
		return EXIT_STORE;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		perror("drl simulate: fork");
		return EXIT_STORE;
	}
	if (pid == 0) {
		if (chdir(o->plot_dir) != 0)
			_exit(127);
		execlp("gnuplot", "gnuplot", "plot.gp", (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0) {
		fprintf(stderr, "drl simulate: gnuplot failed on %s\n", path);
		return EXIT_STORE;
	}
	return -1;
}

/* ---- drl simulate ------------------------------------------------------- */

static int sim_run(sim_opts *o)
{
	row rows[SPECS_MAX + 1] = {0};
	size_t nrows = o->nspecs + 1;
	uint64_t requests = 0;
	int st;

	if (o->plot_dir != NULL && !on_path("gnuplot")) {
		fputs("drl simulate: --plot needs gnuplot, which is not on "
		      "PATH (Debian: apt-get install gnuplot-nox)\n",
		      stderr);
		return EXIT_STORE;
	}
	if ((st = rows_open(o, rows)) >= 0)
		goto out;
	if (o->rate == 0)
		o->rate = 2e6 * (double)o->limit / (double)o->period_us;
	if (o->traffic == TRAFFIC_BOUNDARY)
		o->rate = 1e6 * (double)o->limit / (double)o->period_us;
	if (o->duration_us == 0)
		o->duration_us = o->period_us > DURATION_MAX_US / 10
					 ? DURATION_MAX_US
					 : 10 * o->period_us;
	if (o->keys == 0)
		o->keys = o->traffic == TRAFFIC_ZIPF ? ZIPF_DEFAULT_KEYS : 1;
	if (expected_requests(o) > REQUESTS_MAX) {
		st = usage_error("--rate x --duration gives about %.0f "
				 "requests, more than %.0f",
				 expected_requests(o), REQUESTS_MAX);
		goto out;
	}
	for (size_t i = 0; i < nrows; i++) {
		rows[i].admitted = calloc((size_t)o->keys, sizeof(ring));
		if (rows[i].admitted == NULL) {
			fputs("drl simulate: out of memory\n", stderr);
			st = EXIT_STORE;
			goto out;
		}
	}
	if (o->plot_dir != NULL && (st = plot_open(o, rows, nrows)) >= 0)
		goto out;
	if ((st = simulate(o, rows, nrows, &requests)) >= 0)
		goto out;
	if (o->json)
		print_json(stdout, o, rows, nrows, requests);
	else
		print_table(stdout, o, rows, nrows, requests);
	st = EXIT_DONE;
	if (o->plot_dir != NULL) {
		int pst = plot_render(o, rows, nrows);
		if (pst >= 0)
			st = pst;
	}
out:
	rows_free(rows, nrows, o->keys);
	return st;
}

int tool_cmd_simulate(int argc, char **argv)
{
	sim_opts o;
	int st = sim_parse(argc, argv, &o);

	if (st < 0)
		st = sim_run(&o);
	opts_free(&o);
	return st;
}
