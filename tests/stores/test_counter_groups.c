/*
 * Counter groups on Redis (DRL_CAP_COUNTER_GROUPS; include/drl/sys/
 * backend.h "Counter groups", algorithms/subwindow.c): the counters of one
 * limit and user key are the fields of one hash, on every strategy.
 *
 *  - no field outlives its flat key's TTL under sparse traffic (one
 *    decision every 1, 2, 5 or 13 sub-windows, clock injected with
 *    drl_allow_at), and none goes earlier: after every decision the hash
 *    holds exactly the written fields a flat key would still hold
 *    (HLEN and HEXISTS), on tx=auto, tx=lua, tx=watch and started
 *    (async) decisions;
 *  - a client whose clock lags, writing an older sub-window first, leaves
 *    the hash living as long as the newest field needs;
 *  - processes of different tx on one Redis count the same counters:
 *    interleaved, they decide exactly as one limiter on memory://;
 *  - a policy's give-back keeps the exact count and the hash's TTL;
 *  - a peek reads the group with one HMGET;
 *  - drl_reset removes the hash; a key of another type is a clear error
 *    (WRONGTYPE), never a zero count; the longest keys still work.
 * Real redis-server started by the fixture.
 */
#include <drl/async.h>
#include <drl/drl.h>

#include "redis_info.h"
#include "server_fixture.h"
#include "testutil.h"

#include <hiredis/hiredis.h>

#include <poll.h>
#include <stdio.h>
#include <string.h>

static drl_server srv;
static int have_srv;

#define NEED_SERVER() DRL_FIXTURE_NEED(have_srv)

/* A whole second, so sub-window indexes are plain. */
#define T0 (INT64_C(1700000000) * SEC)
/* 10 sub-windows of 1 s: K = 1, D = n + 1 + K = 12 (subwindow.c) */
#define SPEC "subwindow:1000/10s,subwindows=10"
#define S SEC
#define D 12

static const char *const txs[] = {"auto", "lua", "watch"};

static drl_store *store_tx(const char *tx)
{
	char uri[128];
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d?tx=%s", srv.port, tx);
	return tu_store(uri);
}

#define PREFIX_MAX 64

/* A store of tx txs[t] and a limiter of spec on it, its prefix
 * "<name>:<tx>:" (into prefix, PREFIX_MAX bytes). */
static drl_limiter *tx_limiter(size_t t, const char *name, const char *spec,
			       drl_store **s, char *prefix)
{
	*s = store_tx(txs[t]);
	snprintf(prefix, PREFIX_MAX, "%s:%s:", name, txs[t]);
	return tu_limiter(*s, spec, prefix);
}

static redisContext *raw_open(void)
{
	return redis_raw_open(srv.port);
}

/* One tx's run of a check: a raw connection, a store of that tx, a
 * limiter on it and its prefix "<name>:<tx>:". */
typedef struct tx_run {
	redisContext *c;
	drl_store *s;
	drl_limiter *l;
	const char *prefix;
	const char *tx;
} tx_run;

/* check on a store of each tx in turn, a limiter of spec on it (see
 * tx_limiter); the tx is printed before its run, so a failed assert
 * names the tx it failed on. */
static void every_tx(const char *name, const char *spec,
		     void (*check)(const tx_run *x))
{
	redisContext *c = raw_open();
	for (size_t t = 0; t < 3; t++) {
		char prefix[PREFIX_MAX];
		tx_run x = {.c = c, .prefix = prefix, .tx = txs[t]};
		x.l = tx_limiter(t, name, spec, &x.s, prefix);
		print_message("    tx=%s\n", txs[t]);
		check(&x);
		drl_limiter_free(x.l);
		drl_store_free(x.s);
	}
	redisFree(c);
}

static long long raw_int(redisContext *c, const char *fmt, const char *key,
			 size_t len, const char *field)
{
	redisReply *r = field ? redisCommand(c, fmt, key, len, field)
			      : redisCommand(c, fmt, key, len);
	assert_non_null(r);
	if (r->type != REDIS_REPLY_INTEGER)
		fail_msg("%s: reply type %d", fmt, r->type);
	long long v = r->integer;
	freeReplyObject(r);
	return v;
}

/* The one key under prefix (the group's hash), into buf. */
static size_t group_key(redisContext *c, const char *prefix, char *buf,
			size_t cap)
{
	redisReply *r = redisCommand(c, "KEYS %s*", prefix);
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	if (r->elements != 1)
		fail_msg("%zu keys under %s, not one hash", (size_t)r->elements,
			 prefix);
	size_t n = r->element[0]->len;
	assert_true(n < cap);
	memcpy(buf, r->element[0]->str, n);
	freeReplyObject(r);
	assert_int_equal(raw_int(c, "EXISTS %b", buf, n, NULL), 1);
	redisReply *t = redisCommand(c, "TYPE %b", buf, n);
	assert_string_equal(t->str, "hash");
	freeReplyObject(t);
	return n;
}

