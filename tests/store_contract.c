/*
 * The store conformance suite (store_contract.h): one cmocka test per
 * promise of <drl/sys/backend.h>, run on a fresh backend of the target.
 *
 * Only the public headers, cmocka, libc and pthreads (and the header-only
 * tests/testutil.h, public API too): no internal.h, no drl__ symbol, so a
 * store built outside this tree runs it unchanged
 * (store_contract_lib in tests/meson.build is built without the library's
 * internals to prove it). Where stores legitimately differ, the target
 * says so (ttl_min_us, may_evict, threads_rounds); no check names a store.
 * Calls keep to the header's thread rules: every cas() right after a load()
 * of the same key by the same thread.
 */
/* POSIX clocks, nanosleep, fork and threads, for a build with -std=c11
 * (-pedantic too) and nothing else defined: docs/stores.md. */
#if !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include "store_contract.h"

#include "hot_key.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LONG_TTL (INT64_C(600) * SEC) /* outlives every check */
#define HOUR (INT64_C(3600) * SEC)
#define DAY (INT64_C(86400) * SEC)

/* ---- per-check fixture ---------------------------------------------------- */

/* What each check gets as its state: the target and a fresh backend. */
typedef struct ctx {
	const store_contract_target *t;
	drl_backend *b;
} ctx;

/* Open a fresh backend of t, failing the check when it cannot. */
static drl_backend *open_fresh(const store_contract_target *t)
{
	drl_backend *b = NULL;
	drl_error err = {0};
	int rc = t->open(t->arg, &b, &err);
	if (rc)
		fail_msg("%s: open: %s (%s)", t->name, err.message,
			 drl_err_name(rc));
	if (b == NULL)
		fail_msg("%s: open returned no backend", t->name);
	return b;
}

static int setup(void **state)
{
	ctx *c = calloc(1, sizeof *c);
	if (c == NULL)
		return -1;
	c->t = *state;
	drl_error err = {0};
	int rc = c->t->open(c->t->arg, &c->b, &err);
	if (rc || c->b == NULL) {
		fprintf(stderr, "%s: open: %s (%s)\n", c->t->name, err.message,
			drl_err_name(rc));
		free(c);
		return -1;
	}
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	ctx *c = *state;
	if (c->b)
		c->b->destroy(c->b);
	free(c);
	return 0;
}

static int64_t ttl_min(const store_contract_target *t)
{
	return t->ttl_min_us > 0 ? t->ttl_min_us : 100 * INT64_C(1000);
}

static int rounds(const store_contract_target *t)
{
	return t->threads_rounds > 0 ? t->threads_rounds : 1;
}

/* ---- helpers: each fails the check on an unexpected code ------------------ */

static drl_bytes K(const char *s)
{
	return (drl_bytes){s, strlen(s)};
}

/* rc must be `want`; a failure may fill err, and then with its code. */
static void expect_rc(const char *what, int rc, int want, const drl_error *e)
{
	if (rc != want)
		fail_msg("%s: got %s, want %s: %s", what, drl_err_name(rc),
			 drl_err_name(want), e ? e->message : "");
	if (rc != 0 && e != NULL && e->code != 0 && e->code != rc)
		fail_msg("%s: returned %s, err says %s", what, drl_err_name(rc),
			 drl_err_name(e->code));
}

static int64_t incr_ttl(drl_backend *b, drl_bytes k, int64_t d, int64_t ttl)
{
	drl_error e = {0};
	int64_t v = INT64_MIN;
	expect_rc("incr", b->incr(b, k, d, ttl, &v, &e), 0, &e);
	return v;
}

static int64_t incr_ok(drl_backend *b, drl_bytes k, int64_t d)
{
	return incr_ttl(b, k, d, LONG_TTL);
}

static int64_t get_ok(drl_backend *b, drl_bytes k)
{
	drl_error e = {0};
	int64_t v = INT64_MIN;
	expect_rc("get_many", b->get_many(b, 1, &k, &v, &e), 0, &e);
	return v;
}

/* load that must succeed; returns the version. */
static uint64_t load_ok(drl_backend *b, drl_bytes k, void *buf, size_t cap,
			size_t *len)
{
	drl_error e = {0};
	uint64_t v = UINT64_C(0xdeadbeef);
	*len = (size_t)-1;
	expect_rc("load", b->load(b, k, buf, cap, len, &v, &e), 0, &e);
	if (v == 0 && *len != 0)
		fail_msg("load: version 0 (absent) with len %zu", *len);
	return v;
}

/* cas()'s version argument meaning "the version the load just read". */
#define CURRENT UINT64_MAX

/* cas of k as a thread's optimistic step does it: right after a load of
 * the same key (the store may tie per-thread state to that pair, and a
 * version may be a token of that load), with the version that load read
 * (CURRENT) or the one given: 0, stale or made up. */
static int cas_rc(drl_backend *b, drl_bytes k, const void *blob, size_t len,
		  uint64_t ver, int64_t ttl)
{
	unsigned char buf[4096 + 16];
	size_t got;
	uint64_t loaded = load_ok(b, k, buf, sizeof buf, &got);
	if (ver == CURRENT)
		ver = loaded;
	drl_error e = {0};
	int rc = b->cas(b, k, blob, len, ver, ttl, &e);
	if (rc != 0 && rc != DRL_ECONFLICT)
		fail_msg("cas: %s: %s", drl_err_name(rc), e.message);
	expect_rc("cas", rc, rc, &e);
	return rc;
}

/* Fail unless the blob at k is exactly blob[0..len); returns its version. */
static uint64_t expect_blob(drl_backend *b, drl_bytes k, const void *blob,
			    size_t len)
{
	unsigned char buf[4096 + 16];
	size_t got;
	uint64_t v = load_ok(b, k, buf, sizeof buf, &got);
	if (v == 0)
		fail_msg("blob of %zu bytes expected, key absent", len);
	assert_int_equal(got, len);
	if (len)
		assert_memory_equal(buf, blob, len);
	return v;
}

static void put64(unsigned char *p, int64_t v)
{
	uint64_t u = (uint64_t)v;
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(u >> (8 * i));
}

static int64_t get64(const unsigned char *p)
{
	uint64_t u = 0;
	for (int i = 0; i < 8; i++)
		u |= (uint64_t)p[i] << (8 * i);
	return (int64_t)u;
}

/* ---- vtable --------------------------------------------------------------- */

static int destroy_calls;

static void spy_destroy(drl_backend *b)
{
	(void)b;
	destroy_calls++;
}

/* drl_store_from_backend refuses `copy` (DRL_EINVAL), leaves it untouched
 * and never calls its destroy. */
static void expect_refused(const char *what, drl_backend copy)
{
	drl_backend before = copy;
	drl_store *s = NULL;
	drl_error e = {0};
	destroy_calls = 0;
	int rc = drl_store_from_backend(&s, &copy, &e);
	if (rc != DRL_EINVAL)
		fail_msg("drl_store_from_backend(%s): %s, want DRL_EINVAL",
			 what, drl_err_name(rc));
	assert_int_equal(destroy_calls, 0);
	assert_memory_equal(&copy, &before, sizeof copy);
	if (s != NULL) /* never reached unless the core broke its promise */
		fail_msg("%s: a store came back with DRL_EINVAL", what);
}

/* Version, required methods, each capability with its method; the core
 * accepts the backend (and a limiter on it decides), and refuses a copy
 * written for a newer interface or lacking a required method. */
