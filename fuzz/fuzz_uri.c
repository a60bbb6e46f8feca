/*
 * fuzz_uri: the store URI parser. Input: the URI text (a NUL is added).
 *
 * Opening a redis:// or memcached:// store connects at once (so that a
 * wrong address or password fails drl_store_open), and the host in the
 * input could be anything. So a URI of those schemes is opened whole only
 * when it says connect=lazy (then nothing connects or resolves a name at
 * open: checked with strace); a TLS or Sentinel URI never is (its open
 * reads the files its options name, or asks sentinels); otherwise this
 * target only parses it
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

/* 1: a scheme whose store connects at open (opened whole only with
 * connect=lazy); 2: one never opened here: its open reads files the URI
 * names (TLS: tls_ca, tls_cert, tls_key, which could be a FIFO or
 * /dev/zero) or asks sentinels; 0: the rest. */
static int connects(const char *scheme)
{
	static const char *const net[] = {"redis", "redis+unix",
					  "redis-cluster", "memcached",
					  "memcached+unix"};
	static const char *const never[] = {"rediss", "rediss-cluster",
					    "redis-sentinel",
					    "rediss-sentinel"};
	for (size_t i = 0; i < sizeof net / sizeof net[0]; i++)
		if (strcmp(scheme, net[i]) == 0)
			return 1;
	for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
		if (strcmp(scheme, never[i]) == 0)
			return 2;
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
	static const char *const strs[] = {"connect",
					   "tx",
					   "clock",
					   "prefix",
					   "tls_ca",
					   "tls_ca_dir",
					   "tls_cert",
					   "tls_key",
					   "tls_verify",
					   "tls_server_name",
					   "sentinel_password",
					   "sentinel_user",
					   "sentinel_check_ms"};
	for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
		(void)drl_uri_option(u, strs[i]);
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
	} else if (u.scheme != NULL &&
		   (connects(u.scheme) == 2 ||
		    (connects(u.scheme) == 1 && !says_lazy(&u)))) {
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
