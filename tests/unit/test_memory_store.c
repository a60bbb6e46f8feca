/* The memory store (backends/memory.c), through its vtable: what is its
 * own (options, caps, max_keys, overflow, wrong kinds, 1 MiB keys, TTL
 * refresh and ttl <= 0, churn, growth). The store contract itself runs as
 * contract_memory (tests/fixtures/store_contract.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/memory.h"
#include "internal.h"
#include "testutil.h"

#define LONG_TTL (INT64_C(60) * 1000000)
/* makes a key longer than the memory store keeps in its table's slot */
#define LONG_PAD                                                               \
	"padding-padding-padding-padding-padding-padding-padding-padding"

/* Open a memory store from `text`, expecting success. */
static drl_backend *open_store(const char *text)
{
	drl__uri u;
	drl_error err = {0};
	drl_backend *b = NULL;
	if (drl__uri_parse(&u, text, &err))
		fail_msg("parse(\"%s\"): %s", text, err.message);
	if (drl__memory_open(&b, &u, &err))
		fail_msg("open(\"%s\"): %s", text, err.message);
	drl__uri_clear(&u);
	assert_non_null(b);
	return b;
}

/* Open `text` expecting DRL_EINVAL with `want` in the message. */
static void open_bad(const char *text, const char *want)
{
	drl__uri u;
	drl_error err = {0};
	drl_backend *b = (drl_backend *)&err; /* must be reset to NULL */
	assert_int_equal(drl__uri_parse(&u, text, &err), 0);
	int rc = drl__memory_open(&b, &u, &err);
	drl__uri_clear(&u);
	if (rc != DRL_EINVAL)
		fail_msg("open(\"%s\") = %d, want DRL_EINVAL", text, rc);
	assert_null(b);
	if (!strstr(err.message, want))
		fail_msg("open(\"%s\"): message \"%s\" lacks \"%s\"", text,
			 err.message, want);
}

/* A key from a C string (without its NUL). */
static drl_bytes K(const char *s)
{
	return (drl_bytes){s, strlen(s)};
}

/* The counter at key, read through get_many. */
static int64_t get1(drl_backend *b, drl_bytes key)
{
	int64_t v = -12345;
	drl_error err = {0};
	if (b->get_many(b, 1, &key, &v, &err))
		fail_msg("get_many: %s", err.message);
	return v;
}

/* incr, expecting success; returns the new value. */
static int64_t incr1(drl_backend *b, drl_bytes key, int64_t delta, int64_t ttl)
{
	int64_t v = -12345;
	drl_error err = {0};
	if (b->incr(b, key, delta, ttl, &v, &err))
		fail_msg("incr: %s", err.message);
	return v;
}

static void test_vtable(void **state)
{
	(void)state;
	drl_backend *b = open_store("memory://");
	assert_int_equal(b->version, DRL_BACKEND_VERSION);
	assert_int_equal(b->caps, DRL_CAP_COUNTER | DRL_CAP_CAS |
					  DRL_CAP_UPDATE | DRL_CAP_INPROC);
	assert_string_equal(b->name, "memory");
	assert_non_null(b->update);
	assert_null(b->eval);
	assert_null(b->now);
	assert_int_equal(drl__memory_count(b), 0);
	b->destroy(b);

	b = open_store("memory://?shards=1&max_keys=0");
	b->destroy(b);
	b = open_store("memory://?shards=1024");
	b->destroy(b);
}

/* int64 overflow either way: DRL_ERANGE in err, value unchanged; reads
 * create nothing. */
static void test_incr_overflow(void **state)
{
	(void)state;
	drl_backend *b = open_store("memory://?shards=4");
	drl_error err = {0};
	assert_int_equal(incr1(b, K("k"), 5, LONG_TTL), 5);
	drl_bytes keys[2] = {K("k"), K("absent")};
	int64_t vals[2];
	assert_int_equal(b->get_many(b, 2, keys, vals, &err), 0);
	assert_int_equal(drl__memory_count(b), 1);

	assert_int_equal(incr1(b, K("big"), INT64_MAX, LONG_TTL), INT64_MAX);
	int64_t v = 1;
	assert_int_equal(b->incr(b, K("big"), 1, LONG_TTL, &v, &err),
			 DRL_ERANGE);
	assert_int_equal(err.code, DRL_ERANGE);
	assert_int_equal(v, 1);
	assert_int_equal(get1(b, K("big")), INT64_MAX);
	assert_int_equal(incr1(b, K("small"), INT64_MIN, LONG_TTL), INT64_MIN);
	assert_int_equal(b->incr(b, K("small"), -1, LONG_TTL, &v, &err),
			 DRL_ERANGE);
	assert_int_equal(get1(b, K("small")), INT64_MIN);
	assert_int_equal(incr1(b, K("small"), INT64_MAX, LONG_TTL), -1);
	b->destroy(b);
}

