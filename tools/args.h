/*
 * Small helpers shared by the drl subcommands (tools/args.c): strict
 * number parsing for options and a JSON string writer.
 */
#ifndef DRL_TOOLS_ARGS_H
#define DRL_TOOLS_ARGS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Parse s[0..len) as a whole unsigned decimal in [min, max] into *out.
 * Digits only: no sign, no spaces, no suffix, not empty. Returns false (and
 * leaves *out alone) otherwise, including on overflow. */
bool drl_parse_uint_n(const char *s, size_t len, int64_t min, int64_t max,
		      int64_t *out);

/* The same for the whole NUL-terminated string s. */
bool drl_parse_uint(const char *s, int64_t min, int64_t max, int64_t *out);

/* Seconds as DIGITS[.DIGITS] (at most 6 decimals) into µs, within
 * [min_us, max_us]. Returns false (and leaves *us alone) otherwise. */
bool drl_parse_seconds(const char *s, int64_t min_us, int64_t max_us,
		       int64_t *us);

/* Parse "LIMIT/PERIOD" (LIMIT 1..DRL_LIMIT_MAX, PERIOD a whole number and
 * ms|s|m|h|d, at most DRL_PERIOD_MAX_US) from s, ending at '\0' or ','.
 * Returns false (outputs unspecified) when it is not one. */
bool drl_parse_limit_period(const char *s, int64_t *limit, int64_t *period_us);

/* The name of a decision's path (drl_path: "store", "local", "fail_open",
 * "fail_closed", "near"), as `drl check --json` and drld print it. */
const char *drl_path_name(int path);

/* Write s as a JSON string: quotes, backslashes and control bytes escaped,
 * bytes above 0x7e as \u00XX (their Latin-1 reading), so it is always
 * valid JSON. */
void drl_json_str(FILE *out, const char *s);

/* The same escaping for s[0..n) into dst (cap bytes, NUL included), without
 * the quotes: stops before an escape that would not fit, so the result is
 * valid JSON however short dst is. Returns the bytes written. */
size_t drl_json_escape(char *dst, size_t cap, const char *s, size_t n);

/* Microseconds to whole units of `unit` µs, rounded up (waiting that long
 * is never too early); negative values (DRL_NEVER) give -1. */
long long drl_ceil_div(int64_t us, int64_t unit);

/* Report a usage error of `drl CMD` on stderr: "drl CMD: " and the
 * printf-style message, then the synopsis and a pointer to --help.
 * Returns 2, the usage exit status. */
int drl_vusage_error(const char *cmd, const char *synopsis, const char *fmt,
		     va_list ap);
/* The same with the arguments as "..." (each command defines
 * usage_error(...) on it with its name and synopsis). */
int drl_usage_error(const char *cmd, const char *synopsis, const char *fmt, ...)
#ifdef __GNUC__
	__attribute__((format(printf, 3, 4)))
#endif
	;

/* getopt_long() returned c (':' for a missing value, else '?'): report
 * the option as drl_vusage_error() does. Returns 2. */
int drl_bad_option(const char *cmd, const char *synopsis, int c, char **argv);

#endif /* DRL_TOOLS_ARGS_H */
