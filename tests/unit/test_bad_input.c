/*
 * Bad input on memory://: every row of the shared table (bad_input.c)
 * returns its code and message and reaches no store method; the memory
 * store holds no key after it (drl__memory_count) and key "k" keeps its
 * full quota. Also the entry points that take no store (drl_store_open,
 * drl_store_from_backend, drl_store_stats_get, drl_error_set, ...), and
 * a store whose clock fails: bad input is still DRL_EINVAL, the clock is
 * never read. Redis and memcached: test_bad_input_stores.c.
 */
#include "bad_input.h"

#include "backends/memory.h"
#include "internal.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* ---- the memory target ------------------------------------------------ */

static void memory_empty(void *ctx, const char *what)
{
	size_t n = drl__memory_count(spy_inner(ctx));
	if (n != 0)
		fail_msg("%s: the memory store holds %zu keys", what, n);
}

static bi_target memory_target(void)
{
	bi_target t = {.name = "memory://", .empty = memory_empty};
	t.store = spy_open("memory://", &t.spy);
	t.ctx = t.spy;
	return t;
}

static void test_rows(void **state)
{
	(void)state;
	bi_target t = memory_target();
	bi_run_rows(&t);
	drl_store_free(t.store);
}

static void test_overflow(void **state)
{
	(void)state;
	bi_target t = memory_target();
	bi_run_overflow(&t);
	drl_store_free(t.store);
}

/* ---- URIs ----------------------------------------------------------------- */

#define SEVENTEEN_OPTIONS                                                      \
	"memory://?a=1&b=1&c=1&d=1&e=1&f=1&g=1&h=1&i=1&j=1&k=1&l=1&m=1&n=1&"   \
	"o=1&p=1&q=1"

static const bi_uri_row memory_uris[] = {
	{"junk", DRL_EINVAL, "missing \"://\" after the scheme"},
	{"://", DRL_EINVAL, "empty scheme before \"://\""},
	{"Memory://", DRL_EINVAL, "bad scheme \"Memory\""},
	{"mem://", DRL_EINVAL, "unknown store scheme \"mem\""},
	{"memory://?shards=3", DRL_EINVAL, "must be a power of two"},
	{"memory://?shards=0", DRL_EINVAL,
	 "shards=\"0\": expected an integer in [1, 1024]"},
	{"memory://?shards=99999999999999999999", DRL_EINVAL,
	 "expected an integer in [1, 1024]"},
	{"memory://?shards=16&shards=16", DRL_EINVAL,
	 "option \"shards\" given twice"},
	{"memory://?bogus=1", DRL_EINVAL,
	 "unknown URI option \"bogus\" for a memory:// store"},
	{"memory://?max_keys=-1", DRL_EINVAL, "max_keys=\"-1\": expected"},
	{"memory://?&", DRL_EINVAL, "empty option (stray '&')"},
	{"memory://?shards", DRL_EINVAL, "option \"shards\" has no value"},
	{"memory://?=1", DRL_EINVAL, "has an empty name"},
	{"memory://?sh ards=1", DRL_EINVAL, "space at byte 12"},
	{"memory://?sh\x01rds=1", DRL_EINVAL, "control byte 0x01 at byte 12"},
	{"memory://?shards=%zz", DRL_EINVAL, "bad %-escape \"%zz\""},
	{"memory://?shards=%00", DRL_EINVAL, "escape \"%00\" is not allowed"},
	{"memory://?sh@rds=1", DRL_EINVAL, "raw '@' after the host part"},
	{"memory://?sh%rds=1", DRL_EINVAL, "bad option name"},
	{"memory://host", DRL_EINVAL, "memory:// takes no host"},
	{"memory:///path", DRL_EINVAL,
	 "memory:// takes no path (got \"/path\")"},
	{"memory://user:secret@", DRL_EINVAL, "takes no user or password"},
	{SEVENTEEN_OPTIONS, DRL_EINVAL, "more than 16 options"},
	/* the circuit breaker's options (every scheme) */
	{"memory://?breaker_failures=-1", DRL_EINVAL,
	 "breaker_failures=\"-1\": expected an integer in [0, 1000000]"},
	{"memory://?breaker_open_ms=0", DRL_EINVAL,
	 "breaker_open_ms=\"0\": expected an integer in [1, 3600000]"},
	{"memory://?breaker_open_ms=100&breaker_max_ms=50", DRL_EINVAL,
	 "breaker_max_ms=50 is below breaker_open_ms=100"},
	{"memory://?connect=lazy", DRL_EINVAL,
	 "unknown URI option \"connect\" for a memory:// store"},
};