static void check_vtable(void **state)
{
	ctx *c = *state;
	drl_backend *b = c->b;
	if (b->version < 1 || b->version > DRL_BACKEND_VERSION)
		fail_msg("version %d outside [1, %d]", b->version,
			 DRL_BACKEND_VERSION);
	assert_non_null(b->name);
	assert_true(b->name[0] != '\0');
	assert_true((b->caps & DRL_CAP_COUNTER) != 0);
	assert_true((b->caps & DRL_CAP_CAS) != 0);
	assert_non_null(b->destroy);
	assert_non_null(b->incr);
	assert_non_null(b->get_many);
	assert_non_null(b->load);
	assert_non_null(b->cas);
	if (b->caps & DRL_CAP_UPDATE)
		assert_non_null(b->update);
	if (b->caps & DRL_CAP_SCRIPT)
		assert_non_null(b->eval);
	if (b->caps & DRL_CAP_CLOCK)
		assert_non_null(b->now);
	if (b->caps & DRL_CAP_BATCH)
		assert_true((b->caps & DRL_CAP_SCRIPT) != 0);
	if (b->version < 3)
		assert_true((b->caps & DRL_CAP_DECLARED_KEYS) == 0);
	if (b->version >= 5 && (b->caps & DRL_CAP_EVAL_START)) {
		assert_non_null(b->eval_start);
		assert_true((b->caps & DRL_CAP_SCRIPT) != 0);
	}
	if (b->version >= 6 && (b->caps & DRL_CAP_ADD_READ))
		assert_non_null(b->add_read);
	if (b->version >= 5 && b->version <= 7)
		assert_true(b->eval_start == NULL &&
			    (b->version < 6 || b->add_read_start == NULL) &&
			    (b->version < 7 ||
			     (b->caps & (DRL_CAP_CHANNEL |
					 DRL_CAP_COUNTER_GROUPS)) == 0));
	if (b->version >= 8 && (b->caps & DRL_CAP_CHANNEL)) {
		assert_true((b->caps & DRL_CAP_EVAL_START) != 0);
		assert_non_null(b->chan_open);
		assert_non_null(b->chan_fd);
		assert_non_null(b->chan_process);
		assert_non_null(b->chan_deadline);
		assert_non_null(b->chan_close);
	}
	unsigned known = DRL_CAP_COUNTER | DRL_CAP_CAS | DRL_CAP_UPDATE |
			 DRL_CAP_SCRIPT | DRL_CAP_CLOCK | DRL_CAP_BATCH |
			 DRL_CAP_DECLARED_KEYS | DRL_CAP_EVAL_START |
			 DRL_CAP_ADD_READ | DRL_CAP_INPROC | DRL_CAP_CHANNEL |
			 DRL_CAP_COUNTER_GROUPS;
	assert_int_equal(b->caps & ~known, 0);
	if (b->version >= 8 && (b->caps & DRL_CAP_COUNTER_GROUPS)) {
		assert_non_null(b->trim);
		if (b->add_read_start)
			assert_non_null(b->trim_start);
	}

	/* Refused copies: newer than the library, a required method gone. */
	drl_backend copy = *b;
	copy.destroy = spy_destroy;
	copy.version = DRL_BACKEND_VERSION + 1;
	expect_refused("version + 1", copy);
	static const char *const names[] = {"incr", "get_many", "load", "cas",
					    "destroy"};
	for (int i = 0; i < 5; i++) {
		copy = *b;
		copy.destroy = spy_destroy;
		switch (i) {
		case 0:
			copy.incr = NULL;
			break;
		case 1:
			copy.get_many = NULL;
			break;
		case 2:
			copy.load = NULL;
			break;
		case 3:
			copy.cas = NULL;
			break;
		default:
			copy.destroy = NULL;
			break;
		}
		expect_refused(names[i], copy);
	}
	/* A version 5 store claiming to start calls without eval_start. */
	copy = *b;
	copy.destroy = spy_destroy;
	copy.version = 5;
	copy.caps |= DRL_CAP_EVAL_START | DRL_CAP_SCRIPT;
	copy.eval = copy.eval ? copy.eval : b->eval;
	copy.eval_start = NULL;
	if (copy.eval)
		expect_refused("eval_start", copy);

	/* A version 6 store claiming add_read without it. */
	copy = *b;
	copy.destroy = spy_destroy;
	copy.version = 6;
	copy.caps |= DRL_CAP_ADD_READ;
	copy.add_read = NULL;
	expect_refused("add_read", copy);

	/* A version 8 store claiming counter groups without trim. */
	copy = *b;
	copy.destroy = spy_destroy;
	copy.version = 8;
	copy.caps |= DRL_CAP_COUNTER_GROUPS;
	copy.trim = NULL;
	expect_refused("trim", copy);

	/* A store written for 5 to 7 that starts calls: its started slots
	 * have version 7's signatures and places (include/drl/sys/
	 * backend.h, DRL_BACKEND_VERSION 8). */
	copy = *b;
	copy.destroy = spy_destroy;
	copy.version = 7;
	copy.caps |= DRL_CAP_CHANNEL;
	expect_refused("version 7 with channels", copy);
	if (b->eval_start) {
		copy = *b;
		copy.destroy = spy_destroy;
		copy.version = 5;
		expect_refused("version 5 with eval_start", copy);
	}

	/* The backend itself is accepted; the store owns it from then on. */
	drl_store *s = NULL;
	drl_error e = {0};
	drl_backend *own = open_fresh(c->t);
	int rc = drl_store_from_backend(&s, own, &e);
	expect_rc("drl_store_from_backend", rc, 0, &e);
	drl_limiter *l = NULL;
	expect_rc("drl_limiter_new",
		  drl_limiter_new(&l, s, "fixed_window:3/1m", "vt:", &e), 0,
		  &e);
	int allowed = 0;
	for (int i = 0; i < 5; i++) {
		drl_result r;
		expect_rc("drl_allow_at",
			  drl_allow_at(l, "u", 1, 1, INT64_C(1700000000000000),
				       &r, &e),
			  0, &e);
		allowed += r.allowed;
	}
	assert_int_equal(allowed, 3);
	drl_limiter_free(l);
	drl_store_free(s); /* destroys `own` */
}

/* ---- counters ------------------------------------------------------------- */

/* incr: absent counts 0, positive, zero and negative deltas, the new value
 * returned; values up to a few times DRL_LIMIT_MAX are exact. */
static void check_incr(void **state)
{
	drl_backend *b = ((ctx *)*state)->b;
	assert_int_equal(get_ok(b, K("c")), 0);
	assert_int_equal(incr_ok(b, K("c"), 5), 5);
	assert_int_equal(incr_ok(b, K("c"), 7), 12);
	assert_int_equal(incr_ok(b, K("c"), 0), 12);
	assert_int_equal(incr_ok(b, K("c"), -2), 10);
	assert_int_equal(get_ok(b, K("c")), 10);
	assert_int_equal(incr_ok(b, K("c"), -15), -5); /* below zero */
	assert_int_equal(get_ok(b, K("c")), -5);
	assert_int_equal(incr_ok(b, K("c"), 6), 1);
	assert_int_equal(incr_ok(b, K("neg"), -3), -3); /* absent, negative */
	assert_int_equal(incr_ok(b, K("neg"), 4), 1);
	assert_int_equal(incr_ok(b, K("zero"), 0), 0); /* absent, zero */
	assert_int_equal(get_ok(b, K("zero")), 0);
	assert_int_equal(incr_ok(b, K("big"), DRL_LIMIT_MAX), DRL_LIMIT_MAX);
	assert_int_equal(incr_ok(b, K("big"), DRL_LIMIT_MAX),
			 2 * DRL_LIMIT_MAX);
	assert_int_equal(incr_ok(b, K("big"), -3 * DRL_LIMIT_MAX),
			 -DRL_LIMIT_MAX);
	assert_int_equal(get_ok(b, K("big")), -DRL_LIMIT_MAX);
	/* the other keys were not touched */
	assert_int_equal(get_ok(b, K("c")), 1);
	assert_int_equal(get_ok(b, K("neg")), 1);
}

/* get_many: absent keys read 0, n = 0 reads nothing, n = 1 and n = 64 of
 * present and absent keys (and a key asked twice), every value in the
 * order asked. */
