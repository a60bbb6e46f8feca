/*
 * Stores an application brings, opened from a URI of their own scheme
 * (drl_store_open_with, drl_backend_open_with): public API only, as a
 * store outside this tree uses it. The store here is the memory store
 * under another scheme, with an option of its own, so its decisions can
 * be checked against memory://.
 */
#include <drl/drl.h>
#include <drl/sys/backend.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static int opened;    /* openers called */
static int64_t depth; /* the opener's own option */

/* "wrapped://[?depth=N]": the memory store, reading depth= and nothing
 * else (breaker_* are the core's). */
static int wrapped_open(drl_backend **out, drl_uri *uri, drl_error *err)
{
	opened++;
	if (drl_uri_hosts(uri) != NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "wrapped:// takes no host");
	int rc = drl_uri_option_int(uri, "depth", 0, 9, 1, &depth, err);
	if (rc == 0)
		rc = drl_uri_check_all_used(uri, err);
	if (rc == 0)
		rc = drl_backend_open_with(out, "memory://", NULL, 0, err);
	return rc;
}

/* An opener that breaks its contract: success without a store. */
static int empty_open(drl_backend **out, drl_uri *uri, drl_error *err)
{
	(void)uri;
	(void)err;
	*out = NULL;
	return 0;
}

static const drl_store_opener openers[] = {
	{"wrapped", wrapped_open},
	{"empty", empty_open},
};
#define NOPENERS (sizeof openers / sizeof openers[0])

static void test_own_scheme_decides(void **state)
{
	(void)state;
	drl_store *s = NULL, *m = NULL;
	drl_limiter *ls = NULL, *lm = NULL;
	drl_error err = {0};
	opened = 0;
	if (drl_store_open_with(&s, "wrapped://?depth=3&breaker_failures=2",
				openers, NOPENERS, &err))
		fail_msg("open: %s", err.message);
	assert_int_equal(opened, 1);
	assert_int_equal(depth, 3);
	assert_int_equal(drl_store_open(&m, "memory://", &err), 0);
	const char *spec = "token_bucket:5/1s";
	assert_int_equal(drl_limiter_new(&ls, s, spec, NULL, &err), 0);
	assert_int_equal(drl_limiter_new(&lm, m, spec, NULL, &err), 0);
	for (int i = 0; i < 8; i++) {
		drl_result a, b;
		int64_t now = INT64_C(1700000000000000) + i * 50000;
		assert_int_equal(drl_allow_at(ls, "k", 1, 1, now, &a, &err), 0);
		assert_int_equal(drl_allow_at(lm, "k", 1, 1, now, &b, &err), 0);
		assert_int_equal(a.allowed, b.allowed);
		assert_int_equal(a.remaining, b.remaining);
		assert_int_equal(a.retry_after_us, b.retry_after_us);
	}
	drl_limiter_free(ls);
	drl_limiter_free(lm);
	drl_store_free(s);
	drl_store_free(m);
}

/* Built-in schemes still open; an application's opener comes first. */
static void test_builtin_and_override(void **state)
{
	(void)state;
	drl_store *s = NULL;
	drl_error err = {0};
	assert_int_equal(drl_store_open_with(&s, "memory://?shards=4", openers,
					     NOPENERS, &err),
			 0);
	drl_store_free(s);
	static const drl_store_opener mine[] = {{"memory", wrapped_open}};
	opened = 0;
	assert_int_equal(
		drl_store_open_with(&s, "memory://?depth=7", mine, 1, &err), 0);
	assert_int_equal(opened, 1);
	assert_int_equal(depth, 7);
	drl_store_free(s);
}

