/*
 * drl_allow_batch: many (key, cost) requests in one call.
 *
 * On memory:// (items decided one by one), on a real redis-server with
 * tx=lua (one EVALSHA of the twin's batch variant per chunk of items) and
 * tx=watch (one by one): a batch decides exactly what the same requests
 * decided one after the other do, field for field, for every algorithm and
 * for a policy, in batches smaller and larger than a chunk; a hot key
 * admits exactly the limit, in item order; bad items and items the twin
 * fails on fail on their own; on Redis a batch is one script call per chunk
 * (the server's EVALSHA and read counts, the store's counters), survives
 * SCRIPT FLUSH (also while it runs) without running any item twice, and
 * fails cleanly, within one timeout, when the server stops answering. A
 * store of its own checks the protocol: the arguments sent, every failure
 * kind, a short answer, and that only version 2 stores get batch scripts.
 *
 * Skips the Redis parts when redis-server is missing, except under CI=true
 * (fails).
 */
#include "internal.h"
#include "redis_info.h"
#include "server_fixture.h"
#include "testutil.h"

#include <hiredis/hiredis.h>

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

static drl_server srv;
static int have_redis;

#define T0 INT64_C(1700000000000000) /* a fixed decision time */

/* ---- helpers ------------------------------------------------------------ */

/* Store URIs: memory, then (with a server) redis lua and watch. */
enum { URI_MEMORY, URI_LUA, URI_WATCH, URI_COUNT };

static const char *uri_of(int which, const char *extra)
{
	static char buf[URI_COUNT][192];
	switch (which) {
	case URI_MEMORY:
		return "memory://";
	case URI_LUA:
	case URI_WATCH:
		/* a timeout no loaded machine reaches, unless the test
		 * sets its own */
		snprintf(buf[which], sizeof buf[which],
			 "redis://127.0.0.1:%d?tx=%s%s%s", srv.port,
			 which == URI_LUA ? "lua" : "watch", extra ? extra : "",
			 extra && strstr(extra, "timeout_ms=")
				 ? ""
				 : "&timeout_ms=20000");
		return buf[which];
	}
	return NULL;
}

/* How many stores a test can use: memory only without a server. */
static int nstores(void)
{
	return have_redis ? URI_COUNT : 1;
}

static void same_result(const drl_result *a, const drl_result *b,
			const char *what, int step, size_t item)
{
	if (a->allowed != b->allowed || a->limit != b->limit ||
	    a->remaining != b->remaining ||
	    a->reset_after_us != b->reset_after_us ||
	    a->retry_after_us != b->retry_after_us ||
	    a->limit_index != b->limit_index)
		fail_msg("%s step %d item %zu: batch says allowed=%d rem=%lld "
			 "reset=%lld retry=%lld idx=%d, one by one allowed=%d "
			 "rem=%lld reset=%lld retry=%lld idx=%d",
			 what, step, item, a->allowed, (long long)a->remaining,
			 (long long)a->reset_after_us,
			 (long long)a->retry_after_us, a->limit_index,
			 b->allowed, (long long)b->remaining,
			 (long long)b->reset_after_us,
			 (long long)b->retry_after_us, b->limit_index);
}

/* A raw connection to the server, for INFO and for planting keys. */
static redisContext *raw_open(void)
{
	return redis_raw_open(srv.port);
}

static void raw_ok(redisContext *c, const char *fmt, const char *arg)
{
	redisReply *r = arg ? redisCommand(c, fmt, arg) : redisCommand(c, fmt);
	assert_non_null(r);
	if (r->type == REDIS_REPLY_ERROR)
		fail_msg("%s: %s", fmt, r->str);
	freeReplyObject(r);
}

/* What the server has seen: reads (one per round trip and socket read),
 * EVALSHA calls, SCRIPT LOAD calls. */
typedef struct server_counts {
	long long reads, evalsha, script_load;
} server_counts;

static server_counts counts(redisContext *c)
{
	server_counts n;
	n.reads = redis_info_num(c, "stats", "total_reads_processed:");
	n.evalsha = redis_info_num(c, "commandstats", "cmdstat_evalsha:calls=");
	n.script_load =
		redis_info_num(c, "commandstats", "cmdstat_script|load:calls=");
	return n;
}

