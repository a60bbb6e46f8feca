/*
 * Differential test: the same random traffic (keys, times — sometimes going
 * backwards — and costs, including 0 and more than the limit) decided on
 * memory://, Redis tx=lua (the Lua twins), Redis tx=watch (the C steps over
 * WATCH/MULTI/EXEC), memcached (counters + gets/cas) and Redis tx=lua
 * through drl_allow_batch_at (one item per batch: the twins' batch
 * variants) gives identical decisions, field for field, for every
 * algorithm and for policies; token_bucket and gcra again with two clients
 * whose clocks differ by less, and by more, than one emission interval.
 * Then:
 * every key written to Redis has a TTL, and tx=lua really ran the twins
 * (EVALSHA calls counted by the server) while tx=watch ran none.
 */
#include "redis_info.h"
#include "server_fixture.h"
#include "testutil.h"

#include <hiredis/hiredis.h>
#include <strings.h>

static drl_server redis_srv, mc_srv;
static int have_redis, have_mc;
/* Skips the running test unless both servers run. */
#define NEED_SERVERS() DRL_FIXTURE_NEED(have_redis &&have_mc)

enum { STORES = 6, BATCHED = 4, AUTO = 5, STEPS = 400 };

static const char *const specs[] = {
	"fixed_window:5/1s",
	"fixed_window:3/250ms",
	"sliding_window:5/1s",
	"sliding_window:20/1m",
	"subwindow:6/1200ms,subwindows=4",
	"subwindow:6/1200ms,subwindows=4,trailing=1",
	"token_bucket:5/1s",
	"token_bucket:3/1s,burst=7",
	"token_bucket:7/1m,burst=2",
	"gcra:5/1s",
	"gcra:3/700ms,burst=4",
	"sliding_log:5/1s",
	"sliding_log:4/300ms",
	/* too large for a Lua twin's doubles: tx=lua falls back to CAS */
	"token_bucket:1000000000/1d",
	"sliding_window:1000000000/1d",
	/* policies */
	"token_bucket:5/1s;fixed_window:8/3s",
	"sliding_log:4/1s;gcra:2/1s,burst=3",
};

static long long redis_evalsha_calls(void)
{
	redisContext *c = redisConnect("127.0.0.1", redis_srv.port);
	assert_non_null(c);
	assert_int_equal(c->err, 0);
	long long calls = redis_cmd_calls(c, "evalsha");
	redisFree(c);
	return calls;
}

/* Every key in Redis has a TTL. Returns the number checked. */
static int check_ttls(void)
{
	redisContext *c = redisConnect("127.0.0.1", redis_srv.port);
	assert_non_null(c);
	redisReply *r = redisCommand(c, "KEYS *");
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	for (size_t i = 0; i < r->elements; i++) {
		redisReply *t = redisCommand(c, "PTTL %b", r->element[i]->str,
					     r->element[i]->len);
		/* -2: expired since KEYS (short windows); -1: no TTL */
		if (t->type != REDIS_REPLY_INTEGER || t->integer == -1)
			fail_msg("key without TTL: %.*s",
				 (int)r->element[i]->len, r->element[i]->str);
		freeReplyObject(t);
	}
	int n = (int)r->elements;
	freeReplyObject(r);
	redisFree(c);
	return n;
}

/* Every key a decision of a 1 s limit writes expires within its windows
 * and the grace, ~3 s at most: on every strategy (a twin that set PX in
 * µs, not ms, kept keys 1000 times as long). */
static void test_ttl_bounds(void **state)
{
	(void)state;
	NEED_SERVERS();
	static const char *const ttl_specs[] = {
		"fixed_window:5/1s",
		"sliding_window:5/1s",
		"subwindow:5/1s,subwindows=4,trailing=1",
		"token_bucket:5/1s",
		"gcra:5/1s",
		"sliding_log:5/1s",
	};
	static const char *const tx[] = {"auto", "lua", "watch"};
	redisContext *c = redisConnect("127.0.0.1", redis_srv.port);
	assert_non_null(c);
	for (size_t t = 0; t < 3; t++) {
		char uri[128];
		snprintf(uri, sizeof uri, "redis://127.0.0.1:%d?tx=%s",
			 redis_srv.port, tx[t]);
		drl_store *s;
		assert_int_equal(drl_store_open(&s, uri, NULL), 0);
		for (size_t i = 0; i < sizeof ttl_specs / sizeof ttl_specs[0];
		     i++) {
			freeReplyObject(redisCommand(c, "FLUSHALL"));
			drl_limiter *l;
			drl_result r;
			assert_int_equal(drl_limiter_new(&l, s, ttl_specs[i],
							 "ttl:", NULL),
					 0);
			assert_int_equal(drl_allow(l, "k", 1, 2, &r, NULL), 0);
			assert_true(r.allowed);
			redisReply *k = redisCommand(c, "KEYS ttl:*");
			assert_int_equal(k->type, REDIS_REPLY_ARRAY);
			assert_true(k->elements >= 1);
			for (size_t j = 0; j < k->elements; j++) {
				redisReply *p = redisCommand(
					c, "PTTL %b", k->element[j]->str,
					k->element[j]->len);
				/* 3 s: a window, the one before, the
				 * grace; a group of counters (one hash)
				 * lives the sub-windows the grace spans
				 * longer (algorithms/subwindow.c) */
				if (p->integer <= 0 || p->integer > 4100)
					fail_msg("%s on tx=%s: key %s has a "
						 "TTL of %lld ms",
						 ttl_specs[i], tx[t],
						 k->element[j]->str,
						 (long long)p->integer);
				freeReplyObject(p);
			}
			freeReplyObject(k);
			drl_limiter_free(l);
		}
		drl_store_free(s);
	}
	redisFree(c);
}

static uint64_t rng = 0x853c49e6748fea9bu;
static uint64_t next(void)
{
	return tu_xorshift(&rng);
}

