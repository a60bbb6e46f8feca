/*
 * The command line of drl check/reset, drl bench, drl simulate and drld
 * (tools/common/opts.c): each program describes its options in one table
 * (long name, short name, type, range, help) and tl_opts_parse() fills the
 * program's options struct from argv.
 *
 * getopt_long() does the scanning (clustered short options, --opt=value
 * and --opt value, options after operands, unique prefixes of long
 * names). The table exists on top of it for what getopt_long() leaves to
 * each caller, and what four hand-written switch statements did four
 * slightly different ways:
 *   - every value is checked against its type and range, and a bad one is
 *     reported in one format, "PROG: bad --OPT 'VALUE': expected ...",
 *     naming the allowed range, before the program starts anything;
 *   - --help is generated from the same table, so the ranges it shows are
 *     the ranges checked;
 *   - unknown options, missing values and values given to a flag get one
 *     message each, then the synopsis and "Try 'PROG --help' for more."
 *
 * A repeated option: a flag stays set, any other type keeps the last
 * value, and a TL_OPT_CALL option's setter sees every value (the lists of
 * drl bench and simulate, repeated --limit, add up).
 */
#ifndef TL_OPTS_H
#define TL_OPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum tl_opt_type {
	TL_OPT_FLAG,    /* no value: sets a bool to true */
	TL_OPT_STRING,  /* const char * (argv's own string); min 1: not "" */
	TL_OPT_UINT,    /* a whole decimal number in [min, max] */
	TL_OPT_SECONDS, /* DIGITS[.DIGITS] seconds into µs in [min, max] */
	TL_OPT_DOUBLE,  /* a number in [dmin, dmax] (dmin excluded: open) */
	TL_OPT_CHOICE,  /* one of choices[]: its index, into an int */
	TL_OPT_CALL,    /* set(target, value): lists, anything else;
			 * without arg: no value, set(target, NULL) */
} tl_opt_type;

/* A TL_OPT_CALL setter returns TL_OPT_OK, TL_OPT_BAD (the parser reports
 * "bad --OPT 'VALUE': expected EXPECT"), or an exit status it has
 * reported itself (0 stops with success, e.g. --version). */
enum { TL_OPT_OK = -1, TL_OPT_BAD = -2 };

typedef struct tl_opt {
	const char *name; /* long name, without "--" */
	char short_name;  /* 0: none */
	tl_opt_type type;
	const char *arg;   /* the value's name in --help: "N", "URI" */
	size_t offset;     /* of the field in the target struct */
	size_t size;       /* of that field: UINT stores 4 or 8 bytes */
	int64_t min, max;  /* UINT; SECONDS in µs; STRING: min 1 not empty */
	double dmin, dmax; /* DOUBLE */
	int open_min;      /* DOUBLE: dmin itself is refused */
	const char *const *choices; /* CHOICE, NULL-terminated */
	int (*set)(void *target, const char *value); /* CALL */
	const char *expect; /* CALL: what a bad value should have been */
	const char *dflt;   /* the default shown in --help, or NULL */
	/* --help: words wrapped to the column; a text with '\n' is laid out
	 * as written, a line each. The default and range are added. */
	const char *help;
} tl_opt;

/* Table rows. F is a field of the target struct type T. */
/* What every row for a field fills: its names, type, the argument's name
 * in --help, and where it writes. */
#define TL__FIELD(LONG, SHORT, TYPE, ARG, T, F)                                \
	.name = LONG, .short_name = SHORT, .type = TYPE, .arg = ARG,           \
	.offset = offsetof(T, F), .size = sizeof(((T *)0)->F)
#define TL_FLAG(LONG, SHORT, T, F, HELP)                                       \
	{                                                                      \
		TL__FIELD(LONG, SHORT, TL_OPT_FLAG, NULL, T, F), .help = HELP  \
	}