static void check_get_many(void **state)
{
	drl_backend *b = ((ctx *)*state)->b;
	enum { N = 64 };
	char names[N][16];
	drl_bytes keys[N];
	int64_t vals[N];
	drl_error e = {0};

	expect_rc("get_many n = 0", b->get_many(b, 0, NULL, NULL, &e), 0, &e);
	vals[0] = 99;
	expect_rc("get_many",
		  b->get_many(b, 1, (drl_bytes[]){K("none")}, vals, &e), 0, &e);
	assert_int_equal(vals[0], 0);
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof names[i], "g%d", i);
		keys[i] = K(names[i]);
		if (i % 3 != 0)
			assert_int_equal(incr_ok(b, keys[i], i - 20), i - 20);
	}
	vals[0] = 99;
	expect_rc("get_many", b->get_many(b, 1, &keys[1], vals, &e), 0, &e);
	assert_int_equal(vals[0], -19);
	for (int i = 0; i < N; i++)
		vals[i] = INT64_C(0x5555555555);
	expect_rc("get_many", b->get_many(b, N, keys, vals, &e), 0, &e);
	for (int i = 0; i < N; i++)
		if (vals[i] != (i % 3 != 0 ? i - 20 : 0))
			fail_msg("get_many[%d] (%s) = %" PRId64 ", want %d", i,
				 names[i], vals[i], i % 3 != 0 ? i - 20 : 0);
	/* a key twice, absent keys in between */
	drl_bytes few[5] = {keys[1], keys[3], keys[1], K("nope"), keys[2]};
	expect_rc("get_many", b->get_many(b, 5, few, vals, &e), 0, &e);
	assert_int_equal(vals[0], -19);
	assert_int_equal(vals[1], 0);
	assert_int_equal(vals[2], -19);
	assert_int_equal(vals[3], 0);
	assert_int_equal(vals[4], -18);
	/* reading created nothing: an absent key still counts from 0 */
	assert_int_equal(incr_ok(b, K("nope"), 2), 2);
}

/* ---- add_read (version 6) ------------------------------------------------ */

/* What add_read_start hands back, waited for with a generous deadline. */
typedef struct added {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int calls, rc;
	size_t n;
	int64_t v[8];
} added;

static void added_cb(void *arg, int rc, const int64_t *out, size_t nret,
		     const drl_error *err)
{
	added *a = arg;
	(void)err;
	pthread_mutex_lock(&a->mu);
	a->rc = rc;
	a->n = nret;
	for (size_t i = 0; rc == 0 && i < nret && i < 8; i++)
		a->v[i] = out[i];
	a->calls++;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
}

/* add_read, or add_read_start waited for when `started`: 0 and values. */
static int add_read_call(drl_backend *b, bool started, size_t n,
			 const drl_bytes *keys, int64_t delta, int64_t *v)
{
	drl_error e = {0};
	if (!started)
		return b->add_read(b, n, keys, delta, LONG_TTL, v, &e);
	added a = {.mu = PTHREAD_MUTEX_INITIALIZER,
		   .cv = PTHREAD_COND_INITIALIZER};
	int rc = b->add_read_start(b, NULL, n, keys, delta, LONG_TTL, added_cb,
				   &a, &e);
	if (rc)
		return rc;
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 60;
	pthread_mutex_lock(&a.mu);
	while (a.calls == 0 && pthread_cond_timedwait(&a.cv, &a.mu, &dl) == 0)
		;
	pthread_mutex_unlock(&a.mu);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.rc == 0 ? a.n : n, n);
	memcpy(v, a.v, n * sizeof *v);
	return a.rc;
}

/* add_read (DRL_CAP_ADD_READ): incr of the first key and get_many of the
 * others in one call, the same numbers incr and get_many give; absent
 * keys read 0 and are not created; negative deltas; add_read_start, when
 * the store has it, the same. */
static void check_add_read(void **state)
{
	drl_backend *b = ((ctx *)*state)->b;
	if (b->version < 6 || !(b->caps & DRL_CAP_ADD_READ))
		skip();
	assert_non_null(b->add_read);
	for (int started = 0; started < 2; started++) {
		if (started && b->add_read_start == NULL)
			break;
		char cur[16], prev[16], none[16];
		snprintf(cur, sizeof cur, "ar%d", started);
		snprintf(prev, sizeof prev, "ap%d", started);
		snprintf(none, sizeof none, "an%d", started);
		drl_bytes k[3] = {K(cur), K(prev), K(none)};
		int64_t v[3];
		assert_int_equal(incr_ok(b, K(prev), 9), 9);
		assert_int_equal(add_read_call(b, started, 3, k, 4, v), 0);
		assert_int_equal(v[0], 4);
		assert_int_equal(v[1], 9);
		assert_int_equal(v[2], 0);
		assert_int_equal(add_read_call(b, started, 1, k, -6, v), 0);
		assert_int_equal(v[0], -2);
		assert_int_equal(get_ok(b, K(cur)), -2);
		assert_int_equal(get_ok(b, K(prev)), 9);
		/* reading created nothing */
		assert_int_equal(incr_ok(b, K(none), 3), 3);
	}
}

/* ---- load / cas ------------------------------------------------------------ */

/* The optimistic pair: absent is version 0 and length 0; cas with version
 * 0 creates only when absent; a stale or made-up version conflicts and
 * changes nothing; every write gives a new nonzero version. */
static void check_load_cas(void **state)
{
	drl_backend *b = ((ctx *)*state)->b;
	unsigned char buf[64];
	size_t len;

	assert_int_equal(load_ok(b, K("s"), buf, sizeof buf, &len), 0);
	assert_int_equal(len, 0);
	/* a version on an absent key: nothing to match */
	assert_int_equal(cas_rc(b, K("s"), "x", 1, 12345, LONG_TTL),
			 DRL_ECONFLICT);
	assert_int_equal(load_ok(b, K("s"), buf, sizeof buf, &len), 0);
	/* version 0 creates */
	assert_int_equal(cas_rc(b, K("s"), "hello", 5, 0, LONG_TTL), 0);
	uint64_t v1 = expect_blob(b, K("s"), "hello", 5);
	assert_true(v1 != 0);
	/* ... only when absent */
	assert_int_equal(cas_rc(b, K("s"), "other", 5, 0, LONG_TTL),
			 DRL_ECONFLICT);
	uint64_t v = expect_blob(b, K("s"), "hello", 5);
	/* the current version wins, and the version changes */
	assert_int_equal(cas_rc(b, K("s"), "world!", 6, CURRENT, LONG_TTL), 0);
	uint64_t v2 = expect_blob(b, K("s"), "world!", 6);
	assert_true(v2 != 0 && v2 != v1 && v2 != v);
	/* a stale or made-up version conflicts, the blob is unchanged */
	assert_int_equal(cas_rc(b, K("s"), "stale", 5, v1, LONG_TTL),
			 DRL_ECONFLICT);
	assert_int_equal(cas_rc(b, K("s"), "made up", 7, 42, LONG_TTL),
			 DRL_ECONFLICT);
	v = expect_blob(b, K("s"), "world!", 6);
	/* a smaller blob after a larger one */
	assert_int_equal(cas_rc(b, K("s"), "z", 1, CURRENT, LONG_TTL), 0);
	uint64_t v3 = expect_blob(b, K("s"), "z", 1);
	assert_true(v3 != 0 && v3 != v2 && v3 != v1);

	/* an empty blob is present: nonzero version, length 0 */
	assert_int_equal(cas_rc(b, K("e"), NULL, 0, 0, LONG_TTL), 0);
	drl_error e = {0};
	uint64_t ve = 0;
	len = 9;
	expect_rc("load empty", b->load(b, K("e"), NULL, 0, &len, &ve, &e), 0,
		  &e);
	assert_int_equal(len, 0);
	assert_true(ve != 0);
	assert_int_equal(cas_rc(b, K("e"), "", 0, 0, LONG_TTL), DRL_ECONFLICT);
	ve = expect_blob(b, K("e"), "", 0);
	assert_int_equal(cas_rc(b, K("e"), "y", 1, CURRENT, LONG_TTL), 0);
	uint64_t ve2 = expect_blob(b, K("e"), "y", 1);
	assert_true(ve2 != ve);
}

