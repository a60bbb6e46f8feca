/*
 * JSON strings for the drl tools (tools/common/json.c): the one escaper
 * every tool's JSON output goes through (drl check/reset, bench,
 * simulate, and drld through tools/args.h).
 *
 * The output is always valid JSON, whatever the bytes: well-formed UTF-8
 * passes through as is; '"' and '\\' are escaped, \n \t \r as those
 * short escapes, every other control byte and DEL as \u00XX; a byte that
 * is not part of well-formed UTF-8 (a stray continuation byte, an
 * overlong form, a surrogate, a code point above U+10FFFF, a cut
 * sequence) becomes \u00XX, its Latin-1 reading. tests/integration/test_cli.sh
 * holds `drl check --json` to exactly this.
 */
#ifndef TL_JSON_H
#define TL_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Write the n bytes at s to out as a JSON string, with its quotes. */
void tl_json_strn(FILE *out, const void *s, size_t n);

/* The same for the NUL-terminated string s. */
void tl_json_str(FILE *out, const char *s);

/* The same escaping for s[0..n) into dst (cap bytes, NUL included),
 * without the quotes: stops before a character whose escape (or UTF-8
 * sequence) would not fit, so the result is valid JSON however short dst
 * is. Returns the bytes written, the NUL not counted. */
size_t tl_json_escape(char *dst, size_t cap, const void *s, size_t n);

/* Whether the n bytes at p are entirely well-formed UTF-8 (a JSON string
 * of them then reads back as the same bytes). */
bool tl_utf8_valid(const void *p, size_t n);

#endif /* TL_JSON_H */