/* Every failure fills err with its code (the contract allows a store to
 * leave err alone; this one never does). */
static void test_err_filled(void **state)
{
	(void)state;
	drl_backend *b = open_store("memory://");
	drl_error err = {0};
	unsigned char buf[4];
	size_t len = 0;
	uint64_t ver = 0;
	assert_int_equal(b->cas(b, K("s"), "abc", 3, 5, LONG_TTL, &err),
			 DRL_ECONFLICT);
	assert_int_equal(err.code, DRL_ECONFLICT);
	assert_int_equal(b->cas(b, K("s"), "hello", 5, 0, LONG_TTL, &err), 0);
	assert_int_equal(b->load(b, K("s"), buf, 4, &len, &ver, &err),
			 DRL_ERANGE);
	assert_int_equal(err.code, DRL_ERANGE);
	b->destroy(b);
}

static void test_wrong_kind(void **state)
{
	(void)state;
	drl_backend *b = open_store("memory://");
	drl_error err = {0};
	unsigned char buf[16];
	size_t len = 0;
	uint64_t ver = 0;
	int64_t v = 0;

	assert_int_equal(b->cas(b, K("blob"), "abcd", 4, 0, LONG_TTL, &err), 0);
	assert_int_equal(
		b->load(b, K("blob"), buf, sizeof buf, &len, &ver, &err), 0);
	uint64_t v1 = ver;
	assert_int_equal(incr1(b, K("ctr"), 7, LONG_TTL), 7);

	memset(&err, 0, sizeof err);
	assert_int_equal(b->incr(b, K("blob"), 1, LONG_TTL, &v, &err),
			 DRL_ESTORE);
	assert_int_equal(err.code, DRL_ESTORE);
	assert_non_null(strstr(err.message, "wrong kind of value at key"));
	assert_non_null(strstr(err.message, "blob"));
	drl_bytes keys[2] = {K("ctr"), K("blob")};
	int64_t vals[2];
	assert_int_equal(b->get_many(b, 2, keys, vals, &err), DRL_ESTORE);
	assert_non_null(strstr(err.message, "wrong kind"));

	assert_int_equal(
		b->load(b, K("ctr"), buf, sizeof buf, &len, &ver, &err),
		DRL_ESTORE);
	assert_non_null(strstr(err.message, "wrong kind"));
	assert_int_equal(b->cas(b, K("ctr"), "x", 1, 0, LONG_TTL, &err),
			 DRL_ESTORE);
	assert_int_equal(b->cas(b, K("ctr"), "x", 1, 1, LONG_TTL, &err),
			 DRL_ESTORE);

	/* state unchanged */
	assert_int_equal(get1(b, K("ctr")), 7);
	assert_int_equal(
		b->load(b, K("blob"), buf, sizeof buf, &len, &ver, &err), 0);
	assert_int_equal(ver, v1);
	assert_int_equal(len, 4);
	assert_memory_equal(buf, "abcd", 4);
	b->destroy(b);
}

/* An update step that counts its calls and does what it is told. */
typedef struct step {
	int calls;
	int ret;
	const void *blob;
	size_t len;
	int64_t ttl;
} step;

static int step_fn(void *arg, const void *old, size_t oldlen,
		   const void **newblob, size_t *newlen, int64_t *ttl_us)
{
	step *s = arg;
	(void)old;
	(void)oldlen;
	s->calls++;
	if (s->ret == 1) {
		*newblob = s->blob;
		*newlen = s->len;
		*ttl_us = s->ttl;
	}
	return s->ret;
}

/* update, as far as it is the memory store's own: a step that writes
 * nothing keeps the version (an entry's, not a load's token) and creates
 * nothing; a counter is the wrong kind (the step is not called); a TTL
 * <= 0 from the step deletes. What every store promises about update:
 * contract_memory (check_update). */