/* The one key in Redis matching `pattern`, into buf. */
static void only_key(redisContext *c, const char *pattern, char *buf,
		     size_t cap, size_t *len)
{
	redisReply *r = redisCommand(c, "KEYS %s", pattern);
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	assert_int_equal(r->elements, 1);
	assert_true(r->element[0]->len <= cap);
	memcpy(buf, r->element[0]->str, r->element[0]->len);
	*len = r->element[0]->len;
	freeReplyObject(r);
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t next(void)
{
	return tu_xorshift(&rng);
}

/* ---- batch == one by one ------------------------------------------------ */

/* Periods and time steps are 60 times what the logic needs (the test's
 * clock moves about 12 s a step), so that the keys' TTLs, which run on
 * Redis's real clock, outlast any step however slow the machine: with
 * sliding_window:5/1s a key written under one prefix expired before the
 * same key under the other was read, under valgrind on a loaded machine
 * (one by one disagreed with the batch). */
#define TIME_SCALE 60
static const char *const specs[] = {
	"fixed_window:5/1m",
	"sliding_window:5/1m",
	"subwindow:6/72s,subwindows=4,trailing=1",
	"token_bucket:3/1m,burst=7",
	"gcra:3/42s,burst=4",
	"sliding_log:4/18s",
	/* too large for a twin's doubles: one by one even on tx=lua */
	"token_bucket:1000000000/1d",
	/* a policy: one by one everywhere */
	"sliding_log:4/1m;gcra:2/1m,burst=3",
};

enum { STEPS = 60, BATCH_MAX_TEST = 40, BIG_STEPS = 4, BIG_MIN = 300 };

static drl_batch_item items[DRL_BATCH_MAX];

/* Random batches (repeated keys, costs 0..4 and beyond capacity, a bad
 * item now and then, time moving back and forth) decided as a batch on
 * prefix "b" and one by one on prefix "o" of the same store: STEPS of up
 * to BATCH_MAX_TEST items, then, where a batch goes to a batch script
 * (tx=lua, one limit its twin takes), BIG_STEPS of BIG_MIN..
 * 8/3 x BIG_MIN items: several chunks of the script. (Only there: one by
 * one, a big step takes long enough in real time for a key's TTL to run
 * out under one prefix and not the other.) */
static void run_spec(drl_store *s, int which, const char *spec, int n)
{
	const char *uri = uri_of(which, NULL);
	char pb[48], po[48];
	snprintf(pb, sizeof pb, "bat%d:b:", n);
	snprintf(po, sizeof po, "bat%d:o:", n);
	drl_limiter *lb = tu_limiter(s, spec, pb),
		    *lo = tu_limiter(s, spec, po);
	static const struct {
		const char *p;
		size_t n;
	} keys[] = {{"alice", 5}, {"b\0b", 3}, {"with space\n", 11}, {"k", 1}};
	char what[256];
	snprintf(what, sizeof what, "%s on %s", spec, uri);
	int64_t now = T0 + (int64_t)(next() % (SEC * TIME_SCALE));
	bool big = which == URI_LUA && lb->nlimits == 1 && lb->limits[0].lua_ok;
	for (int step = 0; step < STEPS + (big ? BIG_STEPS : 0); step++) {
		uint64_t x = next();
		if (x % 10 == 0)
			now -= (int64_t)(x >> 8) % (300 * MS * TIME_SCALE);
		else if (x % 3 != 0)
			now += (int64_t)(x >> 8) % (400 * MS * TIME_SCALE);
		size_t nitems = 1 + (size_t)((x >> 16) % BATCH_MAX_TEST);
		if (step >= STEPS)
			nitems = BIG_MIN +
				 (size_t)((x >> 16) % (5 * BIG_MIN / 3));
		for (size_t i = 0; i < nitems; i++) {
			uint64_t y = next();
			int k = (int)(y % 4);
			items[i].key = keys[k].p;
			items[i].keylen = keys[k].n;
			items[i].cost = (int64_t)((y >> 8) % 5);
			if ((y >> 20) % 23 == 0)
				items[i].cost = 1000000001;
			if ((y >> 30) % 29 == 0)
				items[i].cost = -1; /* a bad item */
			items[i].rc = 12345;
		}
		drl_error err = {0};
		if (drl_allow_batch_at(lb, items, nitems, now, &err))
			fail_msg("%s: %s", what, err.message);
		for (size_t i = 0; i < nitems; i++) {
			drl_result r;
			drl_error e = {0};
			int rc = drl_allow_at(lo, items[i].key, items[i].keylen,
					      items[i].cost, now, &r, &e);
			if (rc != items[i].rc)
				fail_msg("%s step %d item %zu: batch rc %s, "
					 "one by one %s (%s)",
					 what, step, i,
					 drl_err_name(items[i].rc),
					 drl_err_name(rc), e.message);
			if (rc == 0)
				same_result(&items[i].result, &r, what, step,
					    i);
		}
	}
	drl_limiter_free(lb);
	drl_limiter_free(lo);
}

static void test_batch_equals_one_by_one(void **state)
{
	(void)state;
	for (int u = 0; u < nstores(); u++) {
		drl_store *s = tu_store(uri_of(u, NULL));
		for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
			run_spec(s, u, specs[i], (int)(u * 100 + i));
		drl_store_free(s);
	}
}

/* ---- a hot key ---------------------------------------------------------- */

static const char *const hot_specs[] = {TU_EVERY_ALGORITHM_100};

enum { HOT = 1000 };

static drl_batch_item hot[HOT];

static void hot_batch(const char *uri, drl_limiter *l, const char *spec,
		      bool real_clock)
{
	for (size_t i = 0; i < HOT; i++)
		hot[i] = (drl_batch_item){.key = "hot", .keylen = 3, .cost = 1};
	drl_error err = {0};
	int rc = real_clock ? drl_allow_batch(l, hot, HOT, &err)
			    : drl_allow_batch_at(l, hot, HOT, T0, &err);
	if (rc)
		fail_msg("%s on %s: %s", spec, uri, err.message);
	for (size_t i = 0; i < HOT; i++) {
		if (hot[i].rc)
			fail_msg("%s on %s item %zu: %s", spec, uri, i,
				 drl_err_name(hot[i].rc));
		if (hot[i].result.allowed != (i < 100))
			fail_msg("%s on %s: item %zu allowed=%d", spec, uri, i,
				 hot[i].result.allowed);
		if (i < 100)
			assert_int_equal(hot[i].result.remaining,
					 99 - (int64_t)i);
	}
}

/* hot_batch() for each of nspecs specs on the first nst stores (URI
 * options `extra`), each limiter under its own prefix (lua and watch share
 * a server). */
static void hot_on_stores(int nst, const char *extra, const char *const *sp,
			  size_t nspecs, bool real_clock)
{
	for (int u = 0; u < nst; u++) {
		const char *uri = uri_of(u, extra);
		drl_store *s = tu_store(uri);
		for (size_t i = 0; i < nspecs; i++) {
			char prefix[32];
			snprintf(prefix, sizeof prefix,
				 "hot%d:%d:%zu:", real_clock, u, i);
			drl_limiter *l = tu_limiter(s, sp[i], prefix);
			hot_batch(uri, l, sp[i], real_clock);
			drl_limiter_free(l);
		}
		drl_store_free(s);
	}
}

/* 1000 requests for one key, limit 100: items 0..99 allowed, the rest
 * denied, for every algorithm, on every store. */
static void test_hot_key_exact(void **state)
{
	(void)state;
	hot_on_stores(nstores(), NULL, hot_specs,
		      sizeof hot_specs / sizeof hot_specs[0], false);
}

/* drl_allow_batch at the real clock: on memory://, and on Redis with
 * clock=server (the twins read TIME themselves). Limits whose windows do
 * not move within the test. */
static void test_hot_key_real_clock(void **state)
{
	(void)state;
	static const char *const sp[] = {"token_bucket:100/1h", "gcra:100/1h",
					 "sliding_log:100/1h"};
	hot_on_stores(have_redis ? 2 : 1, "&clock=server", sp, 3, true);
}

/* ---- bad items, bad calls ----------------------------------------------- */

/* Bad items get their own DRL_EINVAL and decide nothing; the others are
 * decided in order; err describes the first bad one. */
static void test_bad_items(void **state)
{
	(void)state;
	for (int u = 0; u < nstores(); u++) {
		const char *uri = uri_of(u, NULL);
		drl_store *s = tu_store(uri);
		char prefix[32];
		snprintf(prefix, sizeof prefix, "bad%d:", u);
		drl_limiter *l = tu_limiter(s, "fixed_window:2/1h", prefix);
		drl_batch_item it[7] = {
			{.key = "k", .keylen = 1, .cost = 1},
			{.key = NULL, .keylen = 1, .cost = 1},
			{.key = "k", .keylen = 1, .cost = 1},
			{.key = "k", .keylen = 0, .cost = 1},
			{.key = "k", .keylen = 1, .cost = -1},
			{.key = "k",
			 .keylen = (size_t)DRL_KEY_MAX + 1,
			 .cost = 1},
			{.key = "k", .keylen = 1, .cost = 1},
		};
		for (size_t i = 0; i < 7; i++)
			it[i].result.allowed = 77;
		drl_error err = {0};
		assert_int_equal(drl_allow_batch_at(l, it, 7, T0, &err), 0);
		static const int want_rc[7] = {
			0,          DRL_EINVAL, 0, DRL_EINVAL,
			DRL_EINVAL, DRL_EINVAL, 0};
		static const int want_allowed[7] = {1, 0, 1, 0, 0, 0, 0};
		for (size_t i = 0; i < 7; i++) {
			assert_int_equal(it[i].rc, want_rc[i]);
			assert_int_equal(it[i].result.allowed, want_allowed[i]);
		}
		assert_int_equal(it[0].result.remaining, 1);
		assert_int_equal(it[2].result.remaining, 0);
		assert_true(it[6].result.retry_after_us > 0);
		assert_int_equal(err.code, DRL_EINVAL);
		assert_non_null(strstr(err.message, "item 1"));
		assert_non_null(strstr(err.message, "NULL key"));

		/* No failure: err untouched. */
		drl_error clean = {0};
		drl_batch_item ok = {.key = "other", .keylen = 5, .cost = 0};
		assert_int_equal(drl_allow_batch_at(l, &ok, 1, T0, &clean), 0);
		assert_int_equal(ok.rc, 0);
		assert_int_equal(clean.code, 0);
		drl_limiter_free(l);
		drl_store_free(s);
	}
}

/* A call that cannot run is DRL_EINVAL and touches no item. */
static void test_bad_calls(void **state)
{
	(void)state;
	drl_store *s = tu_store("memory://");
	drl_limiter *l = tu_limiter(s, "fixed_window:2/1h", NULL);
	static drl_batch_item many[DRL_BATCH_MAX + 1];
	for (size_t i = 0; i <= DRL_BATCH_MAX; i++)
		many[i] = (drl_batch_item){
			.key = "k", .keylen = 1, .cost = 0, .rc = 12345};
	drl_error err = {0};
	assert_int_equal(drl_allow_batch(NULL, many, 1, &err), DRL_EINVAL);
	assert_non_null(strstr(err.message, "limiter"));
	assert_int_equal(drl_allow_batch(l, NULL, 1, &err), DRL_EINVAL);
	assert_non_null(strstr(err.message, "items"));
	assert_int_equal(drl_allow_batch(l, many, 0, &err), DRL_EINVAL);
	assert_int_equal(drl_allow_batch(l, many, DRL_BATCH_MAX + 1, &err),
			 DRL_EINVAL);
	assert_non_null(strstr(err.message, "4097"));
	assert_int_equal(drl_allow_batch_at(NULL, many, 1, T0, NULL),
			 DRL_EINVAL);
	assert_int_equal(drl_allow_batch_at(l, many, 0, T0, NULL), DRL_EINVAL);
	assert_int_equal(drl_allow_batch_at(l, many, 1, -1, &err), DRL_EINVAL);
	assert_non_null(strstr(err.message, "time"));
	assert_int_equal(
		drl_allow_batch_at(l, many, 1, DRL_TIME_MAX_US + 1, NULL),
		DRL_EINVAL);
	for (size_t i = 0; i <= DRL_BATCH_MAX; i++)
		assert_int_equal(many[i].rc, 12345);
	/* DRL_BATCH_MAX itself is fine. */
	assert_int_equal(drl_allow_batch_at(l, many, DRL_BATCH_MAX, T0, NULL),
			 0);
	assert_int_equal(many[DRL_BATCH_MAX - 1].rc, 0);
	assert_int_equal(many[DRL_BATCH_MAX].rc, 12345);
	drl_limiter_free(l);
	drl_store_free(s);
}

/* ---- Redis: one script call per chunk, NOSCRIPT, errors ----------------- */

enum { RT = 1200 }; /* several chunks */

static drl_batch_item rt[RT];
static char rt_keys[RT][16];

/* RT fresh keys (tag `t`) of cost 1: all allowed, remaining 4. */
static void rt_batch(drl_limiter *l, char t)
{
	for (size_t i = 0; i < RT; i++) {
		snprintf(rt_keys[i], sizeof rt_keys[i], "%c%zu", t, i);
		rt[i] = (drl_batch_item){.key = rt_keys[i],
					 .keylen = strlen(rt_keys[i]),
					 .cost = 1};
	}
	drl_error err = {0};
	if (drl_allow_batch_at(l, rt, RT, T0, &err))
		fail_msg("batch: %s", err.message);
	for (size_t i = 0; i < RT; i++) {
		if (rt[i].rc)
			fail_msg("item %zu: %s", i, drl_err_name(rt[i].rc));
		assert_int_equal(rt[i].result.allowed, 1);
		/* 4, not 3: no item ran twice */
		assert_int_equal(rt[i].result.remaining, 4);
	}
}

/* tx=lua: RT decisions in one EVALSHA per chunk (of the twin's batch
 * variant): the server runs `chunks` EVALSHAs, reads the whole batch in a
 * few socket reads (one by one takes RT), and the store counts RT
 * decisions run server-side. After SCRIPT FLUSH the first chunk meets
 * NOSCRIPT, is sent again once after one SCRIPT LOAD, and runs once. */
static void test_one_call_per_chunk(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have_redis);
	redisContext *raw = raw_open();
	drl_store *s = tu_store(uri_of(URI_LUA, NULL));
	drl_limiter *l = tu_limiter(s, "fixed_window:5/1h", "rt:");
	size_t chunk = drl__batch_chunk(&l->limits[0]);
	long long chunks = (long long)((RT + chunk - 1) / chunk);
	assert_true(chunks >= 2 && chunk >= 128);
	drl_store_stats st0, st1;
	rt_batch(l, 'w'); /* warm-up: loads the script */

	server_counts a = counts(raw);
	assert_int_equal(drl_store_stats_get(s, &st0), 0);
	rt_batch(l, 'a');
	server_counts b = counts(raw);
	assert_int_equal(drl_store_stats_get(s, &st1), 0);
	assert_int_equal(b.evalsha - a.evalsha, chunks);
	assert_int_equal(b.script_load - a.script_load, 0);
	long long batch_reads = b.reads - a.reads - 3; /* 3 INFO commands */
	print_message("batch of %d: %lld EVALSHA, %lld socket reads on the "
		      "server\n",
		      RT, chunks, batch_reads);
	assert_true(batch_reads >= chunks && batch_reads <= RT / 10);
	assert_int_equal(st1.scripts - st0.scripts, RT);
	assert_int_equal(st1.decisions - st0.decisions, RT);
	assert_int_equal(st1.cas_attempts, 0);

	/* The same decisions one by one: RT reads, RT EVALSHAs. */
	a = counts(raw);
	for (size_t i = 0; i < RT; i++) {
		drl_result r;
		snprintf(rt_keys[i], sizeof rt_keys[i], "o%zu", i);
		assert_int_equal(drl_allow_at(l, rt_keys[i], strlen(rt_keys[i]),
					      1, T0, &r, NULL),
				 0);
	}
	b = counts(raw);
	assert_true(b.reads - a.reads - 3 >= RT);
	assert_int_equal(b.evalsha - a.evalsha, RT);

	/* SCRIPT FLUSH: NOSCRIPT for the first chunk, one SCRIPT LOAD, that
	 * chunk again, then the others. */
	for (int round = 0; round < 2; round++) {
		raw_ok(raw, "SCRIPT FLUSH", NULL);
		a = counts(raw);
		assert_int_equal(drl_store_stats_get(s, &st0), 0);
		rt_batch(l, (char)('f' + round));
		b = counts(raw);
		assert_int_equal(drl_store_stats_get(s, &st1), 0);
		assert_int_equal(b.script_load - a.script_load, 1);
		assert_int_equal(b.evalsha - a.evalsha, chunks + 1);
		assert_int_equal(st1.scripts - st0.scripts, RT);
	}
	/* And one call per chunk again after that. */
	a = counts(raw);
	rt_batch(l, 'z');
	b = counts(raw);
	assert_int_equal(b.evalsha - a.evalsha, chunks);
	assert_int_equal(b.script_load - a.script_load, 0);

	drl_limiter_free(l);
	drl_store_free(s);
	redisFree(raw);
}