/* load with too small a buffer: DRL_ERANGE, *len the size needed, the
 * version and the buffer untouched, the blob unchanged. */
static void check_load_erange(void **state)
{
	drl_backend *b = ((ctx *)*state)->b;
	unsigned char buf[64];
	drl_error e = {0};
	assert_int_equal(cas_rc(b, K("r"), "0123456789", 10, 0, LONG_TTL), 0);
	memset(buf, '#', sizeof buf);
	size_t len = 0;
	uint64_t ver = 777;
	expect_rc("load cap 4", b->load(b, K("r"), buf, 4, &len, &ver, &e),
		  DRL_ERANGE, &e);
	assert_int_equal(len, 10);
	assert_int_equal(ver, 777);
	for (int i = 0; i < 4; i++)
		assert_int_equal(buf[i], '#');
	len = 0;
	expect_rc("load cap 9", b->load(b, K("r"), buf, 9, &len, &ver, &e),
		  DRL_ERANGE, &e);
	assert_int_equal(len, 10);
	/* exactly the size fits, the blob is as written, and the store is
	 * in step after an ERANGE: the cas that follows the load works */
	len = 0;
	expect_rc("load cap 10", b->load(b, K("r"), buf, 10, &len, &ver, &e), 0,
		  &e);
	assert_int_equal(len, 10);
	assert_memory_equal(buf, "0123456789", 10);
	assert_true(ver != 0 && ver != 777);
	assert_int_equal(cas_rc(b, K("r"), "ok", 2, CURRENT, LONG_TTL), 0);
	expect_blob(b, K("r"), "ok", 2);
}

/* Blobs are bytes: NULs and 0xff, every byte value, up to 4 KiB. */
static void check_blobs_binary(void **state)
{
	drl_backend *b = ((ctx *)*state)->b;
	static const unsigned char odd[] = {0, 'a', 0, 0xff, '\n', ' ', 0};
	unsigned char big[4096];
	for (size_t i = 0; i < sizeof big; i++)
		big[i] = (unsigned char)(i * 131 + 7);
	big[0] = 0;
	big[1] = 0xff;
	big[sizeof big - 1] = 0;

	assert_int_equal(cas_rc(b, K("bin"), odd, sizeof odd, 0, LONG_TTL), 0);
	expect_blob(b, K("bin"), odd, sizeof odd);
	assert_int_equal(
		cas_rc(b, K("bin"), big, sizeof big, CURRENT, LONG_TTL), 0);
	expect_blob(b, K("bin"), big, sizeof big);
	unsigned char all[256];
	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)(255 - i);
	assert_int_equal(
		cas_rc(b, K("bin"), all, sizeof all, CURRENT, LONG_TTL), 0);
	expect_blob(b, K("bin"), all, sizeof all);
	assert_int_equal(cas_rc(b, K("b2"), big, sizeof big, 0, LONG_TTL), 0);
	expect_blob(b, K("b2"), big, sizeof big);
}

/* ---- keys ------------------------------------------------------------------ */

/* The blob key beside counter key k, in sk (DRL_STORE_KEY_MAX bytes): "S"
 * and k's bytes, or for a key of the longest length "S" in place of its
 * first byte (no other key of that length starts with 'S'). */
static drl_bytes blob_key(unsigned char *sk, drl_bytes k)
{
	size_t skip = k.len == DRL_STORE_KEY_MAX;
	sk[0] = 'S';
	memcpy(sk + 1, (const unsigned char *)k.data + skip, k.len - skip);
	return (drl_bytes){sk, k.len + 1 - skip};
}

/* Keys are any bytes: NUL, space, CR/LF, 0xff, protocol look-alikes, the
 * empty key, 300 bytes and the longest the core sends (DRL_STORE_KEY_MAX),
 * each distinct from the others and from its prefixes, for counters and
 * blobs alike. */
static void check_binary_keys(void **state)
{
	drl_backend *b = ((ctx *)*state)->b;
	enum { KMAX = DRL_STORE_KEY_MAX };
	static char kl[KMAX], klb[KMAX];
	memset(kl, 'k', sizeof kl);
	memcpy(klb, kl, sizeof kl);
	klb[KMAX - 1] = 'l';
	const drl_bytes keys[] = {
		{"a b", 3},        {"a\nb", 3},
		{"a\r\nb", 4},     {"a\0b", 3},
		{"a\0c", 3},       {"a", 1},
		{"a\0", 2},        {"\0", 1},
		{"\0\0", 2},       {"\xff", 1},
		{"a\xff", 2},      {"ab", 2},
		{"", 0},           {"*1\r\n$3\r\nDEL", 12},
		{"a\r\nget x", 8}, {"caf\xc3\xa9", 5},
		{kl, 300},         {kl, 299},
		{kl, 250},         {kl, 251},
		{kl, KMAX},        {klb, KMAX},
	};
	enum { N = sizeof keys / sizeof keys[0] };
	int64_t vals[N];
	drl_error e = {0};

	for (size_t i = 0; i < N; i++)
		assert_int_equal(incr_ok(b, keys[i], (int64_t)i + 1),
				 (int64_t)i + 1);
	expect_rc("get_many", b->get_many(b, N, keys, vals, &e), 0, &e);
	for (size_t i = 0; i < N; i++)
		if (vals[i] != (int64_t)i + 1)
			fail_msg("key %zu (%zu bytes): %" PRId64 ", want %zu",
				 i, keys[i].len, vals[i], i + 1);

	/* blobs under the same bytes behind "S" (a key space of their own) */
	for (size_t i = 0; i < N; i++) {
		unsigned char sk[KMAX], blob[2] = {(unsigned char)i, 0};
		drl_bytes k = blob_key(sk, keys[i]);
		unsigned char buf[16];
		size_t len;
		assert_int_equal(load_ok(b, k, buf, sizeof buf, &len), 0);
		assert_int_equal(cas_rc(b, k, blob, 2, 0, LONG_TTL), 0);
	}
	for (size_t i = 0; i < N; i++) {
		unsigned char sk[KMAX], blob[2] = {(unsigned char)i, 0};
		expect_blob(b, blob_key(sk, keys[i]), blob, 2);
	}
	/* one more write on one key changes no other */
	assert_int_equal(incr_ok(b, keys[3], 100), 104);
	expect_rc("get_many", b->get_many(b, N, keys, vals, &e), 0, &e);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(vals[i], (int64_t)i + 1 + (i == 3 ? 100 : 0));
}

/* ---- TTL ------------------------------------------------------------------- */

/* A key written with ttl_min_us is there at once and gone after it
 * expires (polled for with a generous deadline); a blob that comes back
 * after expiring gets a version its old one does not match; keys with
 * TTLs from an hour to 400 days outlive it (unless the store may evict). */