static void test_update(void **state)
{
	(void)state;
	drl_backend *b = open_store("memory://");
	drl_error err = {0};
	unsigned char buf[64];
	size_t len = 0;
	uint64_t ver = 0;

	step s = {.ret = 0};
	assert_int_equal(b->update(b, K("u"), step_fn, &s, &err), 0);
	assert_int_equal(drl__memory_count(b), 0);
	s = (step){.ret = 1, .blob = "one", .len = 3, .ttl = LONG_TTL};
	assert_int_equal(b->update(b, K("u"), step_fn, &s, &err), 0);
	assert_int_equal(b->load(b, K("u"), buf, sizeof buf, &len, &ver, &err),
			 0);
	uint64_t v1 = ver;
	s = (step){.ret = 0};
	assert_int_equal(b->update(b, K("u"), step_fn, &s, &err), 0);
	assert_int_equal(b->load(b, K("u"), buf, sizeof buf, &len, &ver, &err),
			 0);
	assert_int_equal(ver, v1);
	s = (step){.ret = DRL_ECORRUPT};
	assert_int_equal(b->update(b, K("u"), step_fn, &s, &err), DRL_ECORRUPT);
	assert_int_equal(b->load(b, K("u"), buf, sizeof buf, &len, &ver, &err),
			 0);
	assert_int_equal(ver, v1);

	/* update on a counter: wrong kind, fn not called */
	assert_int_equal(incr1(b, K("ctr"), 1, LONG_TTL), 1);
	s = (step){.ret = 1, .blob = "x", .len = 1, .ttl = LONG_TTL};
	assert_int_equal(b->update(b, K("ctr"), step_fn, &s, &err), DRL_ESTORE);
	assert_int_equal(s.calls, 0);
	assert_int_equal(get1(b, K("ctr")), 1);

	/* a TTL <= 0 from fn deletes */
	s = (step){.ret = 1, .blob = "x", .len = 1, .ttl = 0};
	assert_int_equal(b->update(b, K("u"), step_fn, &s, &err), 0);
	assert_int_equal(b->load(b, K("u"), buf, sizeof buf, &len, &ver, &err),
			 0);
	assert_int_equal(ver, 0);
	assert_int_equal(drl__memory_count(b), 1);
	b->destroy(b);
}

/* Keys past the contract's few hundred bytes (1 MiB), and a message
 * quoting a binary key escapes it. Binary keys up to 300 bytes:
 * contract_memory (check_binary_keys). */
static void test_binary_keys(void **state)
{
	(void)state;
	drl_backend *b = open_store("memory://");
	drl_error err = {0};

	/* A 1 MiB key, and one differing only in its last byte. */
	size_t big = 1u << 20;
	char *k1 = malloc(big), *k2 = malloc(big);
	assert_non_null(k1);
	assert_non_null(k2);
	memset(k1, 'x', big);
	memcpy(k2, k1, big);
	k2[big - 1] = 'y';
	assert_int_equal(incr1(b, (drl_bytes){k1, big}, 10, LONG_TTL), 10);
	assert_int_equal(incr1(b, (drl_bytes){k2, big}, 20, LONG_TTL), 20);
	assert_int_equal(get1(b, (drl_bytes){k1, big}), 10);
	assert_int_equal(get1(b, (drl_bytes){k2, big - 1}), 0);
	free(k1);
	free(k2);

	assert_int_equal(b->cas(b, K("bl\nob"), "z", 1, 0, LONG_TTL, &err), 0);
	int64_t v;
	assert_int_equal(b->incr(b, K("bl\nob"), 1, LONG_TTL, &v, &err),
			 DRL_ESTORE);
	assert_non_null(strstr(err.message, "bl\\x0aob"));
	b->destroy(b);
}

/* TTLs as the memory store keeps them: a write sets the TTL anew, ttl <= 0
 * computes the result and deletes, a huge TTL saturates. Expiry itself
 * (and no ABA after it): contract_memory (check_ttl). */