static void test_uri_rows(void **state)
{
	(void)state;
	bi_target t = memory_target();
	bi_run_uri_rows(&t, memory_uris,
			sizeof memory_uris / sizeof memory_uris[0]);
	drl_store_free(t.store);
}

/* A URI of 1 MiB: refused, the message cut to fit, no crash. */
static void test_huge_uri(void **state)
{
	(void)state;
	size_t n = 1024 * 1024;
	char *uri = malloc(n + 1);
	assert_non_null(uri);
	memcpy(uri, "memory://?", 10);
	memset(uri + 10, 'a', n - 10);
	uri[n] = '\0';
	drl_store *s = NULL;
	drl_error err;
	memset(&err, 'x', sizeof err);
	assert_int_equal(drl_store_open(&s, uri, &err), DRL_EINVAL);
	assert_null(s);
	assert_true(strlen(err.message) < DRL_ERROR_MESSAGE_MAX);
	assert_non_null(strstr(err.message, "has no value"));
	free(uri);
}

/* ---- entry points that take no store ------------------------------------ */

static void noop_destroy(drl_backend *b)
{
	(void)b;
	fail_msg("a refused backend was destroyed");
}

/* drl_store_from_backend refuses each broken backend and leaves it alone
 * (never calls destroy). */
static void test_from_backend(void **state)
{
	(void)state;
	drl_error err = {0};
	drl_store *s = NULL;
	spy *sp;
	drl_store *good = spy_open("memory://", &sp);
	drl_backend base = *spy_inner(sp); /* a copy of a working vtable */
	base.destroy = noop_destroy;

	assert_int_equal(drl_store_from_backend(NULL, &base, &err), DRL_EINVAL);
	assert_non_null(strstr(err.message, "NULL argument"));
	assert_int_equal(drl_store_from_backend(&s, NULL, &err), DRL_EINVAL);
	assert_null(s);

	static const struct {
		const char *what;
		int version;
		unsigned caps_add, caps_del;
		int drop; /* 1 incr, 2 update, 3 destroy */
		const char *msg;
	} rows[] = {
		{"version 0", 0, 0, 0, 0,
		 "written for store interface version 0; this library knows "
		 "1 to"},
		{"version -1", -1, 0, 0, 0, "interface version -1;"},
		{"a newer version", DRL_BACKEND_VERSION + 1, 0, 0, 0,
		 "this library knows 1 to"},
		{"no counters", 1, 0, DRL_CAP_COUNTER, 0,
		 "lacks a required method"},
		{"no incr", 1, 0, 0, 1, "lacks a required method"},
		{"no destroy", 1, 0, 0, 3, "lacks a required method"},
		{"update claimed, no method", 1, 0, 0, 2,
		 "claims a capability without its method"},
		{"script claimed, no eval", 1, DRL_CAP_SCRIPT, 0, 0,
		 "claims a capability without its method"},
		{"clock claimed, no now", 1, DRL_CAP_CLOCK, 0, 0,
		 "claims a capability without its method"},
		{"batch without script", 2, DRL_CAP_BATCH, 0, 0,
		 "claims DRL_CAP_BATCH without DRL_CAP_SCRIPT"},
	};
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		drl_backend b = base;
		b.version = rows[i].version;
		b.caps = (b.caps | rows[i].caps_add) & ~rows[i].caps_del;
		if (rows[i].drop == 1)
			b.incr = NULL;
		if (rows[i].drop == 2)
			b.update = NULL;
		if (rows[i].drop == 3)
			b.destroy = NULL;
		s = (drl_store *)(void *)&b;
		int rc = drl_store_from_backend(&s, &b, &err);
		if (rc != DRL_EINVAL || s != NULL ||
		    strstr(err.message, rows[i].msg) == NULL)
			fail_msg("from_backend, %s: %s, \"%s\"", rows[i].what,
				 drl_err_name(rc), err.message);
	}
	drl_store_free(good);
}

static void test_store_open_args(void **state)
{
	(void)state;
	drl_error err = {0};
	assert_int_equal(drl_store_open(NULL, "memory://", &err), DRL_EINVAL);
	assert_non_null(strstr(err.message, "out is NULL"));
	assert_int_equal(drl_store_open(NULL, NULL, NULL), DRL_EINVAL);
}

