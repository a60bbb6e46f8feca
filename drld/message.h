/*
 * The messages of drld's config loaders (config.c, envoy/envoy_config.c):
 * a prefix naming the file (and where in it), then the message itself.
 */
#ifndef DRLD_MESSAGE_H
#define DRLD_MESSAGE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* Write the vprintf-style message into msg (n bytes) after the k bytes
 * of prefix snprintf wrote there; nothing when the prefix did not fit
 * (k < 0 or k >= n). Returns -1, the loaders' failure. */
static inline int drld_message_rest(char *msg, size_t n, int k, const char *fmt,
				    va_list ap)
{
	if (k >= 0 && (size_t)k < n)
		vsnprintf(msg + k, n - (size_t)k, fmt, ap);
	return -1;
}

#endif /* DRLD_MESSAGE_H */