static void test_ttl(void **state)
{
	(void)state;
	drl_backend *b = open_store("memory://");
	drl_error err = {0};
	unsigned char buf[8];
	size_t len = 0;
	uint64_t ver = 0;

	assert_int_equal(incr1(b, K("long"), 4, LONG_TTL), 4);
	/* A write sets the TTL anew: "refresh" outlives its first 30 ms. */
	assert_int_equal(incr1(b, K("refresh"), 1, 30000), 1);
	assert_int_equal(incr1(b, K("refresh"), 1, LONG_TTL), 2);
	tu_sleep_ms(80);
	assert_int_equal(get1(b, K("refresh")), 2);

	/* ttl <= 0: the result is computed, then the key is gone */
	assert_int_equal(incr1(b, K("zero"), 5, 0), 5);
	assert_int_equal(get1(b, K("zero")), 0);
	assert_int_equal(incr1(b, K("long"), 1, -1), 5);
	assert_int_equal(get1(b, K("long")), 0);
	assert_int_equal(b->cas(b, K("zb"), "ab", 2, 0, 0, &err), 0);
	assert_int_equal(b->load(b, K("zb"), buf, sizeof buf, &len, &ver, &err),
			 0);
	assert_int_equal(ver, 0);

	/* a huge TTL saturates instead of overflowing */
	assert_int_equal(incr1(b, K("forever"), 1, INT64_MAX), 1);
	assert_int_equal(get1(b, K("forever")), 1);
	b->destroy(b);
}

static void test_max_keys(void **state)
{
	(void)state;
	drl_backend *b = open_store("memory://?max_keys=3&shards=4");
	drl_error err = {0};
	int64_t v = 0;
	assert_int_equal(incr1(b, K("a"), 1, LONG_TTL), 1);
	assert_int_equal(incr1(b, K("b"), 1, LONG_TTL), 1);
	/* c expires in 1 s: long after the checks of a full store below
	 * (20 ms was not, under valgrind on a busy machine), then it is
	 * awaited */
	assert_int_equal(incr1(b, K("c"), 1, 1000000), 1);
	/* + 50 ms: the store's clock is CLOCK_MONOTONIC_COARSE */
	int64_t c_gone = tu_mono_ms() + 1050;

	assert_int_equal(b->incr(b, K("d"), 1, LONG_TTL, &v, &err), DRL_ESTORE);
	assert_string_equal(err.message, "memory store full (max_keys=3)");
	assert_int_equal(b->cas(b, K("d"), "x", 1, 0, LONG_TTL, &err),
			 DRL_ESTORE);
	assert_non_null(strstr(err.message, "max_keys=3"));
	step s = {.ret = 1, .blob = "x", .len = 1, .ttl = LONG_TTL};
	assert_int_equal(b->update(b, K("d"), step_fn, &s, &err), DRL_ESTORE);
	assert_non_null(strstr(err.message, "max_keys=3"));
	/* nothing live was evicted; existing keys still take writes */
	assert_int_equal(incr1(b, K("a"), 1, LONG_TTL), 2);
	assert_int_equal(get1(b, K("b")), 1);
	assert_int_equal(get1(b, K("c")), 1);
	/* a write that stores nothing needs no room */
	assert_int_equal(incr1(b, K("d"), 9, 0), 9);
	assert_int_equal(drl__memory_count(b), 3);

	/* once c expires, its room is reclaimed without anyone reading it */
	while (tu_mono_ms() <= c_gone)
		tu_sleep_ms(10);
	assert_int_equal(incr1(b, K("d"), 1, LONG_TTL), 1);
	assert_int_equal(drl__memory_count(b), 3);
	assert_int_equal(b->incr(b, K("e"), 1, LONG_TTL, &v, &err), DRL_ESTORE);
	/* deleting (ttl <= 0) frees room too */
	assert_int_equal(incr1(b, K("a"), 0, 0), 2);
	assert_int_equal(b->cas(b, K("e"), "x", 1, 0, LONG_TTL, &err), 0);
	assert_int_equal(drl__memory_count(b), 3);
	b->destroy(b);
}

/* group_max_keys: keys sharing their bytes before the first '{' (one
 * limit's) are bounded as a group, so one limit's keys cannot take all of
 * max_keys from the others; nothing live is evicted; a freed key gives its
 * room back; many groups come and go (the table grows, and shrinks to
 * nothing: valgrind sees no group left). */