/* Specs decided by two clients whose clocks differ by `lag` µs (T is the
 * emission interval), with forward steps of up to `stride` µs. */
static const struct {
	const char *spec;
	int64_t lag, stride;
} skewed[] = {
	{"token_bucket:10/1s,burst=4", 60 * MS, 150 * MS}, /* T = 100ms */
	{"token_bucket:10/1s,burst=4", 250 * MS, 150 * MS},
	{"gcra:10/1s,burst=4", 60 * MS, 150 * MS},
	{"gcra:10/1s,burst=4", 250 * MS, 150 * MS},
	{"gcra:3/700ms,burst=5", 100 * MS, 300 * MS}, /* T = 233.3ms */
	{"gcra:3/700ms,burst=5", 700 * MS, 300 * MS},
	{"token_bucket:7/1m,burst=12", 5 * SEC, 10 * SEC}, /* T = 8.57s */
	{"gcra:7/1m,burst=12", 5 * SEC, 10 * SEC},
	{"gcra:7/1m,burst=12", 20 * SEC, 10 * SEC},
	/* refunds (C steps, also under tx=lua) leave a full bucket whose
	 * refill time is ahead of the lagging client */
	{"token_bucket:10/1s,burst=4;fixed_window:2/1s", 250 * MS, 150 * MS},
	{"gcra:10/1s,burst=4;fixed_window:2/1s", 250 * MS, 150 * MS},
};

/* One step's time: random, sometimes backwards (lag 0), or that of one of
 * two clients, the second `lag` behind the first. */
static int64_t step_time(int64_t *now, uint64_t x, int64_t lag, int64_t stride)
{
	if (lag == 0) {
		if (x % 10 == 0)
			*now -= (int64_t)(x >> 8) % (300 * MS); /* backwards */
		else if (x % 3 != 0)
			*now += (int64_t)(x >> 8) % (400 * MS);
		return *now;
	}
	if (x % 3 != 0)
		*now += (int64_t)(x >> 8) % stride;
	return (x >> 60) & 1 ? *now - lag : *now;
}

static void run_spec(drl_store *stores[STORES], const char *const names[],
		     const char *spec, int n, int64_t lag, int64_t stride)
{
	drl_limiter *l[STORES];
	for (int s = 0; s < STORES; s++) {
		char prefix[32]; /* lua and watch share a server, not keys */
		snprintf(prefix, sizeof prefix, "diff%d:%d:", n, s);
		drl_error err = {0};
		if (drl_limiter_new(&l[s], stores[s], spec, prefix, &err))
			fail_msg("%s: %s", spec, err.message);
	}
	static const struct {
		const char *p;
		size_t n;
	} keys[] = {{"alice", 5}, {"b\0b", 3}, {"with space\n", 11}, {"k", 1}};
	int64_t real = INT64_C(1700000000000000) + (int64_t)(next() % SEC);
	for (int i = 0; i < STEPS; i++) {
		uint64_t x = next();
		int64_t now = step_time(&real, x, lag, stride);
		int64_t cost = (int64_t)((x >> 40) % 5); /* 0..4 */
		if ((x >> 50) % 17 == 0)
			cost = 1000000001; /* more than any capacity */
		int k = (int)((x >> 20) % 4);
		drl_result r[STORES];
		for (int s = 0; s < STORES; s++) {
			drl_error err = {0};
			drl_batch_item it = {.key = keys[k].p,
					     .keylen = keys[k].n,
					     .cost = cost};
			int rc = s == BATCHED ? drl_allow_batch_at(l[s], &it, 1,
								   now, &err)
					      : drl_allow_at(l[s], keys[k].p,
							     keys[k].n, cost,
							     now, &r[s], &err);
			if (rc == 0 && s == BATCHED) {
				rc = it.rc;
				r[s] = it.result;
			}
			if (rc)
				fail_msg("%s on %s: %s", spec, names[s],
					 err.message);
		}
		for (int s = 1; s < STORES; s++)
			if (r[0].allowed != r[s].allowed ||
			    r[0].limit != r[s].limit ||
			    r[0].remaining != r[s].remaining ||
			    r[0].reset_after_us != r[s].reset_after_us ||
			    r[0].retry_after_us != r[s].retry_after_us ||
			    r[0].limit_index != r[s].limit_index ||
			    r[0].would_allow != r[s].would_allow)
				fail_msg("%s step %d (cost %lld): memory says "
					 "allowed=%d rem=%lld reset=%lld "
					 "retry=%lld, %s says allowed=%d "
					 "rem=%lld reset=%lld retry=%lld",
					 spec, i, (long long)cost, r[0].allowed,
					 (long long)r[0].remaining,
					 (long long)r[0].reset_after_us,
					 (long long)r[0].retry_after_us,
					 names[s], r[s].allowed,
					 (long long)r[s].remaining,
					 (long long)r[s].reset_after_us,
					 (long long)r[s].retry_after_us);
	}
	for (int s = 0; s < STORES; s++)
		drl_limiter_free(l[s]);
}

static void open_all(drl_store *stores[STORES], const char *names[STORES])
{
	static char uris[STORES][128];
	snprintf(uris[0], sizeof uris[0], "memory://");
	snprintf(uris[1], sizeof uris[1], "redis://127.0.0.1:%d?tx=lua",
		 redis_srv.port);
	snprintf(uris[2], sizeof uris[2], "redis://127.0.0.1:%d?tx=watch",
		 redis_srv.port);
	snprintf(uris[3], sizeof uris[3], "memcached://127.0.0.1:%d",
		 mc_srv.port);
	snprintf(uris[BATCHED], sizeof uris[BATCHED], "%s", uris[1]);
	/* tx=auto, the default: the counters by plain commands */
	snprintf(uris[AUTO], sizeof uris[AUTO], "redis://127.0.0.1:%d",
		 redis_srv.port);
	for (int s = 0; s < STORES; s++) {
		drl_error err = {0};
		names[s] = uris[s];
		if (drl_store_open(&stores[s], uris[s], &err))
			fail_msg("%s: %s", uris[s], err.message);
	}
	names[BATCHED] = "tx=lua batches";
}