/* After a decision at sub-window i: the hash holds exactly the written
 * sub-windows a flat key would still hold, (i - D, i] (written[j]: j
 * was written, j from base). Returns whether it does (async callers
 * wait for the started trim). */
static bool fields_exact(redisContext *c, const char *key, size_t len,
			 const bool *written, int64_t base, int64_t i,
			 bool fail)
{
	long long want = 0;
	for (int64_t j = i - D + 1; j <= i; j++) {
		if (j < base || !written[j - base])
			continue;
		want++;
		char f[24];
		snprintf(f, sizeof f, "%lld", (long long)j);
		if (raw_int(c, "HEXISTS %b %s", key, len, f) != 1) {
			if (fail)
				fail_msg("sub-window %lld gone at %lld: "
					 "removed early",
					 (long long)j, (long long)i);
			return false;
		}
	}
	long long hlen = raw_int(c, "HLEN %b", key, len, NULL);
	if (hlen != want && fail)
		fail_msg("at sub-window %lld the hash holds %lld fields, "
			 "%lld still counted: dead fields left",
			 (long long)i, hlen, want);
	return hlen == want;
}

#define STEPS 40

/* One decision every `step` sub-windows (at a varying offset into it),
 * STEPS times, on limiter l; after each, the hash is exact. */
static void sparse(redisContext *c, drl_limiter *l, const char *prefix,
		   int64_t step)
{
	bool written[STEPS * 13 + 1] = {false};
	int64_t base = T0 / S;
	char key[512];
	size_t len = 0;
	for (int64_t k = 0; k < STEPS; k++) {
		int64_t i = base + k * step;
		int64_t now = i * S + (k * 137 * MS) % S;
		assert_true(tu_at(l, "k", 1, now).allowed);
		written[i - base] = true;
		if (len == 0)
			len = group_key(c, prefix, key, sizeof key);
		fields_exact(c, key, len, written, base, i, true);
	}
}

static void test_sparse_every_tx(void **state)
{
	(void)state;
	NEED_SERVER();
	redisContext *c = raw_open();
	static const int64_t steps[] = {1, 2, 5, 13};
	for (size_t t = 0; t < 3; t++) {
		drl_store *s = store_tx(txs[t]);
		for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
			char prefix[64];
			snprintf(prefix, sizeof prefix, "sp:%s:%lld:", txs[t],
				 (long long)steps[k]);
			drl_limiter *l = tu_limiter(s, SPEC, prefix);
			sparse(c, l, prefix, steps[k]);
			drl_limiter_free(l);
		}
		drl_store_free(s);
	}
	redisFree(c);
}

/* Started decisions (the async API, no worker: tx=auto's add_read_start
 * and trim_start). The trim is sent before the decision's callback runs,
 * on another connection than ours: wait for the hash to be exact. */
static int ndone;
static void one_done(drl_async *a, int rc, const drl_result *r,
		     const drl_error *e, void *arg)
{
	(void)a, (void)e, (void)arg;
	assert_int_equal(rc, 0);
	assert_true(r->allowed);
	ndone++;
}

static void test_sparse_started(void **state)
{
	(void)state;
	NEED_SERVER();
	redisContext *c = raw_open();
	drl_store *s = store_tx("auto");
	drl_limiter *l = tu_limiter(s, SPEC, "st:");
	drl_async_opts o = {.threads = DRL_ASYNC_THREADS_NONE};
	drl_async *a = NULL;
	assert_int_equal(drl_async_new(&a, &o, NULL), 0);
	bool written[STEPS * 2 + 1] = {false};
	int64_t base = T0 / S;
	char key[512];
	size_t len = 0;
	ndone = 0;
	for (int64_t k = 0; k < STEPS; k++) {
		int64_t i = base + 2 * k;
		drl_error err = {0};
		int rc = drl_async_allow_at(a, l, "k", 1, 1, i * S + 300 * MS,
					    one_done, NULL, &err);
		if (rc)
			fail_msg("start: %s", err.message);
		int64_t end = tu_mono_ms() + tu_bound_ms(10000);
		while (ndone < k + 1) {
			struct pollfd p = {.fd = drl_async_fd(a),
					   .events = POLLIN};
			assert_true(poll(&p, 1, 100) >= 0);
			assert_true(drl_async_process(a) >= 0);
			if (tu_mono_ms() > end)
				fail_msg("no callback");
		}
		written[i - base] = true;
		if (len == 0)
			len = group_key(c, "st:", key, sizeof key);
		while (!fields_exact(c, key, len, written, base, i, false)) {
			if (tu_mono_ms() > end)
				fields_exact(c, key, len, written, base, i,
					     true);
			struct pollfd none = {.fd = -1};
			(void)poll(&none, 0, 5); /* the trim is on its way */
		}
	}
	drl_async_free(a);
	drl_limiter_free(l);
	drl_store_free(s);
	redisFree(c);
}