/* Chunk sizes: the most for light twins, fewer for heavy ones (many
 * sub-windows, logs of large limits), never none. */
static void test_chunk_sizes(void **state)
{
	(void)state;
	static const struct {
		const char *spec;
		size_t lo, hi;
	} want[] = {
		{"token_bucket:5/1s", DRL__BATCH_CHUNK, DRL__BATCH_CHUNK},
		{"gcra:5/1s", DRL__BATCH_CHUNK, DRL__BATCH_CHUNK},
		{"fixed_window:5/1s", 200, DRL__BATCH_CHUNK},
		{"sliding_window:5/1s", 150, DRL__BATCH_CHUNK},
		{"sliding_log:5/1s", 150, DRL__BATCH_CHUNK},
		{"subwindow:10/1s", 50, 150},
		{"subwindow:60/1m,subwindows=60,trailing=1", 10, 40},
		/* a log's entry is written in place: only a rewrite of its
		 * live entries (up to LIMIT) grows with it */
		{"sliding_log:100/1s", 150, DRL__BATCH_CHUNK},
		{"sliding_log:1000/1s", 150, DRL__BATCH_CHUNK},
		{"sliding_log:10000/1s", 20, 50},
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		drl__limit lim;
		drl_error err = {0};
		assert_int_equal(drl__limit_parse(&lim, want[i].spec,
						  strlen(want[i].spec), &err),
				 0);
		size_t n = drl__batch_chunk(&lim);
		if (n < want[i].lo || n > want[i].hi)
			fail_msg("%s: %zu items per chunk", want[i].spec, n);
	}
}