static void test_identical_decisions(void **state)
{
	(void)state;
	NEED_SERVERS();
	drl_store *stores[STORES];
	const char *names[STORES];
	open_all(stores, names);
	int n = 0;
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
		run_spec(stores, names, specs[i], n++, 0, 0);
	for (size_t i = 0; i < sizeof skewed / sizeof skewed[0]; i++)
		run_spec(stores, names, skewed[i].spec, n++, skewed[i].lag,
			 skewed[i].stride);
	for (int s = 0; s < STORES; s++)
		drl_store_free(stores[s]);
	assert_true(check_ttls() > 0);
}

/* tx=lua runs the twins (one EVALSHA per decision); tx=watch none;
 * tx=auto (the default) the twins of all but the counters, which send
 * plain commands. */
static void test_strategy_really_differs(void **state)
{
	(void)state;
	NEED_SERVERS();
	char uri[128];
	drl_store *s;
	drl_limiter *l;
	drl_result r;
	static const char *const twins[] = {"fixed_window:5/1s",
					    "token_bucket:5/1s", "gcra:5/1s",
					    "sliding_log:5/1s"};
	static const char *const tx[] = {"lua", "watch", "auto"};
	for (int m = 0; m < 3; m++) {
		int watch = m == 1, autos = m == 2;
		snprintf(uri, sizeof uri, "redis://127.0.0.1:%d?tx=%s",
			 redis_srv.port, tx[m]);
		assert_int_equal(drl_store_open(&s, uri, NULL), 0);
		for (size_t i = 0; i < 4; i++) {
			assert_int_equal(drl_limiter_new(&l, s, twins[i],
							 "strategy:", NULL),
					 0);
			/* warm-up: the first EVALSHA of a script may meet
			 * NOSCRIPT and be sent again after SCRIPT LOAD */
			assert_int_equal(drl_allow(l, "x", 1, 1, &r, NULL), 0);
			long long before = redis_evalsha_calls();
			for (int j = 0; j < 10; j++)
				assert_int_equal(
					drl_allow(l, "x", 1, 1, &r, NULL), 0);
			long long calls = redis_evalsha_calls() - before;
			assert_int_equal(calls,
					 watch || (autos && i == 0) ? 0 : 10);
			drl_limiter_free(l);
		}
		/* the store's counters tell the same story */
		drl_store_stats st;
		assert_int_equal(drl_store_stats_get(s, &st), 0);
		assert_int_equal(st.decisions, 44);
		assert_int_equal(st.scripts, watch ? 0 : autos ? 33 : 44);
		/* token_bucket, gcra, sliding_log go through load/cas */
		assert_int_equal(st.cas_attempts, watch ? 33 : 0);
		assert_int_equal(st.cas_exhausted, 0);
		drl_store_free(s);
	}
}

/* clock=server: decisions follow Redis's TIME (inside the twin for lua,
 * one TIME round trip for watch) and still count exactly. */
static void test_server_clock(void **state)
{
	(void)state;
	NEED_SERVERS();
	for (int watch = 0; watch < 2; watch++) {
		char uri[128];
		snprintf(uri, sizeof uri,
			 "redis://127.0.0.1:%d?tx=%s&clock=server",
			 redis_srv.port, watch ? "watch" : "lua");
		drl_store *s;
		drl_limiter *l;
		drl_result r;
		drl_error err = {0};
		assert_int_equal(drl_store_open(&s, uri, &err), 0);
		const char *sp[] = {"sliding_log:3/1h", "token_bucket:3/1h",
				    "fixed_window:3/1h;gcra:5/1h"};
		for (int i = 0; i < 3; i++) {
			char prefix[32];
			snprintf(prefix, sizeof prefix, "clk%d%d:", watch, i);
			assert_int_equal(
				drl_limiter_new(&l, s, sp[i], prefix, &err), 0);
			int allowed = 0;
			for (int j = 0; j < 5; j++) {
				if (drl_allow(l, "c", 1, 1, &r, &err))
					fail_msg("%s: %s", uri, err.message);
				allowed += r.allowed;
			}
			assert_int_equal(allowed, 3);
			assert_true(r.retry_after_us > 0);
			drl_limiter_free(l);
		}
		drl_store_free(s);
	}
}

/* The one key under `prefix` in Redis, into buf (its length returned). */
static size_t only_key(redisContext *c, const char *prefix, char *buf,
		       size_t cap)
{
	redisReply *r = redisCommand(c, "KEYS %s*", prefix);
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	assert_int_equal(r->elements, 1);
	size_t n = r->element[0]->len;
	assert_true(n < cap);
	memcpy(buf, r->element[0]->str, n);
	freeReplyObject(r);
	return n;
}

/* A store on the test's Redis: tx=watch (the C steps) or tx=lua (the
 * twins). */
static drl_store *redis_store(int watch)
{
	char uri[128];
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d?tx=%s", redis_srv.port,
		 watch ? "watch" : "lua");
	drl_store *s;
	drl_error err = {0};
	if (drl_store_open(&s, uri, &err))
		fail_msg("%s: %s", uri, err.message);
	return s;
}

/* A plain connection to the test's Redis, to read and write keys. */
static redisContext *raw_redis(void)
{
	redisContext *c = redisConnect("127.0.0.1", redis_srv.port);
	assert_non_null(c);
	assert_int_equal(c->err, 0);
	return c;
}

/* State libdrl did not write, the same for the C steps (tx=watch) and the
 * twins (tx=lua): a negative counter (a refund that outlived its key)
 * counts as 0 and admits nothing extra; a counter beyond any real count
 * and a bucket stamped at the end of time are DRL_ECORRUPT, never an
 * overflow or a negative retry_after. */
