/* The option table on getopt_long(): see opts.h. */
#include "opts.h"

#include "args.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define OPTS_MAX 64     /* rows of one table */
#define HELP_COL_MAX 28 /* help text starts at most here... */
#define HELP_WIDTH 78   /* ...and wraps before this column */
#define VAL_BASE 256    /* getopt_long()'s val for row i: VAL_BASE + i */

int tl_opts_error(const tl_opts *p, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", p->prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n%sTry '%s --help' for more.\n", p->synopsis,
		p->prog);
	return 2;
}

/* Seconds of us µs as the shortest decimal: 0.01, 3600. */
static void put_seconds(char *buf, size_t size, int64_t us)
{
	int n = snprintf(buf, size, "%" PRId64 ".%06" PRId64, us / 1000000,
			 us % 1000000);
	while (n > 0 && buf[n - 1] == '0')
		buf[--n] = '\0';
	if (n > 0 && buf[n - 1] == '.')
		buf[--n] = '\0';
}

/* The allowed values of o as words, e.g. "1..64", ">= 0",
 * "0.01..3600" (seconds), "poisson, bursty or ramp". */
static void put_range(char *buf, size_t size, const tl_opt *o)
{
	char a[32], b[32];
	size_t n = 0;

	buf[0] = '\0';
	switch (o->type) {
	case TL_OPT_UINT:
		if (o->max == INT64_MAX)
			snprintf(buf, size, ">= %" PRId64, o->min);
		else
			snprintf(buf, size, "%" PRId64 "..%" PRId64, o->min,
				 o->max);
		break;
	case TL_OPT_SECONDS:
		put_seconds(a, sizeof a, o->min);
		put_seconds(b, sizeof b, o->max);
		snprintf(buf, size, "%s..%s", a, b);
		break;
	case TL_OPT_DOUBLE:
		snprintf(buf, size, "%s %.15g and <= %.15g",
			 o->open_min ? ">" : ">=", o->dmin, o->dmax);
		break;
	case TL_OPT_CHOICE:
		for (size_t i = 0; o->choices[i] != NULL && n < size; i++)
			n += (size_t)snprintf(buf + n, size - n, "%s%s",
					      i == 0 ? ""
					      : o->choices[i + 1] == NULL
						      ? " or "
						      : ", ",
					      o->choices[i]);
		break;
	default:
		break;
	}
}

/* Report the bad value v of option o. Returns 2. */
static int bad_value(const tl_opts *p, const tl_opt *o, const char *v)
{
	char range[256];

	switch (o->type) {
	case TL_OPT_STRING:
		return tl_opts_error(p, "bad --%s '%s': expected %s, not empty",
				     o->name, v, o->arg);
	case TL_OPT_CALL:
		return tl_opts_error(p, "bad --%s '%s': expected %s", o->name,
				     v, o->expect);
	case TL_OPT_UINT:
		if (o->max == INT64_MAX)
			return tl_opts_error(p,
					     "bad --%s '%s': expected a whole "
					     "number >= %" PRId64,
					     o->name, v, o->min);
		return tl_opts_error(p,
				     "bad --%s '%s': expected a whole number "
				     "from %" PRId64 " to %" PRId64,
				     o->name, v, o->min, o->max);
	case TL_OPT_SECONDS: {
		char a[32], b[32];
		put_seconds(a, sizeof a, o->min);
		put_seconds(b, sizeof b, o->max);
		return tl_opts_error(p,
				     "bad --%s '%s': expected seconds from %s "
				     "to %s (at most 6 decimals)",
				     o->name, v, a, b);
	}
	default: /* DOUBLE, CHOICE */
		put_range(range, sizeof range, o);
		return tl_opts_error(
			p, "bad --%s '%s': expected %s%s", o->name, v,
			o->type == TL_OPT_DOUBLE ? "a number " : "", range);
	}
}

/* Store the value v (already checked) of o in target. Returns -1, or an
 * exit status. */
