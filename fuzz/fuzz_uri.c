/*
 * fuzz_uri: the store URI parser. Input: the URI text (a NUL is added).
 *
 * Opening a redis:// or memcached:// store connects at once (so that a
 * wrong address or password fails drl_store_open), and the host in the
 * input could be anything. So a URI of those schemes is opened whole only
 * when it says connect=lazy (then nothing connects or resolves a name at
 * open: checked with strace); otherwise this target only parses it
 * (drl__uri_parse, then the core's own options, breaker_*, and the
 * options those stores read, as they read them). Every other URI
 * (memory://, unknown schemes, no scheme) goes through drl_store_open
 * whole, which connects nowhere.
 *
 * A URI that is refused must be DRL_EINVAL (DRL_ENOMEM) with a message.
 */
#include "internal.h"

#include "fuzz.h"

#include <drl/drl.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_error(const char *uri, int rc, const drl_error *err)
{
	if ((rc == DRL_EINVAL || rc == DRL_ENOMEM) && err->code == rc &&
	    err->message[0] != '\0')
		return;
	fprintf(stderr, "fuzz_uri: \"%.200s\": %s \"%s\"\n", uri,
		drl_err_name(rc), err->message);
	abort();
}

static int connects(const char *scheme)
{
	static const char *const net[] = {"redis", "redis+unix",
					  "redis-cluster", "memcached",
					  "memcached+unix"};
	for (size_t i = 0; i < sizeof net / sizeof net[0]; i++)
		if (strcmp(scheme, net[i]) == 0)
			return 1;
	return 0;
}

/* Whether u asks to open without connecting (connect=lazy). */
static int says_lazy(const drl__uri *u)
{
	for (size_t i = 0; i < u->nopts; i++)
		if (strcmp(u->opts[i].key, "connect") == 0)
			return strcmp(u->opts[i].value, "lazy") == 0;
	return 0;
}

/* Read the options the network stores read, as they read them. */
static void parse_only(const char *uri, drl__uri *u)
{
	static const char *const ints[] = {"timeout_ms", "pool", "db",
					   "binary"};
	drl__breaker b;
	drl_error err = {0};
	int64_t v;
	int rc = drl__breaker_options(&b, u, &err);
	if (rc != 0)
		check_error(uri, rc, &err);
	for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
		memset(&err, 0, sizeof err);
		rc = drl_uri_option_int(u, ints[i], 0, INT32_MAX, 1, &v, &err);
		if (rc != 0)
			check_error(uri, rc, &err);
	}
	(void)drl_uri_option(u, "connect");
	(void)drl_uri_option(u, "tx");
	(void)drl_uri_option(u, "clock");
	(void)drl_uri_option(u, "prefix");
	memset(&err, 0, sizeof err);
	rc = drl_uri_check_all_used(u, &err);
	if (rc != 0)
		check_error(uri, rc, &err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	drl_error err = {0};
	drl__uri u;
	char *uri;
	uri = fuzz_text(data, size, 4096);
	if (uri == NULL)
		return 0;
	int rc = drl__uri_parse(&u, uri, &err);
	if (rc != 0) {
		check_error(uri, rc, &err);
	} else if (u.scheme != NULL && connects(u.scheme) && !says_lazy(&u)) {
		parse_only(uri, &u);
		drl__uri_clear(&u);
	} else {
		drl_store *store = NULL;
		drl__uri_clear(&u);
		memset(&err, 0, sizeof err);
		rc = drl_store_open(&store, uri, &err);
		if (rc != 0)
			check_error(uri, rc, &err);
		drl_store_free(store);
	}
	free(uri);
	return 0;
}
