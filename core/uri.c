/*
 * Store URIs: scheme://[user[:password]@]hosts[/path][?k=v&k=v...]
 *
 * Splitting rules (RFC 3986's, made strict):
 * - the scheme ends at the first "://" and matches [a-z][a-z0-9+.-]*;
 * - the authority runs to the first '/' or '?'; the userinfo ends at its
 *   last '@' and splits at its first ':' into user and password;
 * - a raw '@' after the authority is refused: it almost always means a
 *   password holding a raw '/' or '?', and parsing on would put pieces of
 *   that password into hosts, path or option names (and so into messages);
 * - `path` keeps its leading '/' when there are no hosts
 *   (redis+unix:///run/x.sock -> "/run/x.sock"), and drops it otherwise
 *   (redis://h/0 -> "0");
 * - user, password, path and option values are percent-decoded (%00 is
 *   refused: the results are C strings); hosts and option names are kept
 *   raw, and option names are limited to [A-Za-z0-9_.-];
 * - raw spaces and control bytes are refused anywhere.
 *
 * Every message quotes the URI with the password replaced by "***", and
 * never quotes the password on its own.
 */
#include "internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHOW_URI_MAX 120 /* bytes of the URI quoted in a message */
_Static_assert(SHOW_URI_MAX + 8 <= DRL_URI_SHOW_MAX,
	       "drl_uri_redact output fits DRL_URI_SHOW_MAX");
#define SHOW_PART_MAX 48 /* bytes of one part quoted in a message */

/*
 * Write s[0..len) into buf (cap >= 8 bytes) for quoting inside "...":
 * control bytes, '"' and '\\' escaped, cut to about `max` bytes with "..."
 * when longer. Returns buf, always NUL-terminated.
 */
static const char *show(char *buf, size_t cap, const char *s, size_t len,
			size_t max)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		char tmp[8];
		int n;
		if (c < 0x20 || c == 0x7f)
			n = snprintf(tmp, sizeof tmp, "\\x%02x", c);
		else if (c == '"' || c == '\\')
			n = snprintf(tmp, sizeof tmp, "\\%c", c);
		else
			n = snprintf(tmp, sizeof tmp, "%c", c);
		if (o + (size_t)n + 4 > cap || o + (size_t)n > max) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		memcpy(buf + o, tmp, (size_t)n);
		o += (size_t)n;
	}
	buf[o] = '\0';
	return buf;
}

/*
 * Copy text[0..n) into out (cap bytes; at most cap - 1 written, no NUL)
 * with the value of every query option whose name ends in "password"
 * (sentinel_password=) replaced by "***". Returns the bytes written.
 */
static size_t mask_options(const char *text, size_t n, char *out, size_t cap)
{
	const char *q = memchr(text, '?', n);
	size_t qi = q ? (size_t)(q - text) : n;
	size_t o = 0, i = 0;
	while (i < n && o + 1 < cap) {
		char c = text[i++];
		out[o++] = c;
		if (i <= qi || c != '=' || i - 1 - qi < 8 ||
		    memcmp(text + i - 9, "password", 8) != 0)
			continue;
		while (i < n && text[i] != '&')
			i++;
		for (size_t k = 0; k < 3 && o + 1 < cap; k++)
			out[o++] = '*';
	}
	return o;
}

/*
 * Write `text` for a message with anything that may be a password replaced
 * by "***". Works on any input, parseable or not, erring towards hiding too
 * much: from the first ':' after "://" (or after the start when there is
 * no "://") up to the last '@' after that point, and the value of every
 * query option named *password (sentinel_password=). Escaped and cut as
 * show() does (cap >= SHOW_URI_MAX + 8 keeps the whole shown text).
 */
