/*
 * `drl bench` options (see tool_bench_details): the --help text, argv into
 * a bench_opts with every value checked (a usage error names the bad one
 * and exits 2 before anything runs), the exactness phase's capped spec,
 * and store URIs as bench prints them (passwords masked).
 */
#include "shared.h"
#include "common/args.h"
#include "twin_call.h"

#include <drl/async.h>
#include <drl/drl.h>

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char tool_bench_synopsis[] =
	"usage: drl bench [--store URI[,URI...]] --limit SPEC[;SPEC...]\n"
	"                 [--concurrency N[,N...]] [--keys N[,N...]]\n"
	"                 [--duration S] [--rounds N] [--procs N]\n"
	"                 [--exact-limit N] [--ceiling] [--async W]\n"
	"                 [--json]\n";

const char tool_bench_details[] =
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
	"On a single Redis (redis://, redis+unix://; not redis-cluster://),\n"
	"what a decision costs the server, per decision of the throughput\n"
	"phase (JSON server_exec_us, server_cpu_us; null elsewhere):\n"
	"  srv exec µs   command time from INFO commandstats after CONFIG\n"
	"                RESETSTAT at the start of each round's phase: the\n"
	"                scripts' usec when scripts ran (EVAL*, FCALL*:\n"
	"                their usec includes what they call; plain commands\n"
	"                beside them are then left out), else every\n"
	"                command's but INFO, CONFIG, PING, AUTH, HELLO,\n"
	"                SELECT, CLIENT, SCRIPT and COMMAND\n"
	"  srv CPU µs    the server's used_cpu_sys + used_cpu_user (INFO\n"
	"                cpu) over the phase\n"
	"With --ceiling, the same two per redis-benchmark request. These are\n"
	"whole-server figures, taken by this process on a connection of its\n"
	"own around all the cell's processes: anything else the server does\n"
	"meanwhile counts too, so a cell must be the only load on that Redis.\n"
	"CONFIG RESETSTAT clears the server's INFO statistics. Where the\n"
	"server cannot be asked (CONFIG refused or renamed, AUTH failing, no\n"
	"hiredis) a figure is n/a (null) with a note; the cell still runs.\n"
	"\n"
	"Exit status: 0 done, 1 an exactness check admitted more than the\n"
	"limit, 2 bad usage, spec or URI, 3 a store could not be used.\n";

#define usage_error(...)                                                       \
	tl_usage_error("bench", tool_bench_synopsis, __VA_ARGS__)

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

const char *bench_show_uri(shown_uri *b, const char *uri)
{
	return drl_uri_redact(b->s, sizeof b->s, uri);
}

bool bench_is_memory_uri(const char *uri)
{
	return uri[0] == '\0' || strncmp(uri, "memory:", 7) == 0;
}

void bench_opts_free(bench_opts *o)
{
	for (size_t i = 0; i < o->nstores; i++)
		free(o->stores[i]);
	for (size_t i = 0; i < o->nspecs; i++)
		free(o->specs[i]);
}

/* Parse argv into *o. Returns -1 to go on, or an exit status (0 after
 * --help). The caller frees o's lists either way (opts_free). */
int bench_parse(int argc, char **argv, bench_opts *o)
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
			fputs(tool_bench_synopsis, stdout);
			fputs(tool_bench_details, stdout);
			return EXIT_DONE;
		default: /* ':' or '?' */
			return tl_bad_option("bench", tool_bench_synopsis, c,
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
			if (bench_is_memory_uri(o->stores[i]))
				return usage_error(
					"--procs %d needs a shared store; "
					"'%s' lives in each process",
					o->procs,
					bench_show_uri(&su, o->stores[i]));
	return -1;
}

/* The spec with LIMIT and burst capped at cap, for the exactness phase
 * (malloc'd; the spec unchanged when it does not have the expected shape:
 * the library then reports what is wrong with it). */
char *bench_exact_spec(const char *spec, int64_t cap)
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