/* A client 20 ms behind writes the sub-window before after one 10 ms into
 * the next wrote it: the hash must still live as long as the newer
 * field's flat key would (11.99 s here; a flat TTL from the late client
 * alone would be 11.01 s). */
static void lagging_clock(const tx_run *x)
{
	int64_t now = T0 + 10 * MS;
	assert_true(tu_at(x->l, "k", 1, now).allowed);
	assert_true(tu_at(x->l, "k", 1, now - 20 * MS).allowed);
	char key[512];
	size_t len = group_key(x->c, x->prefix, key, sizeof key);
	assert_int_equal(raw_int(x->c, "HLEN %b", key, len, NULL), 2);
	long long pttl = raw_int(x->c, "PTTL %b", key, len, NULL);
	/* 11.99 s less what passed since (generous: 0.5 s) */
	if (pttl < 11490)
		fail_msg("tx=%s: the hash lives %lld ms: less than its "
			 "newest field needs",
			 x->tx, pttl);
}

static void test_lagging_clock(void **state)
{
	(void)state;
	NEED_SERVER();
	every_tx("lag", SPEC, lagging_clock);
}

/* Three limiters, one per tx, on one Redis, one prefix: interleaved on a
 * hot key across sub-windows they decide exactly as one limiter on
 * memory:// (the same counters). */
static void test_mixed_tx_same_counters(void **state)
{
	(void)state;
	NEED_SERVER();
	static const char *const specs[] = {
		"fixed_window:7/2s", "sliding_window:7/2s",
		"subwindow:20/10s,subwindows=10",
		"subwindow:9/4s,subwindows=4,trailing=1"};
	for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
		drl_store *st[3];
		drl_limiter *l[3];
		char prefix[32];
		snprintf(prefix, sizeof prefix, "mx%zu:", k);
		for (size_t t = 0; t < 3; t++) {
			st[t] = store_tx(txs[t]);
			l[t] = tu_limiter(st[t], specs[k], prefix);
		}
		tu m = tu_open("memory://", specs[k]);
		int allowed = 0;
		for (int i = 0; i < 240; i++) {
			int64_t now = T0 + i * 47 * MS;
			int64_t cost = i % 5 == 0 ? 2 : 1;
			drl_result a = tu_at(l[i % 3], "hot", cost, now);
			drl_result b = tu_at(m.lim, "hot", cost, now);
			if (a.allowed != b.allowed ||
			    a.remaining != b.remaining ||
			    a.retry_after_us != b.retry_after_us)
				fail_msg("%s step %d (tx=%s): redis allowed=%d "
					 "rem=%lld, memory allowed=%d "
					 "rem=%lld",
					 specs[k], i, txs[i % 3], a.allowed,
					 (long long)a.remaining, b.allowed,
					 (long long)b.remaining);
			allowed += a.allowed;
		}
		assert_true(allowed > 0);
		tu_free(&m);
		for (size_t t = 0; t < 3; t++) {
			drl_limiter_free(l[t]);
			drl_store_free(st[t]);
		}
	}
}

/* A peek (cost 0) on tx=auto reads the group's counters with one HMGET,
 * not an HGET each, and counts what the decisions wrote. */
static void test_peek_one_hmget(void **state)
{
	(void)state;
	NEED_SERVER();
	drl_store *s;
	char prefix[PREFIX_MAX];
	drl_limiter *l = tx_limiter(0, "peek", SPEC, &s, prefix);
	for (int64_t k = 0; k < 3; k++)
		assert_true(tu_at(l, "k", 1, T0 + k * S).allowed);
	redisContext *c = raw_open();
	freeReplyObject(redisCommand(c, "CONFIG RESETSTAT"));
	drl_result r = tu_at(l, "k", 0, T0 + 3 * S);
	assert_true(r.allowed);
	assert_int_equal(r.remaining, 1000 - 3);
	assert_int_equal(redis_cmd_calls(c, "hmget"), 1);
	assert_int_equal(redis_cmd_calls(c, "hget"), 0);
	redisFree(c);
	drl_limiter_free(l);
	drl_store_free(s);
}