const char *drl_uri_redact(char *buf, size_t cap, const char *text)
{
	if (buf == NULL || cap == 0)
		return "";
	if (cap < 8) { /* show() needs room for "..." and the NUL */
		buf[0] = '\0';
		return buf;
	}
	if (text == NULL)
		text = "(null)";
	size_t n = strlen(text);
	const char *sep = strstr(text, "://");
	size_t a = sep ? (size_t)(sep - text) + 3 : 0;
	const char *at = NULL;
	for (size_t i = a; i < n; i++)
		if (text[i] == '@')
			at = text + i;
	const char *colon =
		at ? memchr(text + a, ':', (size_t)(at - text) - a) : NULL;
	/* Longer than shown either way: show() cuts at SHOW_URI_MAX. */
	char tmp[SHOW_URI_MAX * 2 + 8], out[SHOW_URI_MAX * 2 + 8];
	size_t len;
	if (!colon) {
		len = mask_options(text, n, out, sizeof out);
		return show(buf, cap, out, len, SHOW_URI_MAX);
	}

	/* Build "<before colon>:***<from @>" and show that. */
	size_t head = (size_t)(colon - text) + 1;
	size_t tail = n - (size_t)(at - text);
	if (head > SHOW_URI_MAX + 1)
		head = SHOW_URI_MAX + 1;
	if (tail > SHOW_URI_MAX)
		tail = SHOW_URI_MAX;
	memcpy(tmp, text, head);
	memcpy(tmp + head, "***", 3);
	memcpy(tmp + head + 3, at, tail);
	len = mask_options(tmp, head + 3 + tail, out, sizeof out);
	return show(buf, cap, out, len, SHOW_URI_MAX);
}

/*
 * Clear *u and fail with DRL_EINVAL: `invalid URI "<redacted text>": <fmt>`.
 * Returns DRL_EINVAL.
 */
#ifdef __GNUC__
__attribute__((format(printf, 4, 5)))
#endif
static int
fail(drl__uri *u, drl_error *err, const char *text, const char *fmt, ...)
{
	char detail[DRL_ERROR_MESSAGE_MAX];
	char shown[SHOW_URI_MAX + 8];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof detail, fmt, ap);
	va_end(ap);
	drl__uri_clear(u);
	return drl_error_set(err, DRL_EINVAL, "invalid URI \"%s\": %s",
			     drl_uri_redact(shown, sizeof shown, text), detail);
}

/* Clear *u and fail with DRL_ENOMEM. */
static int fail_nomem(drl__uri *u, drl_error *err)
{
	drl__uri_clear(u);
	return drl_error_set(err, DRL_ENOMEM, "out of memory parsing a URI");
}

/* Value of hex digit c, or -1. */
static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

enum { DECODE_OK = 0, DECODE_BAD = 1, DECODE_NUL = 2 };

/*
 * Percent-decode s[0..len) into a new NUL-terminated string *out (caller
 * frees). Returns DECODE_OK, DECODE_BAD (a '%' not followed by two hex
 * digits) or DECODE_NUL (%00) with *bad = offset of that '%', or
 * DRL_ENOMEM. *out is set only on success.
 */
static int decode(const char *s, size_t len, char **out, size_t *bad)
{
	char *d = malloc(len + 1);
	if (!d)
		return DRL_ENOMEM;
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] != '%') {
			d[o++] = s[i];
			continue;
		}
		int hi = i + 1 < len ? hexval(s[i + 1]) : -1;
		int lo = i + 2 < len ? hexval(s[i + 2]) : -1;
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			free(d);
			*bad = i;
			return hi < 0 || lo < 0 ? DECODE_BAD : DECODE_NUL;
		}
		d[o++] = (char)(hi * 16 + lo);
		i += 2;
	}
	d[o] = '\0';
	*out = d;
	return DECODE_OK;
}

/*
 * Decode the part s[0..len) of `text` named `what` into *dst, failing with
 * a message naming the part (and, unless `secret`, the bad escape).
 */