static void test_stats_get(void **state)
{
	(void)state;
	drl_store *s = NULL;
	drl_store_stats st;
	assert_int_equal(drl_store_open(&s, NULL, NULL), 0);
	assert_int_equal(drl_store_stats_get(NULL, &st), DRL_EINVAL);
	assert_int_equal(drl_store_stats_get(s, NULL), DRL_EINVAL);
	assert_int_equal(drl_store_stats_get(NULL, NULL), DRL_EINVAL);
	drl_store_free(s);
}

/* drl_error_set: NULL err and NULL fmt are fine; the code comes back. */
static void test_error_set(void **state)
{
	(void)state;
	drl_error err;
	/* Through a pointer: -Wformat would refuse a NULL format. */
	int (*set)(drl_error *, int, const char *, ...) = drl_error_set;
	memset(&err, 'x', sizeof err);
	assert_int_equal(set(&err, DRL_ESTORE, NULL), DRL_ESTORE);
	assert_int_equal(err.code, DRL_ESTORE);
	assert_string_equal(err.message, drl_strerror(DRL_ESTORE));
	assert_int_equal(set(NULL, DRL_EINVAL, NULL), DRL_EINVAL);
	assert_int_equal(drl_error_set(NULL, DRL_EINVAL, "%s", "x"),
			 DRL_EINVAL);
	/* Unknown codes have a text and a name. */
	assert_non_null(drl_strerror(-12345));
	assert_non_null(drl_err_name(12345));
	/* _free(NULL) is a no-op. */
	drl_limiter_free(NULL);
	drl_store_free(NULL);
}

/* ---- bad input is checked before the store's clock is read ---------------- */

static int clock_down(drl_backend *b, int64_t *now_us, drl_error *err)
{
	(void)b;
	(void)now_us;
	return drl_error_set(err, DRL_ESTORE, "clock down");
}

static void test_clock_not_read(void **state)
{
	(void)state;
	drl__uri u;
	drl_error err = {0};
	drl_backend *b = NULL;
	assert_int_equal(drl__uri_parse(&u, "memory://", &err), 0);
	assert_int_equal(drl__memory_open(&b, &u, &err), 0);
	drl__uri_clear(&u);
	b->caps |= DRL_CAP_CLOCK; /* a memory store with a broken clock */
	b->now = clock_down;
	drl_store *s = NULL;
	spy *sp;
	drl_limiter *l = NULL;
	assert_int_equal(spy_store(&s, &sp, b, &err), 0);
	assert_int_equal(drl_limiter_new(&l, s, BI_SPEC, NULL, &err), 0);

	drl_result r;
	assert_int_equal(drl_allow(l, NULL, 1, 1, &r, &err), DRL_EINVAL);
	assert_int_equal(drl_allow(l, "k", 0, 1, &r, &err), DRL_EINVAL);
	assert_int_equal(drl_allow(l, "k", 1, -1, &r, &err), DRL_EINVAL);
	assert_int_equal(drl_allow(l, "k", 1, 1, NULL, &err), DRL_EINVAL);
	assert_int_equal(spy_get(sp).now, 0);

	drl_batch_item it[2] = {{.key = NULL, .keylen = 1, .cost = 1},
				{.key = "k", .keylen = 1, .cost = -1}};
	assert_int_equal(drl_allow_batch(l, it, 2, &err), 0);
	assert_int_equal(it[0].rc, DRL_EINVAL);
	assert_int_equal(it[1].rc, DRL_EINVAL);
	assert_non_null(strstr(err.message, "item 0: drl_allow: NULL key"));
	/* A good request does need the clock, and gets its error. */
	assert_int_equal(drl_allow(l, "k", 1, 1, &r, &err), DRL_ESTORE);
	assert_int_equal(drl__memory_count(b), 0);
	drl_limiter_free(l);
	drl_store_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rows),
		cmocka_unit_test(test_overflow),
		cmocka_unit_test(test_uri_rows),
		cmocka_unit_test(test_huge_uri),
		cmocka_unit_test(test_from_backend),
		cmocka_unit_test(test_store_open_args),
		cmocka_unit_test(test_stats_get),
		cmocka_unit_test(test_error_set),
		cmocka_unit_test(test_clock_not_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
