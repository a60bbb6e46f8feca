/*
 * drl — the command-line face of libdrl.
 *
 *   drl check [--store URI] --limit SPEC [--cost N] [--now-ms MS]
 *             [--repeat N] [--json] KEY
 *   drl reset [--store URI] --limit SPEC [--now-ms MS] [--json] KEY
 *   drl bench [--store URI[,URI...]] --limit SPEC[;SPEC...]
 *             [--concurrency N,...] [--keys N,...] [--duration S]
 *             [--procs N] [--exact-limit N] [--ceiling] [--json]
 *   drl simulate [--rate-limit L/P | --limit SPEC[;SPEC...]]
 *             [--traffic poisson|bursty|ramp|zipf|boundary] [--rate R]
 *             [--duration S] [--keys N] [--seed N] [--json] [--plot DIR]
 *
 * Uses the public API (<drl/drl.h>) only (`bench` lives in tools/bench.c,
 * whose ceilings also use core/twin_call.h; `simulate` in
 * tools/simulate.c). Exit codes of check: 0 allowed (also a denial under
 * shadow=1), 1 denied, 2 bad usage / spec / URI / key, 3 store (or
 * output) error; reset: 0 reset, 2 and 3 as check; bench and simulate: see
 * bench.h and simulate.h. Subcommands live in one table (`commands`
 * below); a new one is a function and a row. Each command's options are a
 * table of common/opts.h, which also writes its --help.
 */
#include <drl/drl.h>

#include "bench.h"
#include "common/insecure.h"
#include "common/json.h"
#include "common/opts.h"
#include "common/result.h"
#include "simulate.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	EXIT_ALLOWED = 0,
	EXIT_DENIED = 1,
	EXIT_USAGE = 2,
	EXIT_STORE = 3,
};

#define REPEAT_MAX 1000000
#define DEFAULT_STORE "memory://"

/* ---- usage ------------------------------------------------------------ */

/* A subcommand: `run` gets argv with argv[0] naming the subcommand and
 * returns the process exit status. `cli` is its command line (--help). */
struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
	const tl_opts *cli;
};

static int cmd_check(int argc, char **argv);
static int cmd_reset(int argc, char **argv);
static const tl_opts check_cli, reset_cli;

static const struct command commands[] = {
	{"check", cmd_check, "decide requests for a key", &check_cli},
	{"bench", tool_cmd_bench, "measure what stores cost", &tool_bench_cli},
	{"simulate", tool_cmd_simulate, "measure how accurate algorithms are",
	 &tool_simulate_cli},
	{"reset", cmd_reset, "forget a key's state", &reset_cli},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

/* Print the top-level usage (every subcommand with its summary) to `out`. */
static void print_usage(FILE *out)
{
	fputs("usage: drl COMMAND [OPTIONS] ...\n"
	      "       drl --help | --version\n"
	      "\n"
	      "Commands:\n",
	      out);
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(out, "  %-10s %s\n", commands[i].name,
			commands[i].summary);
	fputs("\n'drl COMMAND --help' describes one command.\n", out);
}

/* The subcommand called `name`, or NULL. */
static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

/* ---- parsing ---------------------------------------------------------- */

/* Append `spec` to the policy in *policy (a malloc'd string or NULL),
 * joining with ';'. Returns false when out of memory (*policy unchanged). */
static bool policy_append(char **policy, const char *spec)
{
	size_t old = *policy != NULL ? strlen(*policy) : 0;
	size_t add = strlen(spec);
	char *p = realloc(*policy, old + (old != 0) + add + 1);

	if (p == NULL)
		return false;
	if (old != 0)
		p[old++] = ';';
	memcpy(p + old, spec, add + 1);
	*policy = p;
	return true;
}

/* Number of limits in a policy spec (';'-separated parts), for display. */
static int policy_count(const char *spec)
{
	int n = 1;

	for (; *spec != '\0'; spec++)
		n += *spec == ';';
	return n;
}

/* ---- output ----------------------------------------------------------- */

/* Write the n bytes at p to `out` as lowercase hex. */
static void hex_string(FILE *out, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(out, "%02x", p[i]);
}

/* Write a key for a human line: printable ASCII as is, backslash, space
 * and every other byte as \xHH, so the key stays one token. */
static void human_key(FILE *out, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] > ' ' && p[i] < 0x7f && p[i] != '\\')
			putc(p[i], out);
		else
			fprintf(out, "\\x%02x", p[i]);
	}
}