static void test_group_max_keys(void **state)
{
	(void)state;
	drl_backend *b =
		open_store("memory://?max_keys=100&group_max_keys=3&shards=4");
	drl_error err = {0};
	int64_t v = 0;
	assert_int_equal(incr1(b, K("fw:5:1{a}"), 1, LONG_TTL), 1);
	assert_int_equal(incr1(b, K("fw:5:1{b}"), 1, LONG_TTL), 1);
	assert_int_equal(b->cas(b, K("fw:5:1{c}"), "x", 1, 0, LONG_TTL, &err),
			 0);
	/* a 4th key of group "fw:5:1" is refused, by every method */
	assert_int_equal(b->incr(b, K("fw:5:1{d}"), 1, LONG_TTL, &v, &err),
			 DRL_ESTORE);
	assert_string_equal(err.message, "memory store full for this key's "
					 "group (group_max_keys=3)");
	assert_int_equal(b->cas(b, K("fw:5:1{d}"), "x", 1, 0, LONG_TTL, &err),
			 DRL_ESTORE);
	step s = {.ret = 1, .blob = "x", .len = 1, .ttl = LONG_TTL};
	assert_int_equal(b->update(b, K("fw:5:1{d}"), step_fn, &s, &err),
			 DRL_ESTORE);
	assert_non_null(strstr(err.message, "group_max_keys=3"));
	/* its keys still take writes; other groups still get new keys */
	assert_int_equal(incr1(b, K("fw:5:1{a}"), 1, LONG_TTL), 2);
	assert_int_equal(incr1(b, K("fw:5:2{a}"), 1, LONG_TTL), 1);
	assert_int_equal(incr1(b, K("p:fw:5:1{a}"), 1, LONG_TTL), 1);
	assert_int_equal(incr1(b, K("{a}"), 1, LONG_TTL), 1);
	assert_int_equal(incr1(b, K("nobrace"), 1, LONG_TTL), 1);
	assert_int_equal(drl__memory_count(b), 7);
	/* a key deleted (ttl <= 0, or del) gives its room back */
	assert_int_equal(incr1(b, K("fw:5:1{a}"), 0, 0), 2);
	assert_int_equal(incr1(b, K("fw:5:1{d}"), 1, LONG_TTL), 1);
	assert_int_equal(b->incr(b, K("fw:5:1{e}"), 1, LONG_TTL, &v, &err),
			 DRL_ESTORE);
	drl_bytes gone[] = {K("fw:5:1{b}"), K("fw:5:1{c}")};
	assert_int_equal(b->del(b, 2, gone, &err), 0);
	assert_int_equal(incr1(b, K("fw:5:1{e}"), 1, LONG_TTL), 1);
	assert_int_equal(incr1(b, K("fw:5:1{f}"), 1, LONG_TTL), 1);

	/* 90 more groups, then all deleted: the stripes' tables grow past
	 * their first buckets and give every group back */
	char key[32];
	for (int pass = 0; pass < 2; pass++)
		for (int g = 0; g < 90; g++) {
			int len = snprintf(key, sizeof key, "g%d:{k}", g);
			drl_bytes kb = {key, (size_t)len};
			if (pass == 0)
				assert_int_equal(incr1(b, kb, 1, LONG_TTL), 1);
			else
				assert_int_equal(b->del(b, 1, &kb, &err), 0);
		}
	assert_int_equal(drl__memory_count(b), 7);
	b->destroy(b);

	/* many groups: 2,000 of one key each fit, and are all kept */
	b = open_store("memory://?group_max_keys=1");
	for (int g = 0; g < 2000; g++) {
		int len = snprintf(key, sizeof key, "g%d:{k}", g);
		drl_bytes kb = {key, (size_t)len};
		assert_int_equal(incr1(b, kb, 1, LONG_TTL), 1);
		len = snprintf(key, sizeof key, "g%d:{j}", g);
		kb.len = (size_t)len;
		assert_int_equal(b->incr(b, kb, 1, LONG_TTL, &v, &err),
				 DRL_ESTORE);
	}
	assert_int_equal(drl__memory_count(b), 2000);
	b->destroy(b);
}

