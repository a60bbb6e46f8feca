/*
 * The Redis store against a real redis-server (started by the fixture on a
 * free loopback port, persistence off): what is Redis's own for tx=lua and
 * tx=watch (TTLs and values as Redis holds them, other clients writing
 * between load and cas, WATCH hygiene, hostile and 1 MB keys, NOSCRIPT,
 * errors and timeouts, AUTH, unix sockets, pools), and decisions through
 * the public API. A raw hiredis connection checks what landed in Redis
 * (PTTL, values). The store contract itself runs as contract_redis_lua
 * and contract_redis_watch (tests/fixtures/store_contract.c).
 *
 * Skips when redis-server is missing, except under CI=true (fails).
 */
#include <drl/backend.h>
#include <drl/drl.h>

#include "backends/redis/redis.h"
#include "internal.h"
#include "redis_info.h"
#include "server_fixture.h"
#include "testutil.h"

#include <hiredis/hiredis.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SEC INT64_C(1000000)
#define TTL (60 * SEC)
#define MB (1024 * 1024)

static drl_server srv;
static int have_srv;

#define NEED_SERVER() DRL_FIXTURE_NEED(have_srv)

/* ---- helpers ------------------------------------------------------------ */

static drl_bytes B(const char *s)
{
	drl_bytes b = {s, strlen(s)};
	return b;
}

static drl_bytes BN(const void *p, size_t n)
{
	drl_bytes b = {p, n};
	return b;
}

/* Parse `uri` and open a Redis backend from it. */
static int open_uri(drl_backend **b, const char *uri, drl_error *err)
{
	drl__uri u;
	int rc = drl__uri_parse(&u, uri, err);
	if (rc)
		return rc;
	rc = drl__redis_open(b, &u, err);
	drl__uri_clear(&u);
	return rc;
}

/* A backend on the shared server with URI options `opts` ("tx=watch"). */
static drl_backend *open_opts(const char *opts)
{
	char uri[512];
	drl_error e = {0};
	drl_backend *b = NULL;
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d%s%s", srv.port,
		 opts && *opts ? "?" : "", opts ? opts : "");
	int rc = open_uri(&b, uri, &e);
	if (rc)
		fail_msg("open %s: %s (%s)", uri, e.message, drl_err_name(rc));
	assert_non_null(b);
	return b;
}

/* One command with binary-safe arguments; the reply (caller frees). */
static redisReply *rawv(redisContext *c, int argc, const char **argv,
			const size_t *lens)
{
	redisReply *r = redisCommandArgv(c, argc, argv, lens);
	if (r == NULL)
		fail_msg("raw command %s: %s", argv[0], c->errstr);
	return r;
}

/* A command of space-separated words, no binary. */
static redisReply *raw_cmd(redisContext *c, const char *cmd)
{
	char buf[512];
	const char *argv[16];
	size_t lens[16];
	int argc = 0;
	snprintf(buf, sizeof buf, "%s", cmd);
	for (char *t = strtok(buf, " "); t && argc < 16;
	     t = strtok(NULL, " ")) {
		argv[argc] = t;
		lens[argc] = strlen(t);
		argc++;
	}
	return rawv(c, argc, argv, lens);
}

static void raw_ok(redisContext *c, const char *cmd)
{
	redisReply *r = raw_cmd(c, cmd);
	if (r->type == REDIS_REPLY_ERROR)
		fail_msg("%s: %s", cmd, r->str);
	freeReplyObject(r);
}

static long long raw_pttl(redisContext *c, drl_bytes key)
{
	const char *argv[2] = {"PTTL", key.data};
	size_t lens[2] = {4, key.len};
	redisReply *r = rawv(c, 2, argv, lens);
	assert_int_equal(r->type, REDIS_REPLY_INTEGER);
	long long v = r->integer;
	freeReplyObject(r);
	return v;
}

static void raw_set(redisContext *c, drl_bytes key, const char *val)
{
	const char *argv[3] = {"SET", key.data, val};
	size_t lens[3] = {3, key.len, strlen(val)};
	freeReplyObject(rawv(c, 3, argv, lens));
}

/* The string at key (NULL when absent); *len its length. Caller frees. */
static char *raw_get(redisContext *c, drl_bytes key, size_t *len)
{
	const char *argv[2] = {"GET", key.data};
	size_t lens[2] = {3, key.len};
	redisReply *r = rawv(c, 2, argv, lens);
	char *out = NULL;
	if (r->type == REDIS_REPLY_STRING) {
		out = malloc(r->len + 1);
		assert_non_null(out);
		memcpy(out, r->str, r->len);
		out[r->len] = '\0';
		*len = r->len;
	} else {
		assert_int_equal(r->type, REDIS_REPLY_NIL);
	}
	freeReplyObject(r);
	return out;
}

static redisContext *flushed(void)
{
	redisContext *c = redis_raw_open(srv.port);
	raw_ok(c, "FLUSHALL");
	return c;
}

static void expect_rc(int rc, int want, const drl_error *e)
{
	if (rc != want)
		fail_msg("got %s, want %s: %s", drl_err_name(rc),
			 drl_err_name(want), e ? e->message : "");
}

static int64_t incr(drl_backend *b, drl_bytes k, int64_t d)
{
	drl_error e = {0};
	int64_t v = 0;
	expect_rc(b->incr(b, k, d, TTL, &v, &e), 0, &e);
	return v;
}

/* load that must succeed; returns the version. */
static uint64_t load_ok(drl_backend *b, drl_bytes k, void *buf, size_t cap,
			size_t *len)
{
	drl_error e = {0};
	uint64_t v = 12345;
	expect_rc(b->load(b, k, buf, cap, len, &v, &e), 0, &e);
	return v;
}

/* Fail unless two decisions agree field by field. */
static void same_result(const drl_result *r, const drl_result *m,
			const char *what, int step)
{
	if (r->allowed != m->allowed || r->limit != m->limit ||
	    r->remaining != m->remaining ||
	    r->reset_after_us != m->reset_after_us ||
	    r->retry_after_us != m->retry_after_us ||
	    r->limit_index != m->limit_index)
		fail_msg("%s step %d: redis {allowed %d remaining %" PRId64
			 " reset %" PRId64 " retry %" PRId64
			 " index %d}, memory {%d %" PRId64 " %" PRId64
			 " %" PRId64 " %d}",
			 what, step, r->allowed, r->remaining,
			 r->reset_after_us, r->retry_after_us, r->limit_index,
			 m->allowed, m->remaining, m->reset_after_us,
			 m->retry_after_us, m->limit_index);
}

/* A port nothing listens on (bound and closed a moment ago). */
static int closed_port(void)
{
	int port = drl_fixture_free_port();
	assert_true(port > 0);
	return port;
}

/* ---- URIs ----------------------------------------------------------------- */

/* Malformed URIs and bad options: DRL_EINVAL naming the part, before any
 * connection; the password never in the message. */
