/*
 * What the files of `drl bench` share (tools/bench/): limits, the types of
 * a run (options, tallies, cells, ceilings) and each file's entry points.
 * tools/bench.h is the command's face to drl.c; this header is bench's
 * inside, included by the files of tools/bench/ only.
 *
 *   options.c          --help text, argv -> bench_opts, shown URIs
 *   grid.c             tool_cmd_bench: the plan, the grid of cells, rounds
 *   procs.c            one cell over --procs processes, or in this one
 *   runner.c           one cell in one process: caller threads, phases
 *   async.c            --async: callers as requests on one event loop
 *   ceiling.c          --ceiling: which ceiling a cell has, results kept
 *   ceiling_redis.c    redis-benchmark EVALSHA of the library's twin call
 *   ceiling_memcached.c raw libmemcached increments
 *   redis_target.c     the server of a redis:// URI, a connection to it
 *                      (redis_target.h)
 *   server_cost.c      what the decisions cost a Redis server (INFO)
 *   report.c           numbers both reports print
 *   report_json.c      --json
 *   report_markdown.c  the Markdown table
 *   util.c             message copies, key choice
 */
#ifndef DRL_TOOLS_BENCH_SHARED_H
#define DRL_TOOLS_BENCH_SHARED_H

#include "common/hist.h"
#include "twin_call.h"

#include <drl/drl.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum {
	EXIT_DONE = 0,
	EXIT_OVER = 1,
	EXIT_USAGE = 2,
	EXIT_STORE = 3,
};

#define LIST_MAX 64         /* entries of one list option */
#define CONC_MAX 1024       /* callers per cell */
#define PROCS_MAX 64        /* --procs */
#define KEYS_MAX 1000000000 /* --keys */
#define EXACT_LIMIT_DEFAULT 1000
#define EXACT_TAIL 8          /* attempts per caller once the quota is gone */
#define DURATION_MIN_US 10000 /* 0.01 s */
#define DURATION_MAX_US INT64_C(3600000000)
#define EXACT_CAP_MIN_US 500000 /* an exactness phase may take this long */
#define MSG_MAX 200
#define CEILINGS_MAX 1024
#define ROUNDS_MAX 15
#define KEY_TTL_S 600 /* expiry of the memcached ceiling's counters */
/* The Redis ceiling's pipelined twin: redis-benchmark -P this deep. */
#define CEILING_PIPELINE 16

typedef struct bench_opts {
	char *stores[LIST_MAX];
	size_t nstores;
	char *specs[LIST_MAX];
	size_t nspecs;
	int conc[LIST_MAX];
	size_t nconc;
	int64_t keys[LIST_MAX];
	size_t nkeys;
	int64_t duration_us;
	int procs;
	int64_t exact_limit;
	int rounds;
	bool ceiling;
	bool json;
	int async_workers; /* --async: 0 blocking threads */
} bench_opts;

/* A store URI as bench prints it (tables, JSON, progress lines,
 * messages): any password masked, as the library's own messages do. */
typedef struct shown_uri {
	char s[DRL_URI_SHOW_MAX];
} shown_uri;

/* What one caller (or, merged, a process or a cell) saw. */
typedef struct tally {
	tl_hist lat;
	uint64_t calls, allowed, errors;
	int first_err;
	char first_msg[MSG_MAX];
	int64_t end_ns;
	uint64_t x_allowed, x_denied, x_errors;
	int x_first_err;
	char x_first_msg[MSG_MAX];
} tally;

/* What a single Redis server spent on a stretch of decisions (or ceiling
 * requests), from its INFO (bench/server_cost.c): totals, and how many
 * decisions each figure covers (0: not measured). */
typedef struct srv_cost {
	bool applies;         /* a single Redis: the figures are wanted */
	bool exec_ok, cpu_ok; /* each figure read */
	double exec_us;       /* command time (commandstats usec) */
	double cpu_us;        /* used_cpu_sys + used_cpu_user, µs */
	uint64_t exec_n, cpu_n;
	char note[MSG_MAX]; /* why a figure is missing, or "" */
} srv_cost;

/* A measurement of a server in progress: its connection and the readings
 * at the start; the figures in out once ended. */
typedef struct srv_probe {
	void *c;    /* redisContext, or NULL */
	bool reset; /* CONFIG RESETSTAT done */
	bool cpu;   /* cpu0 read */
	double cpu0;
	srv_cost out;
} srv_probe;

