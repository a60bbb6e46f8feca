/* JSON strings for the drl tools: see json.h. */
#include "json.h"

#include <string.h>

/* Length of the well-formed UTF-8 sequence starting at p (n bytes left), or
 * 0 when it is not one (overlong forms, surrogates and code points above
 * U+10FFFF are not well-formed). */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	unsigned c = p[0];
	size_t len;
	unsigned lo = 0x80, hi = 0xbf; /* bounds for the second byte */

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (n < len || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return len;
}

bool tl_utf8_valid(const void *s, size_t n)
{
	const unsigned char *p = s;

	for (size_t i = 0; i < n;) {
		size_t l = utf8_len(p + i, n - i);
		if (l == 0)
			return false;
		i += l;
	}
	return true;
}

/* The next character of p[0..n) (n >= 1) as it stands inside a JSON
 * string, into out (at most 6 bytes, not NUL-terminated): its length
 * there is returned, and *used says how many input bytes it took. */
static size_t json_piece(const unsigned char *p, size_t n, char out[7],
			 size_t *used)
{
	unsigned c = p[0];
	size_t l = utf8_len(p, n);

	if (l > 1) {
		memcpy(out, p, l);
		*used = l;
		return l;
	}
	*used = 1;
	if (c == '"' || c == '\\') {
		out[0] = '\\';
		out[1] = (char)c;
		return 2;
	}
	if (c == '\n' || c == '\t' || c == '\r') {
		out[0] = '\\';
		out[1] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
		return 2;
	}
	if (c < 0x20 || c >= 0x7f)
		return (size_t)snprintf(out, 7, "\\u%04x", c);
	out[0] = (char)c;
	return 1;
}

void tl_json_strn(FILE *out, const void *s, size_t n)
{
	const unsigned char *p = s;
	char e[7];
	size_t used;

	putc('"', out);
	for (size_t i = 0; i < n; i += used)
		fwrite(e, 1, json_piece(p + i, n - i, e, &used), out);
	putc('"', out);
}

void tl_json_str(FILE *out, const char *s)
{
	tl_json_strn(out, s, strlen(s));
}

size_t tl_json_escape(char *dst, size_t cap, const void *s, size_t n)
{
	const unsigned char *p = s;
	size_t at = 0, used;
	char e[7];

	if (cap == 0)
		return 0;
	for (size_t i = 0; i < n; i += used) {
		size_t k = json_piece(p + i, n - i, e, &used);
		if (at + k >= cap)
			break;
		memcpy(dst + at, e, k);
		at += k;
	}
	dst[at] = '\0';
	return at;
}
