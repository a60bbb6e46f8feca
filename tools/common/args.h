/*
 * Command-line values for the drl tools (tools/common/args.c): strict
 * number parsing (the option table on top: opts.h).
 *
 * The tools' own helpers are named tl_ ("tools library"), not drl_: drl_
 * is the library's public namespace (include/drl/), and a tool's helper
 * must never look like, or collide with, a symbol of libdrl.
 */
#ifndef TL_ARGS_H
#define TL_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parse s[0..len) as a whole unsigned decimal in [min, max] into *out.
 * Digits only: no sign, no spaces, no suffix, not empty. Returns false (and
 * leaves *out alone) otherwise, including on overflow. */
bool tl_parse_uint_n(const char *s, size_t len, int64_t min, int64_t max,
		     int64_t *out);

/* The same for the whole NUL-terminated string s. */
bool tl_parse_uint(const char *s, int64_t min, int64_t max, int64_t *out);

/* Seconds as DIGITS[.DIGITS] (at most 6 decimals) into µs, within
 * [min_us, max_us]. Returns false (and leaves *us alone) otherwise. */
bool tl_parse_seconds(const char *s, int64_t min_us, int64_t max_us,
		      int64_t *us);

/* Parse "LIMIT/PERIOD" (LIMIT 1..DRL_LIMIT_MAX, PERIOD a whole number and
 * ms|s|m|h|d, at most DRL_PERIOD_MAX_US) from s, ending at '\0' or ','.
 * Returns false (outputs unspecified) when it is not one. */
bool tl_parse_limit_period(const char *s, int64_t *limit, int64_t *period_us);

#endif /* TL_ARGS_H */
