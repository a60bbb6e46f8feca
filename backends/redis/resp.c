/*
 * RESP formatting of one command into a growing buffer, for the shared
 * connections and the channels (append_shared in backends/redis/conn.c).
 *
 * Written here rather than with hiredis's redisFormatCommandArgv(): the
 * one in Debian 12 (hiredis 0.14) mallocs each command and writes every
 * length with sprintf(), which perf put at a fifth of the client's CPU in
 * a started decision (docs/performance.md, "Client: rate-limiter-
 * flexible's shape"). The bytes are the same: *argc, then $len and the
 * argument for each, every line ending in CRLF.
 */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Decimal digits of v. */
static size_t digits(size_t v)
{
	size_t n = 1;
	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

/* v in decimal at p (digits(v) bytes); returns the end. */
static char *decimal(char *p, uint64_t v)
{
	size_t n = 1;
	for (uint64_t w = v; w >= 10; w /= 10)
		n++;
	for (size_t i = n; i > 0; i--) {
		p[i - 1] = (char)('0' + v % 10);
		v /= 10;
	}
	return p + n;
}

/* Write "<mark><v>\r\n" at p; returns the end. */
static char *line(char *p, char mark, size_t v)
{
	*p++ = mark;
	p = decimal(p, v);
	*p++ = '\r';
	*p++ = '\n';
	return p;
}

size_t drl__redis_i64(char buf[24], int64_t v)
{
	char *p = buf;
	uint64_t u = (uint64_t)v;
	if (v < 0) {
		*p++ = '-';
		u = 0 - u; /* INT64_MIN too: unsigned arithmetic */
	}
	return (size_t)(decimal(p, u) - buf);
}

int drl__redis_resp_append(char **buf, size_t *len, size_t *cap, int argc,
			   const char **argv, const size_t *lens)
{
	size_t need = 3 + digits((size_t)argc);
	for (int i = 0; i < argc; i++)
		need += 5 + digits(lens[i]) + lens[i];
	if (*cap - *len < need) {
		size_t c = *cap ? *cap : 256;
		while (c - *len < need)
			c *= 2;
		char *q = realloc(*buf, c);
		if (q == NULL)
			return -1;
		*buf = q;
		*cap = c;
	}
	char *p = line(*buf + *len, '*', (size_t)argc);
	for (int i = 0; i < argc; i++) {
		p = line(p, '$', lens[i]);
		if (lens[i])
			memcpy(p, argv[i], lens[i]);
		p += lens[i];
		*p++ = '\r';
		*p++ = '\n';
	}
	*len = (size_t)(p - *buf);
	return 0;
}