/* Microseconds to whole milliseconds, rounded up (a client that waits the
 * printed time never retries too early); DRL_NEVER stays -1. */
static int64_t us_to_ms(int64_t us)
{
	return tl_ceil_div(us, 1000);
}

/* Print one decision as a JSON object on its own line. */
static void print_json(FILE *out, const unsigned char *key, size_t keylen,
		       const drl_result *r)
{
	bool never = r->retry_after_us == DRL_NEVER;

	fputs("{\"key\":", out);
	tl_json_strn(out, key, keylen);
	if (!tl_utf8_valid(key, keylen)) {
		fputs(",\"key_hex\":\"", out);
		hex_string(out, key, keylen);
		putc('"', out);
	}
	fprintf(out,
		",\"allowed\":%s,\"limit\":%" PRId64 ",\"remaining\":%" PRId64
		",\"reset_ms\":%" PRId64 ",\"retry_after_ms\":%" PRId64
		",\"retry_never\":%s,\"reset_us\":%" PRId64
		",\"retry_after_us\":%" PRId64
		",\"limit_index\":%d,\"path\":\"%s\",\"would_allow\":%s}\n",
		r->allowed ? "true" : "false", r->limit, r->remaining,
		us_to_ms(r->reset_after_us), us_to_ms(r->retry_after_us),
		never ? "true" : "false", r->reset_after_us, r->retry_after_us,
		r->limit_index, tl_path_name(r->path),
		r->would_allow ? "true" : "false");
}

/* Print one decision as a human line, e.g.
 *   allowed  key=user42 remaining=4 limit=5 reset=1000ms
 *   denied   key=user42 remaining=0 limit=5 retry_after=200ms
 * `policy` adds which limit of the policy decided. A denial answered
 * allowed (shadow=1) is printed as the denial, marked shadow=allowed. */
static void print_human(FILE *out, const unsigned char *key, size_t keylen,
			const drl_result *r, bool policy)
{
	fputs(r->would_allow ? "allowed  key=" : "denied   key=", out);
	human_key(out, key, keylen);
	fprintf(out, " remaining=%" PRId64 " limit=%" PRId64, r->remaining,
		r->limit);
	if (r->would_allow)
		fprintf(out, " reset=%" PRId64 "ms",
			us_to_ms(r->reset_after_us));
	else if (r->retry_after_us == DRL_NEVER)
		fputs(" retry_after=never", out);
	else
		fprintf(out, " retry_after=%" PRId64 "ms",
			us_to_ms(r->retry_after_us));
	if (policy)
		fprintf(out, " limit_index=%d", r->limit_index);
	if (r->path != DRL_PATH_STORE) /* not the store: say who */
		fprintf(out, " path=%s", tl_path_name(r->path));
	if (r->allowed && !r->would_allow)
		fputs(" shadow=allowed", out);
	putc('\n', out);
}

/* ---- drl check -------------------------------------------------------- */

/* Options of one `drl check` run, as parsed. */
struct check_opts {
	const char *store;
	char *policy; /* malloc'd, the --limit specs joined by ';' */
	int64_t cost;
	int64_t now_us; /* -1: use the real-time clock */
	int64_t now_ms; /* --now-ms; -1: not given */
	int64_t repeat;
	bool json;
	const char *key;
};

/* --limit: add a limit to the policy. */
static int add_limit(void *target, const char *spec)
{
	if (!policy_append(&((struct check_opts *)target)->policy, spec)) {
		fputs("drl: out of memory\n", stderr);
		return EXIT_STORE;
	}
	return TL_OPT_OK;
}

#define O struct check_opts
#define STORE_OPT                                                              \
	TL_STRING("store", 's', "URI", O, store, DEFAULT_STORE,                \
		  "store holding the shared state")
#define JSON_OPT TL_FLAG("json", 'j', O, json, "one JSON object per decision")

static const tl_opt check_opts[] = {
	STORE_OPT,
	TL_CALL("limit", 'l', "SPEC", add_limit, NULL,
		"ALGORITHM:LIMIT/PERIOD[,option=value...] or a policy of "
		"limits joined by ';'; repeat --limit to add limits to the "
		"policy"),
	TL_UINT("cost", 'c', "N", O, cost, 0, INT64_MAX, "1",
		"units this request takes (0 consumes nothing and reports "
		"the quota)"),
	TL_UINT("now-ms", 0, "MS", O, now_ms, 0, INT64_MAX / 1000, NULL,
		"decide at this time (ms since the Unix epoch) instead of "
		"the real-time clock"),
	TL_UINT("repeat", 'r', "N", O, repeat, 1, REPEAT_MAX, "1",
		"decide N times in this process; the exit status is the last "
		"decision's"),
	JSON_OPT,
};