static void test_hostile_state(void **state)
{
	(void)state;
	NEED_SERVERS();
	redisContext *raw = raw_redis();
	const int64_t t = INT64_C(1700000000000000); /* a whole second */
	for (int watch = 0; watch < 2; watch++) {
		char prefix[32], key[512];
		drl_store *s = redis_store(watch);
		drl_limiter *l;
		drl_result r;
		drl_error err = {0};

		/* previous window at -5: still exactly 10 per window */
		snprintf(prefix, sizeof prefix, "neg%d:", watch);
		assert_int_equal(drl_limiter_new(&l, s, "sliding_window:10/1s",
						 prefix, &err),
				 0);
		assert_int_equal(drl_allow_at(l, "k", 1, 1, t - SEC, &r, &err),
				 0);
		/* the counters are the fields of one hash (counter groups),
		 * field = the window's index */
		size_t n = only_key(raw, prefix, key, sizeof key);
		char prev[24];
		snprintf(prev, sizeof prev, "%lld", (long long)(t / SEC - 1));
		freeReplyObject(
			redisCommand(raw, "HSET %b %s -5", key, n, prev));
		int allowed = 0;
		for (int i = 0; i < 20; i++) {
			assert_int_equal(
				drl_allow_at(l, "k", 1, 1, t + 1, &r, &err), 0);
			allowed += r.allowed;
		}
		assert_int_equal(allowed, 10);
		/* a count no limiter could have written */
		freeReplyObject(redisCommand(
			raw, "HSET %b %s 1152921504606846976", key, n, prev));
		assert_int_equal(drl_allow_at(l, "k", 1, 1, t + 2, &r, &err),
				 DRL_ECORRUPT);
		drl_limiter_free(l);

		/* a token bucket last refilled at INT64_MAX */
		snprintf(prefix, sizeof prefix, "end%d:", watch);
		assert_int_equal(drl_limiter_new(&l, s, "token_bucket:5/1s",
						 prefix, &err),
				 0);
		assert_int_equal(drl_allow_at(l, "k", 1, 1, t, &r, &err), 0);
		n = only_key(raw, prefix, key, sizeof key);
		redisReply *got = redisCommand(raw, "GET %b", key, n);
		assert_int_equal(got->type, REDIS_REPLY_STRING);
		assert_int_equal(got->len, 57); /* 'B', level, last, params */
		unsigned char blob[57];
		memcpy(blob, got->str, sizeof blob);
		freeReplyObject(got);
		for (int i = 0; i < 8; i++)
			blob[17 + i] = i == 7 ? 0x7f : 0xff;
		freeReplyObject(redisCommand(raw, "SET %b %b", key, n, blob,
					     sizeof blob));
		assert_int_equal(drl_allow_at(l, "k", 1, 1, t, &r, &err),
				 DRL_ECORRUPT);
		/* the 25-byte 'T' state of clients built before (no
		 * parameters): refused, never read as some limit's */
		unsigned char old_t[25] = {'T'};
		freeReplyObject(redisCommand(raw, "SET %b %b", key, n, old_t,
					     sizeof old_t));
		assert_int_equal(drl_allow_at(l, "k", 1, 1, t, &r, &err),
				 DRL_ECORRUPT);
		drl_limiter_free(l);
		drl_store_free(s);
	}
	redisFree(raw);
}

/* A limiter on the test's Redis, tx=watch (the C step) or tx=lua (the
 * twin), and the one key a decision at t wrote for it. */
typedef struct on_redis {
	drl_store *s;
	drl_limiter *l;
	char key[512];
	size_t kn;
	int watch;
} on_redis;

/* o's limiter of spec under the prefix NAME then watch (0 or 1), its key
 * written at t; on_redis_free frees it. */
static void on_redis_open(on_redis *o, redisContext *raw, int watch,
			  const char *name, const char *spec, int64_t t)
{
	char prefix[32];
	snprintf(prefix, sizeof prefix, "%s%d:", name, watch);
	o->watch = watch;
	o->s = redis_store(watch);
	o->l = tu_limiter(o->s, spec, prefix);
	(void)tu_at(o->l, "k", 1, t);
	o->kn = only_key(raw, prefix, o->key, sizeof o->key);
}

static void on_redis_free(on_redis *o)
{
	drl_limiter_free(o->l);
	drl_store_free(o->s);
}

/* A fixed decision time. */
#define T_FIXED INT64_C(1700000000000000)

/* body(o, raw) with o on the twin (tx=lua), then on the C step
 * (tx=watch): o's limiter of spec under name, its key written at `at`
 * (on_redis_open). */
static void on_each_tx(const char *name, const char *spec, int64_t at,
		       void (*body)(on_redis *o, redisContext *raw))
{
	redisContext *raw = raw_redis();
	for (int watch = 0; watch < 2; watch++) {
		on_redis o;
		on_redis_open(&o, raw, watch, name, spec, at);
		body(&o, raw);
		on_redis_free(&o);
	}
	redisFree(raw);
}

/* state (len bytes) stored under o's key: a decision at t is
 * DRL_ECORRUPT, or the test fails naming o's tx, what and i. */
static void reads_corrupt(on_redis *o, redisContext *raw,
			  const unsigned char *state, size_t len, int64_t t,
			  const char *what, int i)
{
	drl_result res;
	drl_error err = {0};
	freeReplyObject(
		redisCommand(raw, "SET %b %b", o->key, o->kn, state, len));
	int rc = drl_allow_at(o->l, "k", 1, 1, t, &res, &err);
	if (rc != DRL_ECORRUPT)
		fail_msg("tx=%s: %s %d read (%s)", o->watch ? "watch" : "lua",
			 what, i, drl_err_name(rc));
}

/* The state bytes under prefix: its one key's value, a string. */
static redisReply *state_of(redisContext *raw, const char *prefix)
{
	char key[512];
	size_t kn = only_key(raw, prefix, key, sizeof key);
	redisReply *r = redisCommand(raw, "GET %b", key, kn);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	return r;
}

/* One case of the state bytes tests: limiters of spec[0..n) (n <= 3)
 * under one prefix, the decisions run(l, to) makes with them; tag makes
 * the prefix, what names the case. */