static int store(const tl_opts *p, const tl_opt *o, const char *v, void *target)
{
	char *field = (char *)target + o->offset;
	int64_t n;
	double d;
	char *end;

	switch (o->type) {
	case TL_OPT_FLAG:
		*(bool *)field = true;
		return -1;
	case TL_OPT_STRING:
		if (o->min > 0 && v[0] == '\0')
			return bad_value(p, o, v);
		*(const char **)field = v;
		return -1;
	case TL_OPT_UINT:
	case TL_OPT_SECONDS:
		if (o->type == TL_OPT_UINT
			    ? !tl_parse_uint(v, o->min, o->max, &n)
			    : !tl_parse_seconds(v, o->min, o->max, &n))
			return bad_value(p, o, v);
		if (o->size == sizeof(int32_t)) {
			/* it fits: tl_opts_parse() checks the table */
			int32_t n32 = (int32_t)n;
			memcpy(field, &n32, sizeof n32);
		} else {
			memcpy(field, &n, sizeof n);
		}
		return -1;
	case TL_OPT_DOUBLE:
		errno = 0;
		d = strtod(v, &end);
		/* strtod() takes leading spaces, a sign, "inf", "nan" */
		if (errno != 0 || end == v || *end != '\0' || v[0] == ' ' ||
		    v[0] == '+' || !(d >= o->dmin && d <= o->dmax) ||
		    (o->open_min && d == o->dmin))
			return bad_value(p, o, v);
		*(double *)field = d;
		return -1;
	case TL_OPT_CHOICE:
		for (int i = 0; o->choices[i] != NULL; i++)
			if (strcmp(v, o->choices[i]) == 0) {
				*(int *)field = i;
				return -1;
			}
		return bad_value(p, o, v);
	case TL_OPT_CALL: {
		int st = o->set(target, v);
		return st == TL_OPT_BAD ? bad_value(p, o, v) : st;
	}
	}
	return -1;
}

/* Report getopt_long()'s complaint c (':' a missing value, '?' else) about
 * argv[optind - 1]. Returns 2. */
static int bad_option(const tl_opts *p, int c, char **argv)
{
	const char *arg = argv[optind - 1];

	if (c == ':')
		return tl_opts_error(p, "option '%s' needs a value", arg);
	if (optopt != 0 && strncmp(arg, "--", 2) == 0) /* --json=1 */
		return tl_opts_error(p, "option '--%s' takes no value",
				     optopt >= VAL_BASE
					     ? p->opts[optopt - VAL_BASE].name
					     : "help");
	if (optopt != 0) /* an unknown short option, maybe in a cluster */
		return tl_opts_error(p, "unknown option '-%c'", optopt);
	/* an unknown long option, or the start of several: its text up to
	 * '=' */
	size_t len = strcspn(arg, "=");
	const char *match[2] = {NULL, NULL};
	int n = 0;
	for (size_t i = 0; len > 2 && i < p->nopts; i++)
		if (strncmp(p->opts[i].name, arg + 2, len - 2) == 0 && n++ < 2)
			match[n - 1] = p->opts[i].name;
	if (n > 1)
		return tl_opts_error(p, "ambiguous option '%.*s': --%s, --%s%s",
				     (int)len, arg, match[0], match[1],
				     n > 2 ? ", ..." : "");
	return tl_opts_error(p, "unknown option '%.*s'", (int)len, arg);
}