static void check_ttl(void **state)
{
	ctx *c = *state;
	drl_backend *b = c->b;
	const int64_t ttl = ttl_min(c->t);
	unsigned char buf[16];
	size_t len;
	static const int64_t longs[] = {HOUR, 29 * DAY, 30 * DAY, 40 * DAY,
					400 * DAY};
	static const char *const lnames[] = {"l1h", "l29d", "l30d", "l40d",
					     "l400d"};
	enum { NL = sizeof longs / sizeof longs[0] };

	int64_t t0 = tu_mono_ms();
	assert_int_equal(incr_ttl(b, K("short"), 3, ttl), 3);
	assert_int_equal(cas_rc(b, K("sblob"), "ab", 2, 0, ttl), 0);
	uint64_t old = load_ok(b, K("sblob"), buf, sizeof buf, &len);
	int64_t v1 = get_ok(b, K("short"));
	if (tu_mono_ms() - t0 < ttl / 1000) { /* not yet due: must be there */
		assert_int_equal(v1, 3);
		assert_true(old != 0);
		assert_int_equal(len, 2);
	}
	if (!c->t->may_evict) {
		for (int i = 0; i < NL; i++)
			assert_int_equal(
				incr_ttl(b, K(lnames[i]), i + 1, longs[i]),
				i + 1);
		assert_int_equal(cas_rc(b, K("lblob"), "lb", 2, 0, HOUR), 0);
	}

	/* poll: never a fixed sleep and one look */
	int64_t deadline = t0 + 20 * ttl / 1000 + 5000;
	int gone_c = 0, gone_s = 0;
	while (!(gone_c && gone_s) && tu_mono_ms() < deadline) {
		gone_c = gone_c || get_ok(b, K("short")) == 0;
		gone_s = gone_s ||
			 load_ok(b, K("sblob"), buf, sizeof buf, &len) == 0;
		if (!(gone_c && gone_s))
			tu_sleep_ms(10);
	}
	if (!gone_c || !gone_s)
		fail_msg("%" PRId64
			 " us TTL: counter %s, blob %s after %" PRId64 " ms",
			 ttl, gone_c ? "gone" : "still there",
			 gone_s ? "gone" : "still there", tu_mono_ms() - t0);
	print_message("    %" PRId64 " us TTL: gone after %" PRId64 " ms\n",
		      ttl, tu_mono_ms() - t0);

	/* expired keys start over; no ABA on the blob */
	assert_int_equal(incr_ok(b, K("short"), 4), 4);
	assert_int_equal(cas_rc(b, K("sblob"), "2", 1, 0, LONG_TTL), 0);
	if (old != 0)
		assert_int_equal(cas_rc(b, K("sblob"), "3", 1, old, LONG_TTL),
				 DRL_ECONFLICT);
	expect_blob(b, K("sblob"), "2", 1);

	if (c->t->may_evict)
		return;
	for (int i = 0; i < NL; i++)
		if (get_ok(b, K(lnames[i])) != i + 1)
			fail_msg("%s (TTL %" PRId64 " s) gone after the short "
				 "TTL expired",
				 lnames[i], longs[i] / SEC);
	expect_blob(b, K("lblob"), "lb", 2);
}

/* ---- update ---------------------------------------------------------------- */

/* An update step that records what it saw and does what it is told. */
typedef struct step {
	int calls;
	unsigned char seen[64];
	size_t seenlen;
	bool saw_null;
	int ret;
	const void *blob;
	size_t len;
} step;

static int step_fn(void *arg, const void *old, size_t oldlen,
		   const void **newblob, size_t *newlen, int64_t *ttl_us)
{
	step *s = arg;
	s->calls++;
	s->saw_null = old == NULL;
	s->seenlen = oldlen;
	if (oldlen && oldlen <= sizeof s->seen)
		memcpy(s->seen, old, oldlen);
	if (s->ret == 1) {
		*newblob = s->blob;
		*newlen = s->len;
		*ttl_us = LONG_TTL;
	}
	return s->ret;
}

static void update_ok(drl_backend *b, drl_bytes k, step *s)
{
	drl_error e = {0};
	expect_rc("update", b->update(b, k, step_fn, s, &e), 0, &e);
	assert_int_equal(s->calls, 1);
}

/* DRL_CAP_UPDATE: the step sees the current blob (NULL, 0 when absent);
 * 0 leaves it, 1 writes it (seen by load and cas), a negative return
 * comes back as is and writes nothing. */
static void check_update(void **state)
{
	drl_backend *b = ((ctx *)*state)->b;
	if (!(b->caps & DRL_CAP_UPDATE))
		skip();
	unsigned char buf[64];
	size_t len;
	drl_error e = {0};

	step s = {.ret = 0};
	update_ok(b, K("u"), &s);
	assert_true(s.saw_null);
	assert_int_equal(s.seenlen, 0);
	assert_int_equal(load_ok(b, K("u"), buf, sizeof buf, &len), 0);

	s = (step){.ret = 1, .blob = "one", .len = 3};
	update_ok(b, K("u"), &s);
	assert_true(s.saw_null);
	uint64_t v1 = expect_blob(b, K("u"), "one", 3);
	assert_true(v1 != 0);

	s = (step){.ret = 0};
	update_ok(b, K("u"), &s);
	assert_false(s.saw_null);
	assert_int_equal(s.seenlen, 3);
	assert_memory_equal(s.seen, "one", 3);
	expect_blob(b, K("u"), "one", 3);

	s = (step){.ret = DRL_ECORRUPT, .blob = "no", .len = 2};
	expect_rc("update < 0", b->update(b, K("u"), step_fn, &s, &e),
		  DRL_ECORRUPT, &e);
	assert_int_equal(s.calls, 1);
	s = (step){.ret = -1000, .blob = "no", .len = 2};
	assert_int_equal(b->update(b, K("u"), step_fn, &s, NULL), -1000);
	uint64_t v = expect_blob(b, K("u"), "one", 3);
	s = (step){.ret = DRL_EINVAL, .blob = "no", .len = 2};
	assert_int_equal(b->update(b, K("absent"), step_fn, &s, &e),
			 DRL_EINVAL);
	assert_int_equal(load_ok(b, K("absent"), buf, sizeof buf, &len), 0);

	/* writes by update and by cas see each other */
	s = (step){.ret = 1, .blob = "a longer blob, 24 bytes!", .len = 24};
	update_ok(b, K("u"), &s);
	assert_int_equal(s.seenlen, 3);
	uint64_t v2 = expect_blob(b, K("u"), "a longer blob, 24 bytes!", 24);
	assert_true(v2 != 0 && v2 != v1);
	assert_int_equal(cas_rc(b, K("u"), "c", 1, CURRENT, LONG_TTL), 0);
	assert_int_equal(cas_rc(b, K("u"), "d", 1, v, LONG_TTL), DRL_ECONFLICT);
	s = (step){.ret = 0};
	update_ok(b, K("u"), &s);
	assert_int_equal(s.seenlen, 1);
	assert_int_equal(s.seen[0], 'c');
	s = (step){.ret = 1, .blob = "\0\xff", .len = 2};
	update_ok(b, K("u"), &s);
	expect_blob(b, K("u"), "\0\xff", 2);
}

/* ---- del ------------------------------------------------------------------- */

/* del (version >= 4, when set): the keys are gone (counters and blobs),
 * absent keys are no error, other keys untouched. */
static void check_del(void **state)
{
	drl_backend *b = ((ctx *)*state)->b;
	if (b->version < 4 || b->del == NULL)
		skip();
	unsigned char buf[16];
	size_t len;
	drl_error e = {0};
	assert_int_equal(incr_ok(b, K("d1"), 5), 5);
	assert_int_equal(incr_ok(b, K("d2"), 6), 6);
	assert_int_equal(incr_ok(b, K("keep"), 7), 7);
	assert_int_equal(incr_ok(b, K("d"), 8), 8); /* a prefix of d1 */
	assert_int_equal(cas_rc(b, K("dblob"), "x", 1, 0, LONG_TTL), 0);
	assert_int_equal(cas_rc(b, K("kblob"), "y", 1, 0, LONG_TTL), 0);
	uint64_t vd = expect_blob(b, K("dblob"), "x", 1);

	drl_bytes gone[4] = {K("d1"), K("dblob"), K("absent"), K("d2")};
	expect_rc("del", b->del(b, 4, gone, &e), 0, &e);
	assert_int_equal(get_ok(b, K("d1")), 0);
	assert_int_equal(get_ok(b, K("d2")), 0);
	assert_int_equal(load_ok(b, K("dblob"), buf, sizeof buf, &len), 0);
	assert_int_equal(get_ok(b, K("keep")), 7);
	assert_int_equal(get_ok(b, K("d")), 8);
	expect_blob(b, K("kblob"), "y", 1);
	/* again: every key absent, still no error */
	expect_rc("del again", b->del(b, 4, gone, NULL), 0, NULL);
	expect_rc("del one", b->del(b, 1, (drl_bytes[]){K("nothing")}, &e), 0,
		  &e);
	/* a deleted blob comes back new: its old version does not match */
	assert_int_equal(cas_rc(b, K("dblob"), "z", 1, vd, LONG_TTL),
			 DRL_ECONFLICT);
	assert_int_equal(cas_rc(b, K("dblob"), "z", 1, 0, LONG_TTL), 0);
	expect_blob(b, K("dblob"), "z", 1);
	assert_int_equal(incr_ok(b, K("d1"), 1), 1);
}