typedef struct bytes_case {
	char spec[3][96];
	int n;
	void (*run)(drl_limiter **l, int to);
	int to;
	char tag[32], what[128];
} bytes_case;

/* make(i, &c) for i in 0..count: each case on the twin's store (tx=lua)
 * and the C step's (tx=watch), each under the prefix "<tag>:<store>:";
 * the test fails, naming the case, unless both leave the same state
 * bytes. */
static void same_bytes(int count, void (*make)(int i, bytes_case *c))
{
	redisContext *raw = raw_redis();
	drl_store *st[2] = {redis_store(0), redis_store(1)};
	for (int k = 0; k < count; k++) {
		bytes_case c = {0};
		make(k, &c);
		redisReply *got[2];
		for (int w = 0; w < 2; w++) {
			char prefix[64];
			snprintf(prefix, sizeof prefix, "%s:%d:", c.tag, w);
			drl_limiter *l[3];
			for (int i = 0; i < c.n; i++)
				l[i] = tu_limiter(st[w], c.spec[i], prefix);
			c.run(l, c.to);
			got[w] = state_of(raw, prefix);
			for (int i = 0; i < c.n; i++)
				drl_limiter_free(l[i]);
		}
		bool same = got[0]->len == got[1]->len &&
			    memcmp(got[0]->str, got[1]->str, got[0]->len) == 0;
		freeReplyObject(got[0]);
		freeReplyObject(got[1]);
		if (!same)
			fail_msg("%s: the twin's state differs from the C "
				 "step's",
				 c.what);
	}
	drl_store_free(st[0]);
	drl_store_free(st[1]);
	redisFree(raw);
}

static void pack(unsigned char *p, int64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)((uint64_t)v >> (8 * i));
}

/* gcra's 57-byte 'H' state (TAT, NEWEST, then the parameters) is what a
 * decision writes; the 'G' states of clients built before it (17 and 25
 * bytes, under keys that named LIMIT and burst) are DRL_ECORRUPT on the
 * twin and the C step alike, as is an 'H' state breaking
 * NEWEST <= TAT <= NEWEST + 2 x burst x T or recording another PERIOD. */
static void gcra_states(on_redis *o, redisContext *raw)
{
	const int64_t t = T_FIXED;
	redisReply *r = redisCommand(raw, "STRLEN %b", o->key, o->kn);
	assert_int_equal(r->integer, 57);
	freeReplyObject(r);
	/* the old 'G' states; then malformed 'H' ones: TAT before
	 * NEWEST, TAT beyond NEWEST + 2 x 500ms (a penalty's debt,
	 * drl_adjust, reaches 2 x burst x T at most), another PERIOD */
	unsigned char bad[5][57] = {{'G'}, {'G'}, {'H'}, {'H'}, {'H'}};
	const size_t len[5] = {17, 25, 57, 57, 57};
	pack(bad[0] + 1, t + 300 * MS);
	pack(bad[1] + 1, t + 300 * MS);
	pack(bad[1] + 17, t);
	pack(bad[2] + 1, t - 1);
	pack(bad[2] + 17, t);
	pack(bad[3] + 1, t + 1000 * MS);
	pack(bad[3] + 9, 1);
	pack(bad[3] + 17, t);
	pack(bad[4] + 1, t);
	pack(bad[4] + 17, t);
	for (int i = 2; i < 5; i++) {
		pack(bad[i] + 25, 10);
		pack(bad[i] + 33, i == 4 ? 2 * SEC : SEC);
		pack(bad[i] + 41, 5);
	}
	for (int i = 0; i < 5; i++)
		reads_corrupt(o, raw, bad[i], len[i], t, "gcra state", i);
}

static void test_gcra_states(void **state)
{
	(void)state;
	NEED_SERVERS();
	/* T = 100ms, burst*T = 500ms */
	on_each_tx("old", "gcra:10/1s,burst=5", T_FIXED - SEC, gcra_states);
}

/* The older limit, the changed one (a raise or a cut: `to`), the older
 * again. */
static void params_run(drl_limiter **l, int to)
{
	(void)tu_at(l[0], "k", 7, T_FIXED);
	/* 7 / 3s: 1234 µs refill 2.879... units */
	(void)tu_at(l[1], "k", to ? 9 : 1, T_FIXED + 1234);
	(void)tu_at(l[2], "k", 1, T_FIXED + 5678);
}

/* Case i: alg = a % 2; from a / 2 on, the older limit has the default
 * rules (version 0, keep_used: its twin is sent no change rules,
 * lua_params.lua). */
static void params_case(int i, bytes_case *c)
{
	static const char *const algs[] = {"token_bucket", "gcra"};
	static const char *const policies[] = {"keep_used", "keep_available",
					       "scale", "additive", "reset"};
	int a = i / 10, p = i / 2 % 5, to = i % 2;
	*c = (bytes_case){.n = 3, .run = params_run, .to = to};
	snprintf(c->spec[0], sizeof c->spec[0], "%s:7/3s,burst=10%s",
		 algs[a % 2], a / 2 ? "" : ",version=1");
	snprintf(c->spec[1], sizeof c->spec[1],
		 "%s:%d/3s,version=2,on_change=%s", algs[a % 2], to ? 4 : 13,
		 policies[p]);
	memcpy(c->spec[2], c->spec[0], sizeof c->spec[0]);
	snprintf(c->tag, sizeof c->tag, "pb%d:%d:%d", a, p, to);
	snprintf(c->what, sizeof c->what,
		 "%s on_change=%s to %d (from version %d)", algs[a % 2],
		 policies[p], to ? 4 : 13, a / 2 ? 0 : 1);
}

/* A changed limit converted by the twin (tx=lua) and by the C step
 * (tx=watch) leaves the same state bytes: each policy, both algorithms
 * that record their parameters, a raise and a cut, a fraction of a token
 * refilled in between, a denial that converts (written all the same),
 * and an older version (1, or the default 0) deciding with the newer
 * stored parameters. */