/* drl_reset removes the hash itself (every field, the dead ones too). */
static void reset_removes_hash(const tx_run *x)
{
	for (int k = 0; k < 5; k++)
		assert_true(tu_at(x->l, "k", 1, T0 + k * 3 * S).allowed);
	char key[512];
	size_t len = group_key(x->c, x->prefix, key, sizeof key);
	drl_error err = {0};
	assert_int_equal(drl_reset_at(x->l, "k", 1, T0 + 12 * S, &err), 0);
	assert_int_equal(raw_int(x->c, "EXISTS %b", key, len, NULL), 0);
	drl_result r = tu_at(x->l, "k", 1, T0 + 12 * S);
	assert_int_equal(r.remaining, 999);
}

static void test_reset_removes_hash(void **state)
{
	(void)state;
	NEED_SERVER();
	every_tx("rs", SPEC, reset_removes_hash);
}

/* The hash's key holding a string (someone else's, or a flat counter of
 * a client that wrote there): every tx says WRONGTYPE; nothing is read as
 * 0. The longest prefix and user key still fit. */
static void wrongtype_and_long_keys(const tx_run *x)
{
	assert_true(tu_at(x->l, "k", 1, T0).allowed);
	char key[512];
	size_t len = group_key(x->c, x->prefix, key, sizeof key);
	freeReplyObject(redisCommand(x->c, "DEL %b", key, len));
	freeReplyObject(redisCommand(x->c, "SET %b 5", key, len));
	drl_result r;
	drl_error err = {0};
	int rc = drl_allow_at(x->l, "k", 1, 1, T0, &r, &err);
	if (rc != DRL_ESTORE || strstr(err.message, "WRONGTYPE") == NULL)
		fail_msg("tx=%s: %s (%s)", x->tx, err.message,
			 drl_err_name(rc));

	char longp[129], longk[600];
	memset(longp, 'p', 128);
	longp[128] = '\0';
	memset(longk, 'k', sizeof longk);
	drl_limiter *l = tu_limiter(x->s, SPEC, longp);
	for (size_t n = 1; n <= sizeof longk; n += 131) {
		rc = drl_allow_at(l, longk, n, 1, T0, &r, &err);
		if (rc || !r.allowed)
			fail_msg("tx=%s, key of %zu: %s", x->tx, n,
				 err.message);
	}
	drl_limiter_free(l);
}

static void test_wrongtype_and_long_keys(void **state)
{
	(void)state;
	NEED_SERVER();
	every_tx("wt", SPEC, wrongtype_and_long_keys);
}

/* A policy whose second limit denies gives the first one's increment
 * back (drl__counter_refund, its field's index): the field keeps exactly
 * the admitted count, the hash keeps a TTL, no field goes. Also on the
 * last microsecond of a sub-window, the give-back landing as the next
 * begins. */
static void refund(const tx_run *x)
{
	int64_t edge = T0 + 3 * S - 1; /* the end of sub-window 2 */
	assert_true(tu_at(x->l, "k", 1, T0).allowed);
	assert_true(tu_at(x->l, "k", 1, edge).allowed);
	assert_false(tu_at(x->l, "k", 1, edge).allowed); /* fixed_window */
	assert_false(tu_at(x->l, "k", 1, edge + 1).allowed);
	char pattern[PREFIX_MAX + 8];
	snprintf(pattern, sizeof pattern, "%ssub", x->prefix);
	char key[512];
	size_t len = group_key(x->c, pattern, key, sizeof key);
	char f0[24], f2[24];
	snprintf(f0, sizeof f0, "%lld", (long long)(T0 / S));
	snprintf(f2, sizeof f2, "%lld", (long long)(T0 / S + 2));
	redisReply *r = redisCommand(x->c, "HMGET %b %s %s", key, len, f0, f2);
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	assert_string_equal(r->element[0]->str, "1");
	assert_string_equal(r->element[1]->str, "1");
	freeReplyObject(r);
	/* the refunds left a 0 (or no field) in sub-window 3 */
	long long n = raw_int(x->c, "HLEN %b", key, len, NULL);
	assert_true(n == 2 || n == 3);
	assert_true(raw_int(x->c, "PTTL %b", key, len, NULL) > 0);
}

static void test_refund(void **state)
{
	(void)state;
	NEED_SERVER();
	every_tx("rf", "subwindow:1000/10s,subwindows=10;fixed_window:2/1h",
		 refund);
}

DRL_FIXTURE_REDIS_GROUP(srv, have_srv)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sparse_every_tx),
		cmocka_unit_test(test_sparse_started),
		cmocka_unit_test(test_lagging_clock),
		cmocka_unit_test(test_mixed_tx_same_counters),
		cmocka_unit_test(test_peek_one_hmget),
		cmocka_unit_test(test_reset_removes_hash),
		cmocka_unit_test(test_wrongtype_and_long_keys),
		cmocka_unit_test(test_refund),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