static int decode_part(drl__uri *u, drl_error *err, const char *text,
		       const char *what, bool secret, const char *s, size_t len,
		       char **dst)
{
	size_t bad = 0;
	int rc = decode(s, len, dst, &bad);
	if (rc == DECODE_OK)
		return 0;
	if (rc == DRL_ENOMEM)
		return fail_nomem(u, err);
	if (secret)
		return fail(u, err, text, "%s in the %s",
			    rc == DECODE_NUL ? "%00 is not allowed"
					     : "bad %-escape",
			    what);
	char esc[16];
	size_t elen = len - bad < 3 ? len - bad : 3;
	show(esc, sizeof esc, s + bad, elen, 8);
	if (rc == DECODE_NUL)
		return fail(u, err, text,
			    "escape \"%s\" is not allowed in the %s", esc,
			    what);
	return fail(u, err, text, "bad %%-escape \"%s\" in the %s", esc, what);
}

/* Copy s[0..len) into a new NUL-terminated string, or NULL. */
static char *dup_n(const char *s, size_t len)
{
	char *d = malloc(len + 1);
	if (d) {
		memcpy(d, s, len);
		d[len] = '\0';
	}
	return d;
}

/* 1 when c may appear in an option name. */
static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

/*
 * Parse the query q[0..len) (after '?') into u->opts. Returns 0 or the
 * error, *u cleared on error.
 */
static int parse_options(drl__uri *u, drl_error *err, const char *text,
			 const char *q, size_t len)
{
	char a[SHOW_PART_MAX + 8], b[SHOW_PART_MAX + 8];
	if (len == 0)
		return 0; /* "scheme://host?" : no options */
	const char *end = q + len;
	const char *p = q;
	for (;;) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *segend = amp ? amp : end;
		size_t seglen = (size_t)(segend - p);
		if (seglen == 0)
			return fail(u, err, text, "empty option (stray '&')");
		const char *eq = memchr(p, '=', seglen);
		if (!eq)
			return fail(
				u, err, text, "option \"%s\" has no value",
				show(a, sizeof a, p, seglen, SHOW_PART_MAX));
		size_t klen = (size_t)(eq - p);
		if (klen == 0)
			return fail(
				u, err, text, "option \"%s\" has an empty name",
				show(a, sizeof a, p, seglen, SHOW_PART_MAX));
		for (size_t i = 0; i < klen; i++)
			if (!name_char(p[i]))
				return fail(u, err, text,
					    "bad option name \"%s\" (allowed: "
					    "letters, digits, '_', '.', '-')",
					    show(a, sizeof a, p, klen,
						 SHOW_PART_MAX));
		for (size_t i = 0; i < u->nopts; i++)
			if (strlen(u->opts[i].key) == klen &&
			    memcmp(u->opts[i].key, p, klen) == 0)
				return fail(u, err, text,
					    "option \"%s\" given twice",
					    show(a, sizeof a, p, klen,
						 SHOW_PART_MAX));
		if (u->nopts == DRL__URI_OPTS_MAX)
			return fail(u, err, text, "more than %d options",
				    DRL__URI_OPTS_MAX);
		drl__uri_option *o = &u->opts[u->nopts];
		o->key = dup_n(p, klen);
		if (!o->key)
			return fail_nomem(u, err);
		o->used = false;
		u->nopts++; /* counted now so that clear() frees the key */
		show(b, sizeof b, p, klen, SHOW_PART_MAX);
		char what[SHOW_PART_MAX + 32];
		snprintf(what, sizeof what, "value of option \"%s\"", b);
		int rc = decode_part(u, err, text, what, false, eq + 1,
				     (size_t)(segend - eq - 1), &o->value);
		if (rc)
			return rc;
		if (!amp)
			return 0;
		p = amp + 1;
	}
}

/*
 * Parse `text` into *u (which need not be initialized; a uri parsed before
 * must be cleared first). On success *u owns its strings until
 * drl__uri_clear(); on failure *u is cleared and `err` says which part is
 * bad (DRL_EINVAL) or DRL_ENOMEM. The password never appears in a message.
 */