/* tx=lua: an item the twin fails on (a key of another type, a malformed
 * counter) fails on its own, with the code the single path gives, and the
 * items after it in the same script call are still decided; the same in a
 * batch of several chunks; tx=watch does not claim batches. */
static void test_per_item_errors(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have_redis);
	redisContext *raw = raw_open();
	drl_store *s = tu_store(uri_of(URI_LUA, NULL));
	drl_limiter *l = tu_limiter(s, "fixed_window:5/1h", "pce:");
	drl_batch_item it[4] = {
		{.key = "wrongtype", .keylen = 9, .cost = 1},
		{.key = "corrupt", .keylen = 7, .cost = 1},
		{.key = "fine", .keylen = 4, .cost = 1},
	};
	assert_int_equal(drl_allow_batch_at(l, it, 3, T0, NULL), 0);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(it[i].rc, 0);
	char key[512];
	size_t len;
	only_key(raw, "pce:*wrongtype*", key, sizeof key, &len);
	redisReply *r = redisCommand(raw, "DEL %b", key, len);
	freeReplyObject(r);
	r = redisCommand(raw, "LPUSH %b x", key, len);
	freeReplyObject(r);
	/* the counter: the one field of the limit's hash (counter groups) */
	only_key(raw, "pce:*corrupt*", key, sizeof key, &len);
	r = redisCommand(raw, "HKEYS %b", key, len);
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	assert_int_equal(r->elements, 1);
	redisReply *f = redisCommand(raw, "HSET %b %b not-a-number", key, len,
				     r->element[0]->str, r->element[0]->len);
	freeReplyObject(f);
	freeReplyObject(r);

	drl_error err = {0};
	assert_int_equal(drl_allow_batch_at(l, it, 3, T0, &err), 0);
	assert_int_equal(it[0].rc, DRL_ESTORE);
	assert_int_equal(it[1].rc, DRL_ECORRUPT);
	assert_int_equal(it[2].rc, 0);
	assert_int_equal(it[2].result.remaining, 3);
	assert_int_equal(err.code, DRL_ESTORE);
	assert_non_null(strstr(err.message, "item 0"));
	assert_non_null(strstr(err.message, "WRONGTYPE"));
	/* the single path says the same */
	drl_result one;
	assert_int_equal(drl_allow_at(l, "corrupt", 7, 1, T0, &one, NULL),
			 DRL_ECORRUPT);
	assert_int_equal(drl_allow_at(l, "wrongtype", 9, 1, T0, &one, NULL),
			 DRL_ESTORE);

	/* Several chunks, the bad keys in each: only they fail. */
	for (size_t i = 0; i < 1000; i++) {
		static const char *const k[] = {"wrongtype", "corrupt", "fine",
						"other"};
		hot[i] = (drl_batch_item){
			.key = k[i % 4], .keylen = strlen(k[i % 4]), .cost = 0};
	}
	memset(&err, 0, sizeof err);
	assert_int_equal(drl_allow_batch_at(l, hot, 1000, T0, &err), 0);
	for (size_t i = 0; i < 1000; i++) {
		static const int want[] = {DRL_ESTORE, DRL_ECORRUPT, 0, 0};
		assert_int_equal(hot[i].rc, want[i % 4]);
		if (i % 4 == 2)
			assert_int_equal(hot[i].result.remaining, 3);
	}
	assert_non_null(strstr(err.message, "item 0"));
	drl_limiter_free(l);
	drl_store_free(s);

	/* tx=watch runs no scripts, so no batches either. */
	s = tu_store(uri_of(URI_WATCH, NULL));
	assert_false(s->backend->caps & (DRL_CAP_BATCH | DRL_CAP_SCRIPT));
	drl_store_free(s);
	redisFree(raw);
}