/* What a cell runs: fixed before any process starts. */
typedef struct cell_cfg {
	const char *store;
	const char *spec;
	char *xspec;  /* exactness spec, or NULL: no exactness phase */
	int64_t keys; /* 1: the hot key */
	int conc;
	int nprocs;
	char prefix[64];
	int64_t duration_ns;
	int64_t exact_cap_ns;
	int64_t exact_now_us;
	bool progress;
	int async_workers; /* --async W, or 0 */
	char label[160];   /* for the progress line */
} cell_cfg;

/* What a process reports back (a child writes it down a pipe). */
typedef struct proc_result {
	int open_rc;
	char open_msg[MSG_MAX];
	tally t;
	drl_store_stats d; /* over the throughput phase */
	int64_t start_ns;
	int64_t x_capacity; /* -1: no exactness phase ran */
	int x_rc;
	char x_msg[MSG_MAX];
} proc_result;

enum { PHASE_RUN, PHASE_EXACT };

typedef struct proc_ctx proc_ctx;

/* One caller: its own tally on its own cache lines. */
typedef struct worker {
	proc_ctx *p;
	int id;
	_Alignas(64) _Atomic uint64_t progress;
	tally t;
} worker;

struct proc_ctx {
	const cell_cfg *cfg;
	int nthreads;
	int base_id; /* first caller id of this process */
	drl_limiter *lim;
	drl_limiter *xlim;
	int phase;
	pthread_barrier_t ready, go;
	int64_t start_ns, deadline_ns;
	int64_t x_capacity;
	_Atomic uint64_t *x_total; /* shared by every process of the cell */
	_Atomic int done;
	int to_parent, from_parent; /* -1: no parent (single process) */
	srv_probe *srv; /* measure the server around the throughput phase */
	worker *w;
};

/* The results of a cell, merged over its processes. */
typedef struct cell_result {
	int open_rc;
	char open_msg[MSG_MAX];
	tally t;
	drl_store_stats d;
	double elapsed_s;
	int64_t x_capacity; /* -1: no exactness result */
	int x_rc;
	char x_msg[MSG_MAX];
	srv_cost srv; /* over the throughput phase(s): bench/server_cost.c */
} cell_result;

typedef struct ceiling {
	char id[600]; /* what was measured: the cache key */
	bool ok;      /* at least one round measured */
	bool failed;  /* gave up; note says why */
	char tool[64];
	char note[MSG_MAX];
	int nrounds;
	double rate[ROUNDS_MAX], p50[ROUNDS_MAX], p99[ROUNDS_MAX];
	double per_s, p50_us, p99_us; /* medians over the rounds */
	int64_t n;                    /* redis-benchmark requests per round */
	char command[1200]; /* reproduces one round (password masked) */
	srv_cost srv;       /* the server's cost over the measured rounds */
} ceiling;

typedef struct cell {
	cell_cfg cfg;
	cell_result r; /* merged over the rounds */
	int nrounds;
	double rates[ROUNDS_MAX]; /* decisions/s of each round */
	ceiling *ceil;            /* NULL: not measured / not applicable */
	ceiling *ceil_p; /* the same pipelined (-P CEILING_PIPELINE), Redis */
} cell;

/* ---- util.c ---------------------------------------------------------- */

/* Copy the string src into dst (cap bytes), cut to fit. */
void bench_copy_msg(char *dst, size_t cap, const char *src);
struct drl_uri;
/* Parse uri into *u (drl_uri_parse): true, or false with the error's
 * message in why (whycap bytes). */
bool bench_uri_parse(struct drl_uri **u, const char *uri, char *why,
		     size_t whycap);
/* A nonzero seed for bench_pick_key from a and b, the clock and the pid. */
uint64_t bench_rand_seed(uint64_t a, uint64_t b);
/* The key of one call into buf (>= 24 bytes): "hot" for a single key, else
 * "k<i>" with i uniform in [0, nkeys). Returns its length. */
size_t bench_pick_key(char *buf, int64_t nkeys, uint64_t *rng);

/* ---- options.c ------------------------------------------------------- */

/* The store URI as bench prints it, in b; returns b->s. */
const char *bench_show_uri(shown_uri *b, const char *uri);
/* Whether the URI names a store inside this process (memory://). */
bool bench_is_memory_uri(const char *uri);
/* Parse argv into *o. Returns -1 to go on, or an exit status (0 after
 * --help). The caller frees o's lists either way (bench_opts_free). */
