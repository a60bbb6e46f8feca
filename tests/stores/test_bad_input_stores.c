/*
 * Bad input on real servers: the rows of the shared table (bad_input.c)
 * and store URIs aimed at a live redis-server and memcached. After every
 * row the server itself says nothing reached it: Redis keeps DBSIZE 0,
 * INFO commandstats shows no command of the library's (no write at all
 * for decisions on costs that can never be allowed) and no new
 * connection; memcached keeps curr_items 0 and its stats show no get, set,
 * incr, decr, cas or touch. The unit half (memory://) is test_bad_input.c.
 */
#include "bad_input.h"
#include "server_fixture.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

/* The server of the running test, stopped by its teardown (also when an
 * assertion ends the test early). */
static drl_server srv;
static bool srv_up;

/* Start the test's server: skip the test when the binary is missing (fail
 * under CI=true, see server_fixture.h). */
static void start(int (*fn)(drl_server *, const char *const *))
{
	int rc = fn(&srv, NULL);
	if (rc < 0)
		fail_msg("the server did not start");
	if (rc > 0)
		skip();
	srv_up = true;
}

static int stop(void **state)
{
	(void)state;
	if (srv_up)
		drl_fixture_stop(&srv);
	srv_up = false;
	return 0;
}

/* ---- server counters -------------------------------------------------- */

/* name -> value, from INFO (Redis) or stats (memcached). */
typedef struct counters {
	size_t n;
	struct {
		char name[64];
		long long v;
	} c[512];
} counters;

static long long counter(const counters *c, const char *name)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->c[i].name, name) == 0)
			return c->c[i].v;
	return 0;
}

/* Add "NAME<sep>VALUE" lines of text to c (VALUE: its leading integer;
 * for Redis commandstats "calls=N,..." the N). */
static void parse_lines(counters *c, const char *text, const char *sep)
{
	const char *p = text;
	while (*p && c->n < sizeof c->c / sizeof c->c[0]) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		const char *s = memchr(p, sep[0], len);
		if (s && (size_t)(s - p) < sizeof c->c[0].name) {
			size_t nl = (size_t)(s - p);
			memcpy(c->c[c->n].name, p, nl);
			c->c[c->n].name[nl] = '\0';
			const char *v = s + 1;
			if (strncmp(v, "calls=", 6) == 0)
				v += 6;
			c->c[c->n++].v = strtoll(v, NULL, 10);
		}
		p += len + (eol != NULL);
	}
}

/* ---- Redis ------------------------------------------------------------------ */

typedef struct redis_ctx {
	redisContext *raw;
	counters before;
} redis_ctx;

static redisReply *rcmd(redis_ctx *r, const char *cmd)
{
	redisReply *rep = redisCommand(r->raw, cmd);
	if (rep == NULL)
		fail_msg("redis %s: %s", cmd, r->raw->errstr);
	return rep;
}

static void redis_counters(redis_ctx *r, counters *c)
{
	c->n = 0;
	redisReply *rep = rcmd(r, "INFO commandstats");
	parse_lines(c, rep->str, ":");
	freeReplyObject(rep);
	rep = rcmd(r, "INFO stats");
	parse_lines(c, rep->str, ":");
	freeReplyObject(rep);
}

static void redis_before(void *ctx)
{
	redis_ctx *r = ctx;
	redis_counters(r, &r->before);
}