static const tl_opt reset_opts[] = {
	STORE_OPT,
	TL_CALL("limit", 'l', "SPEC", add_limit, NULL,
		"the policy whose state to forget, as for drl check; repeat "
		"--limit to add limits"),
	TL_UINT("now-ms", 0, "MS", O, now_ms, 0, INT64_MAX / 1000, NULL,
		"the windows live at this time (ms since the Unix epoch) "
		"instead of the real-time clock"),
	TL_FLAG("json", 'j', O, json, "one JSON object"),
};
#undef O

static const tl_opts check_cli = {
	.prog = "drl check",
	.synopsis = "usage: drl check [--store URI] --limit SPEC [--cost N]\n"
		    "                 [--now-ms MS] [--repeat N] [--json] "
		    "KEY\n",
	.intro = "\nDecide whether a request of COST units for KEY is "
		 "allowed.\n\n",
	TL_TABLE(check_opts),
	.outro = "\n"
		 "With shadow=1 in the policy a denial is printed as the "
		 "decision\n"
		 "it would be, marked shadow=allowed, and exits 0.\n"
		 "\n"
		 "Exit status: 0 allowed, 1 denied, 2 bad usage, spec, URI or\n"
		 "key, 3 store error.\n",
};

static const tl_opts reset_cli = {
	.prog = "drl reset",
	.synopsis = "usage: drl reset [--store URI] --limit SPEC [--now-ms "
		    "MS]\n"
		    "                 [--json] KEY\n",
	.intro = "\n"
		 "Forget KEY on every limit of the policy: afterwards it is "
		 "decided\n"
		 "as if it had never been seen (docs/api.md, \"Reset\"). Other "
		 "keys,\n"
		 "limits and prefixes are untouched.\n"
		 "\n",
	TL_TABLE(reset_opts),
	.outro = "\n"
		 "Exit status: 0 reset, 2 bad usage, spec, URI or key "
		 "(nothing\n"
		 "deleted), 3 store error (or a store that cannot delete).\n",
};

/* Report a library error on stderr: what was being done, then the
 * library's message (which names the bad part), or the code's text when
 * the library left no message. Returns the exit status for rc: DRL_EINVAL
 * is the caller's mistake (2), any other code the store's (3). */
static int report(const char *what, int rc, const drl_error *err)
{
	const char *msg =
		err->message[0] != '\0' ? err->message : drl_strerror(rc);

	fprintf(stderr, "drl: %s: %s (%s)\n", what, msg, drl_err_name(rc));
	return rc == DRL_EINVAL ? EXIT_USAGE : EXIT_STORE;
}

/* Parse `drl check` or `drl reset` arguments (command line cli) into *o.
 * Returns -1 to go on, or an exit status (0 after --help, 2 on bad usage).
 * o->policy is malloc'd and the caller frees it either way. */
static int parse_opts(int argc, char **argv, const tl_opts *cli,
		      struct check_opts *o)
{
	int first;

	*o = (struct check_opts){
		.store = DEFAULT_STORE,
		.cost = 1,
		.now_ms = -1,
		.repeat = 1,
	};
	int st = tl_opts_parse(cli, argc, argv, o, &first);
	if (st >= 0)
		return st;
	o->now_us = o->now_ms >= 0 ? o->now_ms * 1000 : -1;
	if (o->policy == NULL)
		return tl_opts_error(cli, "missing --limit SPEC");
	if (first == argc)
		return tl_opts_error(cli, "missing KEY");
	if (argc - first > 1)
		return tl_opts_error(cli,
				     "unexpected argument '%s' (one KEY only)",
				     argv[first + 1]);
	o->key = argv[first];
	return -1;
}

/* Open o->store and a limiter of o->policy on it into *store and *lim
 * (NULL when not made; the caller frees both). Returns -1, or the exit
 * status of the error, reported. */
static int open_limiter(const struct check_opts *o, drl_store **store,
			drl_limiter **lim)
{
	drl_error err = {0};
	tl_warn_insecure("drl", o->store);
	int rc = drl_store_open(store, o->store, &err);

	if (rc != 0)
		return report("--store", rc, &err);
	rc = drl_limiter_new(lim, *store, o->policy, NULL, &err);
	if (rc != 0)
		return report("--limit", rc, &err);
	return -1;
}