/* The batch driver (algorithms/lua_batch.lua) on its own, around a twin
 * of this test's that fails in every way there is, by cost: each item
 * gets its failure kind, the items around it their answers, the peek flag
 * is cost == 0 and each call sees its own key. */
static void test_driver_kinds(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have_redis);
	const char *driver =
		strstr(drl__lua_batch_counter.source, "-- Batch driver");
	assert_non_null(driver);
	static const char twin[] =
		"local function decide(KEYS, ARGV)\n"
		"local cost, peek = tonumber(ARGV[2]), 0\n"
		"if cost < 0 then cost, peek = -1 - cost, 1 end\n"
		"if cost == 1 then return redis.error_reply('ECORRUPT x') end\n"
		"if cost == 2 then return redis.call('INCR', KEYS[1]) end\n"
		"if cost == 3 then return redis.error_reply('OOM no room') "
		"end\n"
		"if cost == 4 then error('boom') end\n"
		"if cost == 5 then return {1, 2, 3, 4, 5, 6} end\n"
		"if cost == 11 then return 7 end\n"
		"if cost == 12 then return {8, 9} end\n"
		"if cost == 6 then return redis.error_reply('ERR other') end\n"
		"if cost == 7 then local x = nil; return x.y end\n"
		"if cost == 8 then return end\n"
		"if cost == 9 then return {1, 2, 3, 4, 'five'} end\n"
		"return {1, peek, cost, #KEYS[1], "
		"tonumber(ARGV[7])}\n"
		"end\n";
	size_t len = sizeof twin - 1 + strlen(driver);
	char *src = malloc(len + 1);
	assert_non_null(src);
	memcpy(src, twin, sizeof twin - 1);
	strcpy(src + sizeof twin - 1, driver);
	drl_script sc = {"kinds", src};

	redisContext *raw = raw_open();
	raw_ok(raw, "DEL list", NULL);
	raw_ok(raw, "LPUSH list x", NULL);
	drl_store *s = tu_store(uri_of(URI_LUA, NULL));
	drl_backend *b = s->backend;
	enum { N = 14 };
	static const int64_t costs[N] = {0, 1, 2, 3,  4, 5,  6,
					 7, 8, 9, 10, 0, 11, 12};
	/* 1: a compact answer (one integer, or two), padded with zeros */
	static const int64_t kind[N] = {0,  -2, -3, -4, -1, -5, -1,
					-1, -5, -5, 0,  0,  1,  1};
	drl_bytes keys[N];
	int64_t args[DRL__SCRIPT_NARGS + N] = {1, 99, 3, 4, 5, 6, 7};
	for (size_t i = 0; i < N; i++) {
		keys[i] = (drl_bytes){i == 2 ? "list" : "key-of-len-12",
				      i == 2 ? 4 : 12};
		args[DRL__SCRIPT_NARGS + i] = costs[i];
	}
	int64_t out[N * DRL__SCRIPT_NOUT];
	size_t nret = 0;
	drl_error err = {0};
	int rc = b->eval(b, &sc, N, keys, DRL__SCRIPT_NARGS + N, args, out,
			 N * DRL__SCRIPT_NOUT, &nret, &err);
	if (rc)
		fail_msg("%s", err.message);
	assert_int_equal(nret, N * DRL__SCRIPT_NOUT);
	for (size_t i = 0; i < N; i++) {
		const int64_t *o = out + i * DRL__SCRIPT_NOUT;
		if (kind[i] == 1) {
			assert_int_equal(o[0], costs[i] == 11 ? 7 : 8);
			assert_int_equal(o[1], costs[i] == 11 ? 0 : 9);
			for (size_t j = 2; j < DRL__SCRIPT_NOUT; j++)
				assert_int_equal(o[j], 0);
		} else if (kind[i] == 0) {
			assert_int_equal(o[0], 1);
			assert_int_equal(o[1], costs[i] == 0); /* peek */
			assert_int_equal(o[2], costs[i]);
			assert_int_equal(o[3], 12);
			assert_int_equal(o[4], 7); /* shared ARGV */
		} else {
			if (o[0] != kind[i])
				fail_msg("item %zu: kind %lld, want %lld", i,
					 (long long)o[0], (long long)kind[i]);
			for (size_t j = 1; j < DRL__SCRIPT_NOUT; j++)
				assert_int_equal(o[j], 0);
		}
	}
	drl_store_free(s);
	redisFree(raw);
	free(src);
}