int bench_parse(int argc, char **argv, bench_opts *o);
void bench_opts_free(bench_opts *o);
/* The spec with LIMIT and burst capped at cap, for the exactness phase
 * (malloc'd; the spec unchanged when it does not have the expected shape:
 * the library then reports what is wrong with it). */
char *bench_exact_spec(const char *spec, int64_t cap);

/* ---- runner.c -------------------------------------------------------- */

/* Keep the first error of a phase: its code in *code, "NAME: message" in
 * msg (MSG_MAX bytes). Later errors leave both alone. */
void bench_note_error(int *code, char *msg, int rc, const drl_error *err);
void bench_tally_merge(tally *into, const tally *t);
/* The progress line on stderr (a terminal): label, time, calls. */
void bench_progress_line(const cell_cfg *cfg, double elapsed, double total,
			 uint64_t calls);
/* One process's share of a cell: open the store, run the throughput phase
 * and (hot key) the exactness phase, report into *res. Always goes
 * through both synchronizations, even after a failure, so the processes
 * of a cell stay in step. */
void bench_run_proc(proc_ctx *p, proc_result *res);

/* ---- async.c --------------------------------------------------------- */

/* Keep p->nthreads requests in flight on one loop until the phase ends
 * (exact: the exactness phase); then wait for the last callbacks. */
void bench_async_loop(worker *w, bool exact);

/* ---- procs.c --------------------------------------------------------- */

/* Fold one round's (or process's) results into a cell's. */
void bench_result_merge(cell_result *into, const cell_result *r);
/* Run one cell: in this process (one process) or forked. */
void bench_run_cell(const cell_cfg *cfg, cell_result *cr);

/* ---- ceiling.c, ceiling_redis.c, ceiling_memcached.c ----------------- */

/* The median of v[0..n) (n >= 1). */
double bench_median(const double *v, int n);
/* The ceiling id of a cell ("" when no ceiling applies). */
void bench_ceiling_id(char *id, size_t cap, const char *uri, const char *spec,
		      int64_t keys, int conc, int pipeline);
/* The ceiling for a cell, measured for round `round` unless that round
 * (or a failure) is already recorded. NULL when no ceiling applies. */
ceiling *bench_ceiling_for(const char *uri, const char *spec, int64_t keys,
			   int conc, int pipeline, int64_t duration_ns,
			   const char *run_prefix, int round);
/* Every ceiling of this run (*n of them), in the order first asked for. */
const ceiling *bench_ceilings(size_t *n);
/* One round of a ceiling: rate and latency (µs) into the outputs; false
 * with cl->note saying why when it cannot be measured. */
bool bench_ceiling_redis(ceiling *cl, const char *uri, const char *spec,
			 int64_t keys, int conc, int pipeline,
			 int64_t duration_ns, const char *prefix,
			 double *rps_out, double *p50_out, double *p99_out);
bool bench_ceiling_memcached(ceiling *cl, const char *uri, int64_t keys,
			     int conc, int64_t duration_ns, const char *prefix,
			     double *rps, double *p50, double *p99);

/* ---- server_cost.c --------------------------------------------------- */

/* Start measuring the Redis server of uri: connect, CONFIG RESETSTAT,
 * read INFO cpu. Never fails: what could not be done is p->out.note. */
void bench_srv_begin(srv_probe *p, const char *uri);
/* Read INFO cpu and INFO commandstats into p->out; close. */
void bench_srv_end(srv_probe *p);
/* The figures of s cover n decisions (or requests). */
void bench_srv_count(srv_cost *s, uint64_t n);
/* Fold one stretch's figures into a total (rounds, ceiling runs). */
void bench_srv_merge(srv_cost *into, const srv_cost *s);
/* µs per decision of command time (exec) or CPU; false: not measured. */
bool bench_srv_per(const srv_cost *s, bool exec, double *per);

/* ---- report.c, report_json.c, report_markdown.c ---------------------- */

/* a / b, 0 when b is 0. */
double bench_per(uint64_t a, uint64_t b);
/* Round trips per decision where they are known: 0 in process, 1 when
 * every decision ran as a server-side script; -1 otherwise. */
int bench_round_trips(const cell *c);
/* decisions/s: the median round. */
double bench_rate(const cell *c);
/* What the exactness phase admitted beyond the capacity; 0 when none. */
int64_t bench_over_admission(const cell *c);
/* The cells as a JSON array / a Markdown table, on out. */
void bench_print_json(FILE *out, const cell *cells, size_t n);
void bench_print_markdown(FILE *out, const cell *cells, size_t n);

#endif /* DRL_TOOLS_BENCH_SHARED_H */