/* ---- now ------------------------------------------------------------------- */

/* DRL_CAP_CLOCK: the store's clock is within 60 s of this machine's. */
static void check_now(void **state)
{
	drl_backend *b = ((ctx *)*state)->b;
	if (!(b->caps & DRL_CAP_CLOCK))
		skip();
	drl_error e = {0};
	int64_t now = 0;
	expect_rc("now", b->now(b, &now, &e), 0, &e);
	int64_t here = drl_now_us();
	if (now < here - 60 * SEC || now > here + 60 * SEC)
		fail_msg("store clock %" PRId64 " us, this machine %" PRId64,
			 now, here);
	int64_t again = 0;
	expect_rc("now", b->now(b, &again, NULL), 0, NULL);
	assert_true(again > here - 60 * SEC && again < here + 60 * SEC);
}

/* ---- eval ------------------------------------------------------------------ */

/* A call started by eval_start(), awaited: what its done() handed back,
 * and how many times done() ran. */
typedef struct started {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int calls;
	int rc;
	int64_t out[128];
	size_t nret;
	drl_error err;
	bool had_err;
} started;

static void started_done(void *arg, int rc, const int64_t *out, size_t nret,
			 const drl_error *err)
{
	started *st = arg;
	pthread_mutex_lock(&st->mu);
	st->rc = rc;
	st->nret = nret;
	if (nret <= 128 && rc == 0)
		memcpy(st->out, out, nret * sizeof *out);
	st->had_err = err != NULL;
	if (err)
		st->err = *err;
	st->calls++;
	pthread_cond_broadcast(&st->cv);
	pthread_mutex_unlock(&st->mu);
}

/* check_eval_start: every eval() of check_eval goes through eval_start()
 * and waits for its done(), which must run exactly once. */
static _Thread_local bool via_start;

static int eval_rc(drl_backend *b, const drl_script *s, size_t nkeys,
		   const drl_bytes *keys, size_t nargs, const int64_t *args,
		   int64_t *out, size_t nout, size_t *nret, drl_error *e)
{
	if (!via_start)
		return b->eval(b, s, nkeys, keys, nargs, args, out, nout, nret,
			       e);
	started *st = calloc(1, sizeof *st);
	assert_non_null(st);
	pthread_mutex_init(&st->mu, NULL);
	pthread_cond_init(&st->cv, NULL);
	int rc = b->eval_start(b, NULL, s, nkeys, keys, nargs, args, nout,
			       started_done, st, e);
	if (rc == 0) {
		pthread_mutex_lock(&st->mu);
		while (st->calls == 0)
			pthread_cond_wait(&st->cv, &st->mu);
		pthread_mutex_unlock(&st->mu);
		rc = st->rc;
		assert_true(st->nret <= nout);
		*nret = st->nret;
		if (rc == 0)
			memcpy(out, st->out, st->nret * sizeof *out);
		assert_int_equal(st->had_err, rc != 0);
		if (rc && e)
			*e = st->err;
		if (rc)
			assert_int_equal(st->err.code, rc);
	}
	/* done() ran once: a second run would have to come now, and the
	 * store's next call goes out after this one's reply. */
	pthread_mutex_lock(&st->mu);
	assert_true(rc != 0 || st->calls == 1);
	pthread_mutex_unlock(&st->mu);
	pthread_cond_destroy(&st->cv);
	pthread_mutex_destroy(&st->mu);
	free(st);
	return rc;
}

/* DRL_CAP_SCRIPT: Redis's EVAL dialect. KEYS and ARGV (integers as
 * decimal strings, microsecond times exact), redis.call on INCRBY, GET,
 * MGET, PEXPIRE and TIME, the struct library, integers back; an error
 * reply starting "ECORRUPT " is DRL_ECORRUPT, any other DRL_ESTORE; each
 * call runs the script once. */
static void check_eval(void **state)
{
	drl_backend *b = ((ctx *)*state)->b;
	if (!(b->caps & DRL_CAP_SCRIPT))
		skip();
	drl_error e = {0};
	int64_t out[8];
	size_t n = 99;
	static const drl_script add = {
		"contract_add",
		"local v = redis.call('INCRBY', KEYS[1], ARGV[1])\n"
		"redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
		"local g = tonumber(redis.call('GET', KEYS[1]))\n"
		"return {v, g, #KEYS, #ARGV, tonumber(ARGV[3]), "
		"tonumber(ARGV[4])}"};
	drl_bytes k = K("ev");
	const int64_t args[4] = {5, 600000, INT64_C(1700000000123456), -7};
	expect_rc("eval add", eval_rc(b, &add, 1, &k, 4, args, out, 8, &n, &e),
		  0, &e);
	assert_int_equal(n, 6);
	assert_int_equal(out[0], 5);
	assert_int_equal(out[1], 5);
	assert_int_equal(out[2], 1);
	assert_int_equal(out[3], 4);
	assert_int_equal(out[4], INT64_C(1700000000123456));
	assert_int_equal(out[5], -7);
	expect_rc("eval add", eval_rc(b, &add, 1, &k, 4, args, out, 8, &n, &e),
		  0, &e);
	assert_int_equal(out[0], 10);

	/* at most once per call: the i-th call sees i */
	static const drl_script once = {
		"contract_once",
		"local v = redis.call('INCRBY', KEYS[1], 1)\n"
		"redis.call('PEXPIRE', KEYS[1], 600000)\nreturn {v}"};
	drl_bytes ko = K("once");
	for (int i = 1; i <= 20; i++) {
		n = 99;
		expect_rc("eval once",
			  eval_rc(b, &once, 1, &ko, 0, NULL, out, 1, &n, &e), 0,
			  &e);
		assert_int_equal(n, 1);
		if (out[0] != i)
			fail_msg("call %d: the script ran %" PRId64 " times", i,
				 out[0]);
	}

	/* MGET (keys of one hash tag: a cluster needs them in one slot) */
	static const drl_script mget = {
		"contract_mget",
		"redis.call('INCRBY', KEYS[1], 3)\n"
		"redis.call('PEXPIRE', KEYS[1], 600000)\n"
		"local r = redis.call('MGET', KEYS[1], KEYS[2])\n"
		"return {tonumber(r[1]), r[2] and 1 or 0}"};
	drl_bytes mk[2] = {K("{m}1"), K("{m}2")};
	expect_rc("eval mget",
		  eval_rc(b, &mget, 2, mk, 0, NULL, out, 8, &n, &e), 0, &e);
	assert_int_equal(n, 2);
	assert_int_equal(out[0], 3);
	assert_int_equal(out[1], 0);

	/* TIME and struct */
	static const drl_script tm = {
		"contract_time",
		"local t = redis.call('TIME')\n"
		"local s = struct.pack('<i8i8', tonumber(ARGV[1]), -3)\n"
		"local a, c = struct.unpack('<i8i8', s)\n"
		"return {tonumber(t[1]), tonumber(t[2]), #s, a, c}"};
	int64_t targ = INT64_C(1700000000654321);
	expect_rc("eval time", eval_rc(b, &tm, 1, &k, 1, &targ, out, 8, &n, &e),
		  0, &e);
	assert_int_equal(n, 5);
	int64_t here = drl_now_us() / SEC;
	assert_true(out[0] > here - 60 && out[0] < here + 60);
	assert_true(out[1] >= 0 && out[1] < 1000000);
	assert_int_equal(out[2], 16);
	assert_int_equal(out[3], targ);
	assert_int_equal(out[4], -3);

	/* errors */
	static const drl_script corrupt = {
		"contract_corrupt",
		"return redis.error_reply('ECORRUPT x: malformed state')"};
	static const drl_script other = {
		"contract_error", "return redis.error_reply('ERR contract says "
				  "no')"};
	expect_rc("eval ECORRUPT",
		  eval_rc(b, &corrupt, 1, &k, 0, NULL, out, 8, &n, &e),
		  DRL_ECORRUPT, &e);
	memset(&e, 0, sizeof e);
	expect_rc("eval error",
		  eval_rc(b, &other, 1, &k, 0, NULL, out, 8, &n, &e),
		  DRL_ESTORE, &e);
	assert_int_equal(e.code, DRL_ESTORE);
	assert_true(e.message[0] != '\0');
	assert_int_equal(eval_rc(b, &corrupt, 1, &k, 0, NULL, out, 8, &n, NULL),
			 DRL_ECORRUPT);
	assert_int_equal(eval_rc(b, &other, 1, &k, 0, NULL, out, 8, &n, NULL),
			 DRL_ESTORE);
	/* the store carries on after errors; the key holds what add wrote */
	expect_rc("eval add", eval_rc(b, &add, 1, &k, 4, args, out, 8, &n, &e),
		  0, &e);
	assert_int_equal(out[0], 15);

	if (!(b->caps & DRL_CAP_BATCH) || b->version < 2)
		return;
	/* DRL_CAP_BATCH: many keys of any slot in one call, 50 args */
	enum { NB = 64 };
	char names[NB][16];
	drl_bytes keys[NB];
	int64_t many[50], vals[NB];
	for (int i = 0; i < NB; i++) {
		snprintf(names[i], sizeof names[i], "batch%d", i);
		keys[i] = K(names[i]);
	}
	for (int i = 0; i < 50; i++)
		many[i] = i * 1000;
	static const drl_script put = {
		"contract_batch_put",
		"for i = 1, #KEYS do\n"
		"  redis.call('INCRBY', KEYS[i], i + tonumber(ARGV[#ARGV]))\n"
		"  redis.call('PEXPIRE', KEYS[i], 600000)\n"
		"end\nreturn {#KEYS, #ARGV}"};
	static const drl_script get = {
		"contract_batch_get",
		"local r = {}\nfor i = 1, #KEYS do\n"
		"  r[i] = tonumber(redis.call('GET', KEYS[i]))\nend\n"
		"return r"};
	expect_rc("eval batch",
		  eval_rc(b, &put, NB, keys, 50, many, out, 8, &n, &e), 0, &e);
	assert_int_equal(n, 2);
	assert_int_equal(out[0], NB);
	assert_int_equal(out[1], 50);
	expect_rc("eval batch get",
		  eval_rc(b, &get, NB, keys, 0, NULL, vals, NB, &n, &e), 0, &e);
	assert_int_equal(n, NB);
	for (int i = 0; i < NB; i++)
		assert_int_equal(vals[i], i + 1 + 49000);
}