/* A server that stops answering: every item of the batch times out (the
 * call itself returns 0) after about one timeout, not one per chunk (the
 * chunks after the one that timed out are not sent), and the store works
 * again once the server answers. */
static void test_timeout(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have_redis);
	/* 200 ms on a quiet machine: long enough here that one wait plus
	 * the work of 8 chunks stays well below 8 waits. */
	const long timeout_ms = (long)tu_bound_ms(200);
	char opt[32];
	snprintf(opt, sizeof opt, "&timeout_ms=%ld", timeout_ms);
	drl_store *s = tu_store(uri_of(URI_LUA, opt));
	drl_limiter *l = tu_limiter(s, "token_bucket:10/1h", "to:");
	for (size_t i = 0; i < DRL_BATCH_MAX; i++)
		items[i] = (drl_batch_item){.key = "t", .keylen = 1, .cost = 1};
	assert_int_equal(drl_allow_batch_at(l, items, 1, T0, NULL), 0);
	for (int big = 0; big < 2; big++) {
		size_t n = big ? DRL_BATCH_MAX : 50;
		struct timespec t0, t1;
		assert_int_equal(drl_fixture_pause(&srv), 0);
		drl_error err = {0};
		clock_gettime(CLOCK_MONOTONIC, &t0);
		int rc = drl_allow_batch_at(l, items, n, T0, &err);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		assert_int_equal(drl_fixture_resume(&srv), 0);
		assert_int_equal(rc, 0);
		for (size_t i = 0; i < n; i++)
			assert_int_equal(items[i].rc, DRL_ETIMEDOUT);
		assert_int_equal(err.code, DRL_ETIMEDOUT);
		assert_non_null(strstr(err.message, "item 0"));
		long ms = (long)(t1.tv_sec - t0.tv_sec) * 1000 +
			  (t1.tv_nsec - t0.tv_nsec) / 1000000;
		print_message("%zu items timed out after %ld ms\n", n, ms);
		/* 8 chunks: one wait, not one each */
		assert_true(ms >= timeout_ms - 50 && ms < 3 * timeout_ms);
	}
	drl_batch_item again = {.key = "u", .keylen = 1, .cost = 1};
	drl_error err = {0};
	assert_int_equal(drl_allow_batch_at(l, &again, 1, T0, &err), 0);
	assert_int_equal(again.rc, 0);
	assert_int_equal(again.result.allowed, 1);
	drl_limiter_free(l);
	drl_store_free(s);
}

/* SCRIPT FLUSH, over and over, while batches on a hot key run: a call that
 * met NOSCRIPT is sent again at most once and never runs twice, so exactly
 * the limit is admitted and the counter in Redis says the same. */
static atomic_int flushing;

static void *flusher(void *arg)
{
	(void)arg;
	redisContext *c = raw_open();
	while (atomic_load(&flushing)) {
		redisReply *r = redisCommand(c, "SCRIPT FLUSH");
		if (r)
			freeReplyObject(r);
		usleep(300);
	}
	redisFree(c);
	return NULL;
}

static void test_flush_during_batches(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have_redis);
	redisContext *raw = raw_open();
	drl_store *s = tu_store(uri_of(URI_LUA, NULL));
	drl_limiter *l = tu_limiter(s, "fixed_window:100/1h", "fl:");
	pthread_t t;
	atomic_store(&flushing, 1);
	assert_int_equal(pthread_create(&t, NULL, flusher, NULL), 0);
	int allowed = 0, ok = 0, failed = 0;
	long long loads = counts(raw).script_load;
	for (int round = 0; round < 40 && ok < 5000; round++) {
		for (size_t i = 0; i < HOT; i++)
			hot[i] = (drl_batch_item){
				.key = "hot", .keylen = 3, .cost = 1};
		drl_error err = {0};
		assert_int_equal(drl_allow_batch_at(l, hot, HOT, T0, &err), 0);
		for (size_t i = 0; i < HOT; i++) {
			if (hot[i].rc == 0) {
				ok++;
				allowed += hot[i].result.allowed;
			} else if (hot[i].rc == DRL_ESTORE) {
				failed++; /* NOSCRIPT twice: did not run */
			} else {
				fail_msg("item %zu: %s", i,
					 drl_err_name(hot[i].rc));
			}
		}
	}
	atomic_store(&flushing, 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	loads = counts(raw).script_load - loads;
	print_message("%d decided, %d failed under SCRIPT FLUSH (%lld SCRIPT "
		      "LOAD)\n",
		      ok, failed, loads);
	assert_true(ok >= 5000);
	assert_int_equal(allowed, 100);
	char key[512];
	size_t len;
	only_key(raw, "fl:*", key, sizeof key, &len);
	/* the counter: the one field of the limit's hash (counter groups) */
	redisReply *r = redisCommand(raw, "HVALS %b", key, len);
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	assert_int_equal(r->elements, 1);
	assert_string_equal(r->element[0]->str, "100");
	freeReplyObject(r);
	drl_limiter_free(l);
	drl_store_free(s);
	redisFree(raw);
}