static void test_uri_errors(void **state)
{
	(void)state;
	static const struct {
		const char *uri;
		const char *needle;
	} bad[] = {
		{"redis://127.0.0.1:6379?bogus=1", "bogus"},
		{"redis://127.0.0.1:6379?tx=lua&Tx=watch", "Tx"},
		{"redis://127.0.0.1:0", "port"},
		{"redis://127.0.0.1:65536", "port"},
		{"redis://127.0.0.1:12ab", "port"},
		{"redis://127.0.0.1:", "port"},
		{"redis://a:1,b:2", "several hosts"},
		{"redis://:6379", "empty host"},
		{"redis://?tx=lua", "no host"},
		{"redis://::1", "brackets"},
		{"redis://[::1", "]"},
		{"redis://[::1]x", "]"},
		{"redis://127.0.0.1/abc", "database"},
		{"redis://127.0.0.1/-1", "database"},
		{"redis://127.0.0.1/1/2", "database"},
		{"redis://127.0.0.1/1?db=2", "twice"},
		{"redis://127.0.0.1?db=x", "db"},
		{"redis://127.0.0.1?tx=optimistic", "tx"},
		{"redis://127.0.0.1?clock=atomic", "clock"},
		{"redis://127.0.0.1?timeout_ms=0", "timeout_ms"},
		{"redis://127.0.0.1?timeout_ms=1s", "timeout_ms"},
		{"redis://127.0.0.1?pool=0", "pool"},
		{"redis://127.0.0.1?pool=100000", "pool"},
		{"redis+unix://localhost/tmp/r.sock", "no host"},
		{"redis+unix://", "socket path"},
		{"redis+unix:///", "socket path"},
		{"redis://alice@127.0.0.1", "password"},
		{"redis://u:Hunter2-Secret@127.0.0.1:99999", "port"},
		{"redis://:Hunter2-Secret@127.0.0.1?bogus=1", "bogus"},
		{"redis://:Hunter2-Secret@a:1,b:2", "several hosts"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		drl_error e = {0};
		drl_backend *b = (drl_backend *)&e; /* must be reset */
		int rc = open_uri(&b, bad[i].uri, &e);
		if (rc != DRL_EINVAL)
			fail_msg("%s: got %s (%s)", bad[i].uri,
				 drl_err_name(rc), e.message);
		assert_null(b);
		assert_int_equal(e.code, DRL_EINVAL);
		if (!strstr(e.message, bad[i].needle))
			fail_msg("%s: message \"%s\" lacks \"%s\"", bad[i].uri,
				 e.message, bad[i].needle);
		assert_null(strstr(e.message, "Hunter2"));
	}

	char uri[400];
	char pfx[200];
	memset(pfx, 'p', sizeof pfx - 1);
	pfx[sizeof pfx - 1] = '\0';
	snprintf(uri, sizeof uri, "redis://127.0.0.1?prefix=%s", pfx);
	drl_error e = {0};
	drl_backend *b = NULL;
	assert_int_equal(open_uri(&b, uri, &e), DRL_EINVAL);
	assert_non_null(strstr(e.message, "prefix"));
}

/* Nothing listening: DRL_EUNAVAILABLE at open, saying so. */
static void test_connect_refused(void **state)
{
	(void)state;
	char uri[128];
	drl_error e = {0};
	drl_backend *b = NULL;
	snprintf(uri, sizeof uri, "redis://:Pw-Refused-77@127.0.0.1:%d",
		 closed_port());
	int rc = open_uri(&b, uri, &e);
	expect_rc(rc, DRL_EUNAVAILABLE, &e);
	assert_null(b);
	assert_non_null(strstr(e.message, "refused"));
	assert_null(strstr(e.message, "Pw-Refused"));
}

/* Capability bits follow tx=, clock= and pipelines= (a started call
 * travels on the shared connections: none without them). tx=auto, the
 * default, adds add_read (the counters without a script) to tx=lua's. */
static void test_caps(void **state)
{
	(void)state;
	NEED_SERVER();
	drl_backend *dflt = open_opts(NULL);
	drl_backend *autos = open_opts("tx=auto&pipelines=0");
	drl_backend *lua = open_opts("tx=lua");
	drl_backend *alone = open_opts("pipelines=0");
	drl_backend *watch = open_opts("tx=watch");
	drl_backend *clk = open_opts("tx=watch&clock=server");
	/* every strategy keeps counters in groups, so processes of any tx
	 * count the same counters */
	unsigned base = DRL_CAP_COUNTER | DRL_CAP_CAS | DRL_CAP_COUNTER_GROUPS;
	assert_int_equal(lua->version, DRL_BACKEND_VERSION);
	assert_string_equal(lua->name, "redis");
	assert_int_equal(lua->caps, base | DRL_CAP_SCRIPT | DRL_CAP_BATCH |
					    DRL_CAP_EVAL_START |
					    DRL_CAP_CHANNEL);
	assert_non_null(lua->chan_open);
	assert_non_null(lua->eval);
	assert_non_null(lua->eval_start);
	assert_null(lua->update);
	assert_null(lua->now);
	assert_null(lua->add_read);
	assert_null(lua->add_read_start);
	assert_int_equal(dflt->caps, base | DRL_CAP_SCRIPT | DRL_CAP_BATCH |
					     DRL_CAP_EVAL_START |
					     DRL_CAP_ADD_READ |
					     DRL_CAP_CHANNEL | DRL_CAP_POLICY);
	/* tx=auto: a policy by DRL.POLICY where the module is loaded */
	assert_non_null(dflt->eval_policy);
	assert_null(lua->eval_policy);
	assert_null(watch->eval_policy);
	assert_non_null(dflt->add_read);
	assert_non_null(dflt->add_read_start);
	assert_non_null(dflt->trim);
	assert_non_null(dflt->trim_start);
	assert_non_null(watch->trim);
	assert_null(watch->trim_start);
	assert_int_equal(autos->caps, base | DRL_CAP_SCRIPT | DRL_CAP_BATCH |
					      DRL_CAP_ADD_READ |
					      DRL_CAP_POLICY);
	assert_non_null(autos->add_read);
	assert_null(autos->add_read_start);
	assert_int_equal(alone->caps, base | DRL_CAP_SCRIPT | DRL_CAP_BATCH |
					      DRL_CAP_ADD_READ |
					      DRL_CAP_POLICY);
	assert_null(alone->eval_start);
	assert_null(alone->chan_open);
	assert_int_equal(watch->caps, base);
	assert_null(watch->add_read);
	assert_null(watch->eval);
	assert_null(watch->eval_start);
	assert_int_equal(clk->caps, base | DRL_CAP_CLOCK);
	assert_non_null(clk->now);
	/* tx=module: policies started too where a started call travels
	 * (the one eval_policy slot, done set); blocking only without */
	drl_backend *mod = open_opts("tx=module");
	drl_backend *mod0 = open_opts("tx=module&pipelines=0");
	assert_int_equal(mod->caps, base | DRL_CAP_SCRIPT | DRL_CAP_EVAL_START |
					    DRL_CAP_CHANNEL | DRL_CAP_POLICY |
					    DRL_CAP_POLICY_START);
	assert_non_null(mod->eval_policy);
	assert_int_equal(mod0->caps, base | DRL_CAP_SCRIPT | DRL_CAP_POLICY);
	mod->destroy(mod);
	mod0->destroy(mod0);

	drl_error e = {0};
	int64_t now = 0;
	expect_rc(clk->now(clk, &now, &e), 0, &e);
	int64_t here = (int64_t)time(NULL) * SEC;
	assert_true(now > here - 10 * SEC && now < here + 10 * SEC);
	dflt->destroy(dflt);
	autos->destroy(autos);
	lua->destroy(lua);
	alone->destroy(alone);
	watch->destroy(watch);
	clk->destroy(clk);
}

/* ---- counters --------------------------------------------------------------- */

/* incr/get_many as Redis holds them: a TTL on every key written (rounded
 * up to ms, set on a key that had none), reads create nothing, errors
 * for values that are not counters, overflow. Counting itself:
 * contract_redis_* (check_incr, check_get_many). */
static void test_counters(void **state)
{
	NEED_SERVER();
	redisContext *raw = flushed();
	drl_backend *b = open_opts(*state);
	drl_error e = {0};
	int64_t v[2];

	assert_int_equal(incr(b, B("c1"), -2), -2);
	long long t = raw_pttl(raw, B("c1"));
	assert_true(t > 0 && t <= 60000);

	drl_bytes two[2] = {B("c1"), B("absent")};
	expect_rc(b->get_many(b, 2, two, v, &e), 0, &e);
	assert_int_equal(raw_pttl(raw, B("absent")), -2); /* not created */

	/* The TTL rounds up to whole ms, and is set on an existing key that
	 * had none. */
	int64_t out;
	expect_rc(b->incr(b, B("c2"), 1, 1500500, &out, &e), 0, &e);
	t = raw_pttl(raw, B("c2"));
	assert_true(t > 1000 && t <= 1501);
	raw_set(raw, B("c3"), "10");
	assert_int_equal(raw_pttl(raw, B("c3")), -1);
	assert_int_equal(incr(b, B("c3"), 1), 11);
	assert_true(raw_pttl(raw, B("c3")) > 0);

	/* A TTL must be positive. */
	expect_rc(b->incr(b, B("c2"), 1, 0, &out, &e), DRL_EINVAL, &e);

	/* Not an integer: DRL_ECORRUPT, quoting nothing of the value. */
	raw_set(raw, B("junk"), "s3cr3t-notanumber");
	e.message[0] = '\0';
	expect_rc(b->get_many(b, 1, (drl_bytes[]){B("junk")}, v, &e),
		  DRL_ECORRUPT, &e);
	assert_null(strstr(e.message, "s3cr3t"));
	expect_rc(b->incr(b, B("junk"), 1, TTL, &out, &e), DRL_ECORRUPT, &e);

	/* Overflow: DRL_ERANGE, value unchanged. */
	raw_set(raw, B("big"), "9223372036854775807");
	expect_rc(b->incr(b, B("big"), 1, TTL, &out, &e), DRL_ERANGE, &e);
	expect_rc(b->get_many(b, 1, (drl_bytes[]){B("big")}, v, &e), 0, &e);
	assert_int_equal(v[0], INT64_MAX);
	assert_int_equal(incr(b, B("big"), -1), INT64_MAX - 1);

	/* The store still works after all those errors. */
	assert_int_equal(incr(b, B("c1"), 1), -1);
	b->destroy(b);
	redisFree(raw);
}

/* add_read_start, waited for here (a generous deadline: the callback is
 * an event, not a timing). */
static int add_read_wait(drl_backend *b, size_t n, const drl_bytes *keys,
			 int64_t delta, int64_t ttl, tu_started *o)
{
	tu_started_init(o);
	drl_error e = {0};
	int rc = b->add_read_start(b, NULL, n, keys, delta, ttl,
				   tu_started_done, o, &e);
	if (rc == 0) {
		rc = tu_started_wait(o);
		assert_int_equal(tu_started_calls(o), 1);
	}
	tu_started_fini(o);
	return rc;
}

/* tx=auto's add_read (the counters without a script or a transaction):
 * INCRBY and PEXPIRE of the first key, the others read by one MGET,
 * absent ones 0 and not created; blocking and started alike. */
static void test_add_read(void **state)
{
	(void)state;
	NEED_SERVER();
	redisContext *raw = flushed();
	drl_backend *b = open_opts("tx=auto&prefix=ar:");
	drl_error e = {0};
	int64_t v[3];
	tu_started o;

	raw_set(raw, B("ar:prev"), "7");
	drl_bytes k3[3] = {B("cur"), B("prev"), B("none")};
	expect_rc(b->add_read(b, 3, k3, 2, 1500500, v, &e), 0, &e);
	assert_int_equal(v[0], 2);
	assert_int_equal(v[1], 7);
	assert_int_equal(v[2], 0);
	long long t = raw_pttl(raw, B("ar:cur"));
	assert_true(t > 1000 && t <= 1501); /* rounded up to whole ms */
	assert_int_equal(raw_pttl(raw, B("ar:none")), -2); /* not created */
	assert_int_equal(raw_pttl(raw, B("ar:prev")), -1); /* not written */

	expect_rc(add_read_wait(b, 3, k3, -1, TTL, &o), 0, NULL);
	assert_int_equal(o.nret, 3);
	assert_int_equal(o.out[0], 1);
	assert_int_equal(o.out[1], 7);
	assert_int_equal(o.out[2], 0);
	assert_true(raw_pttl(raw, B("ar:cur")) > 50000);

	/* The current counter of another type: WRONGTYPE, blocking and
	 * started. A neighbour of another type reads as an unused counter
	 * (one MGET reads them all: backends/redis/counter.c says why); one
	 * that holds no integer is DRL_ECORRUPT, quoting nothing of it. */
	raw_ok(raw, "RPUSH ar:lst x");
	drl_bytes bad[2] = {B("lst"), B("cur")};
	expect_rc(b->add_read(b, 2, bad, 1, TTL, v, &e), DRL_ESTORE, &e);
	assert_non_null(strstr(e.message, "WRONGTYPE"));
	expect_rc(add_read_wait(b, 2, bad, 1, TTL, &o), DRL_ESTORE, NULL);
	assert_non_null(strstr(o.err.message, "WRONGTYPE"));
	drl_bytes lst_old[2] = {B("cur"), B("lst")};
	expect_rc(b->add_read(b, 2, lst_old, 1, TTL, v, &e), 0, &e);
	assert_int_equal(v[0], 2);
	assert_int_equal(v[1], 0);
	raw_set(raw, B("ar:junk"), "s3cr3t-notanumber");
	drl_bytes junk_old[2] = {B("cur"), B("junk")};
	expect_rc(b->add_read(b, 2, junk_old, 1, TTL, v, &e), DRL_ECORRUPT, &e);
	assert_null(strstr(e.message, "s3cr3t"));
	expect_rc(add_read_wait(b, 2, junk_old, 1, TTL, &o), DRL_ECORRUPT,
		  NULL);
	expect_rc(b->add_read(b, 1, (drl_bytes[]){B("junk")}, 1, TTL, v, &e),
		  DRL_ECORRUPT, &e);
	assert_null(strstr(e.message, "s3cr3t"));
	/* Bad arguments change nothing. */
	expect_rc(b->add_read(b, 0, k3, 1, TTL, v, &e), DRL_EINVAL, &e);
	expect_rc(b->add_read(b, 1, k3, 1, 0, v, &e), DRL_EINVAL, &e);
	expect_rc(b->add_read(b, 1, (drl_bytes[]){B("prev")}, 0, TTL, v, &e), 0,
		  &e);
	assert_int_equal(v[0], 7);
	b->destroy(b);
	redisFree(raw);
}

/* A key of another type in the way: DRL_ESTORE with Redis's WRONGTYPE,
 * from every primitive that touches it (get_many too: no MGET, which
 * would read a list as an absent counter). */
static void test_wrong_type(void **state)
{
	NEED_SERVER();
	redisContext *raw = flushed();
	raw_ok(raw, "RPUSH lst x");
	drl_backend *b = open_opts(*state);
	drl_error e = {0};
	int64_t v;
	unsigned char buf[64];
	size_t len;
	uint64_t ver;

	expect_rc(b->incr(b, B("lst"), 1, TTL, &v, &e), DRL_ESTORE, &e);
	assert_non_null(strstr(e.message, "WRONGTYPE"));
	memset(&e, 0, sizeof e);
	expect_rc(b->get_many(b, 2, (drl_bytes[]){B("x"), B("lst")}, &v, &e),
		  DRL_ESTORE, &e);
	assert_non_null(strstr(e.message, "WRONGTYPE"));
	memset(&e, 0, sizeof e);
	expect_rc(b->load(b, B("lst"), buf, sizeof buf, &len, &ver, &e),
		  DRL_ESTORE, &e);
	assert_non_null(strstr(e.message, "WRONGTYPE"));
	/* cas after a failed load has nothing to check against. */
	expect_rc(b->cas(b, B("lst"), "x", 1, 7, TTL, &e), DRL_ECONFLICT, &e);
	if (b->eval) {
		static const drl_script s = {"wt", "return redis.call('INCR', "
						   "KEYS[1])"};
		size_t n;
		memset(&e, 0, sizeof e);
		expect_rc(b->eval(b, &s, 1, (drl_bytes[]){B("lst")}, 0, NULL,
				  &v, 1, &n, &e),
			  DRL_ESTORE, &e);
		assert_non_null(strstr(e.message, "WRONGTYPE"));
	}
	/* Nothing broken: other keys still work. */
	assert_int_equal(incr(b, B("ok"), 3), 3);
	b->destroy(b);
	redisFree(raw);
}

/* ---- optimistic state ---------------------------------------------------------- */

/* load/cas as Redis sees them: the blob is the exact bytes with the TTL
 * asked (PTTL), a blob another client wrote is read, and a write from
 * another client between load and cas (or a DEL, or a key loaded absent
 * and set meanwhile) is DRL_ECONFLICT. Versions, conflicts and DRL_ERANGE
 * as every store promises: contract_redis_* (check_load_cas,
 * check_load_erange, check_blobs_binary). */
static void test_state(void **state)
{
	NEED_SERVER();
	redisContext *raw = flushed();
	drl_backend *b = open_opts(*state);
	drl_error e = {0};
	unsigned char buf[64];
	size_t len = 77;
	static const char blob[] = {'a', 0, 'b', 0, 'c'};
	static const char blob2[] = {0, 0, 0, 9, '\n', ' ', 0};

	uint64_t v0 = load_ok(b, B("s1"), buf, sizeof buf, &len);
	expect_rc(b->cas(b, B("s1"), blob, sizeof blob, v0, TTL, &e), 0, &e);
	long long t = raw_pttl(raw, B("s1"));
	assert_true(t > 0 && t <= 60000);
	uint64_t v1 = load_ok(b, B("s1"), buf, sizeof buf, &len);
	expect_rc(b->cas(b, B("s1"), blob2, sizeof blob2, v1, 2 * SEC, &e), 0,
		  &e);
	t = raw_pttl(raw, B("s1"));
	assert_true(t > 0 && t <= 2000);
	size_t rl = 0;
	char *got = raw_get(raw, B("s1"), &rl);
	assert_int_equal(rl, sizeof blob2);
	assert_memory_equal(got, blob2, sizeof blob2);
	free(got);
	expect_rc(b->cas(b, B("fresh"), "z", 1, 0, TTL, &e), 0, &e);
	assert_true(raw_pttl(raw, B("fresh")) > 0);

	/* A blob another client wrote, and its size when it does not fit. */
	raw_set(raw, B("s2"), "0123456789");
	uint64_t keepv = 555;
	len = 0;
	expect_rc(b->load(b, B("s2"), buf, 4, &len, &keepv, &e), DRL_ERANGE,
		  &e);
	assert_int_equal(len, 10);
	assert_int_equal(keepv, 555);
	load_ok(b, B("s2"), buf, 10, &len);
	assert_memory_equal(buf, "0123456789", 10);

	/* Another client writes between load and cas. */
	uint64_t v5 = load_ok(b, B("s1"), buf, sizeof buf, &len);
	raw_set(raw, B("s1"), "other");
	expect_rc(b->cas(b, B("s1"), "mine", 4, v5, TTL, &e), DRL_ECONFLICT,
		  &e);
	got = raw_get(raw, B("s1"), &rl);
	assert_string_equal(got, "other");
	free(got);
	uint64_t v6 = load_ok(b, B("s1"), buf, sizeof buf, &len);
	assert_memory_equal(buf, "other", 5);
	expect_rc(b->cas(b, B("s1"), "mine", 4, v6, TTL, &e), 0, &e);

	/* ... and while the key was absent (the WATCH covers that too). */
	uint64_t va = load_ok(b, B("s3"), buf, sizeof buf, &len);
	assert_int_equal(va, 0);
	raw_set(raw, B("s3"), "theirs");
	expect_rc(b->cas(b, B("s3"), "mine", 4, 0, TTL, &e), DRL_ECONFLICT, &e);
	got = raw_get(raw, B("s3"), &rl);
	assert_string_equal(got, "theirs");
	free(got);

	/* ... and when the key is deleted in between. */
	uint64_t vd = load_ok(b, B("s1"), buf, sizeof buf, &len);
	raw_ok(raw, "DEL s1");
	expect_rc(b->cas(b, B("s1"), "mine", 4, vd, TTL, &e), DRL_ECONFLICT,
		  &e);

	/* cas on another key than the one loaded cannot be checked. */
	uint64_t vk = load_ok(b, B("s3"), buf, sizeof buf, &len);
	expect_rc(b->cas(b, B("s4"), "m", 1, vk, TTL, &e), DRL_ECONFLICT, &e);
	b->destroy(b);
	redisFree(raw);
}

/* A load without its cas (a denied request) must leave nothing behind
 * that could fail an unrelated EXEC or leak a connection. */
static void test_no_leaked_watch(void **state)
{
	NEED_SERVER();
	redisContext *raw = flushed();
	drl_backend *b = open_opts(*state);
	drl_error e = {0};
	unsigned char buf[64];
	size_t len;

	raw_set(raw, B("w1"), "v");
	load_ok(b, B("w1"), buf, sizeof buf, &len);
	raw_set(raw, B("w1"), "changed"); /* would fail an EXEC under WATCH */
	assert_int_equal(incr(b, B("w2"), 1), 1);
	uint64_t v = load_ok(b, B("w3"), buf, sizeof buf, &len);
	expect_rc(b->cas(b, B("w3"), "a", 1, v, TTL, &e), 0, &e);

	load_ok(b, B("w1"), buf, sizeof buf, &len);
	raw_set(raw, B("w1"), "again");
	/* version 0 without a matching load: SET NX, not the stale WATCH */
	expect_rc(b->cas(b, B("w5"), "n", 1, 0, TTL, &e), 0, &e);
	assert_true(raw_pttl(raw, B("w5")) > 0);

	load_ok(b, B("w1"), buf, sizeof buf, &len);
	raw_set(raw, B("w1"), "and again");
	int64_t vals[1];
	expect_rc(b->get_many(b, 1, (drl_bytes[]){B("w2")}, vals, &e), 0, &e);
	assert_int_equal(vals[0], 1);
	v = load_ok(b, B("w6"), buf, sizeof buf, &len);
	expect_rc(b->cas(b, B("w6"), "b", 1, v, TTL, &e), 0, &e);

	/* The same key loaded twice: the second load's WATCH is the one. */
	load_ok(b, B("w7"), buf, sizeof buf, &len);
	raw_set(raw, B("w7"), "x");
	v = load_ok(b, B("w7"), buf, sizeof buf, &len);
	expect_rc(b->cas(b, B("w7"), "y", 1, v, TTL, &e), 0, &e);

	/* Two loads in a row without cas, then the last watched key
	 * changes: a later EXEC (incr, cas elsewhere) must not see it. */
	load_ok(b, B("w8"), buf, sizeof buf, &len);
	load_ok(b, B("w9"), buf, sizeof buf, &len);
	raw_set(raw, B("w9"), "x");
	assert_int_equal(incr(b, B("w10"), 1), 1);
	load_ok(b, B("w8"), buf, sizeof buf, &len);
	load_ok(b, B("w9"), buf, sizeof buf, &len);
	raw_set(raw, B("w9"), "y");
	v = load_ok(b, B("w11"), buf, sizeof buf, &len);
	raw_set(raw, B("w9"), "z");
	expect_rc(b->cas(b, B("w11"), "c", 1, v, TTL, &e), 0, &e);

	/* Two stores on one thread: a load on A, then a call on B, then
	 * A's cas cannot be checked any more (never a blind write). */
	drl_backend *b2 = open_opts("tx=watch");
	raw_set(raw, B("x1"), "v");
	v = load_ok(b, B("x1"), buf, sizeof buf, &len);
	assert_int_equal(incr(b2, B("x2"), 1), 1);
	expect_rc(b->cas(b, B("x1"), "w", 1, v, TTL, &e), DRL_ECONFLICT, &e);
	v = load_ok(b, B("x1"), buf, sizeof buf, &len);
	expect_rc(b->cas(b, B("x1"), "w", 1, v, TTL, &e), 0, &e);

	/* A store freed while this thread holds one of its connections. */
	load_ok(b2, B("x3"), buf, sizeof buf, &len);
	b2->destroy(b2);
	assert_int_equal(incr(b, B("x4"), 2), 2);
	v = load_ok(b, B("x4"), buf, sizeof buf, &len);
	load_ok(b, B("x4"), buf, sizeof buf, &len);
	b->destroy(b);
	/* ... and then a new store (maybe at the same address). */
	b = open_opts(*state);
	assert_int_equal(incr(b, B("x4"), 2), 4);
	b->destroy(b);
	redisFree(raw);
}

typedef struct loader {
	drl_backend *b;
	char key[16];
	int rc;
} loader;

/* Load a key and exit without cas. */
static void *load_and_exit(void *p)
{
	loader *l = p;
	unsigned char buf[16];
	size_t len;
	uint64_t v;
	drl_error e = {0};
	l->rc = l->b->load(l->b, B(l->key), buf, sizeof buf, &len, &v, &e);
	return NULL;
}

/* Threads that exit between load and cas give their connection back: with
 * pool=1, 30 of them in a row neither hang a later call nor pile up
 * connections. */
static void test_hold_released_at_thread_exit(void **state)
{
	(void)state;
	NEED_SERVER();
	redisContext *raw = flushed();
	long base =
		redis_clients_but_me(raw); /* others: left by failed tests */
	/* A call that waited for the pool would wait the whole timeout. */
	const int64_t timeout_ms = tu_bound_ms(500);
	char opts[64];
	snprintf(opts, sizeof opts, "tx=watch&pool=1&timeout_ms=%lld",
		 (long long)timeout_ms);
	drl_backend *b = open_opts(opts);
	for (int i = 0; i < 30; i++) {
		loader l = {b, "", -100};
		pthread_t t;
		snprintf(l.key, sizeof l.key, "t%d", i % 3);
		assert_int_equal(pthread_create(&t, NULL, load_and_exit, &l),
				 0);
		assert_int_equal(pthread_join(t, NULL), 0);
		assert_int_equal(l.rc, 0);
	}
	int64_t t0 = tu_mono_ms();
	assert_int_equal(incr(b, B("after"), 1), 1);
	assert_true(tu_mono_ms() - t0 < timeout_ms / 2); /* did not wait */
	assert_true(redis_clients_but_me(raw) <= base + 2);
	b->destroy(b);
	/* Every connection closed (the server may take a moment to see it). */
	long left = redis_clients_but_me(raw);
	for (int i = 0; i < 200 && left > base; i++) {
		usleep(10000);
		left = redis_clients_but_me(raw);
	}
	assert_int_equal(left, base);
	redisFree(raw);
}

/* ---- scripts ------------------------------------------------------------------ */

/* eval as Redis runs it: the prefix applies to KEYS, NOSCRIPT after SCRIPT
 * FLUSH handled transparently (and the script still runs once), results
 * that are not integers or too many, scripts that do not compile. The
 * dialect, error codes, large integers and batches of keys and args:
 * contract_redis_lua (check_eval). */
static void test_eval(void **state)
{
	(void)state;
	NEED_SERVER();
	redisContext *raw = flushed();
	drl_backend *b = open_opts("tx=lua&prefix=ev:");
	drl_error e = {0};
	int64_t out[4];
	size_t n = 99;
	static const drl_script add = {
		"add", "return {tonumber(ARGV[1]) + 1, #KEYS, "
		       "redis.call('INCRBY', KEYS[1], ARGV[2])}"};
	drl_bytes k = B("e1");
	int64_t args[2] = {41, 5};
	expect_rc(b->eval(b, &add, 1, &k, 2, args, out, 4, &n, &e), 0, &e);
	assert_int_equal(n, 3);
	assert_int_equal(out[0], 42);
	assert_int_equal(out[1], 1);
	assert_int_equal(out[2], 5);
	size_t rl;
	char *got = raw_get(raw, B("ev:e1"), &rl); /* the prefix applies */
	assert_string_equal(got, "5");
	free(got);

	for (int round = 0; round < 3; round++) {
		raw_ok(raw, "SCRIPT FLUSH");
		expect_rc(b->eval(b, &add, 1, &k, 2, args, out, 4, &n, &e), 0,
			  &e);
		assert_int_equal(out[2], 10 + 5 * round);
	}

	/* Result shapes: one integer, nil, too many, not an integer. */
	static const drl_script one = {"one", "return 7"};
	static const drl_script none = {"none", "return nil"};
	static const drl_script str = {"str", "return {1, 'a'}"};
	static const drl_script bad = {"bad", "return redis.call('NOPE')"};
	static const drl_script syn = {"syn", "return {"};
	expect_rc(b->eval(b, &one, 0, NULL, 0, NULL, out, 4, &n, &e), 0, &e);
	assert_int_equal(n, 1);
	assert_int_equal(out[0], 7);
	expect_rc(b->eval(b, &none, 0, NULL, 0, NULL, out, 4, &n, &e), 0, &e);
	assert_int_equal(n, 0);
	expect_rc(b->eval(b, &add, 1, &k, 2, args, out, 2, &n, &e), DRL_ERANGE,
		  &e);
	expect_rc(b->eval(b, &str, 0, NULL, 0, NULL, out, 4, &n, &e),
		  DRL_EINTERNAL, &e);
	memset(&e, 0, sizeof e);
	expect_rc(b->eval(b, &bad, 0, NULL, 0, NULL, out, 4, &n, &e),
		  DRL_ESTORE, &e);
	assert_non_null(strstr(e.message, "bad"));
	assert_true(strlen(e.message) > 20);
	expect_rc(b->eval(b, &syn, 0, NULL, 0, NULL, out, 4, &n, &e),
		  DRL_ESTORE, &e);

	assert_int_equal(incr(b, B("e2"), 1), 1); /* still healthy */
	b->destroy(b);
	redisFree(raw);
}

/* ---- keys ------------------------------------------------------------------------ */

/* Keys with spaces, newlines, NUL bytes and 1 MB: distinct, working,
 * stored as the exact bytes (with the prefix), each with a TTL. */
static void test_hostile_keys(void **state)
{
	NEED_SERVER();
	redisContext *raw = flushed();
	char uri_opts[96];
	/* Megabyte keys: a timeout a sanitizer's slowdown cannot beat. */
	snprintf(uri_opts, sizeof uri_opts,
		 "%s&prefix=h%%20x:&timeout_ms=%" PRId64, (const char *)*state,
		 tu_bound_ms(1000));
	drl_backend *b = open_opts(uri_opts);
	drl_error e = {0};

	char *big1 = malloc(MB), *big2 = malloc(MB);
	assert_non_null(big1);
	assert_non_null(big2);
	memset(big1, 'x', MB);
	memset(big2, 'x', MB);
	big2[MB - 1] = 'y';
	drl_bytes keys[] = {
		B("a b"),      B("a\nb"),    B("a\r\nb"), BN("a\0b", 3),
		BN("a\0c", 3), BN("\0", 1),  B("a"),      B("*1\r\n$3\r\nDEL"),
		BN(big1, MB),  BN(big2, MB),
	};
	size_t nk = sizeof keys / sizeof keys[0];
	for (size_t i = 0; i < nk; i++)
		assert_int_equal(incr(b, keys[i], (int64_t)i + 1),
				 (int64_t)i + 1);
	int64_t v[16];
	expect_rc(b->get_many(b, nk, keys, v, &e), 0, &e);
	for (size_t i = 0; i < nk; i++)
		assert_int_equal(v[i], (int64_t)i + 1);

	/* In Redis: exactly prefix + bytes, with a TTL. */
	char *full = malloc(MB + 16);
	assert_non_null(full);
	for (size_t i = 0; i < nk; i++) {
		memcpy(full, "h x:", 4);
		memcpy(full + 4, keys[i].data, keys[i].len);
		assert_true(raw_pttl(raw, BN(full, keys[i].len + 4)) > 0);
	}
	redisReply *r = raw_cmd(raw, "DBSIZE");
	assert_int_equal(r->integer, (long long)nk);
	freeReplyObject(r);

	/* State under the same hostile keys (another prefix via the key). */
	for (size_t i = 0; i < nk; i++) {
		memcpy(full, "S", 1);
		memcpy(full + 1, keys[i].data, keys[i].len);
		drl_bytes sk = BN(full, keys[i].len + 1);
		unsigned char buf[16], blob[2] = {(unsigned char)i, 0};
		size_t len;
		uint64_t ver = load_ok(b, sk, buf, sizeof buf, &len);
		assert_int_equal(ver, 0);
		expect_rc(b->cas(b, sk, blob, 2, ver, TTL, &e), 0, &e);
		ver = load_ok(b, sk, buf, sizeof buf, &len);
		assert_true(ver != 0);
		assert_int_equal(len, 2);
		assert_memory_equal(buf, blob, 2);
	}
	r = raw_cmd(raw, "DBSIZE");
	assert_int_equal(r->integer, (long long)(2 * nk));
	freeReplyObject(r);

	if (b->eval) {
		static const drl_script s = {"hk",
					     "return redis.call('INCRBY', "
					     "KEYS[1], ARGV[1])"};
		int64_t out, arg = 100;
		size_t n;
		expect_rc(b->eval(b, &s, 1, &keys[9], 1, &arg, &out, 1, &n, &e),
			  0, &e);
		assert_int_equal(out, 110);
		expect_rc(b->eval(b, &s, 1, &keys[3], 1, &arg, &out, 1, &n, &e),
			  0, &e);
		assert_int_equal(out, 104);
	}
	free(full);
	free(big1);
	free(big2);
	b->destroy(b);
	redisFree(raw);
}

/* prefix=P is prepended to every key; db=N / the path selects the
 * database. */
static void test_prefix_and_db(void **state)
{
	(void)state;
	NEED_SERVER();
	redisContext *raw = flushed();
	char opts[64];
	drl_backend *b = open_opts("prefix=app1:&tx=watch");
	drl_error e = {0};
	unsigned char buf[8];
	size_t len;
	assert_int_equal(incr(b, B("k"), 3), 3);
	uint64_t v = load_ok(b, B("s"), buf, sizeof buf, &len);
	expect_rc(b->cas(b, B("s"), "st", 2, v, TTL, &e), 0, &e);
	size_t rl;
	char *got = raw_get(raw, B("app1:k"), &rl);
	assert_string_equal(got, "3");
	free(got);
	got = raw_get(raw, B("app1:s"), &rl);
	assert_string_equal(got, "st");
	free(got);
	assert_null(raw_get(raw, B("k"), &rl));
	b->destroy(b);

	char uri[128];
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d/3", srv.port);
	assert_int_equal(open_uri(&b, uri, &e), 0);
	assert_int_equal(incr(b, B("dbk"), 7), 7);
	b->destroy(b);
	snprintf(opts, sizeof opts, "db=4");
	b = open_opts(opts);
	assert_int_equal(incr(b, B("dbk"), 8), 8);
	b->destroy(b);
	assert_null(raw_get(raw, B("dbk"), &rl));
	raw_ok(raw, "SELECT 3");
	got = raw_get(raw, B("dbk"), &rl);
	assert_string_equal(got, "7");
	free(got);
	raw_ok(raw, "SELECT 4");
	got = raw_get(raw, B("dbk"), &rl);
	assert_string_equal(got, "8");
	free(got);

	/* A database the server does not have: DRL_ESTORE at open. */
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d/999", srv.port);
	b = NULL;
	expect_rc(open_uri(&b, uri, &e), DRL_ESTORE, &e);
	assert_null(b);
	assert_non_null(strstr(e.message, "SELECT"));
	redisFree(raw);
}

/* ---- other servers: unix socket, AUTH ---------------------------------------------- */

static void test_unix_socket(void **state)
{
	(void)state;
	NEED_SERVER();
	char dir[] = "/tmp/drl-rsock-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[128], uri[256];
	snprintf(path, sizeof path, "%s/redis.sock", dir);
	const char *extra[] = {"--unixsocket", path, "--unixsocketperm", "700",
			       NULL};
	drl_server us;
	int rc = drl_fixture_redis_start(&us, extra);
	assert_int_equal(rc, 0);
	for (int i = 0; i < 300 && access(path, F_OK) != 0; i++)
		usleep(10000);

	drl_backend *b = NULL;
	drl_error e = {0};
	snprintf(uri, sizeof uri, "redis+unix://%s?tx=watch&db=2", path);
	rc = open_uri(&b, uri, &e);
	expect_rc(rc, 0, &e);
	assert_int_equal(incr(b, B("u"), 2), 2);
	unsigned char buf[8];
	size_t len;
	uint64_t v = load_ok(b, B("us"), buf, sizeof buf, &len);
	expect_rc(b->cas(b, B("us"), "1", 1, v, TTL, &e), 0, &e);
	b->destroy(b);

	redisContext *raw = redis_raw_open(us.port);
	raw_ok(raw, "SELECT 2");
	size_t rl;
	char *got = raw_get(raw, B("u"), &rl);
	assert_string_equal(got, "2");
	free(got);
	redisFree(raw);

	/* A socket path that does not exist. */
	snprintf(uri, sizeof uri, "redis+unix://%s/nope.sock", dir);
	b = NULL;
	expect_rc(open_uri(&b, uri, &e), DRL_EUNAVAILABLE, &e);
	drl_fixture_stop(&us);
	unlink(path);
	rmdir(dir);
}

/* requirepass and ACL users: the right password works (percent-encoded
 * in the URI), a wrong or missing one fails at open, and no message ever
 * holds a password. */
static void test_auth(void **state)
{
	(void)state;
	NEED_SERVER();
	const char *pw = "p@ss/w:rd?Xy"; /* needs %-encoding in a URI */
	const char *extra[] = {"--requirepass", pw, NULL};
	drl_server as;
	assert_int_equal(drl_fixture_redis_start(&as, extra), 0);
	char uri[256];
	drl_backend *b = NULL;
	drl_error e = {0};

	snprintf(uri, sizeof uri,
		 "redis://:p%%40ss%%2Fw%%3Ard%%3FXy@127.0.0.1:%d?tx=watch",
		 as.port);
	expect_rc(open_uri(&b, uri, &e), 0, &e);
	assert_int_equal(incr(b, B("a"), 1), 1);
	b->destroy(b);
	snprintf(uri, sizeof uri,
		 "redis://default:p%%40ss%%2Fw%%3Ard%%3FXy@127.0.0.1:%d",
		 as.port);
	expect_rc(open_uri(&b, uri, &e), 0, &e);
	assert_int_equal(incr(b, B("a"), 1), 2);
	b->destroy(b);

	static const char *wrong[] = {
		":Wrong-Pw-4711@",
		"default:Wrong-Pw-4711@",
		"nobody:Wrong-Pw-4711@",
		"",
	};
	for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
		memset(&e, 0, sizeof e);
		b = NULL;
		snprintf(uri, sizeof uri, "redis://%s127.0.0.1:%d", wrong[i],
			 as.port);
		int rc = open_uri(&b, uri, &e);
		if (rc != DRL_ESTORE)
			fail_msg("%s: %s", uri, drl_err_name(rc));
		assert_null(b);
		assert_null(strstr(e.message, "Wrong-Pw"));
		assert_null(strstr(e.message, "p@ss"));
		assert_true(strstr(e.message, "WRONGPASS") ||
			    strstr(e.message, "NOAUTH"));
	}

	/* An ACL user (Redis 6+: AUTH user password). */
	redisContext *raw = redis_raw_open(as.port);
	const char *auth[2] = {"AUTH", pw};
	size_t authl[2] = {4, strlen(pw)};
	freeReplyObject(rawv(raw, 2, auth, authl));
	raw_ok(raw, "ACL SETUSER alice on >Alice-Pw-1 ~* +@all");
	snprintf(uri, sizeof uri, "redis://alice:Alice-Pw-1@127.0.0.1:%d",
		 as.port);
	expect_rc(open_uri(&b, uri, &e), 0, &e);
	assert_int_equal(incr(b, B("alice"), 5), 5);
	b->destroy(b);
	snprintf(uri, sizeof uri, "redis://alice:Alice-Bad-2@127.0.0.1:%d",
		 as.port);
	b = NULL;
	expect_rc(open_uri(&b, uri, &e), DRL_ESTORE, &e);
	assert_null(strstr(e.message, "Alice-Bad"));
	redisFree(raw);
	drl_fixture_stop(&as);

	/* A server that does not know AUTH quotes the arguments of the
	 * unknown command: the message must still not show the password. */
	const char *noauth[] = {"--rename-command", "AUTH", "", NULL};
	assert_int_equal(drl_fixture_redis_start(&as, noauth), 0);
	snprintf(uri, sizeof uri, "redis://bob:Secret-Pw-99@127.0.0.1:%d",
		 as.port);
	b = NULL;
	expect_rc(open_uri(&b, uri, &e), DRL_ESTORE, &e);
	assert_null(strstr(e.message, "Secret-Pw"));
	assert_non_null(strstr(e.message, "AUTH refused"));
	drl_fixture_stop(&as);
}

