/* Request path normalization: see path.h. */
#include "path.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

char *drld_path_normalize(const char *path)
{
	size_t n = strlen(path);
	char *out = malloc(n + 2); /* never longer than the input, plus "/" */

	if (out == NULL)
		return NULL;
	if (path[0] != '/') {
		memcpy(out, path, n + 1);
		return out;
	}
	size_t len = 0;   /* out[0..len): segments, each "/name" */
	bool dir = false; /* the path ends in '/' (a directory) */
	const char *p = path;
	while (*p != '\0') {
		while (*p == '/')
			p++;
		const char *seg = p;
		while (*p != '\0' && *p != '/')
			p++;
		size_t slen = (size_t)(p - seg);
		dir = *p == '/' || slen == 0;
		if (slen == 0 || (slen == 1 && seg[0] == '.')) {
			dir = true;
			continue;
		}
		if (slen == 2 && seg[0] == '.' && seg[1] == '.') {
			while (len > 0 && out[--len] != '/')
				;
			dir = true;
			continue;
		}
		out[len++] = '/';
		memcpy(out + len, seg, slen);
		len += slen;
	}
	if (len == 0 || dir)
		out[len++] = '/';
	out[len] = '\0';
	return out;
}