static void test_params_state_bytes(void **state)
{
	(void)state;
	NEED_SERVERS();
	same_bytes(4 * 5 * 2, params_case);
}

/* The trailer of an 'R' sliding_log state in reply r: dead, n, sum,
 * first live time, LIMIT, PERIOD, version. */
static void log_trailer(const redisReply *r, int64_t out[7])
{
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	assert_true(r->len >= 57);
	assert_int_equal(r->str[r->len - 1], 'R');
	for (int f = 0; f < 7; f++) {
		uint64_t v = 0;
		for (int i = 7; i >= 0; i--)
			v = v << 8 |
			    (unsigned char)
				    r->str[(size_t)r->len - 57 + 8 * f + i];
		out[f] = (int64_t)v;
	}
}

/* An 'R' log at p: one dead entry (t - 2s, 1), live ones at t - 300ms
 * (1) and t - 100ms (2), the trailer saying dead 1, n 2, sum 3, first
 * live t - 300ms, LIMIT 5, PERIOD 1s, version 0: its length. */
static size_t log_state(unsigned char *p, int64_t t)
{
	memset(p, 0, 3 * 16 + 57);
	pack(p, t - 2 * SEC);
	pack(p + 8, 1);
	pack(p + 16, t - 300 * MS);
	pack(p + 24, 1);
	pack(p + 32, t - 100 * MS);
	pack(p + 40, 2);
	unsigned char *tr = p + 48;
	pack(tr, 1);
	pack(tr + 8, 2);
	pack(tr + 16, 3);
	pack(tr + 24, t - 300 * MS);
	pack(tr + 32, 5);
	pack(tr + 40, SEC);
	tr[56] = 'R';
	return 3 * 16 + 57;
}

/* sliding_log's 'R' state is read alike by the twin and the C step: a
 * well-formed one (written by hand, entries left in front) decides the
 * same. The states before it ('L': n, entries; 'M': n, sum, entries;
 * 'S': entries, a trailer without LIMIT, PERIOD and version), which
 * lived under keys that named LIMIT, are DRL_ECORRUPT on both, never
 * read as some limit's; so is an 'R' whose sum its entries cannot make
 * or past what any LIMIT allows, whose first live time is not its first
 * live entry's, longer or shorter than its trailer says, or recording
 * another PERIOD, a LIMIT out of sliding_log's bounds or a version out of
 * version='s (the C step checks every entry; the twin what it reads and
 * what the trailer must meet). */
static void log_state_good(on_redis *o, redisContext *raw)
{
	const int64_t t = T_FIXED;
	unsigned char good[3 * 16 + 57];
	size_t gl = log_state(good, t);
	freeReplyObject(
		redisCommand(raw, "SET %b %b", o->key, o->kn, good, gl));
	EXPECT(tu_at(o->l, "k", 0, t), 1, 2, 900 * MS, 0);
	EXPECT(tu_at(o->l, "k", 3, t), 0, 2, 900 * MS, 700 * MS);
	EXPECT(tu_at(o->l, "k", 1, t), 1, 1, SEC, 0);
	redisReply *r = redisCommand(raw, "GET %b", o->key, o->kn);
	int64_t tr[7];
	log_trailer(r, tr);
	assert_int_equal(tr[1], 3); /* live: 2 and ours */
	assert_int_equal(tr[2], 4);
	assert_int_equal(tr[3], t - 300 * MS);
	assert_int_equal(tr[4], 5);
	assert_int_equal(tr[5], SEC);
	assert_int_equal(tr[6], 0);
	freeReplyObject(r);
}

static void log_states_bad(on_redis *o, redisContext *raw)
{
	const int64_t t = T_FIXED;
	/* the old states: 'L' and 'M' (one entry, 2 at t - 100ms),
	 * 'S' (that entry and a 33-byte trailer) */
	unsigned char old[3][17 + 33] = {{'L'}, {'M'}, {0}};
	const size_t oldlen[3] = {9 + 16, 17 + 16, 16 + 33};
	pack(old[0] + 1, 1);
	pack(old[0] + 9, t - 100 * MS);
	pack(old[0] + 17, 2);
	pack(old[1] + 1, 1);
	pack(old[1] + 9, 2);
	pack(old[1] + 17, t - 100 * MS);
	pack(old[1] + 25, 2);
	pack(old[2], t - 100 * MS);
	pack(old[2] + 8, 2);
	pack(old[2] + 24, 1);
	pack(old[2] + 32, 2);
	pack(old[2] + 40, t - 100 * MS);
	old[2][48] = 'S';
	for (int i = 0; i < 3; i++)
		reads_corrupt(o, raw, old[i], oldlen[i], t,
			      "old state (0 L, 1 M, 2 S)", i);
	/* malformed 'R' (log_state's): a sum of 2 (below the
	 * newest's count and one more entry), a sum of 20001 (above
	 * 2 x the largest LIMIT, what a penalty may reach:
	 * drl_adjust), a first live time that is not the first live
	 * entry's, one dead entry too few, two live entries said for
	 * one, another PERIOD, LIMIT 0 and 10001, version 10^9 + 1 */
	enum { NBAD = 9 };
	unsigned char sb[NBAD][3 * 16 + 57];
	size_t sl[NBAD];
	for (int i = 0; i < NBAD; i++) {
		unsigned char *p = sb[i], *tr = p + 48;
		sl[i] = log_state(p, t);
		if (i == 0 || i == 1)
			pack(tr + 16, i == 0 ? 2 : 20001);
		if (i == 2)
			pack(tr + 24, t - 200 * MS);
		if (i == 3)
			pack(tr, 0);
		if (i == 4) { /* the live entry at t - 300ms removed */
			memmove(p + 16, p + 32, 16 + 57);
			sl[i] -= 16;
			pack(p + 32 + 8, 2);
			pack(p + 32 + 16, 2);
		}
		if (i == 5)
			pack(tr + 40, 2 * SEC);
		if (i == 6 || i == 7)
			pack(tr + 32, i == 6 ? 0 : 10001);
		if (i == 8)
			pack(tr + 48, 1000000001);
	}
	/* when the entry at t - 300ms leaves: the twin reads the first
	 * live one */
	for (int i = 0; i < NBAD; i++)
		reads_corrupt(o, raw, sb[i], sl[i], t + 850 * MS,
			      "bad 'R' state", i);
}

