/*
 * Host lists in store URIs: "host", "host:port", "[v6]", "[v6]:port",
 * comma-separated. One parser for every store (built in or not), so every
 * store accepts and refuses the same addresses with the same messages.
 */
#include "internal.h"

#include <string.h>

/* 1 when c may appear in a host name or IPv4 address. */
static bool host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
}

/* 1 when c may appear inside [...] (an IPv6 address). */
static bool ipv6_char(char c)
{
	return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
	       (c >= '0' && c <= '9') || c == ':' || c == '.';
}

/* true when ok(c) holds for each c of s[0..n). */
static bool all_chars(const char *s, size_t n, bool (*ok)(char))
{
	for (size_t i = 0; i < n; i++)
		if (!ok(s[i]))
			return false;
	return true;
}

/* At most this much of a bad server is quoted in a message. */
#define SHOW 64

/* DRL_EINVAL, the message naming `what` and the server quoted. */
#define BAD_SERVER(why)                                                        \
	drl_error_set(err, DRL_EINVAL, "%s: server \"%.*s\": " why, what,      \
		      show, s)

int drl_hostport_parse(const char *s, size_t len, int default_port,
		       const char *what, drl_hostport *out, drl_error *err)
{
	const char *h = s, *p = NULL;
	size_t hl;
	int64_t port = default_port;
	int show = (int)(len < SHOW ? len : SHOW);

	if (what == NULL)
		what = "store URI";
	if (out == NULL || (s == NULL && len > 0))
		return drl_error_set(err, DRL_EINVAL, "%s: no server", what);
	if (len == 0)
		return drl_error_set(err, DRL_EINVAL,
				     "%s: empty server in the host list", what);
	memset(out, 0, sizeof *out);
	if (s[0] == '[') {
		const char *close = memchr(s, ']', len);
		if (close == NULL)
			return BAD_SERVER("'[' without ']'");
		h = s + 1;
		hl = (size_t)(close - h);
		if (close + 1 < s + len) {
			if (close[1] != ':')
				return BAD_SERVER("expected ':' after ']'");
			p = close + 2;
		}
		if (!all_chars(h, hl, ipv6_char))
			return BAD_SERVER("bad IPv6 address");
		out->ipv6 = true;
	} else {
		const char *colon = memchr(s, ':', len);
		hl = colon ? (size_t)(colon - s) : len;
		if (colon) {
			if (memchr(colon + 1, ':', len - hl - 1))
				return BAD_SERVER("write an IPv6 address in "
						  "brackets ([::1]:port)");
			p = colon + 1;
		}
		if (!all_chars(h, hl, host_char))
			return BAD_SERVER("bad character in the host name");
	}
	if (hl == 0)
		return BAD_SERVER("empty host");
	if (hl > DRL_HOST_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "%s: server \"%.*s...\": host name longer "
				     "than %d bytes",
				     what, show, s, DRL_HOST_MAX);
	if (p != NULL &&
	    drl_parse_int(p, (size_t)(s + len - p), 1, 65535, &port) != 0)
		return BAD_SERVER("port must be an integer in [1, 65535]");
	if (port < 1 || port > 65535)
		return drl_error_set(err, DRL_EINVAL,
				     "%s: default port %d out of range", what,
				     default_port);
	memcpy(out->host, h, hl);
	out->host[hl] = '\0';
	out->port = (int)port;
	return 0;
}
#undef BAD_SERVER

int drl_hostport_list(const char *hosts, int default_port, const char *what,
		      drl_hostport *out, size_t cap, size_t *n, drl_error *err)
{
	if (what == NULL)
		what = "store URI";
	if (n == NULL || (out == NULL && cap > 0))
		return drl_error_set(err, DRL_EINVAL, "%s: no output", what);
	*n = 0;
	if (hosts == NULL || hosts[0] == '\0')
		return drl_error_set(err, DRL_EINVAL, "%s: no server", what);
	const char *s = hosts;
	for (;;) {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		drl_hostport hp;
		int rc = drl_hostport_parse(s, len, default_port, what, &hp,
					    err);
		if (rc) {
			*n = 0;
			return rc;
		}
		for (size_t i = 0; i < *n; i++)
			if (out[i].port == hp.port &&
			    strcmp(out[i].host, hp.host) == 0) {
				*n = 0;
				return drl_error_set(
					err, DRL_EINVAL,
					"%s: server %s%s%s:%d "
					"listed twice",
					what, hp.ipv6 ? "[" : "", hp.host,
					hp.ipv6 ? "]" : "", hp.port);
			}
		if (*n == cap) {
			*n = 0;
			return drl_error_set(err, DRL_EINVAL,
					     "%s: more than %zu servers", what,
					     cap);
		}
		out[(*n)++] = hp;
		if (comma == NULL)
			return 0;
		s = comma + 1;
	}
}