/* ---- faults ------------------------------------------------------------------------ */

/* A server that stops answering: DRL_ETIMEDOUT within about timeout_ms,
 * from a pooled connection and from a new one; then everything recovers. */
static void test_timeout(void **state)
{
	(void)state;
	NEED_SERVER();
	redisContext *raw = flushed();
	/* long enough for a loaded sanitizer build's connect and PING */
	const long tmo = (long)tu_bound_ms(100);
	char opts[64];
	snprintf(opts, sizeof opts, "tx=watch&timeout_ms=%ld&pool=2", tmo);
	drl_backend *b = open_opts(opts);
	drl_error e = {0};
	int64_t v;
	assert_int_equal(incr(b, B("t"), 1), 1);

	assert_int_equal(drl_fixture_pause(&srv), 0);
	int64_t t0 = tu_mono_ms();
	int rc = b->incr(b, B("t"), 1, TTL, &v, &e);
	int64_t took = tu_mono_ms() - t0;
	/* A second caller needs a new connection: the connect succeeds
	 * (the kernel still accepts) and its PING times out. */
	drl_backend *b2 = NULL;
	char uri[128];
	drl_error e2 = {0};
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d?timeout_ms=%ld",
		 srv.port, tmo);
	int rc2 = open_uri(&b2, uri, &e2);
	assert_int_equal(drl_fixture_resume(&srv), 0);

	expect_rc(rc, DRL_ETIMEDOUT, &e);
	assert_true(took >= tmo - 50 && took < tmo + tu_bound_ms(400));
	expect_rc(rc2, DRL_ETIMEDOUT, &e2);
	assert_null(b2);

	/* The timed-out connection was dropped; the next call reconnects.
	 * (The timed-out INCRBY may or may not have run.) */
	int64_t after = incr(b, B("t"), 1);
	assert_true(after == 2 || after == 3);
	b->destroy(b);
	redisFree(raw);
}

