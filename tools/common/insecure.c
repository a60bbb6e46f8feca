/*
 * The warning for tls_verify=no (see insecure.h). The library prints
 * nothing; the tools run by people do, once per store they open.
 */
#include "insecure.h"

#include <drl/sys/backend.h>

#include <stdio.h>
#include <string.h>

void tl_warn_insecure(const char *who, const char *uri)
{
	drl_uri *u = NULL;
	if (uri == NULL || drl_uri_parse(&u, uri, NULL) != 0)
		return;
	const char *v = drl_uri_option(u, "tls_verify");
	if (v && strcmp(v, "no") == 0)
		fprintf(stderr,
			"%s: WARNING: tls_verify=no: the store's TLS "
			"certificate is NOT verified; anyone who can reach the "
			"network path can pose as the store and read or change "
			"every decision. Use it only to test "
			"(docs/stores.md).\n",
			who);
	drl_uri_free(u);
}