/* Commands a decision that writes nothing may send. */
static bool redis_read_only(const char *cmd)
{
	static const char *const ok[] = {
		"cmdstat_get",     "cmdstat_mget",   "cmdstat_evalsha",
		"cmdstat_eval",    "cmdstat_script", "cmdstat_watch",
		"cmdstat_unwatch", "cmdstat_time",   "cmdstat_ping",
		"cmdstat_info",    "cmdstat_dbsize", "cmdstat_script|load",
		"cmdstat_pttl",    "cmdstat_exists", "cmdstat_getrange",
		"cmdstat_hget",    "cmdstat_hmget", /* counter groups */
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		if (strcmp(cmd, ok[i]) == 0)
			return true;
	return false;
}

static void redis_no_writes(void *ctx, const char *what, bool decided)
{
	redis_ctx *r = ctx;
	counters after;
	redis_counters(r, &after);
	for (size_t i = 0; i < after.n; i++) {
		const char *name = after.c[i].name;
		long long d = after.c[i].v - counter(&r->before, name);
		if (d == 0 || strncmp(name, "cmdstat_", 8) != 0)
			continue;
		if (strcmp(name, "cmdstat_info") == 0 ||
		    strcmp(name, "cmdstat_dbsize") == 0)
			continue; /* ours */
		if (decided && redis_read_only(name))
			continue;
		fail_msg("%s: Redis ran %s %lld times", what, name + 8, d);
	}
	long long conns = counter(&after, "total_connections_received") -
			  counter(&r->before, "total_connections_received");
	if (!decided && conns != 0)
		fail_msg("%s: %lld new connections to Redis", what, conns);
}

static void redis_empty(void *ctx, const char *what)
{
	redis_ctx *r = ctx;
	redisReply *rep = rcmd(r, "DBSIZE");
	long long n = rep->integer;
	freeReplyObject(rep);
	if (n != 0)
		fail_msg("%s: Redis holds %lld keys", what, n);
}

/* A target on a spy store opened from redis://127.0.0.1:PORT?opts (a
 * fresh server). */
static bi_target redis_target(redis_ctx *r, int port, char *addr, size_t cap,
			      const char *opts)
{
	char uri[256];
	struct timeval tv = {5, 0};
	r->raw = redisConnectWithTimeout("127.0.0.1", port, tv);
	if (r->raw == NULL || r->raw->err)
		fail_msg("raw redis connection failed");
	snprintf(addr, cap, "127.0.0.1:%d", port);
	snprintf(uri, sizeof uri, "redis://%s%s%s", addr, *opts ? "?" : "",
		 opts);
	bi_target t = {
		.name = "redis",
		.addr = addr,
		.ctx = r,
		.before = redis_before,
		.no_writes = redis_no_writes,
		.empty = redis_empty,
	};
	t.store = spy_open(uri, &t.spy);
	return t;
}

static void redis_done(bi_target *t, redis_ctx *r)
{
	drl_store_free(t->store);
	redisFree(r->raw);
}

/* 129 bytes: one more than a prefix may have. */
#define P16 "pppppppppppppppp"
#define P129 P16 P16 P16 P16 P16 P16 P16 P16 "p"

static const bi_uri_row redis_uris[] = {
	{"redis://{addr}?tx=bogus", DRL_EINVAL,
	 "tx=\"bogus\": expected auto, lua or watch"},
	{"redis://{addr}?clock=sundial", DRL_EINVAL,
	 "clock=\"sundial\": expected client or server"},
	{"redis://{addr}?bogus=1", DRL_EINVAL,
	 "unknown URI option \"bogus\" for a redis:// store"},
	{"redis://{addr}?tx=lua&tx=watch", DRL_EINVAL,
	 "option \"tx\" given twice"},
	{"redis://{addr}?pool=0", DRL_EINVAL,
	 "pool=\"0\": expected an integer"},
	{"redis://{addr}?pool=1025", DRL_EINVAL, "pool=\"1025\""},
	{"redis://{addr}?timeout_ms=0", DRL_EINVAL, "timeout_ms=\"0\""},
	{"redis://{addr}?timeout_ms=99999999999999999999", DRL_EINVAL,
	 "timeout_ms=\"99999999999999999999\""},
	{"redis://{addr}/0?db=0", DRL_EINVAL, "names the database twice"},
	{"redis://{addr}/x", DRL_EINVAL, "database \"x\": expected an integer"},
	{"redis://{addr}/-1", DRL_EINVAL, "database \"-1\""},
	{"redis://{addr}?db=-1", DRL_EINVAL, "db=\"-1\""},
	{"redis://user@{addr}", DRL_EINVAL, "names a user but no password"},
	{"redis://{addr}?prefix=" P129, DRL_EINVAL,
	 "prefix is 129 bytes; at most 128"},
	{"redis://{addr},{addr}", DRL_EINVAL, "names several hosts"},
	{"redis://{addr}:1", DRL_EINVAL, "write an IPv6 address in brackets"},
	{"redis://[::1", DRL_EINVAL, "'[' without ']'"},
	{"redis://127.0.0.1:0", DRL_EINVAL,
	 "\"127.0.0.1:0\": port must be an integer in [1, 65535]"},
	{"redis://127.0.0.1:65536", DRL_EINVAL, "\"127.0.0.1:65536\": port"},
	{"redis://127.0.0.1:x", DRL_EINVAL, "\"127.0.0.1:x\": port"},
	{"redis://", DRL_EINVAL, "redis URI has no host"},
	{"redis+unix://{addr}", DRL_EINVAL, "redis+unix URI takes no host"},
	{"redis+unix://", DRL_EINVAL, "needs an absolute socket path"},
	{"redis://:secret@{addr}?tx=bogus", DRL_EINVAL, "tx=\"bogus\""},
	{"redis://{addr}?connect=sometimes", DRL_EINVAL,
	 "connect=\"sometimes\": expected eager or lazy"},
	{"redis://{addr}?breaker_failures=x", DRL_EINVAL,
	 "breaker_failures=\"x\""},
};

static void test_redis(void **state)
{
	const char *opts = *state;
	start(drl_fixture_redis_start);
	redis_ctx r = {0};
	char addr[64];
	bi_target t = redis_target(&r, srv.port, addr, sizeof addr, opts);
	bi_run_rows(&t);
	bi_run_uri_rows(&t, redis_uris, sizeof redis_uris / sizeof *redis_uris);
	bi_run_overflow(&t);
	redis_done(&t, &r);
}

/* ---- memcached ------------------------------------------------------------ */

typedef struct mc_ctx {
	int fd;
	counters before;
} mc_ctx;

static void mc_counters(mc_ctx *m, counters *c)
{
	static char buf[65536];
	size_t len = 0;
	c->n = 0;
	if (write(m->fd, "stats\r\n", 7) != 7)
		fail_msg("memcached stats: write failed");
	while (len < 5 || memcmp(buf + len - 5, "END\r\n", 5) != 0) {
		if (len + 1 >= sizeof buf)
			fail_msg("memcached stats: reply too long");
		ssize_t k = read(m->fd, buf + len, sizeof buf - 1 - len);
		if (k <= 0)
			fail_msg("memcached stats: read failed");
		len += (size_t)k;
	}
	buf[len] = '\0';
	/* "STAT name value" lines: drop the "STAT " of each. */
	for (char *p = buf; (p = strstr(p, "STAT ")) != NULL;)
		memmove(p, p + 5, strlen(p + 5) + 1);
	parse_lines(c, buf, " ");
}

static void mc_before(void *ctx)
{
	mc_ctx *m = ctx;
	mc_counters(m, &m->before);
}

static void mc_no_writes(void *ctx, const char *what, bool decided)
{
	static const char *const writes[] = {
		"cmd_set",    "cmd_touch",    "cmd_flush",     "incr_misses",
		"incr_hits",  "decr_misses",  "decr_hits",     "cas_misses",
		"cas_hits",   "cas_badval",   "delete_misses", "delete_hits",
		"touch_hits", "touch_misses",
	};
	static const char *const reads[] = {"cmd_get", "get_hits", "get_misses",
					    "total_connections"};
	mc_ctx *m = ctx;
	counters after;
	mc_counters(m, &after);
	for (size_t i = 0; i < sizeof writes / sizeof *writes; i++)
		if (counter(&after, writes[i]) !=
		    counter(&m->before, writes[i]))
			fail_msg("%s: memcached %s went from %lld to %lld",
				 what, writes[i],
				 counter(&m->before, writes[i]),
				 counter(&after, writes[i]));
	for (size_t i = 0; !decided && i < sizeof reads / sizeof *reads; i++)
		if (counter(&after, reads[i]) != counter(&m->before, reads[i]))
			fail_msg("%s: memcached %s went from %lld to %lld",
				 what, reads[i], counter(&m->before, reads[i]),
				 counter(&after, reads[i]));
}

static void mc_empty(void *ctx, const char *what)
{
	mc_ctx *m = ctx;
	counters c;
	mc_counters(m, &c);
	if (counter(&c, "curr_items") != 0)
		fail_msg("%s: memcached holds %lld items", what,
			 counter(&c, "curr_items"));
}

static const bi_uri_row mc_uris[] = {
	{"memcached://{addr}?binary=2", DRL_EINVAL, "binary=\"2\""},
	{"memcached://{addr}?bogus=1", DRL_EINVAL,
	 "unknown URI option \"bogus\" for a memcached:// store"},
	{"memcached://{addr}?binary=1&binary=1", DRL_EINVAL,
	 "option \"binary\" given twice"},
	{"memcached://{addr}?pool=0", DRL_EINVAL, "pool=\"0\""},
	{"memcached://{addr}?timeout_ms=0", DRL_EINVAL, "timeout_ms=\"0\""},
	{"memcached://{addr},", DRL_EINVAL, "empty server in the host list"},
	{"memcached://:secret@{addr}", DRL_EINVAL, "SASL is not supported"},
	{"memcached://{addr}?prefix=a%20b", DRL_EINVAL, "byte 0x20 at 1"},
	{"memcached://127.0.0.1:0", DRL_EINVAL, "port must be an integer"},
	{"memcached://", DRL_EINVAL, "memcached URI: no server"},
	{"memcached://{addr}?connect=sometimes", DRL_EINVAL,
	 "connect=\"sometimes\""},
};

static void test_memcached(void **state)
{
	(void)state;
	start(drl_fixture_memcached_start);
	mc_ctx m = {.fd = socket(AF_INET, SOCK_STREAM, 0)};
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)srv.port)};
	struct timeval tv = {5, 0};
	assert_true(m.fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(m.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	assert_int_equal(connect(m.fd, (struct sockaddr *)&a, sizeof a), 0);
	char addr[64];
	snprintf(addr, sizeof addr, "127.0.0.1:%d", srv.port);
	char uri[128];
	snprintf(uri, sizeof uri, "memcached://%s", addr);
	bi_target t = {
		.name = "memcached",
		.addr = addr,
		.ctx = &m,
		.before = mc_before,
		.no_writes = mc_no_writes,
		.empty = mc_empty,
	};
	t.store = spy_open(uri, &t.spy);
	/* Rows and URIs first: the server stays empty until the overflow
	 * runs write their keys. */
	bi_run_rows(&t);
	bi_run_uri_rows(&t, mc_uris, sizeof mc_uris / sizeof *mc_uris);
	bi_run_overflow(&t);
	drl_store_free(t.store);
	close(m.fd);
}

/* ---- main ---------------------------------------------------------------- */

#define REDIS(opts)                                                            \
	cmocka_unit_test_prestate_setup_teardown(test_redis, NULL, stop, opts)

int main(void)
{
	const struct CMUnitTest tests[] = {
		REDIS(""),
		REDIS("tx=watch"),
		REDIS("tx=watch&clock=server"),
		REDIS("tx=lua&clock=server"),
		cmocka_unit_test_teardown(test_memcached, stop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