/* Connections the server killed: the call that finds out fails with
 * DRL_EUNAVAILABLE (even with a 1 MB write that would raise SIGPIPE), the next
 * one reconnects. */
static void test_killed_connections(void **state)
{
	NEED_SERVER();
	redisContext *raw = flushed();
	/* A 1 MB write and its reply on a slow machine (TSan, a busy core)
	 * must not time out: the test is about the killed connection. */
	char opts[96];
	snprintf(opts, sizeof opts, "%s&timeout_ms=%lld", (char *)*state,
		 (long long)tu_bound_ms(1000));
	drl_backend *b = open_opts(opts);
	drl_error e = {0};
	int64_t v;
	char *big = malloc(MB);
	assert_non_null(big);
	memset(big, 'k', MB);
	for (int round = 0; round < 3; round++) {
		assert_int_equal(incr(b, B("k"), 1), round + 1);
		raw_ok(raw, "CLIENT KILL TYPE normal SKIPME yes");
		usleep(20000);
		int rc = b->incr(b, BN(big, MB), 1, TTL, &v, &e);
		if (rc != DRL_EUNAVAILABLE && rc != 0)
			fail_msg("round %d: %s (%s)", round, drl_err_name(rc),
				 e.message);
	}
	assert_int_equal(incr(b, B("k"), 1), 4);
	free(big);
	b->destroy(b);
	redisFree(raw);
}

