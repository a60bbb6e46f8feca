/*
 * `drl bench`: the cost of each store and strategy, measured.
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
 */
#include "bench.h"
#include "common/args.h"
#include "common/clock.h"
#include "common/hist.h"
#include "common/json.h"

#include "drl_config.h"
#include "twin_call.h"

#include <drl/async.h>
#include <drl/drl.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if DRL_HAVE_REDIS
#include <hiredis/hiredis.h>
#endif
#if DRL_HAVE_MEMCACHED
#include <libmemcached/memcached.h>
#endif

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

/* ---- usage ------------------------------------------------------------ */

const char drl_bench_synopsis[] =
	"usage: drl bench [--store URI[,URI...]] --limit SPEC[;SPEC...]\n"
	"                 [--concurrency N[,N...]] [--keys N[,N...]]\n"
	"                 [--duration S] [--rounds N] [--procs N]\n"
	"                 [--exact-limit N] [--ceiling] [--async W]\n"
	"                 [--json]\n";

const char drl_bench_details[] =
	"\n"
	"Measure decisions/s and latency of stores and strategies: every\n"
	"cell of the grid store x spec x keys x concurrency runs for\n"
	"--duration seconds under a key prefix of its own.\n"
	"\n"
	"  -s, --store URI      store(s) to measure (default memory://);\n"
	"                       a ',' starts a new URI only when followed by\n"
	"                       SCHEME:// (memcached://a:1,b:2 is one pool);\n"
	"                       repeatable. Give Redis/memcached ?pool=N >=\n"
	"                       the largest concurrency, or callers queue\n"
	"                       for connections\n"
	"  -l, --limit SPEC     spec(s) to measure, separated by ';' (each\n"
	"                       is its own cell, not a policy); repeatable\n"
	"  -c, --concurrency L  callers per cell, e.g. 1,16,64 (default 1;\n"
	"                       1..1024 each)\n"
	"  -k, --keys L         1: one hot key; N: keys drawn uniformly from\n"
	"                       N; a list runs both (default 1)\n"
	"  -d, --duration S     seconds per cell, e.g. 2 or 0.5 (default 1)\n"
	"      --rounds N       run every cell (and ceiling) N times, the\n"
	"                       stores of one workload in turn; report the\n"
	"                       median rate, latency over all rounds\n"
	"                       (default 1, max 15)\n"
	"  -p, --procs N        spread each cell's callers over N processes\n"
	"                       (threads within each; shared stores only)\n"
	"      --exact-limit N  on a hot key, also check exactness at one\n"
	"                       fixed time with LIMIT and burst capped at N\n"
	"                       (default 1000; 0 skips the check)\n"
	"      --ceiling        also measure the server without the library:\n"
	"                       redis-benchmark EVALSHA of the same Lua\n"
	"                       script (redis://, also pipelined: -P 16),\n"
	"                       a raw increment loop (memcached://), same\n"
	"                       concurrency\n"
	"      --async W        callers are requests in flight on one event\n"
	"                       loop per process (drl_async_allow, a context\n"
	"                       of W worker threads: 1..256), not threads\n"
	"                       calling drl_allow; latency is start to\n"
	"                       callback\n"
	"  -j, --json           one JSON array of cells on stdout\n"
	"                       (default: a Markdown table)\n"
	"  -h, --help           this text\n"
	"\n"
	"Per cell: decisions/s; p50/p99/p99.9 latency; round trips per\n"
	"decision where known (memory 0, Lua scripts 1, else n/a); CAS\n"
	"attempts and conflicts (retries) per decision and exhausted retry\n"
	"budgets (drl_store_stats); errors; the share of calls allowed;\n"
	"exactness (admitted / capacity at one fixed time; \"cut short\" when\n"
	"the phase ran out of time first); the ceiling and library/ceiling.\n"
	"The planned run time goes to stderr first; a progress line too when\n"
	"stderr is a terminal.\n"
	"\n"
	"Exit status: 0 done, 1 an exactness check admitted more than the\n"
	"limit, 2 bad usage, spec or URI, 3 a store could not be used.\n";

/* ---- small helpers ---------------------------------------------------- */

/* xorshift64*: key choice only. */
static uint64_t rand_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * UINT64_C(2685821657736338717);
}

static uint64_t rand_seed(uint64_t a, uint64_t b)
{
	uint64_t s = (a * UINT64_C(0x9e3779b97f4a7c15)) ^ b ^
		     (uint64_t)tl_mono_ns() ^ ((uint64_t)getpid() << 32);
	return s ? s : 1;
}

/* The decimal digits of v at p (up to 20, no NUL); returns how many. */
static size_t put_uint(char *p, uint64_t v)
{
	char tmp[20], *end = tmp + sizeof tmp, *d = end;

	do
		*--d = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	memcpy(p, d, (size_t)(end - d));
	return (size_t)(end - d);
}

/* The key of one call into buf (>= 24 bytes): "hot" for a single key, else
 * "k<i>" with i uniform in [0, nkeys). Returns its length. */
static size_t pick_key(char *buf, int64_t nkeys, uint64_t *rng)
{
	if (nkeys == 1) {
		memcpy(buf, "hot", 3);
		return 3;
	}
	uint64_t i = ((rand_next(rng) >> 32) * (uint64_t)nkeys) >> 32;
	buf[0] = 'k';
	return 1 + put_uint(buf + 1, i);
}