static void test_bad_options(void **state)
{
	(void)state;
	open_bad("memory://?shards=3", "shards");
	open_bad("memory://?shards=3", "power of two");
	open_bad("memory://?shards=0", "shards=\"0\"");
	open_bad("memory://?shards=2048", "[1, 1024]");
	open_bad("memory://?shards=abc", "shards=\"abc\"");
	open_bad("memory://?max_keys=-1", "max_keys");
	open_bad("memory://?group_max_keys=-1", "group_max_keys");
	open_bad("memory://?group_max_keys=x", "group_max_keys");
	open_bad("memory://?shards=16&bogus=1", "\"bogus\"");
	open_bad("memory://localhost", "host");
	open_bad("memory://localhost", "localhost");
	open_bad("memory:///tmp/x", "path");
	open_bad("memory:///", "path");

	drl__uri u;
	drl_error err = {0};
	drl_backend *b = NULL;
	assert_int_equal(drl__uri_parse(&u, "memory://u:s3cr3t@", &err), 0);
	assert_int_equal(drl__memory_open(&b, &u, &err), DRL_EINVAL);
	assert_non_null(strstr(err.message, "user"));
	assert_null(strstr(err.message, "s3cr3t"));
	drl__uri_clear(&u);
}

/* ---- threads ------------------------------------------------------------ */

#define NTHREADS 8

typedef struct worker {
	drl_backend *b;
	int iters;
	int id;
	int failures;
} worker;

/* Run fn on NTHREADS threads (one worker each), join, expect no failure. */
static void run_workers(void *(*fn)(void *), worker *w)
{
	pthread_t t[NTHREADS];
	for (int i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, fn, &w[i]), 0);
	for (int i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	for (int i = 0; i < NTHREADS; i++)
		assert_int_equal(w[i].failures, 0);
}

/* Many short-lived distinct keys per thread (sweeps, resizes) next to
 * shared long-lived counters that must stay exact. */
static void *churn_worker(void *arg)
{
	worker *w = arg;
	char key[32];
	for (int i = 0; i < w->iters; i++) {
		int64_t v;
		int n = snprintf(key, sizeof key, "t%d:%d", w->id, i);
		if (w->b->incr(w->b, (drl_bytes){key, (size_t)n}, 1, 1000, &v,
			       NULL))
			w->failures++;
		n = snprintf(key, sizeof key, "shared:%d", i % 16);
		if (w->b->incr(w->b, (drl_bytes){key, (size_t)n}, 1, LONG_TTL,
			       &v, NULL))
			w->failures++;
	}
	return NULL;
}

static void test_threads_churn(void **state)
{
	(void)state;
	drl_backend *b = open_store("memory://?shards=8");
	worker w[NTHREADS];
	for (int i = 0; i < NTHREADS; i++)
		w[i] = (worker){b, 16000, i, 0};
	run_workers(churn_worker, w);
	int64_t total = 0;
	for (int i = 0; i < 16; i++) {
		char key[32];
		int n = snprintf(key, sizeof key, "shared:%d", i);
		total += get1(b, (drl_bytes){key, (size_t)n});
	}
	assert_int_equal(total, NTHREADS * 16000);
	b->destroy(b);
}

/* group_max_keys under threads: NTHREADS threads each try to create 300
 * keys of one group of 500 and 300 short-lived keys of groups of their
 * own: exactly 500 of the shared group's are created (the count is exact
 * under contention), and every one of the others is. */
static void *group_worker(void *arg)
{
	worker *w = arg;
	char key[48];
	for (int i = 0; i < 300; i++) {
		int64_t v;
		int n = snprintf(key, sizeof key, "shared:{%d:%d}", w->id, i);
		int rc = w->b->incr(w->b, (drl_bytes){key, (size_t)n}, 1,
				    LONG_TTL, &v, NULL);
		if (rc == 0)
			w->iters++; /* created */
		else if (rc != DRL_ESTORE)
			w->failures++;
		n = snprintf(key, sizeof key, "own%d:%d:{k}", w->id, i);
		if (w->b->incr(w->b, (drl_bytes){key, (size_t)n}, 1, 1000, &v,
			       NULL))
			w->failures++;
	}
	return NULL;
}

static void test_threads_groups(void **state)
{
	(void)state;
	drl_backend *b = open_store("memory://?shards=8&group_max_keys=500");
	worker w[NTHREADS];
	for (int i = 0; i < NTHREADS; i++)
		w[i] = (worker){b, 0, i, 0};
	run_workers(group_worker, w);
	int created = 0;
	for (int i = 0; i < NTHREADS; i++)
		created += w[i].iters;
	assert_int_equal(created, 500);
	b->destroy(b);
}