/* The server out of memory (maxmemory, noeviction): DRL_ESTORE with
 * Redis's OOM text from every write, not EXECABORT. */
static void test_oom(void **state)
{
	NEED_SERVER();
	redisContext *raw = flushed();
	drl_backend *b = open_opts(*state);
	drl_error e = {0};
	int64_t v;
	unsigned char buf[8];
	size_t len;
	raw_ok(raw, "CONFIG SET maxmemory 1");
	expect_rc(b->incr(b, B("o"), 1, TTL, &v, &e), DRL_ESTORE, &e);
	assert_non_null(strstr(e.message, "OOM"));
	uint64_t ver = load_ok(b, B("os"), buf, sizeof buf, &len);
	memset(&e, 0, sizeof e);
	expect_rc(b->cas(b, B("os"), "x", 1, ver, TTL, &e), DRL_ESTORE, &e);
	assert_non_null(strstr(e.message, "OOM"));
	if (b->eval) {
		static const drl_script s = {"w", "return redis.call('INCR', "
						  "KEYS[1])"};
		size_t n;
		memset(&e, 0, sizeof e);
		expect_rc(b->eval(b, &s, 1, (drl_bytes[]){B("o")}, 0, NULL, &v,
				  1, &n, &e),
			  DRL_ESTORE, &e);
		assert_non_null(strstr(e.message, "OOM"));
	}
	raw_ok(raw, "CONFIG SET maxmemory 0");
	assert_int_equal(incr(b, B("o"), 1), 1);
	b->destroy(b);
	redisFree(raw);
}