/* Copy a message, truncating. */
static void copy_msg(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* ---- options ------------------------------------------------------------ */

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

#define usage_error(...)                                                       \
	tl_usage_error("bench", drl_bench_synopsis, __VA_ARGS__)

/* Whether s starts a URI: SCHEME "://" with SCHEME = alpha *(alnum + - .) */
static bool starts_uri(const char *s)
{
	size_t i = 0;
	if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
		return false;
	while (s[i] == '+' || s[i] == '-' || s[i] == '.' ||
	       (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
	       (s[i] >= '0' && s[i] <= '9'))
		i++;
	return strncmp(s + i, "://", 3) == 0;
}

/* Append the piece s[0..len) to list (a copy). Returns an exit status on
 * failure, -1 on success. */
static int list_add(char **list, size_t *n, const char *s, size_t len,
		    const char *what)
{
	if (len == 0)
		return usage_error("empty %s in the list", what);
	if (*n == LIST_MAX)
		return usage_error("at most %d %ss", LIST_MAX, what);
	char *p = malloc(len + 1);
	if (p == NULL) {
		fputs("drl bench: out of memory\n", stderr);
		return EXIT_STORE;
	}
	memcpy(p, s, len);
	p[len] = '\0';
	list[(*n)++] = p;
	return -1;
}

/* --store: split at ',' only where a new SCHEME:// begins. */
static int add_stores(bench_opts *o, const char *arg)
{
	const char *start = arg;
	for (const char *p = arg;; p++) {
		if (*p == '\0' || (*p == ',' && starts_uri(p + 1))) {
			int st = list_add(o->stores, &o->nstores, start,
					  (size_t)(p - start), "store URI");
			if (st >= 0)
				return st;
			if (*p == '\0')
				return -1;
			start = p + 1;
		}
	}
}

/* --limit: split at ';'. */
static int add_specs(bench_opts *o, const char *arg)
{
	const char *start = arg;
	for (const char *p = arg;; p++) {
		if (*p == '\0' || *p == ';') {
			int st = list_add(o->specs, &o->nspecs, start,
					  (size_t)(p - start), "spec");
			if (st >= 0)
				return st;
			if (*p == '\0')
				return -1;
			start = p + 1;
		}
	}
}

/* A ','-separated list of whole numbers in [min, max]. Returns false on
 * any bad element (empty, not digits, out of range, too many). */
static bool parse_num_list(const char *arg, int64_t min, int64_t max,
			   int64_t *out, size_t *n)
{
	const char *start = arg;
	*n = 0;
	for (const char *p = arg;; p++) {
		if (*p != '\0' && *p != ',')
			continue;
		if (*n == LIST_MAX ||
		    !tl_parse_uint_n(start, (size_t)(p - start), min, max,
				     &out[*n]))
			return false;
		(*n)++;
		if (*p == '\0')
			return true;
		start = p + 1;
	}
}

/* A store URI as bench prints it (tables, JSON, progress lines,
 * messages): any password masked, as the library's own messages do. */
typedef struct shown_uri {
	char s[DRL__TWIN_URI_SHOW_MAX];
} shown_uri;

static const char *show_uri(shown_uri *b, const char *uri)
{
	return drl__tool_uri_show(b->s, sizeof b->s, uri);
}

static bool is_memory_uri(const char *uri)
{
	return uri[0] == '\0' || strncmp(uri, "memory:", 7) == 0;
}

static void opts_free(bench_opts *o)
{
	for (size_t i = 0; i < o->nstores; i++)
		free(o->stores[i]);
	for (size_t i = 0; i < o->nspecs; i++)
		free(o->specs[i]);
}

/* Parse argv into *o. Returns -1 to go on, or an exit status (0 after
 * --help). The caller frees o's lists either way (opts_free). */
static int bench_parse(int argc, char **argv, bench_opts *o)
{
	enum { OPT_CEILING = 256, OPT_EXACT, OPT_ROUNDS, OPT_ASYNC };
	static const struct option longopts[] = {
		{"store", required_argument, NULL, 's'},
		{"limit", required_argument, NULL, 'l'},
		{"concurrency", required_argument, NULL, 'c'},
		{"keys", required_argument, NULL, 'k'},
		{"duration", required_argument, NULL, 'd'},
		{"procs", required_argument, NULL, 'p'},
		{"exact-limit", required_argument, NULL, OPT_EXACT},
		{"async", required_argument, NULL, OPT_ASYNC},
		{"rounds", required_argument, NULL, OPT_ROUNDS},
		{"ceiling", no_argument, NULL, OPT_CEILING},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int64_t tmp[LIST_MAX], v;
	int c, st;

	*o = (bench_opts){.duration_us = 1000000,
			  .procs = 1,
			  .exact_limit = EXACT_LIMIT_DEFAULT,
			  .rounds = 1};
	optind = 1;
	while ((c = getopt_long(argc, argv, ":s:l:c:k:d:p:jh", longopts,
				NULL)) != -1) {
		switch (c) {
		case 's':
			if ((st = add_stores(o, optarg)) >= 0)
				return st;
			break;
		case 'l':
			if ((st = add_specs(o, optarg)) >= 0)
				return st;
			break;
		case 'c':
			if (!parse_num_list(optarg, 1, CONC_MAX, tmp,
					    &o->nconc))
				return usage_error(
					"bad --concurrency '%s': expected "
					"whole numbers 1..%d separated by ','",
					optarg, CONC_MAX);
			for (size_t i = 0; i < o->nconc; i++)
				o->conc[i] = (int)tmp[i];
			break;
		case 'k':
			if (!parse_num_list(optarg, 1, KEYS_MAX, o->keys,
					    &o->nkeys))
				return usage_error(
					"bad --keys '%s': expected whole "
					"numbers 1..%d separated by ','",
					optarg, KEYS_MAX);
			break;
		case 'd':
			if (!tl_parse_seconds(optarg, DURATION_MIN_US,
					      DURATION_MAX_US, &o->duration_us))
				return usage_error(
					"bad --duration '%s': expected "
					"seconds 0.01..3600 (e.g. 2 or 0.5)",
					optarg);
			break;
		case 'p':
			if (!tl_parse_uint_n(optarg, strlen(optarg), 1,
					     PROCS_MAX, &v))
				return usage_error("bad --procs '%s': expected "
						   "1..%d",
						   optarg, PROCS_MAX);
			o->procs = (int)v;
			break;
		case OPT_ASYNC:
			if (!tl_parse_uint_n(optarg, strlen(optarg), 1,
					     DRL_ASYNC_THREADS_MAX, &v))
				return usage_error("bad --async '%s': expected "
						   "worker threads 1..%d",
						   optarg,
						   DRL_ASYNC_THREADS_MAX);
			o->async_workers = (int)v;
			break;
		case OPT_EXACT:
			if (!tl_parse_uint_n(optarg, strlen(optarg), 0,
					     DRL_LIMIT_MAX, &o->exact_limit))
				return usage_error(
					"bad --exact-limit '%s': expected "
					"0..%" PRId64,
					optarg, DRL_LIMIT_MAX);
			break;
		case OPT_ROUNDS:
			if (!tl_parse_uint_n(optarg, strlen(optarg), 1,
					     ROUNDS_MAX, &v))
				return usage_error("bad --rounds '%s': "
						   "expected 1..%d",
						   optarg, ROUNDS_MAX);
			o->rounds = (int)v;
			break;
		case OPT_CEILING:
			o->ceiling = true;
			break;
		case 'j':
			o->json = true;
			break;
		case 'h':
			fputs(drl_bench_synopsis, stdout);
			fputs(drl_bench_details, stdout);
			return EXIT_DONE;
		default: /* ':' or '?' */
			return tl_bad_option("bench", drl_bench_synopsis, c,
					     argv);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (o->nspecs == 0)
		return usage_error("missing --limit SPEC");
	if (o->nstores == 0 && (st = list_add(o->stores, &o->nstores,
					      "memory://", 9, "store")) >= 0)
		return st;
	if (o->nconc == 0)
		o->conc[o->nconc++] = 1;
	if (o->nkeys == 0)
		o->keys[o->nkeys++] = 1;
	shown_uri su;
	if (o->procs > 1)
		for (size_t i = 0; i < o->nstores; i++)
			if (is_memory_uri(o->stores[i]))
				return usage_error(
					"--procs %d needs a shared store; "
					"'%s' lives in each process",
					o->procs, show_uri(&su, o->stores[i]));
	return -1;
}

/* The spec with LIMIT and burst capped at cap, for the exactness phase
 * (malloc'd; the spec unchanged when it does not have the expected shape:
 * the library then reports what is wrong with it). */
static char *exact_spec(const char *spec, int64_t cap)
{
	size_t len = strlen(spec);
	char *out = malloc(len + 48);
	const char *colon = strchr(spec, ':');
	size_t o = 0;
	int64_t v;

	if (out == NULL)
		return NULL;
	if (colon == NULL) {
		memcpy(out, spec, len + 1);
		return out;
	}
	const char *p = colon + 1;
	memcpy(out, spec, (size_t)(p - spec));
	o = (size_t)(p - spec);
	size_t d = strspn(p, "0123456789");
	if (d && tl_parse_uint_n(p, d, 0, INT64_MAX, &v) && v > cap) {
		o += (size_t)sprintf(out + o, "%" PRId64, cap);
		p += d;
	}
	while (*p) {
		if (strncmp(p, ",burst=", 7) == 0) {
			memcpy(out + o, p, 7);
			o += 7;
			p += 7;
			d = strspn(p, "0123456789");
			if (d && tl_parse_uint_n(p, d, 0, INT64_MAX, &v) &&
			    v > cap) {
				o += (size_t)sprintf(out + o, "%" PRId64, cap);
				p += d;
			}
			continue;
		}
		out[o++] = *p++;
	}
	out[o] = '\0';
	return out;
}

/* ---- one cell, in one process ------------------------------------------ */

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

static void note_error(int *code, char *msg, int rc, const drl_error *err)
{
	if (*code != 0)
		return;
	*code = rc;
	/* the message cut to what fits after a code's name */
	snprintf(msg, MSG_MAX, "%s: %.170s", drl_err_name(rc),
		 err->message[0] ? err->message : drl_strerror(rc));
}

static void tally_merge(tally *into, const tally *t)
{
	tl_hist_merge(&into->lat, &t->lat);
	into->calls += t->calls;
	into->allowed += t->allowed;
	into->errors += t->errors;
	if (into->first_err == 0 && t->first_err != 0) {
		into->first_err = t->first_err;
		copy_msg(into->first_msg, MSG_MAX, t->first_msg);
	}
	if (t->end_ns > into->end_ns)
		into->end_ns = t->end_ns;
	into->x_allowed += t->x_allowed;
	into->x_denied += t->x_denied;
	into->x_errors += t->x_errors;
	if (into->x_first_err == 0 && t->x_first_err != 0) {
		into->x_first_err = t->x_first_err;
		copy_msg(into->x_first_msg, MSG_MAX, t->x_first_msg);
	}
}

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
	worker *w;
};

static void run_loop(worker *w)
{
	proc_ctx *p = w->p;
	tally *t = &w->t;
	const int64_t deadline = p->deadline_ns;
	const int64_t nkeys = p->cfg->keys;
	uint64_t rng = rand_seed((uint64_t)(p->base_id + w->id), 1);
	char key[24];
	drl_result r;
	drl_error err;
	int64_t t1 = p->start_ns;

	err.message[0] = '\0';
	for (;;) {
		int64_t t0 = tl_mono_ns();
		if (t0 >= deadline)
			break;
		size_t klen = pick_key(key, nkeys, &rng);
		int rc = drl_allow(p->lim, key, klen, 1, &r, &err);
		t1 = tl_mono_ns();
		tl_hist_add(&t->lat, t1 - t0);
		t->calls++;
		if (rc != 0) {
			t->errors++;
			note_error(&t->first_err, t->first_msg, rc, &err);
		} else {
			t->allowed += r.allowed != 0;
		}
		if ((t->calls & 63) == 0)
			atomic_store_explicit(&w->progress, t->calls,
					      memory_order_relaxed);
	}
	t->end_ns = t1;
}

/* Decide at one fixed time until the shared count of admitted requests
 * reaches the capacity, then EXACT_TAIL more (all must be denied). */
static void exact_loop(worker *w)
{
	proc_ctx *p = w->p;
	tally *t = &w->t;
	const uint64_t cap = (uint64_t)p->x_capacity;
	drl_result r;
	drl_error err;
	int tail = 0;

	err.message[0] = '\0';
	while (tl_mono_ns() < p->deadline_ns) {
		int rc = drl_allow_at(p->xlim, "x", 1, 1, p->cfg->exact_now_us,
				      &r, &err);
		if (rc != 0) {
			t->x_errors++;
			note_error(&t->x_first_err, t->x_first_msg, rc, &err);
		} else if (r.allowed) {
			t->x_allowed++;
			atomic_fetch_add_explicit(p->x_total, 1,
						  memory_order_relaxed);
		} else {
			t->x_denied++;
		}
		if (atomic_load_explicit(p->x_total, memory_order_relaxed) >=
			    cap &&
		    ++tail >= EXACT_TAIL)
			break;
	}
}

/* --async: a process's callers are requests in flight on one loop,
 * decided by a drl_async context; caller 0's thread runs the loop. */
typedef struct aloop {
	worker *w;
	drl_async *a;
	uint64_t rng;
	int inflight, tail;
	bool exact;
} aloop;

/* One request in flight: when it started. */
typedef struct aslot {
	aloop *lp;
	int64_t t0;
} aslot;

static void async_start(aslot *s);

/* A decision of the throughput phase: run_loop's accounting. */
static void async_run_done(aloop *lp, int64_t t0, int rc, const drl_result *r,
			   const drl_error *err)
{
	tally *t = &lp->w->t;
	int64_t t1 = tl_mono_ns();
	tl_hist_add(&t->lat, t1 - t0);
	t->calls++;
	t->end_ns = t1;
	if (rc != 0) {
		t->errors++;
		note_error(&t->first_err, t->first_msg, rc, err);
	} else {
		t->allowed += r->allowed != 0;
	}
	if ((t->calls & 63) == 0)
		atomic_store_explicit(&lp->w->progress, t->calls,
				      memory_order_relaxed);
}

/* A decision of the exactness phase: exact_loop's accounting; whether
 * the phase goes on. */
static bool async_exact_done(aloop *lp, int rc, const drl_result *r,
			     const drl_error *err)
{
	proc_ctx *p = lp->w->p;
	tally *t = &lp->w->t;
	if (rc != 0) {
		t->x_errors++;
		note_error(&t->x_first_err, t->x_first_msg, rc, err);
	} else if (r->allowed) {
		t->x_allowed++;
		atomic_fetch_add_explicit(p->x_total, 1, memory_order_relaxed);
	} else {
		t->x_denied++;
	}
	return !(atomic_load_explicit(p->x_total, memory_order_relaxed) >=
			 (uint64_t)p->x_capacity &&
		 ++lp->tail >= EXACT_TAIL);
}

static void async_done(drl_async *a, int rc, const drl_result *r,
		       const drl_error *err, void *arg)
{
	(void)a;
	aslot *s = arg;
	aloop *lp = s->lp;
	bool more = lp->exact ? async_exact_done(lp, rc, r, err)
			      : (async_run_done(lp, s->t0, rc, r, err), true);
	lp->inflight--;
	if (more && tl_mono_ns() < lp->w->p->deadline_ns)
		async_start(s);
}

static void async_start(aslot *s)
{
	aloop *lp = s->lp;
	proc_ctx *p = lp->w->p;
	drl_error err = {0};
	int rc;
	s->t0 = tl_mono_ns();
	if (lp->exact) {
		rc = drl_async_allow_at(lp->a, p->xlim, "x", 1, 1,
					p->cfg->exact_now_us, async_done, s,
					&err);
	} else {
		char key[24];
		size_t klen = pick_key(key, p->cfg->keys, &lp->rng);
		rc = drl_async_allow(lp->a, p->lim, key, klen, 1, async_done, s,
				     &err);
	}
	if (rc == 0) {
		lp->inflight++;
		return;
	}
	/* not started: a failed call, and this place retires */
	drl_result r = {0};
	if (lp->exact)
		(void)async_exact_done(lp, rc, &r, &err);
	else
		async_run_done(lp, s->t0, rc, &r, &err);
}

/* Keep p->nthreads requests in flight until the phase ends; then wait
 * for the last callbacks. */
static void async_loop(worker *w, bool exact)
{
	proc_ctx *p = w->p;
	drl_async_opts o = {.threads = p->cfg->async_workers};
	drl_error err = {0};
	aloop lp = {.w = w,
		    .rng = rand_seed((uint64_t)p->base_id, 1),
		    .exact = exact};
	int rc = drl_async_new(&lp.a, &o, &err);
	if (rc != 0) {
		note_error(exact ? &w->t.x_first_err : &w->t.first_err,
			   exact ? w->t.x_first_msg : w->t.first_msg, rc, &err);
		return;
	}
	aslot *slots = calloc((size_t)p->nthreads, sizeof *slots);
	for (int i = 0; slots && i < p->nthreads; i++) {
		slots[i].lp = &lp;
		async_start(&slots[i]);
	}
	struct pollfd pfd = {.fd = drl_async_fd(lp.a), .events = POLLIN};
	while (lp.inflight > 0) {
		poll(&pfd, 1, 100);
		drl_async_process(lp.a);
	}
	drl_async_free(lp.a);
	free(slots);
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	proc_ctx *p = w->p;

	if (p->cfg->async_workers > 0) {
		/* caller 0 runs the loop for all; the others only keep the
		 * phase's barriers */
		pthread_barrier_wait(&p->ready);
		pthread_barrier_wait(&p->go);
		if (w->id == 0)
			async_loop(w, p->phase == PHASE_EXACT);
		atomic_fetch_add(&p->done, 1);
		return NULL;
	}

	if (p->phase == PHASE_RUN) {
		/* Warm up on a key of its own: connections, scripts. */
		char key[24] = "w";
		size_t klen =
			1 + put_uint(key + 1, (uint64_t)(p->base_id + w->id));
		drl_result r;
		(void)drl_allow(p->lim, key, klen, 1, &r, NULL);
	}
	pthread_barrier_wait(&p->ready);
	pthread_barrier_wait(&p->go);
	if (p->phase == PHASE_RUN)
		run_loop(w);
	else
		exact_loop(w);
	atomic_fetch_add(&p->done, 1);
	return NULL;
}

/* All callers of this process are ready: agree on the start time (with
 * the parent when there is one). */
static int64_t sync_start(proc_ctx *p)
{
	int64_t start;
	char ready = 'R';

	if (p->to_parent < 0)
		return tl_mono_ns();
	if (write(p->to_parent, &ready, 1) != 1 ||
	    read(p->from_parent, &start, sizeof start) != sizeof start)
		return tl_mono_ns() - INT64_C(1000000000000); /* over: stop */
	return start;
}

static void progress_line(const cell_cfg *cfg, double elapsed, double total,
			  uint64_t calls)
{
	if (calls)
		fprintf(stderr, "\r\033[K%s  %.1f/%.1f s  %" PRIu64 " calls",
			cfg->label, elapsed, total, calls);
	else
		fprintf(stderr, "\r\033[K%s  %.1f/%.1f s", cfg->label, elapsed,
			total);
}

/* Run one phase with p->nthreads callers (none when the phase's limiter
 * could not be made: the phase then only synchronizes). */
static void run_phase(proc_ctx *p, int phase, int64_t length_ns)
{
	int n = p->nthreads;
	bool active = phase == PHASE_RUN ? p->lim != NULL : p->xlim != NULL;
	pthread_t *th = NULL;
	int started = 0;

	p->phase = phase;
	atomic_store(&p->done, 0);
	if (active) {
		th = calloc((size_t)n, sizeof *th);
		if (th == NULL ||
		    pthread_barrier_init(&p->ready, NULL, (unsigned)n + 1) ||
		    pthread_barrier_init(&p->go, NULL, (unsigned)n + 1)) {
			free(th);
			th = NULL;
			active = false;
		}
	}
	if (active) {
		for (started = 0; started < n; started++)
			if (pthread_create(&th[started], NULL, worker_main,
					   &p->w[started]) != 0)
				break;
		if (started < n) {
			/* The started ones wait at a barrier that can never
			 * fill: nothing sane is left to do. */
			fprintf(stderr, "drl bench: cannot start %d threads\n",
				n);
			abort();
		}
		pthread_barrier_wait(&p->ready);
	}
	int64_t start = sync_start(p);
	p->start_ns = start;
	p->deadline_ns = start + length_ns;
	if (!active)
		return;
	pthread_barrier_wait(&p->go);
	while (atomic_load(&p->done) < n) {
		int64_t now = tl_mono_ns();
		if (p->cfg->progress && p->to_parent < 0) {
			uint64_t calls = 0;
			for (int i = 0; i < n; i++)
				calls += atomic_load_explicit(
					&p->w[i].progress,
					memory_order_relaxed);
			progress_line(p->cfg, (double)(now - start) / 1e9,
				      (double)length_ns / 1e9, calls);
		}
		tl_sleep_ns(INT64_C(100000000));
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&p->ready);
	pthread_barrier_destroy(&p->go);
	free(th);
}

static void stats_delta(drl_store_stats *d, const drl_store_stats *a,
			const drl_store_stats *b)
{
	d->decisions = b->decisions - a->decisions;
	d->cas_attempts = b->cas_attempts - a->cas_attempts;
	d->cas_conflicts = b->cas_conflicts - a->cas_conflicts;
	d->cas_exhausted = b->cas_exhausted - a->cas_exhausted;
	d->scripts = b->scripts - a->scripts;
}

/* One process's share of a cell: open the store, run the throughput phase
 * and (hot key) the exactness phase, report into *res. Always goes
 * through both synchronizations, even after a failure, so the processes
 * of a cell stay in step. */
static void run_proc(proc_ctx *p, proc_result *res)
{
	const cell_cfg *cfg = p->cfg;
	drl_store *store = NULL;
	drl_error err = {0};
	drl_store_stats before = {0}, after = {0};
	int rc;

	memset(res, 0, sizeof *res);
	res->x_capacity = -1;
	p->w = aligned_alloc(64, sizeof(worker) * (size_t)p->nthreads);
	if (p->w == NULL) {
		res->open_rc = DRL_ENOMEM;
		copy_msg(res->open_msg, MSG_MAX, "out of memory");
	} else {
		memset(p->w, 0, sizeof(worker) * (size_t)p->nthreads);
		for (int i = 0; i < p->nthreads; i++) {
			p->w[i].p = p;
			p->w[i].id = i;
		}
	}
	if (p->w != NULL &&
	    ((rc = drl_store_open(&store, cfg->store, &err)) != 0 ||
	     (rc = drl_limiter_new(&p->lim, store, cfg->spec, cfg->prefix,
				   &err)) != 0)) {
		res->open_rc = rc;
		copy_msg(res->open_msg, MSG_MAX, err.message);
	}
	if (p->lim != NULL && cfg->xspec != NULL) {
		char xprefix[80];
		snprintf(xprefix, sizeof xprefix, "%sx:", cfg->prefix);
		err.message[0] = '\0';
		rc = drl_limiter_new(&p->xlim, store, cfg->xspec, xprefix,
				     &err);
		if (rc != 0) {
			res->x_rc = rc;
			copy_msg(res->x_msg, MSG_MAX, err.message);
		}
	}

	if (store)
		drl_store_stats_get(store, &before);
	run_phase(p, PHASE_RUN, cfg->duration_ns);
	res->start_ns = p->start_ns;
	if (store) {
		drl_store_stats_get(store, &after);
		stats_delta(&res->d, &before, &after);
	}

	if (cfg->xspec != NULL) {
		if (p->xlim != NULL) {
			/* cost 0: the quota at that time, consuming nothing */
			drl_result r;
			err.message[0] = '\0';
			rc = drl_allow_at(p->xlim, "x", 1, 0, cfg->exact_now_us,
					  &r, &err);
			if (rc != 0) {
				res->x_rc = rc;
				copy_msg(res->x_msg, MSG_MAX, err.message);
				drl_limiter_free(p->xlim);
				p->xlim = NULL;
			} else {
				p->x_capacity = r.remaining;
				res->x_capacity = r.remaining;
			}
		}
		run_phase(p, PHASE_EXACT, cfg->exact_cap_ns);
	}

	if (p->w != NULL)
		for (int i = 0; i < p->nthreads; i++)
			tally_merge(&res->t, &p->w[i].t);
	if (res->t.end_ns < res->start_ns)
		res->t.end_ns = res->start_ns;
	drl_limiter_free(p->xlim);
	drl_limiter_free(p->lim);
	drl_store_free(store);
	free(p->w);
	p->w = NULL;
}

/* ---- one cell, over processes ------------------------------------------ */

/* All len bytes to (out) or from fd, across short transfers and EINTR;
 * false on an error or end of file. */
static bool io_all(int fd, void *buf, size_t len, bool out)
{
	char *p = buf;
	while (len) {
		ssize_t n = out ? write(fd, p, len) : read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

static bool write_all(int fd, const void *buf, size_t len)
{
	return io_all(fd, (void *)buf, len, true);
}

static bool read_all(int fd, void *buf, size_t len)
{
	return io_all(fd, buf, len, false);
}

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
} cell_result;

/* Fold one round's results into a cell's. */
static void result_merge(cell_result *into, const cell_result *r)
{
	if (into->open_rc == 0 && r->open_rc != 0) {
		into->open_rc = r->open_rc;
		copy_msg(into->open_msg, MSG_MAX, r->open_msg);
	}
	if (into->x_rc == 0 && r->x_rc != 0) {
		into->x_rc = r->x_rc;
		copy_msg(into->x_msg, MSG_MAX, r->x_msg);
	}
	if (into->x_capacity < 0)
		into->x_capacity = r->x_capacity;
	tally_merge(&into->t, &r->t);
	into->d.decisions += r->d.decisions;
	into->d.cas_attempts += r->d.cas_attempts;
	into->d.cas_conflicts += r->d.cas_conflicts;
	into->d.cas_exhausted += r->d.cas_exhausted;
	into->d.scripts += r->d.scripts;
	into->elapsed_s += r->elapsed_s;
}

/* Fold one process's results into a cell's (as a round of no duration). */
static void merge_proc(cell_result *cr, const proc_result *r, int64_t *start)
{
	cell_result one = {
		.open_rc = r->open_rc,
		.t = r->t,
		.d = r->d,
		.x_capacity = r->x_capacity,
		.x_rc = r->x_rc,
	};
	copy_msg(one.open_msg, MSG_MAX, r->open_msg);
	copy_msg(one.x_msg, MSG_MAX, r->x_msg);
	result_merge(cr, &one);
	if (*start == 0 || r->start_ns < *start)
		*start = r->start_ns;
}

/* Fork cfg->nprocs children, each running run_proc with its share of the
 * callers; start each phase in all of them at once; collect. */
static int run_forked(const cell_cfg *cfg, _Atomic uint64_t *x_total,
		      cell_result *cr, int64_t *start)
{
	int n = cfg->nprocs;
	pid_t pid[PROCS_MAX];
	int to_child[PROCS_MAX], from_child[PROCS_MAX];
	int base = 0, forked = 0, status = 0;

	fflush(stdout);
	fflush(stderr);
	for (int i = 0; i < n; i++) {
		int a[2], b[2];
		int share = cfg->conc / n + (i < cfg->conc % n);
		if (pipe(a) != 0)
			break;
		if (pipe(b) != 0) {
			close(a[0]);
			close(a[1]);
			break;
		}
		pid[i] = fork();
		if (pid[i] < 0) {
			close(a[0]);
			close(a[1]);
			close(b[0]);
			close(b[1]);
			break;
		}
		if (pid[i] == 0) {
			proc_result res;
			proc_ctx p = {.cfg = cfg,
				      .nthreads = share,
				      .base_id = base,
				      .x_total = x_total,
				      .to_parent = b[1],
				      .from_parent = a[0]};
			for (int j = 0; j < i; j++) {
				close(to_child[j]);
				close(from_child[j]);
			}
			close(a[1]);
			close(b[0]);
			run_proc(&p, &res);
			_exit(write_all(b[1], &res, sizeof res) ? 0 : 1);
		}
		close(a[0]);
		close(b[1]);
		to_child[i] = a[1];
		from_child[i] = b[0];
		base += share;
		forked++;
	}
	if (forked < n) {
		fprintf(stderr, "drl bench: cannot start %d processes: %s\n", n,
			strerror(errno));
		status = -1;
	}
	int phases = cfg->xspec ? 2 : 1;
	for (int ph = 0; ph < phases && status == 0; ph++) {
		int64_t len = ph == 0 ? cfg->duration_ns : cfg->exact_cap_ns;
		for (int i = 0; i < forked; i++) {
			char c;
			if (!read_all(from_child[i], &c, 1))
				status = -1;
		}
		int64_t t0 = tl_mono_ns();
		for (int i = 0; i < forked; i++)
			if (!write_all(to_child[i], &t0, sizeof t0))
				status = -1;
		if (ph == 0 && cfg->progress)
			while (tl_mono_ns() < t0 + len) {
				progress_line(cfg,
					      (double)(tl_mono_ns() - t0) / 1e9,
					      (double)len / 1e9, 0);
				tl_sleep_ns(INT64_C(100000000));
			}
	}
	for (int i = 0; i < forked; i++) {
		proc_result res;
		close(to_child[i]);
		if (status == 0 && read_all(from_child[i], &res, sizeof res))
			merge_proc(cr, &res, start);
		else
			status = -1;
		close(from_child[i]);
	}
	for (int i = 0; i < forked; i++) {
		int ws;
		while (waitpid(pid[i], &ws, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
			status = -1;
	}
	return status;
}

/* Run one cell: in this process (one process) or forked. */
static void run_cell(const cell_cfg *cfg, cell_result *cr)
{
	int64_t start = 0;
	_Atomic uint64_t *x_total =
		mmap(NULL, sizeof *x_total, PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	memset(cr, 0, sizeof *cr);
	cr->x_capacity = -1;
	if (x_total == MAP_FAILED) {
		cr->open_rc = DRL_ENOMEM;
		copy_msg(cr->open_msg, MSG_MAX, "mmap failed");
		return;
	}
	atomic_store(x_total, 0);
	if (cfg->nprocs <= 1) {
		proc_result res;
		proc_ctx p = {.cfg = cfg,
			      .nthreads = cfg->conc,
			      .x_total = x_total,
			      .to_parent = -1,
			      .from_parent = -1};
		run_proc(&p, &res);
		merge_proc(cr, &res, &start);
	} else if (run_forked(cfg, x_total, cr, &start) != 0 &&
		   cr->open_rc == 0) {
		cr->open_rc = DRL_EINTERNAL;
		copy_msg(cr->open_msg, MSG_MAX,
			 "a benchmark process failed or died");
	}
	if (cfg->progress)
		fputs("\r\033[K", stderr);
	cr->elapsed_s = (double)(cr->t.end_ns - start) / 1e9;
	munmap((void *)x_total, sizeof *x_total);
}

/* ---- ceilings ----------------------------------------------------------- */

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
} ceiling;

/* The median of v[0..n) (n >= 1): the middle value, or the mean of the
 * middle two. */
static double median(const double *v, int n)
{
	double s[ROUNDS_MAX];
	memcpy(s, v, sizeof *v * (size_t)n);
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
			double t = s[j];
			s[j] = s[j - 1];
			s[j - 1] = t;
		}
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static ceiling ceilings[CEILINGS_MAX];
static size_t nceilings;
static uint64_t ceiling_serial;

static ceiling *ceiling_find(const char *id)
{
	for (size_t i = 0; i < nceilings; i++)
		if (strcmp(ceilings[i].id, id) == 0)
			return &ceilings[i];
	return NULL;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decode s[0..len) into out (cap bytes); false when too long. */
static bool pct_decode(char *out, size_t cap, const char *s, size_t len)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		if (o + 1 >= cap)
			return false;
		int hi, lo;
		if (s[i] == '%' && i + 2 < len &&
		    (hi = hex_digit(s[i + 1])) >= 0 &&
		    (lo = hex_digit(s[i + 2])) >= 0) {
			out[o++] = (char)(hi * 16 + lo);
			i += 2;
		} else {
			out[o++] = s[i];
		}
	}
	out[o] = '\0';
	return true;
}

/* The value of query option `key` in uri ("...?a=1&b=2"), copied into out;
 * false when absent. */
static bool uri_option(const char *uri, const char *key, char *out, size_t cap)
{
	const char *q = strchr(uri, '?');
	size_t klen = strlen(key);
	while (q != NULL) {
		q++;
		const char *end = strchr(q, '&');
		size_t len = end ? (size_t)(end - q) : strlen(q);
		if (len > klen && strncmp(q, key, klen) == 0 && q[klen] == '=')
			return pct_decode(out, cap, q + klen + 1,
					  len - klen - 1);
		q = end;
	}
	return false;
}

#if DRL_HAVE_REDIS
typedef struct redis_target {
	char host[256];
	int port;
	char sock[512];
	char user[128];
	char pass[256];
	int db;
} redis_target;

/* The server of a redis:// or redis+unix:// URI. */
static bool redis_target_parse(const char *uri, redis_target *t, char *why,
			       size_t whycap)
{
	memset(t, 0, sizeof *t);
	t->port = 6379;
	char v[64];
	if (uri_option(uri, "db", v, sizeof v))
		t->db = atoi(v);
	if (strncmp(uri, "redis+unix://", 13) == 0) {
		const char *p = uri + 13;
		size_t len = strcspn(p, "?");
		if (!pct_decode(t->sock, sizeof t->sock, p, len)) {
			snprintf(why, whycap, "socket path too long");
			return false;
		}
		return true;
	}
	if (strncmp(uri, "redis://", 8) != 0) {
		snprintf(why, whycap, "not a redis:// URI");
		return false;
	}
	const char *a = uri + 8;
	size_t alen = strcspn(a, "/?");
	const char *at = memchr(a, '@', alen);
	if (at != NULL) {
		const char *colon = memchr(a, ':', (size_t)(at - a));
		if (colon) {
			pct_decode(t->user, sizeof t->user, a,
				   (size_t)(colon - a));
			pct_decode(t->pass, sizeof t->pass, colon + 1,
				   (size_t)(at - colon - 1));
		} else {
			pct_decode(t->user, sizeof t->user, a,
				   (size_t)(at - a));
		}
		alen -= (size_t)(at + 1 - a);
		a = at + 1;
	}
	const char *hend = a + alen;
	const char *portp = NULL;
	if (a < hend && *a == '[') {
		const char *rb = memchr(a, ']', alen);
		if (!rb) {
			snprintf(why, whycap, "bad IPv6 host");
			return false;
		}
		snprintf(t->host, sizeof t->host, "%.*s", (int)(rb - a - 1),
			 a + 1);
		if (rb + 1 < hend && rb[1] == ':')
			portp = rb + 2;
	} else {
		const char *colon = memchr(a, ':', alen);
		size_t hl = colon ? (size_t)(colon - a) : alen;
		snprintf(t->host, sizeof t->host, "%.*s", (int)hl, a);
		if (colon)
			portp = colon + 1;
	}
	if (t->host[0] == '\0')
		snprintf(t->host, sizeof t->host, "127.0.0.1");
	if (portp) {
		int64_t port;
		if (!tl_parse_uint_n(portp, (size_t)(hend - portp), 1, 65535,
				     &port)) {
			snprintf(why, whycap, "bad port");
			return false;
		}
		t->port = (int)port;
	}
	const char *path = a + alen;
	if (*path == '/' && path[1] != '\0' && path[1] != '?')
		t->db = atoi(path + 1);
	return true;
}

/* SCRIPT LOAD the source on the target; the SHA1 into sha (41 bytes). */
static bool redis_script_load(const redis_target *t, const char *source,
			      char sha[41], char *why, size_t whycap)
{
	struct timeval tv = {5, 0};
	redisContext *c =
		t->sock[0] ? redisConnectUnixWithTimeout(t->sock, tv)
			   : redisConnectWithTimeout(t->host, t->port, tv);
	redisReply *r = NULL;
	bool ok = false;

	if (c == NULL || c->err) {
		snprintf(why, whycap, "cannot connect: %s",
			 c ? c->errstr : "out of memory");
		goto out;
	}
	if (t->pass[0]) {
		r = t->user[0] ? redisCommand(c, "AUTH %s %s", t->user, t->pass)
			       : redisCommand(c, "AUTH %s", t->pass);
		if (r == NULL || r->type == REDIS_REPLY_ERROR) {
			snprintf(why, whycap, "AUTH failed");
			goto out;
		}
		freeReplyObject(r);
	}
	r = redisCommand(c, "SCRIPT LOAD %b", source, strlen(source));
	if (r == NULL || r->type != REDIS_REPLY_STRING || r->len != 40) {
		snprintf(why, whycap, "SCRIPT LOAD failed: %s",
			 r && r->type == REDIS_REPLY_ERROR ? r->str
			 : c->err                          ? c->errstr
				  : "unexpected reply");
		goto out;
	}
	memcpy(sha, r->str, 40);
	sha[40] = '\0';
	ok = true;
out:
	if (r)
		freeReplyObject(r);
	if (c)
		redisFree(c);
	return ok;
}

/* Run argv (redis-benchmark), capturing stdout and stderr into out (cap
 * bytes, NUL-terminated); killed after timeout_ns. Returns its exit status
 * or -1. */
static int run_capture(char *const argv[], char *out, size_t cap,
		       int64_t timeout_ns)
{
	int fd[2];
	size_t len = 0;
	int ws = 0;

	out[0] = '\0';
	if (pipe(fd) != 0)
		return -1;
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		close(fd[0]);
		close(fd[1]);
		return -1;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, 0);
		dup2(fd[1], 1);
		dup2(fd[1], 2);
		close(fd[0]);
		close(fd[1]);
		execvp(argv[0], argv);
		fprintf(stderr, "cannot run %s: %s\n", argv[0],
			strerror(errno));
		_exit(127);
	}
	close(fd[1]);
	int64_t kill_at = tl_mono_ns() + timeout_ns;
	bool killed = false;
	for (;;) {
		struct pollfd pfd = {fd[0], POLLIN, 0};
		int pr = poll(&pfd, 1, 100);
		if (pr > 0) {
			char buf[4096];
			ssize_t n = read(fd[0], buf, sizeof buf);
			if (n == 0)
				break;
			if (n < 0 && errno != EINTR)
				break;
			if (n > 0 && len + 1 < cap) {
				size_t take = (size_t)n < cap - 1 - len
						      ? (size_t)n
						      : cap - 1 - len;
				memcpy(out + len, buf, take);
				len += take;
				out[len] = '\0';
			}
		}
		if (!killed && tl_mono_ns() > kill_at) {
			kill(pid, SIGKILL);
			killed = true;
		}
	}
	close(fd[0]);
	while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
	if (killed || !WIFEXITED(ws))
		return -1;
	return WEXITSTATUS(ws);
}

/* From redis-benchmark --csv output: the data row's rps, p50 and p99.
 * A row is "test","rps","avg","min","p50","p95","p99","max" (milliseconds);
 * the test name is our command, which holds no '"'. */
static bool parse_benchmark_csv(const char *out, double *rps, double *p50_ms,
				double *p99_ms)
{
	for (const char *line = out; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		double f[8];
		int nf = 0;
		const char *p = line, *stop = line + len;

		while (strncmp(line, "\"EVALSHA", 8) == 0 && p < stop &&
		       *p == '"' && nf < 8) {
			const char *q =
				memchr(p + 1, '"', (size_t)(stop - p - 1));
			char num[64], *e;
			size_t fl;
			if (q == NULL)
				break;
			fl = (size_t)(q - p - 1);
			if (nf > 0) {
				if (fl == 0 || fl >= sizeof num)
					break;
				memcpy(num, p + 1, fl);
				num[fl] = '\0';
				f[nf] = strtod(num, &e);
				if (*e != '\0')
					break;
			}
			nf++;
			p = q + 1;
			if (p < stop && *p == ',')
				p++;
		}
		if (nf == 8 && p == stop) {
			*rps = f[1];
			*p50_ms = f[4];
			*p99_ms = f[6];
			return *rps > 0;
		}
		line = end ? end + 1 : NULL;
	}
	return false;
}

/* Build the redis-benchmark argv for n requests into argv/bufs. */
typedef struct bench_argv {
	char *argv[48];
	int argc;
	char bufs[24][64];
	int nbufs;
} bench_argv;

static void ba_add(bench_argv *b, const char *s)
{
	b->argv[b->argc++] = (char *)s;
	b->argv[b->argc] = NULL;
}

static void ba_num(bench_argv *b, int64_t v)
{
	char *p = b->bufs[b->nbufs++];
	snprintf(p, 64, "%" PRId64, v);
	ba_add(b, p);
}

/* A command line for the docs: argv joined by spaces, the password
 * masked. */
static void ba_show(const bench_argv *b, char *out, size_t cap)
{
	size_t o = 0;
	out[0] = '\0';
	for (int i = 0; i < b->argc && o + 1 < cap; i++) {
		const char *a = b->argv[i];
		if (i > 0 && strcmp(b->argv[i - 1], "-a") == 0)
			a = "***";
		int n = snprintf(out + o, cap - o, "%s%s", i ? " " : "", a);
		if (n < 0)
			break;
		o += (size_t)n;
		if (o >= cap)
			o = cap - 1;
	}
}

/* One round of the Redis ceiling: redis-benchmark sized (after a short
 * calibration run, the first time) to last about duration_ns. */
static bool ceiling_redis(ceiling *cl, const char *uri, const char *spec,
			  int64_t keys, int conc, int pipeline,
			  int64_t duration_ns, const char *prefix,
			  double *rps_out, double *p50_out, double *p99_out)
{
	redis_target t;
	drl__twin_call tc;
	drl_error err = {0};
	char sha[41];
	static char out[65536];

	if (!redis_target_parse(uri, &t, cl->note, sizeof cl->note))
		return false;
	/* What the library sends to decide one request for the key "hot" or,
	 * on many keys, "__rand_int__" (which redis-benchmark -r rewrites to
	 * 12 digits: the same key encoding, a random key). now = -1: the
	 * script reads Redis TIME, so its state moves with time as the
	 * library's does (a fixed now would turn every request after the
	 * first LIMIT into a cheap denial). */
	const char *user_key = keys == 1 ? "hot" : "__rand_int__";
	if (drl__twin_call_make(&tc, spec, prefix, user_key, strlen(user_key),
				-1, 1, &err) != 0) {
		copy_msg(cl->note, sizeof cl->note, err.message);
		return false;
	}
	if (!redis_script_load(&t, tc.source, sha, cl->note, sizeof cl->note))
		return false;
	if (pipeline > 1)
		snprintf(cl->tool, sizeof cl->tool,
			 "redis-benchmark -P %d EVALSHA %s", pipeline, tc.name);
	else
		snprintf(cl->tool, sizeof cl->tool,
			 "redis-benchmark EVALSHA %s", tc.name);

	int64_t n = cl->n;
	if (n == 0)
		n = conc * INT64_C(100) > 2000 ? conc * INT64_C(100) : 2000;
	for (int run = cl->n ? 1 : 0; run < 2; run++) {
		bench_argv b = {.argc = 0};
		ba_add(&b, "redis-benchmark");
		if (t.sock[0]) {
			ba_add(&b, "-s");
			ba_add(&b, t.sock);
		} else {
			ba_add(&b, "-h");
			ba_add(&b, t.host);
			ba_add(&b, "-p");
			ba_num(&b, t.port);
		}
		if (t.user[0]) {
			ba_add(&b, "--user");
			ba_add(&b, t.user);
		}
		if (t.pass[0]) {
			ba_add(&b, "-a");
			ba_add(&b, t.pass);
		}
		if (t.db) {
			ba_add(&b, "--dbnum");
			ba_num(&b, t.db);
		}
		ba_add(&b, "-c");
		ba_num(&b, conc);
		ba_add(&b, "-n");
		ba_num(&b, n);
		if (pipeline > 1) {
			ba_add(&b, "-P");
			ba_num(&b, pipeline);
		}
		if (keys > 1) {
			ba_add(&b, "-r");
			ba_num(&b, keys);
		}
		ba_add(&b, "--csv");
		ba_add(&b, "EVALSHA");
		ba_add(&b, sha);
		ba_num(&b, (int64_t)tc.nkeys);
		ba_add(&b, tc.key);
		for (size_t i = 0; i < tc.nargs; i++)
			ba_num(&b, tc.args[i]);
		int st = run_capture(b.argv, out, sizeof out,
				     3 * duration_ns + INT64_C(10000000000));
		double rps, p50, p99;
		if (st != 0 || !parse_benchmark_csv(out, &rps, &p50, &p99)) {
			char *nl = strchr(out, '\n');
			if (nl)
				*nl = '\0';
			snprintf(cl->note, sizeof cl->note,
				 "redis-benchmark failed (exit %d): %.120s", st,
				 out);
			return false;
		}
		if (run == 1) {
			*rps_out = rps;
			*p50_out = p50 * 1000;
			*p99_out = p99 * 1000;
			ba_show(&b, cl->command, sizeof cl->command);
			return true;
		}
		n = (int64_t)(rps * (double)duration_ns / 1e9);
		if (n < conc * INT64_C(10))
			n = conc * INT64_C(10);
		if (n > INT64_C(100000000))
			n = INT64_C(100000000);
		cl->n = n;
	}
	return false;
}
#endif /* DRL_HAVE_REDIS */

#if DRL_HAVE_MEMCACHED
typedef struct mc_ctx {
	const char *config;
	bool binary;
	int64_t keys;
	const char *prefix;
	pthread_barrier_t ready, go;
	int64_t deadline_ns;
	_Atomic int failed;
} mc_ctx;

typedef struct mc_worker {
	mc_ctx *c;
	int id;
	tl_hist lat;
	uint64_t calls, errors;
	int64_t end_ns;
} mc_worker;

static bool mc_incr(memcached_st *mc, bool binary, const char *key, size_t klen)
{
	uint64_t v;
	memcached_return_t rc;
	if (binary) {
		/* A client that loses the race to create the key gets
		 * NOT_STORED and sends it again (as the store does). */
		for (int i = 0; i < 2; i++) {
			rc = memcached_increment_with_initial(mc, key, klen, 1,
							      1, KEY_TTL_S, &v);
			if (rc != MEMCACHED_NOTSTORED)
				break;
		}
		return rc == MEMCACHED_SUCCESS;
	}
	rc = memcached_increment(mc, key, klen, 1, &v);
	if (rc == MEMCACHED_NOTFOUND) {
		rc = memcached_add(mc, key, klen, "1", 1, KEY_TTL_S, 0);
		if (rc == MEMCACHED_NOTSTORED)
			rc = memcached_increment(mc, key, klen, 1, &v);
		else if (rc == MEMCACHED_SUCCESS)
			return true;
	}
	return rc == MEMCACHED_SUCCESS;
}

static void *mc_worker_main(void *arg)
{
	mc_worker *w = arg;
	mc_ctx *c = w->c;
	memcached_st *mc = memcached(c->config, strlen(c->config));
	/* the transport settings the store uses (backends/memcached.c) */
	if (mc != NULL) {
		memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
		memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_NO_BLOCK, 1);
	}
	uint64_t rng = rand_seed((uint64_t)w->id, 2);
	char key[200];
	size_t plen = strlen(c->prefix);

	memcpy(key, c->prefix, plen);
	if (mc == NULL) {
		atomic_store(&c->failed, 1);
	} else {
		size_t l = (size_t)snprintf(key + plen, sizeof key - plen,
					    "w%d", w->id);
		if (!mc_incr(mc, c->binary, key, plen + l))
			atomic_store(&c->failed, 1);
	}
	pthread_barrier_wait(&c->ready);
	pthread_barrier_wait(&c->go);
	int64_t t1 = tl_mono_ns();
	while (mc != NULL &&
	       !atomic_load_explicit(&c->failed, memory_order_relaxed)) {
		int64_t t0 = tl_mono_ns();
		if (t0 >= c->deadline_ns)
			break;
		size_t klen = plen + pick_key(key + plen, c->keys, &rng);
		bool ok = mc_incr(mc, c->binary, key, klen);
		t1 = tl_mono_ns();
		tl_hist_add(&w->lat, t1 - t0);
		w->calls++;
		w->errors += !ok;
	}
	w->end_ns = t1;
	if (mc)
		memcached_free(mc);
	return NULL;
}

/* libmemcached configuration for a memcached:// URI ("--SERVER=h:p ..."). */
static bool mc_config(const char *uri, char *cfg, size_t cap, bool *binary,
		      char *why, size_t whycap)
{
	char v[16];
	size_t o = 0;
	*binary = !(uri_option(uri, "binary", v, sizeof v) &&
		    strcmp(v, "0") == 0);
	if (strncmp(uri, "memcached+unix://", 17) == 0) {
		char path[512];
		const char *p = uri + 17;
		if (!pct_decode(path, sizeof path, p, strcspn(p, "?"))) {
			snprintf(why, whycap, "socket path too long");
			return false;
		}
		o = (size_t)snprintf(cfg, cap, "--SOCKET=\"%s\"", path);
	} else if (strncmp(uri, "memcached://", 12) == 0) {
		const char *p = uri + 12;
		size_t len = strcspn(p, "?/");
		while (len > 0) {
			size_t one = strcspn(p, ",?/");
			if (one > len)
				one = len;
			if (one == 0 || *p == '[') {
				snprintf(why, whycap,
					 "cannot build a raw client for this "
					 "host list");
				return false;
			}
			o += (size_t)snprintf(cfg + o, cap - o,
					      "%s--SERVER=%.*s", o ? " " : "",
					      (int)one, p);
			if (o >= cap)
				break;
			p += one;
			len -= one;
			if (len > 0) {
				p++;
				len--;
			}
		}
	} else {
		snprintf(why, whycap, "not a memcached:// URI");
		return false;
	}
	if (*binary && o < cap)
		o += (size_t)snprintf(cfg + o, cap - o, " --BINARY-PROTOCOL");
	if (o >= cap) {
		snprintf(why, whycap, "URI too long");
		return false;
	}
	return true;
}

/* One round of the memcached ceiling: conc threads incrementing for
 * duration_ns. */
static bool ceiling_memcached(ceiling *cl, const char *uri, int64_t keys,
			      int conc, int64_t duration_ns, const char *prefix,
			      double *rps, double *p50, double *p99)
{
	char cfg[1024];
	mc_ctx c = {.config = cfg, .keys = keys, .prefix = prefix};
	mc_worker *w;
	pthread_t *th;
	int started;

	if (!mc_config(uri, cfg, sizeof cfg, &c.binary, cl->note,
		       sizeof cl->note))
		return false;
	snprintf(cl->tool, sizeof cl->tool, "libmemcached %s",
		 c.binary ? "increment_with_initial (binary)" : "incr (ascii)");
	w = calloc((size_t)conc, sizeof *w);
	th = calloc((size_t)conc, sizeof *th);
	if (w == NULL || th == NULL ||
	    pthread_barrier_init(&c.ready, NULL, (unsigned)conc + 1) != 0) {
		snprintf(cl->note, sizeof cl->note, "out of memory");
		free(w);
		free(th);
		return false;
	}
	pthread_barrier_init(&c.go, NULL, (unsigned)conc + 1);
	for (started = 0; started < conc; started++) {
		w[started].c = &c;
		w[started].id = started;
		if (pthread_create(&th[started], NULL, mc_worker_main,
				   &w[started]) != 0) {
			fprintf(stderr, "drl bench: cannot start threads\n");
			abort();
		}
	}
	pthread_barrier_wait(&c.ready);
	int64_t start = tl_mono_ns();
	c.deadline_ns = start + duration_ns;
	pthread_barrier_wait(&c.go);
	tl_hist all = {{0}, 0, 0};
	uint64_t calls = 0, errors = 0;
	int64_t end = start;
	for (int i = 0; i < conc; i++) {
		pthread_join(th[i], NULL);
		tl_hist_merge(&all, &w[i].lat);
		calls += w[i].calls;
		errors += w[i].errors;
		if (w[i].end_ns > end)
			end = w[i].end_ns;
	}
	pthread_barrier_destroy(&c.ready);
	pthread_barrier_destroy(&c.go);
	free(w);
	free(th);
	if (atomic_load(&c.failed) || errors > calls / 1000 || calls == 0 ||
	    end <= start) {
		snprintf(cl->note, sizeof cl->note,
			 "raw increments failed (%" PRIu64 " of %" PRIu64 ")",
			 errors, calls);
		return false;
	}
	*rps = (double)calls / ((double)(end - start) / 1e9);
	*p50 = tl_hist_quantile_us(&all, 0.5);
	*p99 = tl_hist_quantile_us(&all, 0.99);
	snprintf(cl->command, sizeof cl->command,
		 "built in: %d threads, one memcached_st each, %s on %s for "
		 "%.1f s",
		 conc,
		 c.binary ? "memcached_increment_with_initial"
			  : "memcached_increment",
		 keys == 1 ? "one key" : "uniform random keys",
		 (double)duration_ns / 1e9);
	return true;
}
#endif /* DRL_HAVE_MEMCACHED */

/* The ceiling id of a cell ("" when no ceiling applies). The Redis script
 * ceiling depends on the server and the spec, not on tx=; memcached's
 * increment ceiling only on the servers. */
static void ceiling_id(char *id, size_t cap, const char *uri, const char *spec,
		       int64_t keys, int conc, int pipeline)
{
	id[0] = '\0';
	if (pipeline > 1 && strncmp(uri, "redis://", 8) != 0 &&
	    strncmp(uri, "redis+unix://", 13) != 0)
		return; /* only redis-benchmark pipelines */
	size_t hl = strcspn(uri, "?");
	/* A cluster has no single server to drive (bench_cluster measures
	 * the cluster: docs/performance.md). */
	if (strncmp(uri, "redis-cluster:", 14) == 0)
		return;
	if (strncmp(uri, "redis", 5) == 0)
		snprintf(id, cap, "%.*s|%s|%" PRId64 "|%d|P%d", (int)hl, uri,
			 spec, keys, conc, pipeline);
	else if (strncmp(uri, "memcached", 9) == 0)
		snprintf(id, cap, "%.*s|%" PRId64 "|%d", (int)hl, uri, keys,
			 conc);
}

/* The ceiling for a cell, measured for round `round` unless that round
 * (or a failure) is already recorded: cells that share a ceiling (tx=lua
 * and tx=watch on one server) measure it once per round. NULL when no
 * ceiling applies. */
static ceiling *ceiling_for(const char *uri, const char *spec, int64_t keys,
			    int conc, int pipeline, int64_t duration_ns,
			    const char *run_prefix, int round)
{
	char id[600];
	char prefix[96];
	double rps = 0, p50 = 0, p99 = 0;
	bool ok = false;

	ceiling_id(id, sizeof id, uri, spec, keys, conc, pipeline);
	if (id[0] == '\0')
		return NULL;
	ceiling *cl = ceiling_find(id);
	if (cl == NULL) {
		if (nceilings == CEILINGS_MAX)
			return NULL;
		cl = &ceilings[nceilings++];
		memset(cl, 0, sizeof *cl);
		copy_msg(cl->id, sizeof cl->id, id);
	}
	if (cl->failed || cl->nrounds > round || cl->nrounds == ROUNDS_MAX)
		return cl;
	/* a fresh key every round: no state carried over */
	snprintf(prefix, sizeof prefix, "%sc%" PRIu64 ":", run_prefix,
		 ++ceiling_serial);
	if (strncmp(uri, "redis", 5) == 0) {
#if DRL_HAVE_REDIS
		ok = ceiling_redis(cl, uri, spec, keys, conc, pipeline,
				   duration_ns, prefix, &rps, &p50, &p99);
#else
		copy_msg(cl->note, sizeof cl->note, "built without hiredis");
#endif
	} else {
#if DRL_HAVE_MEMCACHED
		ok = ceiling_memcached(cl, uri, keys, conc, duration_ns, prefix,
				       &rps, &p50, &p99);
#else
		copy_msg(cl->note, sizeof cl->note,
			 "built without libmemcached");
#endif
	}
	if (!ok) {
		cl->failed = true;
		return cl;
	}
	cl->rate[cl->nrounds] = rps;
	cl->p50[cl->nrounds] = p50;
	cl->p99[cl->nrounds] = p99;
	cl->nrounds++;
	cl->ok = true;
	cl->per_s = median(cl->rate, cl->nrounds);
	cl->p50_us = median(cl->p50, cl->nrounds);
	cl->p99_us = median(cl->p99, cl->nrounds);
	return cl;
}

/* ---- output ------------------------------------------------------------- */

typedef struct cell {
	cell_cfg cfg;
	cell_result r; /* merged over the rounds */
	int nrounds;
	double rates[ROUNDS_MAX]; /* decisions/s of each round */
	ceiling *ceil;            /* NULL: not measured / not applicable */
	ceiling *ceil_p; /* the same pipelined (-P CEILING_PIPELINE), Redis */
} cell;

static double per(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0;
}

/* Round trips per decision where they are known: 0 in process, 1 when
 * every decision ran as a server-side script; -1 otherwise. */
static int round_trips(const cell *c)
{
	if (is_memory_uri(c->cfg.store))
		return 0;
	if (c->r.d.decisions > 0 && c->r.d.scripts == c->r.d.decisions)
		return 1;
	return -1;
}

/* A ceiling as JSON: null (none applies), its note (not measured), or
 * its rate, latency, rounds and command; `lib` is the cell's rate. */
static void print_json_ceiling(FILE *out, const ceiling *cl, double lib)
{
	if (cl == NULL) {
		fputs("null", out);
		return;
	}
	if (!cl->ok) {
		fputs("{\"per_s\":null,\"ratio\":null,\"note\":", out);
		tl_json_str(out, cl->note);
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
	putc('}', out);
}

/* decisions/s: the median round. */
static double rate(const cell *c)
{
	return c->nrounds ? median(c->rates, c->nrounds) : 0;
}

static int64_t over_admission(const cell *c)
{
	if (c->r.x_capacity < 0)
		return 0;
	int64_t over = (int64_t)c->r.t.x_allowed - c->r.x_capacity;
	return over > 0 ? over : 0;
}

static void print_json(FILE *out, const cell *cells, size_t n)
{
	fputs("[\n", out);
	for (size_t i = 0; i < n; i++) {
		const cell *c = &cells[i];
		const tally *t = &c->r.t;
		const drl_store_stats *d = &c->r.d;
		int rt = round_trips(c);

		shown_uri su;
		fputs("  {\"store\":", out);
		tl_json_str(out, show_uri(&su, c->cfg.store));
		fputs(",\"spec\":", out);
		tl_json_str(out, c->cfg.spec);
		fprintf(out,
			",\"keys\":%" PRId64 ",\"concurrency\":%d,\"procs\":%d"
			",\"async_workers\":%d"
			",\"duration_s\":%.3f,\"decisions\":%" PRIu64
			",\"decisions_per_s\":%.1f,\"allowed\":%" PRIu64
			",\"errors\":%" PRIu64 ",\"first_error\":",
			c->cfg.keys, c->cfg.conc, c->cfg.nprocs,
			c->cfg.async_workers, c->r.elapsed_s, t->calls, rate(c),
			t->allowed, t->errors);
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
			d->decisions, per(d->scripts, d->decisions),
			per(d->cas_attempts, d->decisions),
			per(d->cas_conflicts, d->decisions), d->cas_exhausted);
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
				over_admission(c),
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
		print_json_ceiling(out, c->ceil, rate(c));
		fputs(",\"ceiling_pipelined\":", out);
		print_json_ceiling(out, c->ceil_p, rate(c));
		fprintf(out, "}%s\n", i + 1 < n ? "," : "");
	}
	fputs("]\n", out);
}

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

static void print_markdown(FILE *out, const cell *cells, size_t n)
{
	bool any_ceiling = false, any_pipelined = false;
	for (size_t i = 0; i < n; i++) {
		any_ceiling |= cells[i].ceil != NULL;
		any_pipelined |= cells[i].ceil_p != NULL;
	}
	fputs("| store | spec | keys | C | decisions/s | p50 µs | p99 µs | "
	      "p99.9 µs | RT/dec | CAS retries/dec | exhausted | errors | "
	      "allowed | exact (admitted/cap) |",
	      out);
	if (any_ceiling)
		fputs(" ceiling/s | lib/ceiling |", out);
	if (any_pipelined)
		fputs(" ceiling -P16/s | lib/ceiling -P16 |", out);
	fputs("\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
	      out);
	if (any_ceiling)
		fputs("--:|--:|", out);
	if (any_pipelined)
		fputs("--:|--:|", out);
	putc('\n', out);
	for (size_t i = 0; i < n; i++) {
		const cell *c = &cells[i];
		shown_uri su;
		const tally *t = &c->r.t;
		char p50[16], p99[16], p999[16], rt[8], cas[16], exact[48];
		char conc[32];
		int r = round_trips(c);

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
				 per(c->r.d.cas_conflicts, c->r.d.decisions));
		if (c->cfg.xspec == NULL)
			snprintf(exact, sizeof exact, "—");
		else if (c->r.x_capacity < 0)
			snprintf(exact, sizeof exact, "failed");
		else
			snprintf(exact, sizeof exact,
				 "%" PRIu64 "/%" PRId64 "%s", t->x_allowed,
				 c->r.x_capacity,
				 over_admission(c) ? " **OVER**"
				 : (int64_t)t->x_allowed < c->r.x_capacity
					 ? " (cut short)"
					 : "");
		fprintf(out,
			"| %s | %s | %" PRId64 " | %s | %.0f | %s | %s | %s | "
			"%s | %s | %" PRIu64 " | %" PRIu64 " | %.1f%% | %s |",
			show_uri(&su, c->cfg.store), c->cfg.spec, c->cfg.keys,
			conc, rate(c), p50, p99, p999, rt, cas,
			c->r.d.cas_exhausted, t->errors + (c->r.open_rc != 0),
			100 * per(t->allowed, t->calls), exact);
		if (any_ceiling)
			print_md_ceiling(out, c->ceil, rate(c));
		if (any_pipelined)
			print_md_ceiling(out, c->ceil_p, rate(c));
		putc('\n', out);
	}
	/* Errors and missing ceilings, said once below the table. */
	for (size_t i = 0; i < n; i++) {
		const cell *c = &cells[i];
		shown_uri su;
		const char *store = show_uri(&su, c->cfg.store);
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
	}
	/* The commands behind the ceilings. */
	bool header = false;
	for (size_t i = 0; i < nceilings; i++) {
		if (!ceilings[i].ok || ceilings[i].command[0] == '\0')
			continue;
		if (!header)
			fputs("\n\nCeilings:\n", out);
		header = true;
		fprintf(out, "\n- `%s`: %.0f/s", ceilings[i].command,
			ceilings[i].per_s);
	}
	putc('\n', out);
}

/* ---- the grid ----------------------------------------------------------- */

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
		 total, show_uri(&su, cfg.store), cfg.spec, cfg.keys, cfg.conc,
		 round + 1, rounds);
	run_cell(&cfg, &r);
	if (c->nrounds == 0) {
		c->r = r;
	} else {
		result_merge(&c->r, &r);
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
		int rc = drl_store_open(&store, o->stores[s], &err);
		if (rc != 0) {
			shown_uri su;
			fprintf(stderr, "drl bench: --store '%s': %s (%s)\n",
				show_uri(&su, o->stores[s]),
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
						cfg->xspec = exact_spec(
							cfg->spec,
							o->exact_limit);
						nexact++;
					}
				}

	/* The plan, before any load. */
	if (o->ceiling) {
		char(*ids)[600] = calloc(ncells, sizeof *ids);
		for (i = 0; ids && i < ncells; i++) {
			ceiling_id(ids[i], sizeof ids[i], cells[i].cfg.store,
				   cells[i].cfg.spec, cells[i].cfg.keys,
				   cells[i].cfg.conc, 1);
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
				if (round == 0 && over_admission(c) > 0)
					status = EXIT_OVER;
				if (!o->ceiling)
					continue;
				if (progress)
					fprintf(stderr,
						"\r\033[K[%zu/%zu] ceiling",
						done,
						ncells * (size_t)o->rounds);
				c->ceil = ceiling_for(
					c->cfg.store, c->cfg.spec, c->cfg.keys,
					c->cfg.conc, 1, dur, run_prefix, round);
				c->ceil_p = ceiling_for(
					c->cfg.store, c->cfg.spec, c->cfg.keys,
					c->cfg.conc, CEILING_PIPELINE, dur,
					run_prefix, round);
				if (progress)
					fputs("\r\033[K", stderr);
			}
		}
	}

	if (o->json)
		print_json(stdout, cells, ncells);
	else
		print_markdown(stdout, cells, ncells);
	for (i = 0; i < ncells; i++)
		free(cells[i].cfg.xspec);
	free(cells);
	return status;
}

int drl_cmd_bench(int argc, char **argv)
{
	bench_opts o;
	int status = bench_parse(argc, argv, &o);

	if (status < 0)
		status = validate(&o);
	if (status < 0)
		status = bench_run(&o);
	opts_free(&o);
	return status;
}