/* DRL_CAP_EVAL_START (version >= 5): eval_start() keeps every promise of
 * eval() (check_eval, each call awaited), and many calls started at once
 * from one thread each get their own reply, exactly once. */
static void check_eval_start(void **state)
{
	drl_backend *b = ((ctx *)*state)->b;
	if (b->version < 5 || !(b->caps & DRL_CAP_EVAL_START))
		skip();
	assert_non_null(b->eval_start);
	assert_true((b->caps & DRL_CAP_SCRIPT) != 0);
	via_start = true;
	check_eval(state);
	via_start = false;

	enum { NS = 300 };
	static const drl_script echo = {
		"contract_echo",
		"local v = redis.call('INCRBY', KEYS[1], ARGV[1])\n"
		"redis.call('PEXPIRE', KEYS[1], 600000)\n"
		"return {v, tonumber(ARGV[2])}"};
	started *st = calloc(NS, sizeof *st);
	assert_non_null(st);
	char names[NS][16];
	for (int i = 0; i < NS; i++) {
		pthread_mutex_init(&st[i].mu, NULL);
		pthread_cond_init(&st[i].cv, NULL);
		snprintf(names[i], sizeof names[i], "many%d", i % 7);
		drl_bytes k = K(names[i]);
		const int64_t args[2] = {1, 1000 + i};
		drl_error e = {0};
		expect_rc("eval_start",
			  b->eval_start(b, NULL, &echo, 1, &k, 2, args, 2,
					started_done, &st[i], &e),
			  0, &e);
	}
	int64_t seen[7] = {0};
	for (int i = 0; i < NS; i++) {
		pthread_mutex_lock(&st[i].mu);
		while (st[i].calls == 0)
			pthread_cond_wait(&st[i].cv, &st[i].mu);
		pthread_mutex_unlock(&st[i].mu);
		expect_rc("eval_start many", st[i].rc, 0, &st[i].err);
		assert_int_equal(st[i].nret, 2);
		if (st[i].out[1] != 1000 + i)
			fail_msg("call %d got the reply of call %" PRId64, i,
				 st[i].out[1] - 1000);
		/* each of a key's calls saw a count of its own */
		assert_true(st[i].out[0] >= 1 && st[i].out[0] <= NS / 7 + 1);
		seen[i % 7] += st[i].out[0];
	}
	for (int j = 0; j < 7; j++) {
		int64_t m = NS / 7 + (j < NS % 7); /* calls on key j */
		assert_int_equal(seen[j], m * (m + 1) / 2);
	}
	for (int i = 0; i < NS; i++) {
		pthread_mutex_lock(&st[i].mu);
		assert_int_equal(st[i].calls, 1);
		pthread_mutex_unlock(&st[i].mu);
		pthread_cond_destroy(&st[i].cv);
		pthread_mutex_destroy(&st[i].mu);
	}
	free(st);
}

/* ---- threads --------------------------------------------------------------- */

enum { NTHREADS = 8, INCRS = 500, CASES = 100 };

typedef struct worker {
	drl_backend *b;
	const char *key;
	int iters;
	int failures;
	int rc;
	long conflicts;
	char msg[DRL_ERROR_MESSAGE_MAX];
} worker;

static void *incr_worker(void *arg)
{
	worker *w = arg;
	for (int i = 0; i < w->iters; i++) {
		drl_error e = {0};
		int64_t v;
		int rc = w->b->incr(w->b, K(w->key), 1, LONG_TTL, &v, &e);
		if (rc) {
			w->failures++;
			w->rc = rc;
			memcpy(w->msg, e.message, sizeof w->msg);
		}
	}
	return NULL;
}

/* One increment of an 8-byte counter blob by load/cas, retried on
 * DRL_ECONFLICT (a bounded number of times). */
static void *cas_worker(void *arg)
{
	worker *w = arg;
	for (int i = 0; i < w->iters; i++) {
		int done = 0;
		for (int attempt = 0; attempt < 1000000 && !done; attempt++) {
			drl_error e = {0};
			unsigned char buf[8];
			size_t len = 0;
			uint64_t ver = 0;
			int rc = w->b->load(w->b, K(w->key), buf, sizeof buf,
					    &len, &ver, &e);
			if (rc == 0 && len != (ver ? 8u : 0u))
				rc = DRL_ECORRUPT;
			if (rc == 0) {
				put64(buf, (ver ? get64(buf) : 0) + 1);
				rc = w->b->cas(w->b, K(w->key), buf, 8, ver,
					       LONG_TTL, &e);
			}
			if (rc == 0) {
				done = 1;
			} else if (rc == DRL_ECONFLICT) {
				w->conflicts++;
			} else {
				w->failures++;
				w->rc = rc;
				memcpy(w->msg, e.message, sizeof w->msg);
				return NULL;
			}
		}
		if (!done) {
			w->failures++;
			snprintf(w->msg, sizeof w->msg, "retries spent");
			return NULL;
		}
	}
	return NULL;
}

/* An update step adding 1 to an 8-byte counter blob. */
static int add_one(void *arg, const void *old, size_t oldlen,
		   const void **newblob, size_t *newlen, int64_t *ttl_us)
{
	unsigned char *out = arg;
	if (oldlen != 0 && oldlen != 8)
		return DRL_ECORRUPT;
	put64(out, (old ? get64(old) : 0) + 1);
	*newblob = out;
	*newlen = 8;
	*ttl_us = LONG_TTL;
	return 1;
}