static void test_sliding_log_states(void **state)
{
	(void)state;
	NEED_SERVERS();
	on_each_tx("logr", "sliding_log:5/1s", T_FIXED - 2 * SEC,
		   log_state_good);
	on_each_tx("bad", "sliding_log:5/1s", T_FIXED - 2 * SEC,
		   log_states_bad);
}

/* Six entries, the changed limit (a raise or a cut: `to`), the old one,
 * a penalty. */
static void log_run(drl_limiter **l, int to)
{
	for (int k = 0; k < 6; k++)
		(void)tu_at(l[0], "k", 1, T_FIXED + 100 * k);
	(void)tu_at(l[1], "k", to ? 9 : 1, T_FIXED + 1234);
	(void)tu_at(l[0], "k", 1, T_FIXED + 5678);
	drl_result r;
	drl_error err = {0};
	if (drl_adjust_at(l[0], "k", 1, 3, T_FIXED + 6000, &r, &err))
		fail_msg("%s", err.message);
}

/* Case i: with versions or not (v), keep_used or reset, a raise or a
 * cut. */
static void log_case(int i, bytes_case *c)
{
	static const char *const policies[] = {"keep_used", "reset"};
	int v = i / 4, p = i / 2 % 2, to = i % 2;
	*c = (bytes_case){.n = 2, .run = log_run, .to = to};
	snprintf(c->spec[0], sizeof c->spec[0], "sliding_log:7/3s%s",
		 v ? ",version=1" : "");
	snprintf(c->spec[1], sizeof c->spec[1],
		 "sliding_log:%d/3s,on_change=%s%s", to ? 4 : 13, policies[p],
		 v ? ",version=2" : "");
	snprintf(c->tag, sizeof c->tag, "lb%d:%d:%d", v, p, to);
	snprintf(c->what, sizeof c->what, "sliding_log %s to %d%s", policies[p],
		 to ? 4 : 13, v ? " (versions)" : "");
}

/* A sliding_log limit changed under the twin (tx=lua) and the C step
 * (tx=watch) leaves the same state bytes: keep_used and reset, with and
 * without versions, a raise (allowed) and a cut (a denial, which records
 * the new LIMIT all the same), the old spec after it (following a newer
 * version), then a penalty (drl_adjust). No entry leaves the window, so
 * the twin's log has no dead entries in front: byte for byte the C
 * step's. */
static void test_log_state_bytes(void **state)
{
	(void)state;
	NEED_SERVERS();
	same_bytes(2 * 2 * 2, log_case);
}

/* What a sliding_log decision costs the server does not grow with the
 * log: the twin writes its entry in place (SETRANGE of the entry and the
 * trailer), leaves the entries that left the window in front, and
 * rewrites the live ones alone (SET) only once the dead outnumber them by
 * more than 32; decisions stay those of the C step (memory://), and the
 * state stays within twice the live entries and 32. */
static void test_sliding_log_in_place(void **state)
{
	(void)state;
	NEED_SERVERS();
	redisContext *raw = raw_redis();
	const int64_t t0 = INT64_C(1700000000000000);
	drl_store *s = redis_store(0), *mem;
	drl_limiter *l, *ml;
	assert_int_equal(drl_store_open(&mem, "memory://", NULL), 0);
	assert_int_equal(
		drl_limiter_new(&l, s, "sliding_log:40/1s", "inplace:", NULL),
		0);
	assert_int_equal(
		drl_limiter_new(&ml, mem, "sliding_log:40/1s", "m:", NULL), 0);
	freeReplyObject(redisCommand(raw, "CONFIG RESETSTAT"));
	int writes = 0;
	size_t longest = 0;
	char key[512];
	size_t kn = 0;
	/* one request each 40ms, 2 each 7th (denied once 40 are live) */
	for (int i = 0; i < 200; i++) {
		int64_t now = t0 + i * 40 * MS;
		int64_t cost = i % 7 == 0 ? 2 : 1;
		drl_result a = tu_at(l, "k", cost, now);
		drl_result b = tu_at(ml, "k", cost, now);
		if (a.allowed != b.allowed || a.remaining != b.remaining ||
		    a.reset_after_us != b.reset_after_us ||
		    a.retry_after_us != b.retry_after_us)
			fail_msg("step %d: redis allowed=%d rem=%lld "
				 "retry=%lld, "
				 "memory allowed=%d rem=%lld retry=%lld",
				 i, a.allowed, (long long)a.remaining,
				 (long long)a.retry_after_us, b.allowed,
				 (long long)b.remaining,
				 (long long)b.retry_after_us);
		writes += a.allowed;
		if (kn == 0)
			kn = only_key(raw, "inplace:", key, sizeof key);
		redisReply *r = redisCommand(raw, "STRLEN %b", key, kn);
		if ((size_t)r->integer > longest)
			longest = (size_t)r->integer;
		freeReplyObject(r);
	}
	long long set = redis_cmd_calls(raw, "set"),
		  setrange = redis_cmd_calls(raw, "setrange");
	/* 25 live entries at most (one each 40ms in 1s): a rewrite after
	 * ~33 entries left, every other write in place */
	if (set < 2 || set > writes / 20 || setrange < writes - set)
		fail_msg("%d writes: %lld SET, %lld SETRANGE", writes, set,
			 setrange);
	if (longest > 57 + 16 * (2 * 26 + 32))
		fail_msg("the log grew to %zu bytes", longest);
	redisReply *r = redisCommand(raw, "GET %b", key, kn);
	int64_t tr[7];
	log_trailer(r, tr);
	assert_true(tr[0] > 0); /* entries left in front */
	freeReplyObject(r);
	drl_limiter_free(l);
	drl_limiter_free(ml);
	drl_store_free(s);
	drl_store_free(mem);
	redisFree(raw);
}