/* A cost-0 request (a peek) writes nothing and is allowed, also when time
 * went backwards past a gcra TAT (which once made gcra deny it, and the
 * policy then refunded an undo no decision had filled — found by the
 * random batches above under valgrind). Seen on tx=watch as SET commands:
 * a peek only ever reads. 5s behind, gcra sees itself as at 10s (issue
 * 18): 2 of 3 left. */
static void test_denied_peek_writes_nothing(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have_redis);
	redisContext *raw = raw_open();
	drl_store *s = tu_store(uri_of(URI_WATCH, NULL));
	drl_limiter *l =
		tu_limiter(s, "sliding_log:4/1s;gcra:2/1s,burst=3", "pk:");
	drl_result r;
	assert_int_equal(drl_allow_at(l, "p", 1, 1, T0 + 10 * SEC, &r, NULL),
			 0);
	assert_int_equal(r.allowed, 1);
	long long sets =
		redis_info_num(raw, "commandstats", "cmdstat_set:calls=");
	drl_batch_item it = {.key = "p", .keylen = 1, .cost = 0};
	assert_int_equal(drl_allow_batch_at(l, &it, 1, T0 + 5 * SEC, NULL), 0);
	assert_int_equal(it.rc, 0);
	assert_int_equal(it.result.allowed, 1); /* a peek, TAT far ahead */
	assert_int_equal(it.result.remaining, 2);
	assert_int_equal(it.result.limit_index, 1); /* gcra: least left */
	assert_int_equal(
		redis_info_num(raw, "commandstats", "cmdstat_set:calls=") -
			sets,
		0);
	drl_limiter_free(l);
	drl_store_free(s);
	redisFree(raw);
}

/* A store of its own, counting what it is asked: incr/get_many/load/cas
 * (the core's optimistic and counter paths) and eval, which answers a twin
 * with a decision and a batch variant as stub_mode says. */
enum { STUB_KINDS, STUB_SHORT, STUB_TIMEOUT };
static int stub_mode, stub_evals, stub_batch_evals;
static int64_t stub_kind;      /* nonzero: every item of a batch fails so */
static size_t stub_batch_keys; /* the most keys one batch call had */

static void stub_destroy(drl_backend *b)
{
	(void)b;
}

static int stub_incr(drl_backend *b, drl_bytes key, int64_t delta,
		     int64_t ttl_us, int64_t *value, drl_error *err)
{
	*value = delta;
	return 0;
}

static int stub_get_many(drl_backend *b, size_t n, const drl_bytes *keys,
			 int64_t *values, drl_error *err)
{
	memset(values, 0, n * sizeof *values);
	return 0;
}

static int stub_load(drl_backend *b, drl_bytes key, void *buf, size_t cap,
		     size_t *len, uint64_t *version, drl_error *err)
{
	*len = 0;
	*version = 0;
	return 0;
}

static int stub_cas(drl_backend *b, drl_bytes key, const void *blob, size_t len,
		    uint64_t version, int64_t ttl_us, drl_error *err)
{
	return 0;
}

/* A twin: allowed, remaining 9. A batch variant (STUB_KINDS): item i
 * decided (allowed, remaining = its cost) when i % 6 == 0, else failure
 * kind -(i % 6), or stub_kind for every item when set; STUB_SHORT: one
 * value short; STUB_TIMEOUT: a timeout. */
static int stub_eval(drl_backend *b, const drl_script *script, size_t nkeys,
		     const drl_bytes *keys, size_t nargs, const int64_t *args,
		     int64_t *out, size_t nout, size_t *nret, drl_error *err)
{
	if (script == &drl__lua_counter) {
		static const int64_t one[5] = {1, 9, 0, 0, 0};
		stub_evals++;
		assert_int_equal(nkeys, 1);
		assert_int_equal(nargs, DRL__SCRIPT_NARGS);
		memcpy(out, one, sizeof one);
		*nret = 5;
		return 0;
	}
	assert_ptr_equal(script, &drl__lua_batch_counter);
	stub_batch_evals++;
	if (nkeys > stub_batch_keys)
		stub_batch_keys = nkeys;
	assert_int_equal(nargs, DRL__SCRIPT_NARGS + nkeys);
	assert_int_equal(nout, DRL__SCRIPT_NOUT * nkeys);
	assert_int_equal(args[0], T0);
	assert_int_equal(args[2], 2); /* limit */
	if (stub_mode == STUB_TIMEOUT)
		return drl_error_set(err, DRL_ETIMEDOUT, "stub: timed out");
	for (size_t i = 0; i < nkeys; i++) {
		int64_t *o = out + i * DRL__SCRIPT_NOUT;
		memset(o, 0, DRL__SCRIPT_NOUT * sizeof *o);
		o[0] = stub_kind ? stub_kind : -(int64_t)(i % 6);
		if (o[0] == 0) {
			o[0] = 1;
			o[1] = args[DRL__SCRIPT_NARGS + i];
		}
	}
	*nret = nkeys * DRL__SCRIPT_NOUT - (stub_mode == STUB_SHORT);
	return 0;
}

