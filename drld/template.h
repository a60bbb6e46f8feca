/*
 * Key templates: how a rule builds the key it limits from a request.
 * Literal text with placeholders:
 *
 *   {path}          the request path (no query string)
 *   {method}        the request method (GET, POST, ...)
 *   {header:NAME}   the value of request header NAME (case-insensitive;
 *                   "" when absent)
 *   {ip}            the client's address (127.0.0.1, ::1)
 *   {key}           the "key" of a /v1/check body
 *   {{ and }}       a literal { and }
 *
 * e.g. "tenant:{header:X-Tenant}:{path}". A template is parsed (and so
 * checked) once, when the config is loaded; expanding it per request
 * allocates the key once.
 */
#ifndef DRLD_TEMPLATE_H
#define DRLD_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

/* Longest template text, and most parts (literals and placeholders). */
#define DRLD_TEMPLATE_MAX 1024
#define DRLD_TEMPLATE_PARTS_MAX 32

struct drld_template;

/* What a template is expanded from: the parts of one request. */
struct drld_request_parts {
	const char *path;
	const char *method;
	const char *key; /* the /v1/check body's key, or NULL */
	size_t keylen;
	/* header value of `name` ("" or NULL when absent) and the client's
	 * address as text into buf (n bytes; "" when unknown) */
	const char *(*header)(void *cls, const char *name);
	void (*ip)(void *cls, char *buf, size_t n);
	void *cls;
};

/* Parse `text` into *out. Returns 0, or -1 with a message naming the
 * problem in msg (n bytes): an unknown placeholder, an unclosed '{', a
 * lone '}', an empty header name, too long or too many parts. */
int drld_template_parse(struct drld_template **out, const char *text, char *msg,
			size_t n);
void drld_template_free(struct drld_template *t);

/* Whether the template uses {key} (only /v1/check requests have one). */
bool drld_template_uses_key(const struct drld_template *t);

/* Expand t for the request p into a malloc'd key of *len bytes (not
 * NUL-terminated; the caller frees it). {key} without p->key expands to
 * "". Returns NULL when out of memory, or when the key would be longer
 * than max bytes (*len is then that length). */
char *drld_template_expand(const struct drld_template *t,
			   const struct drld_request_parts *p, size_t max,
			   size_t *len);

#endif /* DRLD_TEMPLATE_H */
