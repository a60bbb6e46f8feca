/*
 * The option table of drl and drld (tools/common/opts.c): every type, its
 * range, unknown options, missing values, repeated options, --opt=value
 * and --opt value, operands, and --help generated from the table.
 */
#include "common/opts.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

typedef struct cfg {
	bool json;
	const char *store;
	const char *dir;
	int threads; /* 4 bytes */
	int64_t big;
	unsigned small;
	int64_t dur_us;
	double rate;
	int color;
	int calls;     /* values --add saw */
	char last[32]; /* the last of them */
} cfg;

/* --add: counts its values; "bad" is TL_OPT_BAD, "stop" ends with 7. */
static int add(void *target, const char *v)
{
	cfg *c = target;

	if (strcmp(v, "bad") == 0)
		return TL_OPT_BAD;
	if (strcmp(v, "stop") == 0)
		return 7;
	c->calls++;
	snprintf(c->last, sizeof c->last, "%s", v);
	return TL_OPT_OK;
}

static const char *const colors[] = {"red", "green", "blue", NULL};

#define O cfg
static const tl_opt table[] = {
	TL_FLAG("json", 'j', O, json, "one JSON object"),
	TL_STRING("store", 's', "URI", O, store, "memory://", "the store"),
	TL_NONEMPTY("dir", 0, "DIR", O, dir, "a directory"),
	TL_UINT("threads", 't', "N", O, threads, 1, 64, "2", "threads"),
	TL_UINT("big", 0, "N", O, big, 0, INT64_MAX, NULL, "a big one"),
	TL_UINT("small", 0, "N", O, small, 0, 100000, NULL, "unsigned"),
	TL_SECONDS("duration", 'd', "S", O, dur_us, 10000, 3600000000, "1",
		   "seconds per cell"),
	TL_DOUBLE("rate", 'r', "R", O, rate, 0, 1, 1e7, NULL, "per second"),
	TL_CHOICE("color", 'c', "C", O, color, colors, "red, green or blue"),
	TL_CALL("add", 'a', "X", add, "anything but bad", "add X"),
};
#undef O

static const tl_opts cli = {
	.prog = "prog",
	.synopsis = "usage: prog [OPTIONS] [ARG...]\n",
	.intro = "\nIntro.\n\n",
	TL_TABLE(table),
	.outro = "\nOutro.\n",
};

/* One parse: what it returned, its operands and what it printed. */
typedef struct run {
	int st;
	int first;
	cfg c;
	char out[8192];
	char err[8192];
} run;