static drl_backend stub = {
	/* version */ 1,
	/* caps */ DRL_CAP_COUNTER | DRL_CAP_CAS | DRL_CAP_SCRIPT |
		DRL_CAP_BATCH,
	/* name */ "stub",
	/* destroy */ stub_destroy,
	/* incr */ stub_incr,
	/* get_many */ stub_get_many,
	/* load */ stub_load,
	/* cas */ stub_cas,
	/* update */ NULL,
	/* eval */ stub_eval,
	/* now */ NULL,
	/* del */ NULL,
	/* eval_start */ NULL,
	/* add_read */ NULL,
	/* add_read_start */ NULL,
	/* chan_open .. chan_close */ NULL,
	NULL,
	NULL,
	NULL,
	/* trim */ NULL,
	/* trim_start */ NULL,
	/* eval_policy */ NULL,
};

/* A version 1 store gets no batch scripts, whatever its caps say: its
 * items go one by one (one twin call each). A version 2 store that claims
 * DRL_CAP_BATCH must run scripts; one that does gets one batch call per
 * chunk, with the shared arguments and each item's cost, and each item
 * reads its own answer: decided, or its failure kind's code. */
static void test_stub_protocol(void **state)
{
	(void)state;
	drl_store *s = NULL;
	drl_error err = {0};
	assert_false(drl__has_batch(&stub));
	assert_int_equal(drl_store_from_backend(&s, &stub, &err), 0);
	drl_limiter *l = tu_limiter(s, "fixed_window:2/1h", NULL);
	for (size_t i = 0; i < 3; i++)
		items[i] = (drl_batch_item){.key = "k", .keylen = 1, .cost = 1};
	assert_int_equal(drl_allow_batch_at(l, items, 3, T0, NULL), 0);
	assert_int_equal(stub_evals, 3);
	assert_int_equal(stub_batch_evals, 0);
	assert_int_equal(items[2].rc, 0);
	assert_int_equal(items[2].result.remaining, 9);
	drl_limiter_free(l);
	drl_store_free(s);

	drl_backend b = stub;
	b.version = 2;
	b.caps &= ~(unsigned)DRL_CAP_SCRIPT;
	assert_int_equal(drl_store_from_backend(&s, &b, &err), DRL_EINVAL);
	assert_non_null(strstr(err.message, "DRL_CAP_BATCH"));
	b.caps |= DRL_CAP_SCRIPT;
	assert_true(drl__has_batch(&b));
	assert_int_equal(drl_store_from_backend(&s, &b, &err), 0);
	l = tu_limiter(s, "fixed_window:2/1h", NULL);

	/* Every failure kind, in DRL_BATCH_MAX items: one call per chunk. */
	static const int want[6] = {0,          DRL_ESTORE, DRL_ECORRUPT,
				    DRL_ESTORE, DRL_ESTORE, DRL_ECORRUPT};
	static const char *const says[6] = {NULL,       "failed on the server",
					    "ECORRUPT", "WRONGTYPE",
					    "OOM",      "not a decision"};
	for (size_t i = 0; i < DRL_BATCH_MAX; i++)
		items[i] = (drl_batch_item){
			.key = "k", .keylen = 1, .cost = (int64_t)(i % 3)};
	memset(&err, 0, sizeof err);
	stub_mode = STUB_KINDS;
	stub_batch_evals = stub_evals = 0;
	assert_int_equal(drl_allow_batch_at(l, items, DRL_BATCH_MAX, T0, &err),
			 0);
	size_t chunk = drl__batch_chunk(&l->limits[0]);
	assert_int_equal(stub_evals, 0);
	assert_int_equal(stub_batch_evals, (DRL_BATCH_MAX + chunk - 1) / chunk);
	assert_int_equal(stub_batch_keys, chunk);
	for (size_t i = 0; i < DRL_BATCH_MAX; i++) {
		size_t k = (i % chunk) % 6;
		assert_int_equal(items[i].rc, want[k]);
		if (k == 0)
			assert_int_equal(items[i].result.remaining,
					 (int64_t)(i % 3));
	}
	assert_non_null(strstr(err.message, "item 1: counter script failed"));
	for (size_t k = 1; k < 6; k++) {
		drl_error e = {0};
		stub_kind = -(int64_t)k;
		assert_int_equal(drl_allow_batch_at(l, items, 1, T0, &e), 0);
		if (items[0].rc != want[k] || !strstr(e.message, says[k]))
			fail_msg("kind %zu: %s: %s", k,
				 drl_err_name(items[0].rc), e.message);
	}
	stub_kind = 0;

	/* A short answer fails every item of its call. */
	stub_mode = STUB_SHORT;
	assert_int_equal(drl_allow_batch_at(l, items, 7, T0, &err), 0);
	for (size_t i = 0; i < 7; i++)
		assert_int_equal(items[i].rc, DRL_ECORRUPT);
	assert_non_null(strstr(err.message, "answered 34 values for 7 items"));

	/* A timeout: the first call only; every item fails with it. */
	stub_mode = STUB_TIMEOUT;
	stub_batch_evals = 0;
	assert_int_equal(drl_allow_batch_at(l, items, DRL_BATCH_MAX, T0, &err),
			 0);
	assert_int_equal(stub_batch_evals, 1);
	for (size_t i = 0; i < DRL_BATCH_MAX; i++)
		assert_int_equal(items[i].rc, DRL_ETIMEDOUT);
	assert_non_null(strstr(err.message, "item 0: stub: timed out"));
	drl_limiter_free(l);
	drl_store_free(s);
}

DRL_FIXTURE_REDIS_GROUP(srv, have_redis)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batch_equals_one_by_one),
		cmocka_unit_test(test_hot_key_exact),
		cmocka_unit_test(test_hot_key_real_clock),
		cmocka_unit_test(test_bad_items),
		cmocka_unit_test(test_bad_calls),
		cmocka_unit_test(test_one_call_per_chunk),
		cmocka_unit_test(test_chunk_sizes),
		cmocka_unit_test(test_per_item_errors),
		cmocka_unit_test(test_driver_kinds),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_flush_during_batches),
		cmocka_unit_test(test_denied_peek_writes_nothing),
		cmocka_unit_test(test_stub_protocol),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