/* Every refusal is DRL_EINVAL with a message, and leaves *out NULL. */
static void test_refusals(void **state)
{
	(void)state;
	struct {
		const char *uri;
		const drl_store_opener *o;
		size_t n;
		const char *want;
	} rows[] = {
		{"wrapped://", NULL, 0, "unknown store scheme \"wrapped\""},
		{"nope://", openers, NOPENERS,
		 "and the ones the application registered"},
		{"wrapped://?depth=10", openers, NOPENERS,
		 "URI option depth=\"10\""},
		{"wrapped://?what=1", openers, NOPENERS,
		 "unknown URI option \"what\""},
		{"wrapped://h", openers, NOPENERS, "takes no host"},
		{"empty://", openers, NOPENERS, "opener returned no store"},
		{"wrapped://", NULL, 2, "openers at NULL"},
		{"wrapped//", openers, NOPENERS, "missing \"://\""},
	};
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		drl_store *s = (drl_store *)&rows[i];
		drl_backend *b = (drl_backend *)&rows[i];
		drl_error err = {0};
		int rc = drl_store_open_with(&s, rows[i].uri, rows[i].o,
					     rows[i].n, &err);
		if (rc != DRL_EINVAL || s != NULL ||
		    !strstr(err.message, rows[i].want))
			fail_msg("store %s: %d, \"%s\", want \"%s\"",
				 rows[i].uri, rc, err.message, rows[i].want);
		memset(&err, 0, sizeof err);
		rc = drl_backend_open_with(&b, rows[i].uri, rows[i].o,
					   rows[i].n, &err);
		if (rc != DRL_EINVAL || b != NULL ||
		    !strstr(err.message, rows[i].want))
			fail_msg("backend %s: %d, \"%s\", want \"%s\"",
				 rows[i].uri, rc, err.message, rows[i].want);
	}
	assert_int_equal(drl_store_open_with(NULL, "memory://", NULL, 0, NULL),
			 DRL_EINVAL);
	assert_int_equal(
		drl_backend_open_with(NULL, "memory://", NULL, 0, NULL),
		DRL_EINVAL);
}

/* The raw backend is the store itself: what incr writes, get_many reads. */
static void test_raw_backend(void **state)
{
	(void)state;
	drl_backend *b = NULL;
	drl_error err = {0};
	assert_int_equal(drl_backend_open_with(&b, "wrapped://?depth=2",
					       openers, NOPENERS, &err),
			 0);
	assert_true(b->version >= 1 && b->version <= DRL_BACKEND_VERSION);
	drl_bytes k = {"k", 1};
	int64_t v = 0;
	assert_int_equal(b->incr(b, k, 5, 1000000, &v, &err), 0);
	assert_int_equal(v, 5);
	assert_int_equal(b->get_many(b, 1, &k, &v, &err), 0);
	assert_int_equal(v, 5);
	b->destroy(b);
}

/* drl_uri_parse/free: the parser openers get, for a store's own tools. */
static void test_uri_parse(void **state)
{
	(void)state;
	drl_uri *u = NULL;
	drl_error err = {0};
	assert_int_equal(drl_uri_parse(&u, "x://[::1]:5,h?o=%41", &err), 0);
	assert_string_equal(drl_uri_hosts(u), "[::1]:5,h");
	assert_string_equal(drl_uri_option(u, "o"), "A");
	drl_hostport hp[2];
	size_t n = 0;
	assert_int_equal(drl_hostport_list(drl_uri_hosts(u), 7, "x URI", hp, 2,
					   &n, &err),
			 0);
	assert_int_equal(n, 2);
	assert_int_equal(hp[1].port, 7);
	drl_uri_free(u);
	u = (drl_uri *)&err;
	assert_int_equal(drl_uri_parse(&u, "x://u:secret@h h", &err),
			 DRL_EINVAL);
	assert_null(u);
	assert_null(strstr(err.message, "secret"));
	assert_int_equal(drl_uri_parse(NULL, "x://", &err), DRL_EINVAL);
	drl_uri_free(NULL);
}

/* DRL_BACKEND_INIT states the version and zeroes the rest. */
static void test_backend_init(void **state)
{
	(void)state;
	static const drl_backend proto = DRL_BACKEND_INIT(3);
	assert_int_equal(proto.version, 3);
	assert_int_equal(proto.caps, 0);
	assert_null(proto.name);
	assert_null(proto.incr);
	assert_null(proto.del);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_scheme_decides),
		cmocka_unit_test(test_builtin_and_override),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_raw_backend),
		cmocka_unit_test(test_backend_init),
		cmocka_unit_test(test_uri_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