/* ---- threads ------------------------------------------------------------------------ */

#define NTHREADS 8

typedef struct worker {
	drl_backend *b;
	int iters;
	int rc;
	char msg[DRL_ERROR_MESSAGE_MAX];
	long conflicts;
} worker;

static void *incr_worker(void *p)
{
	worker *w = p;
	for (int i = 0; i < w->iters; i++) {
		drl_error e = {0};
		int64_t v;
		w->rc = w->b->incr(w->b, B("hot"), 1, TTL, &v, &e);
		if (w->rc) {
			memcpy(w->msg, e.message, sizeof w->msg);
			break;
		}
	}
	return NULL;
}

/* One increment of a little-endian int64 blob by load/cas, retried on
 * conflict (bounded). */
static void *cas_worker(void *p)
{
	worker *w = p;
	for (int i = 0; i < w->iters && w->rc == 0; i++) {
		for (int attempt = 0;; attempt++) {
			drl_error e = {0};
			unsigned char buf[8];
			size_t len = 0;
			uint64_t ver = 0;
			w->rc = w->b->load(w->b, B("hotstate"), buf, sizeof buf,
					   &len, &ver, &e);
			if (w->rc == 0 && len != (ver ? 8u : 0u))
				w->rc = DRL_ECORRUPT;
			if (w->rc == 0) {
				int64_t n = ver ? drl__get64(buf) : 0;
				drl__put64(buf, n + 1);
				w->rc = w->b->cas(w->b, B("hotstate"), buf, 8,
						  ver, TTL, &e);
			}
			if (w->rc == DRL_ECONFLICT && attempt < 100000) {
				w->conflicts++;
				w->rc = 0;
				continue;
			}
			if (w->rc)
				memcpy(w->msg, e.message, sizeof w->msg);
			break;
		}
	}
	return NULL;
}