int drl__uri_parse(drl__uri *u, const char *text, drl_error *err)
{
	char a[SHOW_PART_MAX + 8];
	if (u == NULL)
		return drl_error_set(err, DRL_EINVAL, "invalid URI: no output");
	memset(u, 0, sizeof *u);
	if (text == NULL)
		return drl_error_set(err, DRL_EINVAL, "invalid URI: NULL");

	size_t n = strlen(text);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)text[i];
		if (c == ' ')
			return fail(u, err, text,
				    "space at byte %zu (percent-encode it as "
				    "%%20)",
				    i);
		if (c < 0x20 || c == 0x7f)
			return fail(u, err, text,
				    "control byte 0x%02x at byte %zu", c, i);
	}

	/* scheme */
	const char *sep = strstr(text, "://");
	if (!sep)
		return fail(u, err, text,
			    "missing \"://\" after the scheme (e.g. memory://, "
			    "redis://host:6379)");
	size_t slen = (size_t)(sep - text);
	if (slen == 0)
		return fail(u, err, text, "empty scheme before \"://\"");
	for (size_t i = 0; i < slen; i++) {
		char c = text[i];
		bool ok = (c >= 'a' && c <= 'z') ||
			  (i > 0 && ((c >= '0' && c <= '9') || c == '+' ||
				     c == '.' || c == '-'));
		if (!ok)
			return fail(
				u, err, text,
				"bad scheme \"%s\" (must match "
				"[a-z][a-z0-9+.-]*)",
				show(a, sizeof a, text, slen, SHOW_PART_MAX));
	}
	u->scheme = dup_n(text, slen);
	if (!u->scheme)
		return fail_nomem(u, err);

	/* authority: [user[:password]@]hosts */
	const char *rest = sep + 3;
	size_t alen = strcspn(rest, "/?");
	const char *after = rest + alen;
	if (strchr(after, '@'))
		return fail(u, err, text,
			    "raw '@' after the host part (percent-encode '@', "
			    "'/' and '?' in a user or password as %%40, %%2F, "
			    "%%3F)");
	const char *at = NULL;
	for (size_t i = 0; i < alen; i++)
		if (rest[i] == '@')
			at = rest + i;
	const char *hosts = rest;
	if (at) {
		size_t ulen = (size_t)(at - rest);
		const char *colon = memchr(rest, ':', ulen);
		size_t userlen = colon ? (size_t)(colon - rest) : ulen;
		int rc;
		if (userlen > 0) {
			rc = decode_part(u, err, text, "user", false, rest,
					 userlen, &u->user);
			if (rc)
				return rc;
		}
		if (colon && colon + 1 < at) {
			rc = decode_part(u, err, text, "password", true,
					 colon + 1, (size_t)(at - colon - 1),
					 &u->password);
			if (rc)
				return rc;
		}
		hosts = at + 1;
	}
	size_t hlen = (size_t)(after - hosts);
	if (hlen > 0) {
		u->hosts = dup_n(hosts, hlen);
		if (!u->hosts)
			return fail_nomem(u, err);
	}

	/* path */
	const char *q = strchr(after, '?');
	if (!q)
		q = text + n;
	if (*after == '/') {
		const char *p = hlen > 0 ? after + 1 : after;
		int rc = decode_part(u, err, text, "path", false, p,
				     (size_t)(q - p), &u->path);
		if (rc)
			return rc;
	}

	/* options */
	if (*q == '?')
		return parse_options(u, err, text, q + 1,
				     (size_t)(text + n - q - 1));
	return 0;
}

/*
 * Free everything *u owns and zero it. Safe on a zeroed or already cleared
 * uri, and on NULL.
 */
void drl__uri_clear(drl__uri *u)
{
	if (u == NULL)
		return;
	free(u->scheme);
	free(u->user);
	if (u->password) {
		/* Do not leave the secret lying around in freed memory. */
		volatile char *p = u->password;
		while (*p)
			*p++ = '\0';
		free(u->password);
	}
	free(u->hosts);
	free(u->path);
	for (size_t i = 0; i < u->nopts && i < DRL__URI_OPTS_MAX; i++) {
		free(u->opts[i].key);
		free(u->opts[i].value);
	}
	memset(u, 0, sizeof *u);
}

