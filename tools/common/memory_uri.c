/*
 * Bounds on a memory:// store for a service whose clients choose the
 * keys (tools/common/memory_uri.h). The library's memory store has no
 * bound unless its URI names one; drld and the nginx module add theirs
 * to any memory:// URI, the operator's included (issue 45, holes 8, 9).
 */
#include "memory_uri.h"

#include <drl/sys/backend.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int tl_memory_uri(char *buf, size_t cap, const char *uri, int64_t max_keys,
		  int64_t share, drl_error *err)
{
	drl_uri *u = NULL;
	int rc = drl_uri_parse(&u, uri, err);
	if (rc)
		return rc;
	int64_t max = max_keys;
	bool given_max = drl_uri_option(u, "max_keys") != NULL;
	bool given_group = drl_uri_option(u, "group_max_keys") != NULL;
	if (given_max)
		rc = drl_uri_option_int(u, "max_keys", 0, INT64_MAX, 0, &max,
					err);
	drl_uri_free(u);
	if (rc)
		return rc;
	char opts[96] = "";
	size_t n = 0;
	if (!given_max)
		n += (size_t)snprintf(opts + n, sizeof opts - n,
				      "&max_keys=%lld", (long long)max);
	if (!given_group && max > 0)
		snprintf(opts + n, sizeof opts - n, "&group_max_keys=%lld",
			 (long long)(share ? share : (max + 3) / 4));
	/* opts + 1: the options after their leading '&', which joins them
	 * to a query or starts one */
	size_t ulen = strlen(uri);
	const char *sep = strchr(uri, '?') == NULL                       ? "?"
			  : uri[ulen - 1] == '?' || uri[ulen - 1] == '&' ? ""
									 : "&";
	int len = snprintf(buf, cap, "%s%s%s", uri, opts[0] ? sep : "",
			   opts[0] ? opts + 1 : "");
	if (len < 0 || (size_t)len >= cap)
		return drl_error_set(err, DRL_EINVAL, "store URI too long");
	return 0;
}