static void run_workers(drl_backend *b, void *(*fn)(void *), int iters,
			long *conflicts)
{
	pthread_t t[NTHREADS];
	worker w[NTHREADS];
	for (int i = 0; i < NTHREADS; i++) {
		memset(&w[i], 0, sizeof w[i]);
		w[i].b = b;
		w[i].iters = iters;
		assert_int_equal(pthread_create(&t[i], NULL, fn, &w[i]), 0);
	}
	*conflicts = 0;
	for (int i = 0; i < NTHREADS; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		if (w[i].rc)
			fail_msg("thread %d: %s: %s", i, drl_err_name(w[i].rc),
				 w[i].msg);
		*conflicts += w[i].conflicts;
	}
}

/* 8 threads x incr on one key with pool=2, where threads wait for
 * connections: the exact sum (the default pool: contract_redis_*,
 * check_threads_incr). */
static void test_threads_incr(void **state)
{
	NEED_SERVER();
	redisContext *raw = flushed();
	drl_backend *b = open_opts(*state);
	long conflicts;
	run_workers(b, incr_worker, 1000, &conflicts);
	int64_t v;
	drl_error e = {0};
	expect_rc(b->get_many(b, 1, (drl_bytes[]){B("hot")}, &v, &e), 0, &e);
	assert_int_equal(v, NTHREADS * 1000);
	b->destroy(b);
	redisFree(raw);
}

