/* Key templates: see template.h. */
#include "template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum part_kind { LIT, PATH, METHOD, HEADER, IP, KEY };

struct part {
	enum part_kind kind;
	const char *text; /* LIT: the bytes; HEADER: the name (NUL-ended) */
	size_t len;
};

struct drld_template {
	size_t nparts;
	struct part parts[DRLD_TEMPLATE_PARTS_MAX];
	bool uses_key;
	char buf[]; /* the texts parts point into */
};

/* Whether c may be in a header name (an RFC 9110 token character). */
static bool token_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Add a part; false when there are too many. */
static bool add(struct drld_template *t, enum part_kind kind, const char *text,
		size_t len)
{
	if (t->nparts == DRLD_TEMPLATE_PARTS_MAX)
		return false;
	t->parts[t->nparts++] = (struct part){kind, text, len};
	t->uses_key |= kind == KEY;
	return true;
}

/* Parse the placeholder name[0..len) (between braces) into a part; name
 * is in t->buf, where a header name is NUL-terminated in place. */
static int placeholder(struct drld_template *t, char *name, size_t len,
		       char *msg, size_t n)
{
	static const struct {
		const char *name;
		enum part_kind kind;
	} simple[] = {
		{"path", PATH},
		{"method", METHOD},
		{"ip", IP},
		{"key", KEY},
	};

	for (size_t i = 0; i < sizeof simple / sizeof simple[0]; i++)
		if (strlen(simple[i].name) == len &&
		    memcmp(name, simple[i].name, len) == 0)
			return add(t, simple[i].kind, NULL, 0) ? 0 : -2;
	if (len > 7 && memcmp(name, "header:", 7) == 0) {
		for (size_t i = 7; i < len; i++)
			if (!token_char((unsigned char)name[i])) {
				snprintf(msg, n,
					 "header name \"%.*s\" holds a "
					 "character a header name cannot",
					 (int)(len - 7), name + 7);
				return -1;
			}
		name[len] = '\0'; /* was the closing brace */
		return add(t, HEADER, name + 7, len - 7) ? 0 : -2;
	}
	snprintf(msg, n,
		 "unknown placeholder \"{%.*s}\" (expected {path}, {method}, "
		 "{header:NAME}, {ip} or {key})",
		 (int)(len > 64 ? 64 : len), name);
	return -1;
}

/* Parse t->buf (a copy of the text) into t->parts. Literal runs are
 * compacted in place ({{ becomes {), so every part points into t->buf. */
static int parse(struct drld_template *t, char *msg, size_t n)
{
	char *s = t->buf, *lit = NULL;
	size_t litlen = 0;
	int rc = 0;

	while (*s != '\0' && rc == 0) {
		if ((s[0] == '{' && s[1] == '{') ||
		    (s[0] == '}' && s[1] == '}')) {
			if (lit == NULL)
				lit = s;
			lit[litlen++] = s[0];
			s += 2;
			continue;
		}
		if (*s == '}') {
			snprintf(msg, n, "a lone '}' (write }} for one)");
			return -1;
		}
		if (*s != '{') {
			if (lit == NULL)
				lit = s;
			lit[litlen++] = *s++;
			continue;
		}
		char *close = strchr(s, '}');
		if (close == NULL) {
			snprintf(msg, n, "a '{' without its '}'");
			return -1;
		}
		if (lit != NULL && !add(t, LIT, lit, litlen))
			rc = -2;
		lit = NULL;
		litlen = 0;
		if (rc == 0)
			rc = placeholder(t, s + 1, (size_t)(close - s - 1), msg,
					 n);
		s = close + 1;
	}
	if (rc == 0 && lit != NULL && !add(t, LIT, lit, litlen))
		rc = -2;
	if (rc == -2)
		snprintf(msg, n, "more than %d parts", DRLD_TEMPLATE_PARTS_MAX);
	return rc == 0 ? 0 : -1;
}

int drld_template_parse(struct drld_template **out, const char *text, char *msg,
			size_t n)
{
	size_t len = strlen(text);

	*out = NULL;
	if (len == 0 || len > DRLD_TEMPLATE_MAX) {
		snprintf(msg, n, "a key template is 1 to %d bytes",
			 DRLD_TEMPLATE_MAX);
		return -1;
	}
	struct drld_template *t = calloc(1, sizeof *t + len + 1);
	if (t == NULL) {
		snprintf(msg, n, "out of memory");
		return -1;
	}
	memcpy(t->buf, text, len + 1);
	if (parse(t, msg, n) != 0) {
		free(t);
		return -1;
	}
	*out = t;
	return 0;
}

void drld_template_free(struct drld_template *t)
{
	free(t);
}

bool drld_template_uses_key(const struct drld_template *t)
{
	return t->uses_key;
}

/* The bytes part `pt` expands to for request p; ipbuf holds {ip}. */
static const char *value(const struct part *pt,
			 const struct drld_request_parts *p, char *ipbuf,
			 size_t *len)
{
	const char *v = NULL;

	switch (pt->kind) {
	case LIT:
		*len = pt->len;
		return pt->text;
	case KEY:
		*len = p->key != NULL ? p->keylen : 0;
		return p->key != NULL ? p->key : "";
	case PATH:
		v = p->path;
		break;
	case METHOD:
		v = p->method;
		break;
	case HEADER:
		v = p->header(p->cls, pt->text);
		break;
	case IP:
		p->ip(p->cls, ipbuf, 64);
		v = ipbuf;
		break;
	}
	if (v == NULL)
		v = "";
	*len = strlen(v);
	return v;
}

char *drld_template_expand(const struct drld_template *t,
			   const struct drld_request_parts *p, size_t max,
			   size_t *len)
{
	const char *v[DRLD_TEMPLATE_PARTS_MAX];
	size_t vl[DRLD_TEMPLATE_PARTS_MAX];
	char ipbuf[64] = "";
	size_t total = 0;

	for (size_t i = 0; i < t->nparts; i++) {
		v[i] = value(&t->parts[i], p, ipbuf, &vl[i]);
		total += vl[i]; /* each part is below 2^32: no overflow */
	}
	*len = total;
	if (total > max)
		return NULL;
	char *key = malloc(total + 1);
	if (key == NULL)
		return NULL;
	size_t at = 0;
	for (size_t i = 0; i < t->nparts; i++) {
		memcpy(key + at, v[i], vl[i]);
		at += vl[i];
	}
	key[total] = '\0';
	return key;
}