/* The PTTL of key kn in ms. */
static long long key_pttl(redisContext *raw, const char *key, size_t kn)
{
	redisReply *r = redisCommand(raw, "PTTL %b", key, kn);
	assert_int_equal(r->type, REDIS_REPLY_INTEGER);
	long long t = r->integer;
	freeReplyObject(r);
	return t;
}

/* A sliding_log write in place sends one write command, not two: it asks
 * PTTL and extends the TTL (a quarter period beyond what it needs) only
 * when it falls short, on the server's clock. A write whose newest entry
 * lies ahead of the caller's time (clock skew) needs longer, and gets it. */
static void test_sliding_log_ttl_kept(void **state)
{
	(void)state;
	NEED_SERVERS();
	redisContext *raw = raw_redis();
	const int64_t t0 = INT64_C(1700000000000000), S = 1000 * MS;
	drl_store *s = redis_store(0);
	drl_limiter *l;
	assert_int_equal(
		drl_limiter_new(&l, s, "sliding_log:1000/1h", "ttlkept:", NULL),
		0);
	freeReplyObject(redisCommand(raw, "CONFIG RESETSTAT"));
	for (int i = 0; i < 20; i++)
		assert_true(tu_at(l, "k", 1, t0 + i * S).allowed);
	char key[512];
	size_t kn = only_key(raw, "ttlkept:", key, sizeof key);
	/* the first write is a SET (PX: 1h, the grace, 15 min), the others
	 * in place: a PTTL each, no PEXPIRE (unless 15 min went by) */
	assert_int_equal(redis_cmd_calls(raw, "set"), 1);
	assert_int_equal(redis_cmd_calls(raw, "setrange"), 19);
	assert_int_equal(redis_cmd_calls(raw, "pttl"), 19);
	assert_int_equal(redis_cmd_calls(raw, "pexpire"), 0);
	long long t = key_pttl(raw, key, kn);
	assert_true(t > 3600 * 1000 + 1000 && t <= 4500 * 1000 + 1000);
	/* 20 min behind the newest entry: it must live 1h20m more */
	assert_true(tu_at(l, "k", 1, t0 + 19 * S - 1200 * S).allowed);
	assert_int_equal(redis_cmd_calls(raw, "pexpire"), 1);
	t = key_pttl(raw, key, kn);
	assert_true(t > 4800 * 1000 + 1000);
	drl_limiter_free(l);
	drl_store_free(s);
	redisFree(raw);
}

/* The ARGV of the EVALSHA the last decision sent (SLOWLOG, every command
 * logged), beyond the script's key: how many. */
static long long last_evalsha_nargs(redisContext *raw)
{
	redisReply *r = redisCommand(raw, "SLOWLOG GET 16");
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	long long n = -1;
	for (size_t i = 0; i < r->elements && n < 0; i++) {
		redisReply *e = r->element[i], *argv = e->element[3];
		if (argv->elements >= 3 &&
		    strcasecmp(argv->element[0]->str, "evalsha") == 0)
			n = (long long)argv->elements - 3 -
			    atoll(argv->element[2]->str);
	}
	freeReplyObject(r);
	return n;
}

/* A lean twin is sent the arguments it reads, no more (each costs the
 * server a Lua string, a slot of ARGV and a strtod): sliding_log, gcra
 * and token_bucket six (to their change rules), five when those are the
 * common ones (keep_used, version 0: read as 0 when missing); the
 * counter twin all seven. */
static void test_twins_sent_what_they_read(void **state)
{
	(void)state;
	NEED_SERVERS();
	static const struct {
		const char *spec;
		long long nargs;
	} cases[] = {
		{"sliding_log:10/1m", 5},
		{"sliding_log:10/1m,on_change=reset", 6},
		{"gcra:10/1m", 5},
		{"token_bucket:10/1m", 5},
		{"token_bucket:10/1m,on_change=keep_used", 5},
		{"gcra:10/1m,on_change=scale", 6},
		{"token_bucket:10/1m,version=1", 6},
		{"sliding_log:10/1m,version=1", 6},
		{"fixed_window:10/1m", 7},
	};
	redisContext *raw = raw_redis();
	drl_store *s = redis_store(0);
	freeReplyObject(
		redisCommand(raw, "CONFIG SET slowlog-log-slower-than 0"));
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		drl_limiter *l;
		assert_int_equal(
			drl_limiter_new(&l, s, cases[i].spec, "nargs:", NULL),
			0);
		freeReplyObject(redisCommand(raw, "SLOWLOG RESET"));
		assert_true(
			tu_at(l, "k", 1, INT64_C(1700000000000000)).allowed);
		assert_int_equal(last_evalsha_nargs(raw), cases[i].nargs);
		drl_limiter_free(l);
	}
	freeReplyObject(
		redisCommand(raw, "CONFIG SET slowlog-log-slower-than 10000"));
	drl_store_free(s);
	redisFree(raw);
}

DRL_FIXTURE_PAIR_GROUP(redis_srv, have_redis, mc_srv, have_mc)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_identical_decisions),
		cmocka_unit_test(test_ttl_bounds),
		cmocka_unit_test(test_strategy_really_differs),
		cmocka_unit_test(test_server_clock),
		cmocka_unit_test(test_hostile_state),
		cmocka_unit_test(test_sliding_log_states),
		cmocka_unit_test(test_sliding_log_in_place),
		cmocka_unit_test(test_sliding_log_ttl_kept),
		cmocka_unit_test(test_twins_sent_what_they_read),
		cmocka_unit_test(test_gcra_states),
		cmocka_unit_test(test_params_state_bytes),
		cmocka_unit_test(test_log_state_bytes),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
