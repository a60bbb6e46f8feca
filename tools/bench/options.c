/*
 * `drl bench` options: the option table (tool_bench_cli, its --help too),
 * argv into a bench_opts with every value checked (a usage error names the
 * bad one and exits 2 before anything runs), the exactness phase's capped
 * spec, and store URIs as bench prints them (passwords masked).
 */
#include "shared.h"
#include "bench.h"
#include "common/args.h"
#include "common/opts.h"
#include "twin_call.h"

#include <drl/async.h>
#include <drl/drl.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define usage_error(...) tl_opts_error(&tool_bench_cli, __VA_ARGS__)

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
	char *p = strndup(s, len);
	if (p == NULL) {
		fputs("drl bench: out of memory\n", stderr);
		return EXIT_STORE;
	}
	list[(*n)++] = p;
	return -1;
}

/* Append the pieces of arg to list (list_add), arg cut at each p where
 * cuts(p). Returns an exit status on failure, -1 on success. */
static int add_pieces(char **list, size_t *n, const char *arg,
		      bool (*cuts)(const char *p), const char *what)
{
	const char *start = arg;
	for (const char *p = arg;; p++) {
		if (*p == '\0' || cuts(p)) {
			int st = list_add(list, n, start, (size_t)(p - start),
					  what);
			if (st >= 0)
				return st;
			if (*p == '\0')
				return -1;
			start = p + 1;
		}
	}
}

/* --store: split at ',' only where a new SCHEME:// begins. */
static bool store_cut(const char *p)
{
	return *p == ',' && starts_uri(p + 1);
}

static int add_stores(void *target, const char *arg)
{
	bench_opts *o = target;
	return add_pieces(o->stores, &o->nstores, arg, store_cut, "store URI");
}

/* --limit: split at ';'. */
static bool spec_cut(const char *p)
{
	return *p == ';';
}