#define TL_STRING(LONG, SHORT, ARG, T, F, DFLT, HELP)                          \
	{                                                                      \
		TL__FIELD(LONG, SHORT, TL_OPT_STRING, ARG, T, F),              \
			.dflt = DFLT, .help = HELP                             \
	}
#define TL_UINT(LONG, SHORT, ARG, T, F, MIN, MAX, DFLT, HELP)                  \
	{                                                                      \
		TL__FIELD(LONG, SHORT, TL_OPT_UINT, ARG, T, F),                \
			.min = MIN, .max = MAX, .dflt = DFLT, .help = HELP     \
	}
#define TL_SECONDS(LONG, SHORT, ARG, T, F, MIN_US, MAX_US, DFLT, HELP)         \
	{                                                                      \
		TL__FIELD(LONG, SHORT, TL_OPT_SECONDS, ARG, T, F),             \
			.min = MIN_US, .max = MAX_US, .dflt = DFLT,            \
			.help = HELP                                           \
	}
#define TL_NONEMPTY(LONG, SHORT, ARG, T, F, HELP)                              \
	{                                                                      \
		TL__FIELD(LONG, SHORT, TL_OPT_STRING, ARG, T, F), .min = 1,    \
								  .help = HELP \
	}
/* OPEN 1: MIN itself is refused. */
#define TL_DOUBLE(LONG, SHORT, ARG, T, F, MIN, OPEN, MAX, DFLT, HELP)          \
	{                                                                      \
		TL__FIELD(LONG, SHORT, TL_OPT_DOUBLE, ARG, T, F),              \
			.dmin = MIN, .open_min = OPEN, .dmax = MAX,            \
			.dflt = DFLT, .help = HELP                             \
	}
#define TL_CHOICE(LONG, SHORT, ARG, T, F, CHOICES, HELP)                       \
	{                                                                      \
		TL__FIELD(LONG, SHORT, TL_OPT_CHOICE, ARG, T, F),              \
			.choices = CHOICES, .help = HELP                       \
	}
#define TL_CALL(LONG, SHORT, ARG, SET, EXPECT, HELP)                           \
	{                                                                      \
		.name = LONG, .short_name = SHORT, .type = TL_OPT_CALL,        \
		.arg = ARG, .set = SET, .expect = EXPECT, .help = HELP         \
	}

/* .opts and .nopts of a tl_opts from the array TABLE. */
#define TL_TABLE(TABLE) .opts = TABLE, .nopts = sizeof TABLE / sizeof TABLE[0]

/* A program's command line. */
typedef struct tl_opts {
	const char *prog;     /* "drl check", "drld": starts every message */
	const char *synopsis; /* "usage: ..." lines, each ending in '\n' */
	const char *intro;    /* --help between the synopsis and the options */
	const tl_opt *opts;   /* the table; -h/--help is added */
	size_t nopts;
	const char *outro;  /* --help after the options, or NULL */
	const char *outro2; /* and more (C99 bounds one string's length) */
} tl_opts;

/* Parse argv[1..argc) into *target (which holds the defaults) by p's
 * table. Returns -1 to go on, with the operands (the arguments that are
 * not options) at argv[*first..argc); or an exit status to end with:
 * 0 after --help (printed on stdout) or a setter's success, 2 after a
 * usage error (reported on stderr), or a setter's own status. */
int tl_opts_parse(const tl_opts *p, int argc, char **argv, void *target,
		  int *first);

/* Write p's --help: synopsis, intro, the table's options, outro. */
void tl_opts_help(const tl_opts *p, FILE *out);

/* Report a usage error on stderr: "PROG: " and the printf-style message,
 * then the synopsis and "Try 'PROG --help' for more.". Returns 2. */
int tl_opts_error(const tl_opts *p, const char *fmt, ...)
#ifdef __GNUC__
	__attribute__((format(printf, 2, 3)))
#endif
	;

#endif /* TL_OPTS_H */