/*
 * The value of option `key` (marking it used), or NULL when absent. The
 * string is owned by *u, valid and unchanged until drl__uri_clear().
 */
const char *drl_uri_option(drl__uri *u, const char *key)
{
	if (u == NULL || key == NULL)
		return NULL;
	for (size_t i = 0; i < u->nopts; i++) {
		if (strcmp(u->opts[i].key, key) == 0) {
			u->opts[i].used = true;
			return u->opts[i].value;
		}
	}
	return NULL;
}

/*
 * Integer option `key` (marked used) in [min, max] into *out; `def` when
 * absent. DRL_EINVAL naming the option, its value and the allowed range
 * when it is not a decimal integer in range; *out is then unchanged.
 */
int drl_uri_option_int(drl__uri *u, const char *key, int64_t min, int64_t max,
		       int64_t def, int64_t *out, drl_error *err)
{
	if (out == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_uri_option_int: out is NULL");
	const char *v = drl_uri_option(u, key);
	if (v == NULL) {
		*out = def;
		return 0;
	}
	if (drl_parse_int(v, strlen(v), min, max, out) == 0)
		return 0;
	char a[SHOW_PART_MAX + 8];
	return drl_error_set(
		err, DRL_EINVAL,
		"URI option %s=\"%s\": expected an integer in "
		"[%" PRId64 ", %" PRId64 "]",
		key, show(a, sizeof a, v, strlen(v), SHOW_PART_MAX), min, max);
}

/*
 * DRL_EINVAL naming the first option no one asked for through
 * drl_uri_option*(); 0 when every option was used.
 */
int drl_uri_check_all_used(const drl__uri *u, drl_error *err)
{
	if (u == NULL)
		return 0;
	for (size_t i = 0; i < u->nopts; i++) {
		if (!u->opts[i].used) {
			char a[SHOW_PART_MAX + 8];
			const char *k = u->opts[i].key;
			return drl_error_set(
				err, DRL_EINVAL,
				"unknown URI option \"%s\" for a %s:// store",
				show(a, sizeof a, k, strlen(k), SHOW_PART_MAX),
				u->scheme ? u->scheme : "?");
		}
	}
	return 0;
}

int drl_uri_option_lazy(drl__uri *u, bool *lazy, drl_error *err)
{
	if (lazy == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_uri_option_lazy: lazy is NULL");
	const char *v = drl_uri_option(u, "connect");
	*lazy = false;
	if (v == NULL || strcmp(v, "eager") == 0)
		return 0;
	if (strcmp(v, "lazy") == 0) {
		*lazy = true;
		return 0;
	}
	return drl_error_set(err, DRL_EINVAL,
			     "URI option connect=\"%.32s\": expected eager or "
			     "lazy",
			     v);
}

/* ---- the accessors of include/drl/sys/backend.h --------------------------- */

int drl_uri_parse(drl_uri **out, const char *text, drl_error *err)
{
	if (out == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_uri_parse: out is NULL");
	*out = NULL;
	drl_uri *u = malloc(sizeof *u);
	if (u == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	int rc = drl__uri_parse(u, text, err);
	if (rc) {
		free(u);
		return rc;
	}
	*out = u;
	return 0;
}

void drl_uri_free(drl_uri *u)
{
	if (u == NULL)
		return;
	drl__uri_clear(u);
	free(u);
}

const char *drl_uri_scheme(const drl_uri *u)
{
	return u ? u->scheme : NULL;
}

const char *drl_uri_user(const drl_uri *u)
{
	return u ? u->user : NULL;
}

const char *drl_uri_password(const drl_uri *u)
{
	return u ? u->password : NULL;
}

const char *drl_uri_hosts(const drl_uri *u)
{
	return u ? u->hosts : NULL;
}

const char *drl_uri_path(const drl_uri *u)
{
	return u ? u->path : NULL;
}

void drl_uri_set_servers(drl_uri *u, size_t servers)
{
	if (u)
		u->servers = servers;
}