static int add_specs(void *target, const char *arg)
{
	bench_opts *o = target;
	return add_pieces(o->specs, &o->nspecs, arg, spec_cut, "spec");
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

/* --concurrency: a list, replacing an earlier one. */
static int set_conc(void *target, const char *arg)
{
	bench_opts *o = target;
	int64_t v[LIST_MAX];

	if (!parse_num_list(arg, 1, CONC_MAX, v, &o->nconc))
		return TL_OPT_BAD;
	for (size_t i = 0; i < o->nconc; i++)
		o->conc[i] = (int)v[i];
	return TL_OPT_OK;
}

/* --keys: a list, replacing an earlier one. */
static int set_keys(void *target, const char *arg)
{
	bench_opts *o = target;

	return parse_num_list(arg, 1, KEYS_MAX, o->keys, &o->nkeys)
		       ? TL_OPT_OK
		       : TL_OPT_BAD;
}

#define O bench_opts
#define STR(x) #x
#define XSTR(x) STR(x)
static const tl_opt bench_opts_table[] = {
	TL_CALL("store", 's', "URI", add_stores, NULL,
		"store(s) to measure (default memory://); a ',' starts a new "
		"URI only when followed by SCHEME:// (memcached://a:1,b:2 is "
		"one pool); repeatable. Give Redis/memcached ?pool=N >= the "
		"largest concurrency, or callers queue for connections"),
	TL_CALL("limit", 'l', "SPEC", add_specs, NULL,
		"spec(s) to measure, separated by ';' (each is its own cell, "
		"not a policy); repeatable"),
	TL_CALL("concurrency", 'c', "L", set_conc,
		"whole numbers 1.." XSTR(CONC_MAX) " separated by ','",
		"callers per cell, e.g. 1,16,64 (default 1; 1.." XSTR(
			CONC_MAX) " each)"),
	TL_CALL("keys", 'k', "L", set_keys,
		"whole numbers 1.." XSTR(KEYS_MAX) " separated by ','",
		"1: one hot key; N: keys drawn uniformly from N; a list runs "
		"both (default 1; 1.." XSTR(KEYS_MAX) " each)"),
	TL_SECONDS("duration", 'd', "S", O, duration_us, DURATION_MIN_US,
		   DURATION_MAX_US, "1", "seconds per cell, e.g. 2 or 0.5"),
	TL_UINT("rounds", 0, "N", O, rounds, 1, ROUNDS_MAX, "1",
		"run every cell (and ceiling) N times, the stores of one "
		"workload in turn; report the median rate, latency over all "
		"rounds"),
	TL_UINT("procs", 'p', "N", O, procs, 1, PROCS_MAX, "1",
		"spread each cell's callers over N processes (threads within "
		"each; shared stores only)"),
	TL_UINT("exact-limit", 0, "N", O, exact_limit, 0, DRL_LIMIT_MAX,
		XSTR(EXACT_LIMIT_DEFAULT),
		"on a hot key, also check exactness at one fixed time with "
		"LIMIT and burst capped at N (0 skips the check)"),
	TL_FLAG("ceiling", 0, O, ceiling,
		"also measure the server without the library: "
		"redis-benchmark EVALSHA of the same Lua script (redis://, "
		"also pipelined: -P 16), a raw increment loop (memcached://), "
		"same concurrency"),
	TL_UINT("async", 0, "W", O, async_workers, 1, DRL_ASYNC_THREADS_MAX,
		NULL,
		"callers are requests in flight on one event loop per "
		"process (drl_async_allow, a context of W worker threads), "
		"not threads calling drl_allow; latency is start to "
		"callback"),
	TL_FLAG("json", 'j', O, json,
		"one JSON array of cells on stdout (default: a Markdown "
		"table)"),
};
#undef O

const tl_opts tool_bench_cli = {
	.prog = "drl bench",
	.synopsis =
		"usage: drl bench [--store URI[,URI...]] --limit "
		"SPEC[;SPEC...]\n"
		"                 [--concurrency N[,N...]] [--keys N[,N...]]\n"
		"                 [--duration S] [--rounds N] [--procs N]\n"
		"                 [--exact-limit N] [--ceiling] [--async W]\n"
		"                 [--json]\n",
	.intro = "\n"
		 "Measure decisions/s and latency of stores and strategies: "
		 "every\n"
		 "cell of the grid store x spec x keys x concurrency runs for\n"
		 "--duration seconds under a key prefix of its own.\n"
		 "\n",
	TL_TABLE(bench_opts_table),
	.outro = "\n"
		 "Per cell: decisions/s; p50/p99/p99.9 latency; round trips "
		 "per\n"
		 "decision where known (memory 0, Lua scripts 1, else n/a); "
		 "CAS\n"
		 "attempts and conflicts (retries) per decision and exhausted "
		 "retry\n"
		 "budgets (drl_store_stats); errors; the share of calls "
		 "allowed;\n"
		 "exactness (admitted / capacity at one fixed time; \"cut "
		 "short\" when\n"
		 "the phase ran out of time first); the ceiling and "
		 "library/ceiling.\n"
		 "The planned run time goes to stderr first; a progress line "
		 "too when\n"
		 "stderr is a terminal.\n"
		 "\n"
		 "On a single Redis (redis://, redis+unix://; not "
		 "redis-cluster://),\n"
		 "what a decision costs the server, per decision of the "
		 "throughput\n"
		 "phase (JSON server_exec_us, server_cpu_us; null elsewhere):\n"
		 "  srv exec µs   command time from INFO commandstats after "
		 "CONFIG\n"
		 "                RESETSTAT at the start of each round's "
		 "phase: the\n"
		 "                scripts' usec when scripts ran (EVAL*, "
		 "FCALL*:\n"
		 "                their usec includes what they call; plain "
		 "commands\n"
		 "                beside them are then left out), else every\n"
		 "                command's but INFO, CONFIG, PING, AUTH, "
		 "HELLO,\n"
		 "                SELECT, CLIENT, SCRIPT and COMMAND\n"
		 "  srv CPU µs    the server's used_cpu_sys + used_cpu_user "
		 "(INFO\n"
		 "                cpu) over the phase\n",
	.outro2 = "With --ceiling, the same two per redis-benchmark request. "
		  "These are\n"
		  "whole-server figures, taken by this process on a connection "
		  "of its\n"
		  "own around all the cell's processes: anything else the "
		  "server does\n"
		  "meanwhile counts too, so a cell must be the only load on "
		  "that Redis.\n"
		  "CONFIG RESETSTAT clears the server's INFO statistics. Where "
		  "the\n"
		  "server cannot be asked (CONFIG refused or renamed, AUTH "
		  "failing, no\n"
		  "hiredis) a figure is n/a (null) with a note; the cell still "
		  "runs.\n"
		  "\n"
		  "Exit status: 0 done, 1 an exactness check admitted more "
		  "than the\n"
		  "limit, 2 bad usage, spec or URI, 3 a store could not be "
		  "used.\n",
};

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
	int first, st;

	*o = (bench_opts){.duration_us = 1000000,
			  .procs = 1,
			  .exact_limit = EXACT_LIMIT_DEFAULT,
			  .rounds = 1};
	if ((st = tl_opts_parse(&tool_bench_cli, argc, argv, o, &first)) >= 0)
		return st;
	if (first < argc)
		return usage_error("unexpected argument '%s'", argv[first]);
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