/* 8 threads x load/cas retry loops on one key: no lost update, exact
 * count (default pool and pool=2: holds never starve the pool). */
static void test_threads_cas(void **state)
{
	NEED_SERVER();
	redisContext *raw = flushed();
	long base = redis_clients_but_me(raw);
	drl_backend *b = open_opts(*state);
	long conflicts;
	run_workers(b, cas_worker, 150, &conflicts);
	unsigned char buf[8];
	size_t len;
	load_ok(b, B("hotstate"), buf, sizeof buf, &len);
	assert_int_equal(len, 8);
	assert_int_equal(drl__get64(buf), NTHREADS * 150);
	print_message("    %s: %ld conflicts for %d updates\n",
		      (const char *)*state, conflicts, NTHREADS * 150);
	/* Connections stay bounded: pool + 2 per thread at most. */
	assert_true(redis_clients_but_me(raw) <= base + 16 + 2 * NTHREADS);
	b->destroy(b);
	redisFree(raw);
}

/* ---- through the public API ---------------------------------------------------------- */

/* A limiter on redis:// decides like the same limiter on memory://, for
 * every algorithm, both strategies, including denials and refunds. */
static void test_public_api(void **state)
{
	NEED_SERVER();
	redisContext *raw = flushed();
	static const char *const specs[] = {
		"fixed_window:10/1m",   "token_bucket:10/1m",
		"sliding_window:5/10s", "gcra:5/10s",
		"sliding_log:5/10s",    "token_bucket:10/1m;fixed_window:15/1h",
	};
	char uri[256];
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d?%s", srv.port,
		 (const char *)*state);
	drl_error e = {0};
	drl_store *rs = NULL, *ms = NULL;
	expect_rc(drl_store_open(&rs, uri, &e), 0, &e);
	expect_rc(drl_store_open(&ms, "memory://", &e), 0, &e);

	for (size_t si = 0; si < sizeof specs / sizeof specs[0]; si++) {
		drl_limiter *rl = NULL, *ml = NULL;
		char prefix[16];
		snprintf(prefix, sizeof prefix, "e2e%zu:", si);
		expect_rc(drl_limiter_new(&rl, rs, specs[si], prefix, &e), 0,
			  &e);
		expect_rc(drl_limiter_new(&ml, ms, specs[si], prefix, &e), 0,
			  &e);
		/* 12 requests at one instant: 10 (or 5) allowed. */
		const int64_t t0 = INT64_C(1700000000000000);
		int allowed = 0;
		for (int i = 0; i < 12; i++) {
			drl_result r, m;
			expect_rc(
				drl_allow_at(rl, "user\0 42", 8, 1, t0, &r, &e),
				0, &e);
			expect_rc(
				drl_allow_at(ml, "user\0 42", 8, 1, t0, &m, &e),
				0, &e);
			same_result(&r, &m, specs[si], i);
			allowed += r.allowed;
		}
		if (allowed != 10 && allowed != 5)
			fail_msg("%s: %d of 12 allowed", specs[si], allowed);

		/* A seeded random walk over keys, times and costs. */
		uint64_t seed = 0x9e3779b97f4a7c15u + si;
		int64_t now = t0;
		for (int i = 0; i < 150; i++) {
			tu_xorshift(&seed);
			char key[2] = {(char)('a' + seed % 3), 0};
			int64_t cost = (int64_t)((seed >> 8) % 4);
			now += (int64_t)((seed >> 16) % (3 * SEC));
			drl_result r, m;
			expect_rc(drl_allow_at(rl, key, 1, cost, now, &r, &e),
				  0, &e);
			expect_rc(drl_allow_at(ml, key, 1, cost, now, &m, &e),
				  0, &e);
			same_result(&r, &m, specs[si], 100 + i);
		}
		drl_limiter_free(rl);
		drl_limiter_free(ml);
	}

	/* Every key the limiters wrote has a TTL. */
	redisReply *keys = raw_cmd(raw, "KEYS *");
	assert_int_equal(keys->type, REDIS_REPLY_ARRAY);
	assert_true(keys->elements > 0);
	for (size_t i = 0; i < keys->elements; i++)
		assert_true(raw_pttl(raw, BN(keys->element[i]->str,
					     keys->element[i]->len)) > 0);
	freeReplyObject(keys);
	drl_store_free(rs);
	drl_store_free(ms);
	redisFree(raw);
}

/* drl_store_open knows both schemes and reports bad URIs and dead
 * servers. */
static void test_public_open(void **state)
{
	(void)state;
	drl_store *s = (drl_store *)&s;
	drl_error e = {0};
	expect_rc(drl_store_open(&s, "redis://127.0.0.1:6379?nope=1", &e),
		  DRL_EINVAL, &e);
	assert_null(s);
	char uri[128];
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d", closed_port());
	expect_rc(drl_store_open(&s, uri, &e), DRL_EUNAVAILABLE, &e);
	expect_rc(drl_store_open(&s, "redis+unix:///nonexistent/x.sock", &e),
		  DRL_EUNAVAILABLE, &e);
}

/* ---- main ------------------------------------------------------------------------------ */

DRL_FIXTURE_REDIS_GROUP(srv, have_srv)

#define BOTH(fn)                                                               \
	cmocka_unit_test_prestate(fn, "tx=lua"),                               \
		cmocka_unit_test_prestate(fn, "tx=watch")

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uri_errors),
		cmocka_unit_test(test_connect_refused),
		cmocka_unit_test(test_public_open),
		cmocka_unit_test(test_caps),
		BOTH(test_counters),
		cmocka_unit_test(test_add_read),
		BOTH(test_wrong_type),
		BOTH(test_state),
		BOTH(test_no_leaked_watch),
		cmocka_unit_test(test_hold_released_at_thread_exit),
		cmocka_unit_test(test_eval),
		BOTH(test_hostile_keys),
		cmocka_unit_test(test_prefix_and_db),
		cmocka_unit_test(test_unix_socket),
		cmocka_unit_test(test_auth),
		cmocka_unit_test(test_timeout),
		BOTH(test_killed_connections),
		BOTH(test_oom),
		/* 8 threads share 2 connections: a thread may wait its turn
		 * for long on a loaded machine (the store's timeout_ms bounds
		 * that wait), so the deadline is generous; what is judged is
		 * the count, not the speed */
		cmocka_unit_test_prestate(test_threads_incr,
					  "tx=watch&pool=2&timeout_ms=60000"),
		BOTH(test_threads_cas),
		cmocka_unit_test_prestate(test_threads_cas,
					  "tx=watch&pool=2&timeout_ms=60000"),
		BOTH(test_public_api),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