static void *update_worker(void *arg)
{
	worker *w = arg;
	unsigned char out[8];
	for (int i = 0; i < w->iters; i++) {
		drl_error e = {0};
		int rc = w->b->update(w->b, K(w->key), add_one, out, &e);
		if (rc) {
			w->failures++;
			w->rc = rc;
			memcpy(w->msg, e.message, sizeof w->msg);
			return NULL;
		}
	}
	return NULL;
}

/* Start fn[i % nfn] on NTHREADS threads, join them all (never sleep),
 * fail on any worker's failure; returns the conflicts counted. */
static long run_workers(drl_backend *b, const char *key, int iters,
			void *(*const *fn)(void *), int nfn)
{
	pthread_t t[NTHREADS];
	worker w[NTHREADS];
	long conflicts = 0;
	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (worker){.b = b, .key = key, .iters = iters};
		assert_int_equal(
			pthread_create(&t[i], NULL, fn[i % nfn], &w[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	for (int i = 0; i < NTHREADS; i++) {
		if (w[i].failures)
			fail_msg("thread %d: %d failures, last %s: %s", i,
				 w[i].failures, drl_err_name(w[i].rc),
				 w[i].msg);
		conflicts += w[i].conflicts;
	}
	return conflicts;
}

/* 8 threads x incr of one key: the exact sum. */
static void check_threads_incr(void **state)
{
	ctx *c = *state;
	int iters = INCRS * rounds(c->t);
	void *(*const fn[1])(void *) = {incr_worker};
	run_workers(c->b, "hot", iters, fn, 1);
	assert_int_equal(get_ok(c->b, K("hot")), NTHREADS * iters);
}

/* 8 threads x load/cas increments of one blob counter, retried on
 * DRL_ECONFLICT: no update lost. With DRL_CAP_UPDATE, the same with half
 * the threads using update() on the key the others cas. */
static void check_threads_cas(void **state)
{
	ctx *c = *state;
	drl_backend *b = c->b;
	int iters = CASES * rounds(c->t);
	unsigned char buf[8];
	size_t len;
	void *(*const cas_only[1])(void *) = {cas_worker};
	long conflicts = run_workers(b, "hotblob", iters, cas_only, 1);
	assert_true(load_ok(b, K("hotblob"), buf, sizeof buf, &len) != 0);
	assert_int_equal(len, 8);
	assert_int_equal(get64(buf), NTHREADS * iters);
	print_message("    %d x %d cas increments, %ld conflicts\n", NTHREADS,
		      iters, conflicts);
	if (!(b->caps & DRL_CAP_UPDATE))
		return;
	void *(*const mixed[2])(void *) = {cas_worker, update_worker};
	run_workers(b, "hotmix", iters, mixed, 2);
	assert_true(load_ok(b, K("hotmix"), buf, sizeof buf, &len) != 0);
	assert_int_equal(get64(buf), NTHREADS * iters);
}

/* ---- hot key through the public API ---------------------------------------- */

void store_contract_hot_key(const store_contract_target *t)
{
	if (t->uri == NULL) {
		print_message("    %s: no URI shared between processes\n",
			      t->name);
		skip();
	}
	hot_key_set_openers(t->openers, t->nopeners);
	hot_key_all_specs(t->uri);
	hot_key_set_openers(NULL, 0);
}

/* Every algorithm, from HOT_PROCS processes x HOT_THREADS threads at one
 * instant: exactly the limit allowed (tests/hot_key.h). */
static void check_hot_key(void **state)
{
	store_contract_hot_key(((ctx *)*state)->t);
}

/* ---- bad input -------------------------------------------------------------- */

/* err may be NULL in every method, on success and on failure; a load of
 * cap 0 into NULL on a present key is DRL_ERANGE with the size. */
static void check_null_err(void **state)
{
	drl_backend *b = ((ctx *)*state)->b;
	int64_t v = 0;
	unsigned char buf[16];
	size_t len = 0;
	uint64_t ver = 0;

	assert_int_equal(b->incr(b, K("n"), 2, LONG_TTL, &v, NULL), 0);
	assert_int_equal(v, 2);
	assert_int_equal(b->get_many(b, 1, (drl_bytes[]){K("n")}, &v, NULL), 0);
	assert_int_equal(v, 2);
	assert_int_equal(b->load(b, K("s"), buf, sizeof buf, &len, &ver, NULL),
			 0);
	assert_int_equal(ver, 0);
	assert_int_equal(b->cas(b, K("s"), "abc", 3, 0, LONG_TTL, NULL), 0);
	assert_int_equal(b->load(b, K("s"), buf, sizeof buf, &len, &ver, NULL),
			 0);
	assert_int_equal(b->cas(b, K("s"), "abc", 3, 0, LONG_TTL, NULL),
			 DRL_ECONFLICT);
	assert_int_equal(b->load(b, K("s"), buf, sizeof buf, &len, &ver, NULL),
			 0);
	assert_int_equal(b->cas(b, K("s"), "abc", 3, 4242, LONG_TTL, NULL),
			 DRL_ECONFLICT);
	ver = 555;
	len = 0;
	assert_int_equal(b->load(b, K("s"), NULL, 0, &len, &ver, NULL),
			 DRL_ERANGE);
	assert_int_equal(len, 3);
	assert_int_equal(ver, 555);
	assert_int_equal(b->load(b, K("s"), buf, 2, &len, &ver, NULL),
			 DRL_ERANGE);
	assert_int_equal(len, 3);
	assert_int_equal(ver, 555);
	assert_int_equal(b->load(b, K("s"), buf, sizeof buf, &len, &ver, NULL),
			 0);
	assert_int_equal(len, 3);
	assert_memory_equal(buf, "abc", 3);
	assert_int_equal(b->cas(b, K("s"), "de", 2, ver, LONG_TTL, NULL), 0);
	expect_blob(b, K("s"), "de", 2);
	if (b->caps & DRL_CAP_UPDATE) {
		step s = {.ret = 1, .blob = "fg", .len = 2};
		assert_int_equal(b->update(b, K("s"), step_fn, &s, NULL), 0);
		expect_blob(b, K("s"), "fg", 2);
	}
	if (b->caps & DRL_CAP_CLOCK)
		assert_int_equal(b->now(b, &v, NULL), 0);
	if (b->caps & DRL_CAP_SCRIPT) {
		static const drl_script one = {"contract_one", "return {1}"};
		size_t n = 0;
		assert_int_equal(b->eval(b, &one, 1, (drl_bytes[]){K("n")}, 0,
					 NULL, &v, 1, &n, NULL),
				 0);
		assert_int_equal(v, 1);
	}
	if (b->version >= 4 && b->del)
		assert_int_equal(b->del(b, 1, (drl_bytes[]){K("n")}, NULL), 0);
}

/* ---- the group --------------------------------------------------------------- */

#define CHECK(fn)                                                              \
	cmocka_unit_test_prestate_setup_teardown(fn, setup, teardown,          \
						 (void *)(uintptr_t)t)

int store_contract_run(const store_contract_target *t)
{
	const struct CMUnitTest checks[] = {
		CHECK(check_vtable),       CHECK(check_incr),
		CHECK(check_get_many),     CHECK(check_load_cas),
		CHECK(check_load_erange),  CHECK(check_blobs_binary),
		CHECK(check_binary_keys),  CHECK(check_ttl),
		CHECK(check_update),       CHECK(check_del),
		CHECK(check_now),          CHECK(check_eval),
		CHECK(check_eval_start),   CHECK(check_add_read),
		CHECK(check_threads_incr), CHECK(check_threads_cas),
		CHECK(check_null_err),     CHECK(check_hot_key),
	};
	return _cmocka_run_group_tests(
		t->name, checks, sizeof checks / sizeof checks[0], NULL, NULL);
}