/* Read the file behind fd from its start into buf; then empty it. */
static void slurp(int fd, char *buf, size_t size)
{
	ssize_t n = pread(fd, buf, size - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	assert_int_equal(ftruncate(fd, 0), 0);
}

/* Parse the NULL-terminated arguments after argv[0] "prog" into r. */
static void parse(run *r, ...)
{
	char *argv[32] = {"prog"};
	int argc = 1;
	va_list ap;
	FILE *out = tmpfile(), *err = tmpfile();
	int save_out = dup(1), save_err = dup(2);

	va_start(ap, r);
	while ((argv[argc] = va_arg(ap, char *)) != NULL)
		argc++;
	va_end(ap);
	memset(r, 0, sizeof *r);
	r->c.store = "memory://";
	r->c.threads = 2;
	r->first = -5;
	fflush(stdout);
	fflush(stderr);
	dup2(fileno(out), 1);
	dup2(fileno(err), 2);
	r->st = tl_opts_parse(&cli, argc, argv, &r->c, &r->first);
	fflush(stdout);
	fflush(stderr);
	dup2(save_out, 1);
	dup2(save_err, 2);
	close(save_out);
	close(save_err);
	slurp(fileno(out), r->out, sizeof r->out);
	slurp(fileno(err), r->err, sizeof r->err);
	fclose(out);
	fclose(err);
}

/* r failed with a usage error whose first line is `line`. */
static void usage_is(const run *r, const char *line)
{
	size_t n = strlen(line);

	assert_int_equal(r->st, 2);
	if (strncmp(r->err, line, n) != 0 || r->err[n] != '\n')
		fail_msg("expected '%s', got '%s'", line, r->err);
	assert_non_null(strstr(r->err, "usage: prog [OPTIONS]"));
	assert_non_null(strstr(r->err, "Try 'prog --help' for more.\n"));
	assert_string_equal(r->out, "");
}

static void test_types(void **state)
{
	run r;

	parse(&r, "--json", "--store", "redis://h", "--dir=/tmp", "-t", "8",
	      "--big=9223372036854775807", "--small", "100000", "-d", "0.5",
	      "--rate=2.5", "--color", "blue", "-a", "x", NULL);
	assert_int_equal(r.st, -1);
	assert_string_equal(r.err, "");
	assert_true(r.c.json);
	assert_string_equal(r.c.store, "redis://h");
	assert_string_equal(r.c.dir, "/tmp");
	assert_int_equal(r.c.threads, 8);
	assert_true(r.c.big == INT64_MAX);
	assert_int_equal(r.c.small, 100000);
	assert_true(r.c.dur_us == 500000);
	assert_true(r.c.rate == 2.5);
	assert_int_equal(r.c.color, 2);
	assert_int_equal(r.c.calls, 1);
	assert_int_equal(r.first, 17); /* argc: all were options */
}

static void test_defaults_kept(void **state)
{
	run r;

	parse(&r, NULL);
	assert_int_equal(r.st, -1);
	assert_int_equal(r.first, 1);
	assert_false(r.c.json);
	assert_string_equal(r.c.store, "memory://");
	assert_int_equal(r.c.threads, 2);
}

/* --opt=value, --opt value, -ovalue, -o value, clusters, prefixes. */
static void test_spellings(void **state)
{
	run r;

	parse(&r, "--threads=3", NULL);
	assert_int_equal(r.c.threads, 3);
	parse(&r, "--threads", "4", NULL);
	assert_int_equal(r.c.threads, 4);
	parse(&r, "-t5", NULL);
	assert_int_equal(r.c.threads, 5);
	parse(&r, "-jt", "6", NULL);
	assert_true(r.c.json);
	assert_int_equal(r.c.threads, 6);
	parse(&r, "--thr=7", NULL); /* a unique prefix */
	assert_int_equal(r.c.threads, 7);
	parse(&r, "--store=", NULL); /* an empty value is a value */
	assert_int_equal(r.st, -1);
	assert_string_equal(r.c.store, "");
}

static void test_ranges(void **state)
{
	run r;

	parse(&r, "--threads", "1", NULL);
	assert_int_equal(r.c.threads, 1);
	parse(&r, "--threads", "64", NULL);
	assert_int_equal(r.c.threads, 64);
	parse(&r, "--threads", "0", NULL);
	usage_is(&r, "prog: bad --threads '0': expected a whole number from 1 "
		     "to 64");
	const char *bad[] = {"65", "-1", "+1",  " 1",
			     "1x", "",   "1.5", "99999999999999999999"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		parse(&r, "-t", bad[i], NULL);
		assert_int_equal(r.st, 2);
		assert_non_null(strstr(r.err, "bad --threads '"));
		assert_int_equal(r.c.threads, 2); /* left alone */
	}
	parse(&r, "--big", "-1", NULL);
	usage_is(&r, "prog: bad --big '-1': expected a whole number >= 0");
	parse(&r, "--small", "100001", NULL);
	usage_is(&r, "prog: bad --small '100001': expected a whole number "
		     "from 0 to 100000");

	parse(&r, "-d", "0.01", NULL);
	assert_true(r.c.dur_us == 10000);
	parse(&r, "-d", "3600", NULL);
	assert_true(r.c.dur_us == 3600000000);
	parse(&r, "-d", "0.009", NULL);
	usage_is(&r, "prog: bad --duration '0.009': expected seconds from "
		     "0.01 to 3600 (at most 6 decimals)");
	parse(&r, "-d", "1.1234567", NULL);
	assert_int_equal(r.st, 2);
	parse(&r, "-d", "1e3", NULL);
	assert_int_equal(r.st, 2);

	parse(&r, "-r", "10000000", NULL);
	assert_true(r.c.rate == 1e7);
	const char *badr[] = {"0",   "-1", "10000001", "nan", "inf",
			      "abc", "+1", " 1",       "1x",  ""};
	for (size_t i = 0; i < sizeof badr / sizeof badr[0]; i++) {
		parse(&r, "--rate", badr[i], NULL);
		assert_int_equal(r.st, 2);
	}
	parse(&r, "--rate", "0", NULL);
	usage_is(&r, "prog: bad --rate '0': expected a number > 0 and <= "
		     "10000000");

	parse(&r, "--color", "pink", NULL);
	usage_is(&r, "prog: bad --color 'pink': expected red, green or blue");
	parse(&r, "--dir", "", NULL);
	usage_is(&r, "prog: bad --dir '': expected DIR, not empty");
}

static void test_unknown_and_missing(void **state)
{
	run r;

	parse(&r, "--bogus", NULL);
	usage_is(&r, "prog: unknown option '--bogus'");
	parse(&r, "--bogus=1", NULL);
	usage_is(&r, "prog: unknown option '--bogus'");
	parse(&r, "-x", NULL);
	usage_is(&r, "prog: unknown option '-x'");
	parse(&r, "-jx", NULL);
	usage_is(&r, "prog: unknown option '-x'");
	parse(&r, "--s", NULL); /* ambiguous: --store, --small */
	usage_is(&r, "prog: ambiguous option '--s': --store, --small");
	parse(&r, "--d=1", NULL);
	usage_is(&r, "prog: ambiguous option '--d': --dir, --duration");
	parse(&r, "--threads", NULL);
	usage_is(&r, "prog: option '--threads' needs a value");
	parse(&r, "-t", NULL);
	usage_is(&r, "prog: option '-t' needs a value");
	parse(&r, "--json=yes", NULL);
	usage_is(&r, "prog: option '--json' takes no value");
	parse(&r, "--help=1", NULL);
	usage_is(&r, "prog: option '--help' takes no value");
}

/* A scalar keeps the last value, a flag stays set, a setter sees all. */
static void test_repeated(void **state)
{
	run r;

	parse(&r, "-t", "3", "--threads=9", "-j", "--json", "--store", "a",
	      "-s", "b", "-a", "x", "--add", "y", "--add=z", NULL);
	assert_int_equal(r.st, -1);
	assert_int_equal(r.c.threads, 9);
	assert_true(r.c.json);
	assert_string_equal(r.c.store, "b");
	assert_int_equal(r.c.calls, 3);
	assert_string_equal(r.c.last, "z");
	/* the first bad value stops the parse */
	parse(&r, "-t", "3", "-t", "0", "-t", "4", NULL);
	assert_int_equal(r.st, 2);
	assert_int_equal(r.c.threads, 3);
}

static void test_setter(void **state)
{
	run r;

	parse(&r, "--add", "bad", NULL);
	usage_is(&r, "prog: bad --add 'bad': expected anything but bad");
	parse(&r, "--add", "stop", "--bogus", NULL);
	assert_int_equal(r.st, 7); /* its status, nothing after it read */
	assert_string_equal(r.err, "");
}

/* Operands come back in order after the options, wherever they were. */
static void test_operands(void **state)
{
	run r;

	parse(&r, "k1", "-j", "k2", "--threads", "3", NULL);
	assert_int_equal(r.st, -1);
	assert_true(r.c.json);
	assert_int_equal(r.first, 4);
	parse(&r, "-j", "--", "-t", NULL);
	assert_int_equal(r.st, -1);
	assert_int_equal(r.first, 3); /* "-t" is an operand */
	assert_int_equal(r.c.threads, 2);
}

static void test_help(void **state)
{
	run r;

	parse(&r, "--threads", "3", "--help", "--bogus", NULL);
	assert_int_equal(r.st, 0);
	assert_string_equal(r.err, "");
	assert_true(strncmp(r.out, "usage: prog [OPTIONS]", 21) == 0);
	assert_non_null(strstr(r.out, "\nIntro.\n"));
	assert_non_null(strstr(r.out, "\nOutro.\n"));
	/* each option, its default and the range checked */
	assert_non_null(strstr(r.out, "  -t, --threads N"));
	assert_non_null(strstr(r.out, "threads (default 2, 1..64)\n"));
	assert_non_null(strstr(r.out, "      --big N"));
	assert_non_null(strstr(r.out, "(>= 0)"));
	assert_non_null(strstr(r.out, "(default 1, 0.01..3600)"));
	assert_non_null(strstr(r.out, "(> 0 and <= 10000000)"));
	assert_non_null(strstr(r.out, "(default memory://)"));
	assert_non_null(strstr(r.out, "  -h, --help"));
	parse(&r, "-h", NULL);
	assert_int_equal(r.st, 0);
	/* no line wider than 78 columns */
	for (const char *l = r.out; *l != '\0';) {
		size_t n = strcspn(l, "\n");
		assert_true(n <= 78);
		l += n + (l[n] == '\n');
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_types),
		cmocka_unit_test(test_defaults_kept),
		cmocka_unit_test(test_spellings),
		cmocka_unit_test(test_ranges),
		cmocka_unit_test(test_unknown_and_missing),
		cmocka_unit_test(test_repeated),
		cmocka_unit_test(test_setter),
		cmocka_unit_test(test_operands),
		cmocka_unit_test(test_help),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