int tl_opts_parse(const tl_opts *p, int argc, char **argv, void *target,
		  int *first)
{
	struct option longopts[OPTS_MAX + 2];
	char shorts[2 * OPTS_MAX + 4] = ":h";
	size_t ns = 2;
	int c, st;

	if (p->nopts > OPTS_MAX) /* a bad table: the CLI tests see it */
		abort();
	for (size_t i = 0; i < p->nopts; i++) {
		const tl_opt *o = &p->opts[i];
		if ((o->type == TL_OPT_UINT || o->type == TL_OPT_SECONDS) &&
		    (o->size == sizeof(int32_t)
			     ? o->min < 0 || o->max > INT32_MAX
			     : o->size != sizeof(int64_t)))
			abort(); /* a field that cannot hold the range */
		int has = o->type == TL_OPT_FLAG || (o->type == TL_OPT_CALL &&
						     o->arg == NULL)
				  ? no_argument
				  : required_argument;
		longopts[i] =
			(struct option){o->name, has, NULL, VAL_BASE + (int)i};
		if (o->short_name != 0) {
			shorts[ns++] = o->short_name;
			if (has == required_argument)
				shorts[ns++] = ':';
		}
	}
	shorts[ns] = '\0';
	longopts[p->nopts] = (struct option){"help", no_argument, NULL, 'h'};
	longopts[p->nopts + 1] = (struct option){NULL, 0, NULL, 0};
	optind = 0; /* glibc: start afresh, also after an error */
	while ((c = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
		size_t i = 0;
		if (c == 'h') {
			tl_opts_help(p, stdout);
			return 0;
		}
		if (c >= VAL_BASE) {
			i = (size_t)(c - VAL_BASE);
		} else {
			while (i < p->nopts && p->opts[i].short_name != c)
				i++;
			if (c == ':' || c == '?' || i == p->nopts)
				return bad_option(p, c, argv);
		}
		if ((st = store(p, &p->opts[i], optarg, target)) >= 0)
			return st;
	}
	*first = optind;
	return -1;
}

/* Write the words of text to out, wrapped to fit between column col and
 * HELP_WIDTH, the first line starting at column *at. */
static void put_words(FILE *out, const char *text, int col, int *at)
{
	while (*text != '\0') {
		int len = (int)strcspn(text, " ");
		if (*at > col && *at + 1 + len > HELP_WIDTH) {
			fprintf(out, "\n%*s", col, "");
			*at = col;
		} else if (*at > col) {
			putc(' ', out);
			(*at)++;
		}
		fprintf(out, "%.*s", len, text);
		*at += len;
		text += len;
		text += strspn(text, " ");
	}
}

/* The option part of o's line: "  -s, --store URI". */
static int put_left(FILE *out, const tl_opt *o)
{
	int n = o->short_name ? fprintf(out, "  -%c, ", o->short_name)
			      : fprintf(out, "      ");
	n += fprintf(out, "--%s", o->name);
	if (o->arg != NULL)
		n += fprintf(out, " %s", o->arg);
	return n;
}

/* o's help text, then its default and range, from column col on. */
static void put_help(FILE *out, const tl_opt *o, int col, int at)
{
	char range[256], extra[512];
	const char *help = o->help;

	if (strchr(help, '\n') != NULL) { /* laid out by its writer */
		for (const char *l = help; *l != '\0';) {
			int len = (int)strcspn(l, "\n");
			if (l != help)
				fprintf(out, "%*s", col, "");
			fprintf(out, "%.*s\n", len, l);
			l += len + (l[len] == '\n');
		}
		at = col;
		help = "";
	}
	put_range(range, sizeof range, o);
	if (o->type == TL_OPT_CHOICE) /* the text lists them */
		range[0] = '\0';
	if (o->dflt != NULL && range[0] != '\0')
		snprintf(extra, sizeof extra, "(default %s, %s)", o->dflt,
			 range);
	else if (o->dflt != NULL || range[0] != '\0')
		snprintf(extra, sizeof extra, "(%s%s%s)",
			 o->dflt ? "default " : "", o->dflt ? o->dflt : "",
			 range);
	else
		extra[0] = '\0';
	if (help[0] == '\0' && extra[0] == '\0')
		return;
	if (at == col && help[0] == '\0')
		fprintf(out, "%*s", col, "");
	put_words(out, help, col, &at);
	int len = (int)strlen(extra);
	if (at > col && at + 1 + len > HELP_WIDTH && col + len <= HELP_WIDTH) {
		fprintf(out, "\n%*s", col, ""); /* keep "(default ...)" whole */
		at = col;
	}
	put_words(out, extra, col, &at);
	putc('\n', out);
}

void tl_opts_help(const tl_opts *p, FILE *out)
{
	static const tl_opt help = {
		.name = "help", .short_name = 'h', .help = "this text"};
	int col = 0;

	for (size_t i = 0; i < p->nopts; i++) {
		int n = 6 + 2 + (int)strlen(p->opts[i].name) +
			(p->opts[i].arg ? 1 + (int)strlen(p->opts[i].arg) : 0);
		if (n + 2 <= HELP_COL_MAX && n + 2 > col)
			col = n + 2;
	}
	fputs(p->synopsis, out);
	fputs(p->intro, out);
	for (size_t i = 0; i <= p->nopts; i++) {
		const tl_opt *o = i < p->nopts ? &p->opts[i] : &help;
		int at = put_left(out, o);
		if (at + 2 > col) { /* too long: the help on the next line */
			fprintf(out, "\n%*s", col, "");
		} else {
			fprintf(out, "%*s", col - at, "");
		}
		put_help(out, o, col, col);
	}
	if (p->outro != NULL)
		fputs(p->outro, out);
	if (p->outro2 != NULL)
		fputs(p->outro2, out);
}