/* Run the decisions of one parsed `drl check` on its limiter: decide
 * o->repeat times and print each decision. Returns the exit status of the
 * last decision, or 2/3 on the first error. */
static int check_run(const struct check_opts *o, drl_limiter *lim)
{
	drl_error err = {0};
	const unsigned char *key = (const unsigned char *)o->key;
	size_t keylen = strlen(o->key);
	bool policy = policy_count(o->policy) > 1;
	int status = -1;
	int rc;

	for (int64_t i = 0; i < o->repeat; i++) {
		drl_result r;

		if (o->now_us >= 0)
			rc = drl_allow_at(lim, key, keylen, o->cost, o->now_us,
					  &r, &err);
		else
			rc = drl_allow(lim, key, keylen, o->cost, &r, &err);
		if (rc != 0)
			return report("decision", rc, &err);
		if (o->json)
			print_json(stdout, key, keylen, &r);
		else
			print_human(stdout, key, keylen, &r, policy);
		status = r.allowed ? EXIT_ALLOWED : EXIT_DENIED;
	}
	return status;
}

/* Parse the arguments of command `cmd`, open its store, make its limiter
 * and run it on them. Returns the process exit status. */
static int parse_and_run(int argc, char **argv, const tl_opts *cmd,
			 int (*run)(const struct check_opts *, drl_limiter *))
{
	struct check_opts o;
	drl_store *store = NULL;
	drl_limiter *lim = NULL;
	int status = parse_opts(argc, argv, cmd, &o);

	if (status < 0)
		status = open_limiter(&o, &store, &lim);
	if (status < 0)
		status = run(&o, lim);
	drl_limiter_free(lim);
	drl_store_free(store);
	free(o.policy);
	return status;
}

/* `drl check`: see check_cli. Returns the process exit status. */
static int cmd_check(int argc, char **argv)
{
	return parse_and_run(argc, argv, &check_cli, check_run);
}

/* ---- drl reset -------------------------------------------------------- */

/* Forget o->key on the store for o->policy (lim) and say so. Returns 0,
 * or 2/3 as check_run does. */
static int reset_run(const struct check_opts *o, drl_limiter *lim)
{
	drl_error err = {0};
	const unsigned char *key = (const unsigned char *)o->key;
	size_t keylen = strlen(o->key);
	int rc;

	if (o->now_us >= 0)
		rc = drl_reset_at(lim, key, keylen, o->now_us, &err);
	else
		rc = drl_reset(lim, key, keylen, &err);
	if (rc != 0)
		return report("reset", rc, &err);
	if (o->json) {
		fputs("{\"key\":", stdout);
		tl_json_strn(stdout, key, keylen);
		fputs(",\"reset\":true}\n", stdout);
	} else {
		fputs("reset    key=", stdout);
		human_key(stdout, key, keylen);
		putc('\n', stdout);
	}
	return EXIT_ALLOWED;
}

/* `drl reset`: see reset_cli. Returns the process exit status. */
static int cmd_reset(int argc, char **argv)
{
	return parse_and_run(argc, argv, &reset_cli, reset_run);
}

/* ---- main ------------------------------------------------------------- */

/* Dispatch to a subcommand, or answer --help / --version. Returns the exit
 * status. */
static int dispatch(int argc, char **argv)
{
	const struct command *cmd;

	if (argc < 2) {
		print_usage(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		if (argc > 2 && (cmd = find_command(argv[2])) != NULL) {
			tl_opts_help(cmd->cli, stdout);
			return EXIT_ALLOWED;
		}
		print_usage(stdout);
		return EXIT_ALLOWED;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
		printf("drl %s\n", drl_version());
		return EXIT_ALLOWED;
	}
	cmd = find_command(argv[1]);
	if (cmd == NULL) {
		fprintf(stderr, "drl: unknown %s '%s'\n\n",
			argv[1][0] == '-' ? "option" : "command", argv[1]);
		print_usage(stderr);
		return EXIT_USAGE;
	}
	return cmd->run(argc - 1, argv + 1);
}

/* Run one command. An output error (e.g. a full disk behind stdout) turns
 * any status into 3: what was printed may be incomplete. */
int main(int argc, char **argv)
{
	int status = dispatch(argc, argv);

	if (fflush(stdout) != 0 || ferror(stdout)) {
		perror("drl: writing output");
		return EXIT_STORE;
	}
	return status;
}