/* Keys expiring and created again among live ones, in one shard's table
 * (the sweep frees expired slots and moves the entries after them): every
 * round creates the same NSHORT short-lived counters again, each reading
 * exactly 1 (the last round's expired, none revived), and counts every
 * live counter (short and long keys) and blob once more, each exactly;
 * the table grows through it and nothing is lost or counted twice. */
static void test_churn_exact(void **state)
{
	(void)state;
	enum { NLIVE = 2800, NBLOB = 500, NSHORT = 20000, ROUNDS = 6 };
	drl_backend *b = open_store("memory://?shards=1");
	drl_error err = {0};
	char key[128];
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < NSHORT; i++) {
			int n = snprintf(key, sizeof key, "short:%d", i);
			if (incr1(b, (drl_bytes){key, (size_t)n}, 1, 2000) != 1)
				fail_msg("round %d: %s not fresh", r, key);
			if (i % 7 != 0 || i / 7 >= NLIVE)
				continue;
			/* a third of them longer than a slot's inline key */
			n = snprintf(key, sizeof key, "live:%d:%s", i / 7,
				     i % 3 ? "" : LONG_PAD);
			if (incr1(b, (drl_bytes){key, (size_t)n}, 1,
				  LONG_TTL) != r + 1)
				fail_msg("round %d: %s miscounted", r, key);
		}
		for (int i = 0; i < NBLOB; i++) {
			int n = snprintf(key, sizeof key, "blob:%d", i);
			drl_bytes k = {key, (size_t)n};
			unsigned char buf[8];
			size_t len = 0;
			uint64_t ver = 0;
			assert_int_equal(b->load(b, k, buf, sizeof buf, &len,
						 &ver, &err),
					 0);
			if (len != (r ? 1u : 0u) ||
			    (r && buf[0] != 'a' + r - 1))
				fail_msg("round %d: %s holds %zu bytes", r, key,
					 len);
			char v = (char)('a' + r);
			assert_int_equal(
				b->cas(b, k, &v, 1, ver, LONG_TTL, &err), 0);
		}
		tu_sleep_ms(30); /* every short key expires */
	}
	for (int i = 0; i < NLIVE; i++) {
		int n = snprintf(key, sizeof key, "live:%d:%s", i,
				 (i * 7) % 3 ? "" : LONG_PAD);
		if (get1(b, (drl_bytes){key, (size_t)n}) != ROUNDS)
			fail_msg("%s: not %d", key, ROUNDS);
	}
	for (int i = 0; i < NSHORT; i += 97) {
		int n = snprintf(key, sizeof key, "short:%d", i);
		assert_int_equal(get1(b, (drl_bytes){key, (size_t)n}), 0);
	}
	b->destroy(b);
}

/* ---- memory reclamation ----------------------------------------------- */

/* Distinct short-lived keys must not make the store grow without bound:
 * expired entries are reclaimed by writes to other keys, without reads. */
static void test_growth(void **state)
{
	(void)state;
	drl_backend *b = open_store("memory://");
	char key[32];
	const int first = 1000000, second = 200000;
	for (int i = 0; i < first; i++) {
		int n = snprintf(key, sizeof key, "old:%d", i);
		incr1(b, (drl_bytes){key, (size_t)n}, 1, 50000);
	}
	tu_sleep_ms(80);
	for (int i = 0; i < second; i++) {
		int n = snprintf(key, sizeof key, "new:%d", i);
		incr1(b, (drl_bytes){key, (size_t)n}, 1, LONG_TTL);
	}
	size_t held = drl__memory_count(b);
	print_message("entries held after %d + %d keys: %zu\n", first, second,
		      held);
	assert_true(held >= (size_t)second); /* live keys are all kept */
	assert_true(held < (size_t)first / 2);
	b->destroy(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vtable),
		cmocka_unit_test(test_incr_overflow),
		cmocka_unit_test(test_err_filled),
		cmocka_unit_test(test_wrong_kind),
		cmocka_unit_test(test_update),
		cmocka_unit_test(test_binary_keys),
		cmocka_unit_test(test_ttl),
		cmocka_unit_test(test_max_keys),
		cmocka_unit_test(test_group_max_keys),
		cmocka_unit_test(test_bad_options),
		cmocka_unit_test(test_threads_churn),
		cmocka_unit_test(test_threads_groups),
		cmocka_unit_test(test_churn_exact),
		cmocka_unit_test(test_growth),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
