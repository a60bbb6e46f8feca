/*
 * The memcached store (backends/memcached.c) against real memcached
 * servers started on free loopback ports by the fixture: what is
 * memcached's own (the range of its counters per protocol, blobs near its
 * 1 MB item limit, one request for get_many, how keys are mapped and
 * hashed, TTLs as the server holds them, 30-day TTLs), a three-server pool
 * with one server killed or hung, a server restart, and end-to-end
 * decisions through the public API compared with memory://. The store
 * contract itself (both protocols) runs as contract_memcached
 * (tests/fixtures/store_contract.c).
 *
 * Skips (exit 77) when memcached is not installed, unless CI=true.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libmemcached/memcached.h>
#include <openssl/sha.h>

#include "backends/memcached.h"
#include "fake_server.h"
#include "internal.h"
#include "server_fixture.h"
#include "testutil.h"

#define SEC INT64_C(1000000)
#define LONG_TTL (INT64_C(600) * SEC)
#define DAY INT64_C(86400)

static drl_server srv; /* one server shared by most tests */

/* ---- helpers ------------------------------------------------------------- */

/* A byte string from a C string. */
static drl_bytes K(const char *s)
{
	return (drl_bytes){s, strlen(s)};
}

/* Open the store at `text` (printf format), or return the error code with
 * *out NULL. */
static int try_open(drl_backend **out, drl_error *err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int try_open(drl_backend **out, drl_error *err, const char *fmt, ...)
{
	char text[4096];
	va_list ap;
	drl__uri u;
	int rc;

	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	*out = (drl_backend *)err; /* must come back NULL on failure */
	rc = drl__uri_parse(&u, text, err);
	if (rc) {
		*out = NULL;
		return rc;
	}
	rc = drl__memcached_open(out, &u, err);
	drl__uri_clear(&u);
	if (rc)
		assert_null(*out);
	return rc;
}

/* Open the shared server with options `opts` ("" or "k=v&..."). */
static drl_backend *open_srv(const char *opts)
{
	drl_error err = {0};
	drl_backend *b;
	/* a generous timeout: these tests are not about timeouts, and a
	 * loaded CI host can stall a loopback reply for a second */
	if (try_open(&b, &err, "memcached://127.0.0.1:%d?timeout_ms=5000%s%s",
		     srv.port, opts[0] ? "&" : "", opts))
		fail_msg("open(%s): %s", opts, err.message);
	assert_string_equal(b->name, "memcached");
	assert_int_equal(b->caps, DRL_CAP_COUNTER | DRL_CAP_CAS |
					  DRL_CAP_ADD_READ | DRL_CAP_CHANNEL);
	assert_true(b->version >= 1);
	return b;
}

/* incr, expecting success; returns the new value. */
static int64_t incr_ok(drl_backend *b, drl_bytes k, int64_t delta)
{
	drl_error err = {0};
	int64_t v = INT64_MIN;
	int rc = b->incr(b, k, delta, LONG_TTL, &v, &err);
	if (rc)
		fail_msg("incr(%+" PRId64 "): %s (%s)", delta, err.message,
			 drl_err_name(rc));
	return v;
}

/* get_many of one key, expecting success. */
static int64_t get_ok(drl_backend *b, drl_bytes k)
{
	drl_error err = {0};
	int64_t v = INT64_MIN;
	int rc = b->get_many(b, 1, &k, &v, &err);
	if (rc)
		fail_msg("get_many: %s (%s)", err.message, drl_err_name(rc));
	return v;
}

/* A plain libmemcached client on one server (to look behind the store). */
static memcached_st *raw_client(int port)
{
	memcached_st *mc = memcached_create(NULL);
	assert_non_null(mc);
	assert_int_equal(memcached_server_add(mc, "127.0.0.1", (in_port_t)port),
			 MEMCACHED_SUCCESS);
	memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, 500);
	memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 500);
	return mc;
}

/* 1 when `key` (already a store key) exists behind the raw client mc. */
static int raw_has(memcached_st *mc, const char *key, size_t len)
{
	memcached_return_t rc = memcached_exist(mc, key, len);
	if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_NOTFOUND)
		fail_msg("exist: %s", memcached_strerror(NULL, rc));
	return rc == MEMCACHED_SUCCESS;
}

/* 1 when `key` (already a store key) exists on the server at port. */
static int raw_exists(int port, const char *key, size_t len)
{
	memcached_st *mc = raw_client(port);
	int has = raw_has(mc, key, len);
	memcached_free(mc);
	return has;
}

/* Ask the server at port (meta debug command "me") for the seconds left
 * before `key` expires: -1 never, -2 absent. */
static long raw_exp_left(int port, const char *key)
{
	struct sockaddr_in a;
	char buf[1024];
	size_t got = 0;
	long out = -3;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((unsigned short)port);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
	int n = snprintf(buf, sizeof buf, "me %s\r\n", key);
	assert_int_equal(write(fd, buf, (size_t)n), n);
	for (int i = 0; i < 100 && got < sizeof buf - 1; i++) {
		ssize_t r = read(fd, buf + got, sizeof buf - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
		buf[got] = '\0';
		if (strstr(buf, "\r\n"))
			break;
	}
	close(fd);
	buf[got] = '\0';
	if (strncmp(buf, "EN", 2) == 0)
		return -2;
	const char *e = strstr(buf, " exp=");
	if (e == NULL)
		fail_msg("me %s: unexpected reply \"%s\"", key, buf);
	out = strtol(e + 5, NULL, 10);
	/* memcached 1.6.18 prints the seconds left negated */
	return out == -1 ? -1 : labs(out);
}

/* A port with nothing listening a moment ago. */
static int dead_port(void)
{
	int port = drl_fixture_free_port();
	assert_true(port > 0);
	return port;
}

/* Start a memcached for one test, skipping the test when it cannot. */
static void start_or_skip(drl_server *s, const char *const *extra)
{
	int rc = drl_fixture_memcached_start(s, extra);
	if (rc == 1)
		skip();
	if (rc != 0)
		fail_msg("cannot start memcached");
}

/* ---- URI and open -------------------------------------------------------- */

/* Open `text` expecting DRL_EINVAL with `want` in the message. */
static void open_bad(const char *text, const char *want)
{
	drl_error err = {0};
	drl_backend *b;
	int rc = try_open(&b, &err, "%s", text);
	if (rc != DRL_EINVAL)
		fail_msg("open(\"%s\") = %s, want DRL_EINVAL (%s)", text,
			 drl_err_name(rc), err.message);
	if (!strstr(err.message, want))
		fail_msg("open(\"%s\"): message \"%s\" lacks \"%s\"", text,
			 err.message, want);
}

static void test_open_rejects_bad_uris(void **state)
{
	char text[512], longp[200];
	(void)state;
	memset(longp, 'p', 129);
	longp[129] = '\0';

	open_bad("memcached://127.0.0.1:11211?nope=1", "nope");
	open_bad("memcached://127.0.0.1:11211?timeout_ms=0", "timeout_ms");
	open_bad("memcached://127.0.0.1:11211?timeout_ms=abc", "timeout_ms");
	open_bad("memcached://127.0.0.1:11211?binary=2", "binary");
	open_bad("memcached://127.0.0.1:11211?channels=2", "channels");
	open_bad("memcached://127.0.0.1:11211?pool=0", "pool");
	open_bad("memcached://127.0.0.1:11211?prefix=a%20b", "prefix");
	open_bad("memcached://127.0.0.1:11211?prefix=a%0Ab", "prefix");
	snprintf(text, sizeof text, "memcached://127.0.0.1:11211?prefix=%s",
		 longp);
	open_bad(text, "prefix");
	open_bad("memcached://127.0.0.1:0", "port");
	open_bad("memcached://127.0.0.1:65536", "port");
	open_bad("memcached://127.0.0.1:abc", "port");
	open_bad("memcached://127.0.0.1:", "port");
	open_bad("memcached://127.0.0.1:1,,127.0.0.1:2", "empty server");
	open_bad("memcached://127.0.0.1:1,", "empty server");
	open_bad("memcached://:11211", "empty host");
	open_bad("memcached://", "no server");
	open_bad("memcached://ho$t:1", "host");
	open_bad("memcached://::1:11211", "IPv6");
	open_bad("memcached://[::1:11211", "]");
	open_bad("memcached://[::1]x", "':'");
	open_bad("memcached://127.0.0.1:5,127.0.0.1:5", "twice");
	open_bad("memcached://127.0.0.1/db0", "path");
	open_bad("memcached+unix://", "socket path");
	open_bad("memcached+unix://h/tmp/x.sock", "no host");

	/* A password is refused and never quoted. */
	drl_error err = {0};
	drl_backend *b;
	assert_int_equal(
		try_open(&b, &err, "memcached://u:s3cretpw@127.0.0.1:1"),
		DRL_EINVAL);
	assert_non_null(strstr(err.message, "SASL"));
	assert_null(strstr(err.message, "s3cretpw"));
}

static void test_open_fails_fast_without_server(void **state)
{
	drl_error err = {0};
	drl_backend *b;
	(void)state;
	int port = dead_port();
	int64_t t0 = tu_mono_ms();
	int rc = try_open(&b, &err, "memcached://127.0.0.1:%d?timeout_ms=300",
			  port);
	int64_t took = tu_mono_ms() - t0;
	if (rc == 0) {
		b->destroy(b);
		if (drl_fixture_port_listening(port)) {
			print_message("port %d was taken by another process: "
				      "skipping\n",
				      port);
			skip();
		}
	}
	if (rc != DRL_EUNAVAILABLE && rc != DRL_ETIMEDOUT)
		fail_msg("open on a dead port: %s (%s)", drl_err_name(rc),
			 err.message);
	assert_true(took < 300 + tu_bound_ms(400));
	assert_non_null(strstr(err.message, "memcached"));

	/* One dead server in a pool does not stop the open. */
	assert_int_equal(try_open(&b, &err,
				  "memcached://127.0.0.1:%d,127.0.0.1:%d"
				  "?timeout_ms=300",
				  srv.port, port),
			 0);
	b->destroy(b);
}

/* ---- counters ------------------------------------------------------------ */

/* state: extra options, e.g. "binary=0" */
static void test_counter_conformance(void **state)
{
	const char *proto = *state ? (const char *)*state : "";
	char opts[128];
	drl_error err = {0};
	int64_t v;
	snprintf(opts, sizeof opts, "%s&prefix=cc%s_", proto,
		 strchr(proto, '0') ? "a" : "b");
	drl_backend *b = open_srv(opts);

	assert_int_equal(incr_ok(b, K("c1"), 1), 1);
	/* large values are exact (ASCII incr carries 32 bits) */
	int64_t big = strchr(proto, '0') ? INT64_C(1) << 31 : INT64_C(1) << 40;
	assert_int_equal(incr_ok(b, K("c4"), -big + 1), -big + 1);
	assert_int_equal(incr_ok(b, K("c4"), big), 1);

	if (strchr(proto, '0') == NULL) {
		/* binary: the range edges are refused, never wrong */
		assert_int_equal(incr_ok(b, K("c5"), INT64_MAX), INT64_MAX);
		assert_int_equal(b->incr(b, K("c5"), 1, LONG_TTL, &v, &err),
				 DRL_ERANGE);
		assert_int_equal(incr_ok(b, K("c6"), -(INT64_C(1) << 62) + 1),
				 -(INT64_C(1) << 62) + 1);
		assert_int_equal(b->incr(b, K("c6"), -1, LONG_TTL, &v, &err),
				 DRL_ERANGE);
	} else {
		/* ASCII incr carries 32 bits */
		assert_int_equal(b->incr(b, K("c5"), INT64_C(1) << 33, LONG_TTL,
					 &v, &err),
				 DRL_ERANGE);
		assert_int_equal(incr_ok(b, K("c5"), UINT32_MAX),
				 (int64_t)UINT32_MAX);
	}
	assert_int_equal(b->incr(b, K("c7"), INT64_MIN, LONG_TTL, &v, &err),
			 DRL_ERANGE);
	assert_int_equal(
		b->incr(b, K("c7"), -(INT64_C(1) << 62), LONG_TTL, &v, &err),
		DRL_ERANGE);

	/* a key holding a blob is not a counter */
	assert_int_equal(b->cas(b, K("blob"), "xyz", 3, 0, LONG_TTL, &err), 0);
	assert_int_equal(b->incr(b, K("blob"), 1, LONG_TTL, &v, &err),
			 DRL_ECORRUPT);
	assert_int_equal(b->get_many(b, 1, (drl_bytes[]){K("blob")}, &v, &err),
			 DRL_ECORRUPT);
	/* ...and the handle still works after that */
	assert_int_equal(incr_ok(b, K("c1"), 1), 2);
	b->destroy(b);
}

/* One binary GETKQ hit: key k, counter value v (BIAS + v, as stored). */
static size_t getkq_hit(char *out, const char *k, int64_t v)
{
	char val[24];
	size_t kl = strlen(k);
	int vl = snprintf(val, sizeof val, "%" PRIu64,
			  (UINT64_C(1) << 62) + (uint64_t)v);
	uint32_t body = htonl((uint32_t)(4 + kl + (size_t)vl));
	uint16_t klen = htons((uint16_t)kl);
	memset(out, 0, 28);
	out[0] = (char)0x81;
	out[1] = 0x0d; /* GETKQ */
	memcpy(out + 2, &klen, 2);
	out[4] = 4; /* extras: the flags */
	memcpy(out + 8, &body, 4);
	memcpy(out + 28, k, kl);
	memcpy(out + 28 + kl, val, (size_t)vl);
	return 28 + kl + (size_t)vl;
}

/* What a server answers to get_many(ka, kb, kc) with ka = 5, kc = -3 and
 * kb absent, in one reply (to one request: a multi-get). */
static size_t mget_reply(char *out, int binary)
{
	static const char noop[24] = {(char)0x81, 0x0a};
	size_t n = 0;
	if (!binary)
		return (size_t)sprintf(
			out, "VALUE ka 0 19\r\n4611686018427387909\r\n"
			     "VALUE kc 0 19\r\n4611686018427387901\r\nEND\r\n");
	n += getkq_hit(out + n, "ka", 5);
	n += getkq_hit(out + n, "kc", -3);
	memcpy(out + n, noop, sizeof noop);
	return n + sizeof noop;
}

/* get_many reads every key with one request: a server that answers once,
 * with every key's value, and then never again gives all the values (one
 * get per key would wait for a second answer and time out). */
static void test_get_many_one_request(void **state)
{
	const char *proto = *state;
	int binary = strchr(proto, '1') != NULL;
	char reply[512];
	fake_plan plan = {.reply = reply,
			  .len = mget_reply(reply, binary),
			  .wait_request = 1,
			  .end = FAKE_END_HANG};
	drl_bytes keys[3] = {K("ka"), K("kb"), K("kc")};
	int64_t vals[3] = {-1, -1, -1};
	drl_error err = {0};
	fake_server *fs = NULL;
	drl_backend *b;

	assert_int_equal(fake_server_start_tcp(&fs, &plan, 1), 0);
	if (try_open(&b, &err,
		     "memcached://127.0.0.1:%d?connect=lazy&%s&timeout_ms=%lld",
		     fake_server_port(fs), proto, (long long)tu_bound_ms(1000)))
		fail_msg("open: %s", err.message);
	int rc = b->get_many(b, 3, keys, vals, &err);
	if (rc)
		fail_msg("get_many (%s): %s (%s)", proto, err.message,
			 drl_err_name(rc));
	assert_int_equal(vals[0], 5);
	assert_int_equal(vals[1], 0);
	assert_int_equal(vals[2], -3);
	assert_int_equal(fake_server_accepted(fs), 1);
	b->destroy(b);
	fake_server_stop(fs);
}

/* ---- optimistic state ---------------------------------------------------- */

/* Blobs near memcached's 1 MB item limit: 100 KB round trip, 2 MB is an
 * error (not a crash) and the store carries on. Blobs up to 4 KiB,
 * versions and conflicts: contract_memcached (check_load_cas, ...). */
static void test_large_blobs(void **state)
{
	const char *proto = *state;
	char opts[128], buf[64];
	size_t len;
	uint64_t ver, v2;
	drl_error err = {0};
	snprintf(opts, sizeof opts, "%s&prefix=lc%s_", proto,
		 strchr(proto, '0') ? "a" : "b");
	drl_backend *b = open_srv(opts);
	assert_int_equal(b->cas(b, K("s"), "world!", 6, 0, LONG_TTL, &err), 0);
	assert_int_equal(b->load(b, K("s"), buf, sizeof buf, &len, &v2, &err),
			 0);
	/* binary blobs with NULs, 100 KB */
	size_t big = 100 * 1024;
	unsigned char *blob = malloc(big), *back = malloc(big);
	assert_non_null(blob);
	assert_non_null(back);
	for (size_t i = 0; i < big; i++)
		blob[i] = (unsigned char)(i * 131 + 7);
	assert_int_equal(b->cas(b, K("big"), blob, big, 0, LONG_TTL, &err), 0);
	assert_int_equal(b->load(b, K("big"), back, big, &len, &ver, &err), 0);
	assert_int_equal(len, big);
	assert_memory_equal(blob, back, big);
	free(blob);
	free(back);
	/* larger than memcached's 1 MB items: an error, not a crash */
	size_t huge = 2 * 1024 * 1024;
	char *h = calloc(1, huge);
	assert_non_null(h);
	int rc = b->cas(b, K("huge"), h, huge, 0, LONG_TTL, &err);
	assert_true(rc == DRL_ESTORE || rc == DRL_ERANGE);
	free(h);
	/* and the store carries on */
	assert_int_equal(b->load(b, K("s"), buf, sizeof buf, &len, &ver, &err),
			 0);
	assert_int_equal(ver, v2);
	b->destroy(b);
}

/* ---- keys ---------------------------------------------------------------- */

/* "#" + hex SHA-256 of s[0..n): the hashed form of a key. */
static void hashed_form(const void *s, size_t n, char out[66])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256(s, n, md);
	out[0] = '#';
	for (int i = 0; i < 32; i++)
		sprintf(out + 1 + 2 * i, "%02x", md[i]);
}

static void test_hostile_keys(void **state)
{
	enum { N = 14 };
	static char k250[250], k251[251], k248[248];
	char *mb = malloc(1024 * 1024), *mb2 = malloc(1024 * 1024);
	char h1[66];
	drl_bytes keys[N];
	int64_t vals[N];
	drl_error err = {0};
	(void)state;
	assert_non_null(mb);
	assert_non_null(mb2);
	memset(k250, 'a', sizeof k250);
	memset(k251, 'a', sizeof k251);
	memset(k248, 'b', sizeof k248);
	memset(mb, 'z', 1024 * 1024);
	memcpy(mb2, mb, 1024 * 1024);
	mb2[1024 * 1024 - 1] = 'y'; /* differs in the last byte only */
	hashed_form("a b", 3, h1);

	keys[0] = (drl_bytes){"a b", 3};
	keys[1] = (drl_bytes){"a\nb", 3};
	keys[2] = (drl_bytes){"a\0b", 3};
	keys[3] = (drl_bytes){"a\0c", 3};
	keys[4] = (drl_bytes){k250, sizeof k250};
	keys[5] = (drl_bytes){k251, sizeof k251};
	keys[6] = (drl_bytes){mb, 1024 * 1024};
	keys[7] = (drl_bytes){mb2, 1024 * 1024};
	keys[8] = (drl_bytes){h1, 65}; /* looks like the hash of "a b" */
	keys[9] = (drl_bytes){"\x7f", 1};
	keys[10] = (drl_bytes){"", 0};
	keys[11] = (drl_bytes){"caf\xc3\xa9", 5};
	keys[12] = (drl_bytes){"a\r\nget x", 8};
	keys[13] = (drl_bytes){"ab", 2};

	for (int proto = 0; proto < 2; proto++) {
		drl_backend *b = open_srv(proto ? "binary=1&prefix=hk_"
						: "binary=0&prefix=hk_");
		for (int i = 0; i < N; i++)
			assert_int_equal(incr_ok(b, keys[i], i + 1),
					 (i + 1) * (proto + 1));
		memset(vals, 0, sizeof vals);
		assert_int_equal(b->get_many(b, N, keys, vals, &err), 0);
		for (int i = 0; i < N; i++)
			assert_int_equal(vals[i], (i + 1) * (proto + 1));
		/* blobs too */
		for (int i = 0; i < N; i++) {
			char buf[8], name[16];
			size_t len;
			uint64_t ver;
			int n = snprintf(name, sizeof name, "%d", i);
			/* a different key space: "S" + key */
			char *tmp = malloc(keys[i].len + 1);
			assert_non_null(tmp);
			tmp[0] = 'S';
			memcpy(tmp + 1, keys[i].data, keys[i].len);
			drl_bytes sk = {tmp, keys[i].len + 1};
			assert_int_equal(b->load(b, sk, buf, sizeof buf, &len,
						 &ver, &err),
					 0);
			assert_int_equal(b->cas(b, sk, name, (size_t)n, ver,
						LONG_TTL, &err),
					 0);
			assert_int_equal(b->load(b, sk, buf, sizeof buf, &len,
						 &ver, &err),
					 0);
			assert_int_equal(len, (size_t)n);
			assert_memory_equal(buf, name, len);
			free(tmp);
		}
		b->destroy(b);
	}

	/* What lands on the server: plain keys as is, others hashed. With
	 * prefix "hk_" (3 bytes) 247 bytes stay plain and 248 are hashed. */
	drl_backend *b = open_srv("prefix=hk_");
	incr_ok(b, (drl_bytes){k248, 247}, 1);
	incr_ok(b, (drl_bytes){k248, 248}, 1);
	b->destroy(b);
	char store_key[260], hk[66];
	memcpy(store_key, "hk_", 3);
	memcpy(store_key + 3, k248, 247);
	assert_true(raw_exists(srv.port, store_key, 250));
	memcpy(store_key + 3, "ab", 2);
	assert_true(raw_exists(srv.port, store_key, 5));
	hashed_form(k248, 248, hk);
	memcpy(store_key + 3, hk, 65);
	assert_true(raw_exists(srv.port, store_key, 68));
	hashed_form("a b", 3, hk);
	memcpy(store_key + 3, hk, 65);
	assert_true(raw_exists(srv.port, store_key, 68));
	/* no prefix: a 250-byte key is stored as is, 251 hashed */
	b = open_srv("");
	incr_ok(b, (drl_bytes){k250, 250}, 1);
	incr_ok(b, (drl_bytes){k251, 251}, 1);
	b->destroy(b);
	assert_true(raw_exists(srv.port, k250, 250));
	hashed_form(k251, 251, hk);
	assert_true(raw_exists(srv.port, hk, 65));
	free(mb);
	free(mb2);
}

/* ---- TTLs ---------------------------------------------------------------- */

/* A short TTL as memcached holds it: sent as ceil(s) + 1 s, a counter's
 * expiry kept from its creation, never gone before the TTL. That it
 * expires (and starts over): contract_memcached (check_ttl). */
static void test_ttl_short(void **state)
{
	drl_error err = {0};
	int64_t v;
	(void)state;
	drl_backend *b = open_srv("prefix=ttls_");
	int64_t written = tu_mono_ms();
	assert_int_equal(b->incr(b, K("c"), 1, 300 * 1000, &v, &err), 0);
	assert_int_equal(b->cas(b, K("s"), "x", 1, 0, 300 * 1000, &err), 0);
	/* sent as ceil(0.3 s) + 1 s for memcached's 1 s clock */
	long left = raw_exp_left(srv.port, "ttls_c");
	assert_true(left >= 1 && left <= 2);
	/* memcached keeps a counter's expiry from its creation on */
	assert_int_equal(b->incr(b, K("c"), 0, LONG_TTL, &v, &err), 0);
	left = raw_exp_left(srv.port, "ttls_c");
	assert_true(left >= 0 && left <= 2);
	assert_int_equal(get_ok(b, K("c")), 1);
	/* never gone before 300 ms: memcached, whose clock ticks whole
	 * seconds, keeps it at least a second (checked only while less
	 * than a second has passed since the write) */
	tu_sleep_ms(300);
	if (tu_mono_ms() - written < 1000)
		assert_true(raw_exists(srv.port, "ttls_c", 6));
	b->destroy(b);
}

static void test_ttl_long(void **state)
{
	drl_error err = {0};
	int64_t v;
	(void)state;
	drl_backend *b = open_srv("prefix=ttll_");
	/* 40 days: sent as an absolute time, so still there */
	assert_int_equal(b->incr(b, K("c40"), 1, 40 * DAY * SEC, &v, &err), 0);
	assert_int_equal(b->cas(b, K("s40"), "x", 1, 0, 40 * DAY * SEC, &err),
			 0);
	/* exactly 30 days (+1 s: absolute), 29 days (relative) */
	assert_int_equal(b->incr(b, K("c30"), 1, 30 * DAY * SEC, &v, &err), 0);
	assert_int_equal(b->incr(b, K("c29"), 1, 29 * DAY * SEC, &v, &err), 0);
	/* 400 days (beyond the longest period) */
	assert_int_equal(b->incr(b, K("c400"), 1, 400 * DAY * SEC, &v, &err),
			 0);
	tu_sleep_ms(1100);
	assert_int_equal(get_ok(b, K("c40")), 1);
	assert_int_equal(get_ok(b, K("c30")), 1);
	assert_int_equal(get_ok(b, K("c29")), 1);
	assert_int_equal(get_ok(b, K("c400")), 1);
	char buf[4];
	size_t len;
	uint64_t ver;
	assert_int_equal(
		b->load(b, K("s40"), buf, sizeof buf, &len, &ver, &err), 0);
	assert_true(ver != 0);
	/* and the server holds the intended expiries (seconds left) */
	long l40 = raw_exp_left(srv.port, "ttll_c40");
	long l30 = raw_exp_left(srv.port, "ttll_c30");
	long l29 = raw_exp_left(srv.port, "ttll_c29");
	long l400 = raw_exp_left(srv.port, "ttll_c400");
	assert_true(l40 > 40 * DAY - 10 && l40 <= 40 * DAY + 2);
	assert_true(l30 > 30 * DAY - 10 && l30 <= 30 * DAY + 2);
	assert_true(l29 > 29 * DAY - 10 && l29 <= 29 * DAY + 2);
	assert_true(l400 > 400 * DAY - 10 && l400 <= 400 * DAY + 2);
	b->destroy(b);
}

/* ---- pools and failures -------------------------------------------------- */

#define POOL_KEYS 300

/* Which of the three servers (raw clients) holds store key "pl_k<i>": its
 * index. */
static int owner_of(memcached_st *const *raw, int i)
{
	char key[32];
	int n = snprintf(key, sizeof key, "pl_k%d", i), owner = -1;
	for (int j = 0; j < 3; j++) {
		if (raw_has(raw[j], key, (size_t)n)) {
			if (owner >= 0)
				fail_msg("key %s on two servers", key);
			owner = j;
		}
	}
	if (owner < 0)
		fail_msg("key %s on no server", key);
	return owner;
}

/* Expect an incr of k to fail within the timeout bound; print the first
 * message. Returns 1 (instead of failing) when the incr worked because some
 * other process has started a server on the dead server's port. */
static int expect_fast_failure(drl_backend *b, const char *k,
			       int64_t timeout_ms, int first, int dead_port)
{
	drl_error err = {0};
	int64_t v;
	int64_t t0 = tu_mono_ms();
	int rc = b->incr(b, K(k), 1, LONG_TTL, &v, &err);
	int64_t took = tu_mono_ms() - t0;
	if (rc == 0 && drl_fixture_port_listening(dead_port))
		return 1;
	if (rc != DRL_EUNAVAILABLE && rc != DRL_ETIMEDOUT)
		fail_msg("incr %s on a dead server: %s (%s)", k,
			 drl_err_name(rc), err.message);
	if (took >= 2 * timeout_ms + tu_bound_ms(250))
		fail_msg("incr %s took %" PRId64 " ms", k, took);
	assert_non_null(strstr(err.message, "memcached"));
	if (first)
		print_message("%s: %s\n", drl_err_name(rc), err.message);
	return 0;
}

/* mode: "kill" stops a server, "pause" hangs it (SIGSTOP). */
static void pool_with_failure(const char *mode)
{
	drl_server s[3];
	char keys[POOL_KEYS][16];
	int owner[POOL_KEYS], count[3] = {0, 0, 0};
	const int64_t timeout_ms = 1000;
	drl_error err = {0};
	drl_backend *b;

	for (int j = 0; j < 3; j++)
		start_or_skip(&s[j], NULL);
	assert_int_equal(try_open(&b, &err,
				  "memcached://127.0.0.1:%d,127.0.0.1:%d,"
				  "127.0.0.1:%d?timeout_ms=%" PRId64
				  "&prefix=pl_",
				  s[0].port, s[1].port, s[2].port, timeout_ms),
			 0);
	for (int i = 0; i < POOL_KEYS; i++) {
		snprintf(keys[i], sizeof keys[i], "k%d", i);
		assert_int_equal(incr_ok(b, K(keys[i]), 1), 1);
	}
	/* every key on exactly one server, every server has a fair share */
	memcached_st *raw[3];
	for (int j = 0; j < 3; j++)
		raw[j] = raw_client(s[j].port);
	for (int i = 0; i < POOL_KEYS; i++) {
		owner[i] = owner_of(raw, i);
		count[owner[i]]++;
	}
	for (int j = 0; j < 3; j++)
		memcached_free(raw[j]);
	print_message("keys per server: %d %d %d\n", count[0], count[1],
		      count[2]);
	for (int j = 0; j < 3; j++)
		assert_true(count[j] >= POOL_KEYS / 10);

	/* take server 1 down */
	int dead_port_no = s[1].port;
	if (strcmp(mode, "kill") == 0)
		drl_fixture_stop(&s[1]);
	else
		assert_int_equal(drl_fixture_pause(&s[1]), 0);

	int64_t worst = 0;
	int failed = 0, fine = 0;
	for (int i = 0; i < POOL_KEYS; i++) {
		if (owner[i] == 1) {
			if (failed < 12) { /* bounded: each may wait */
				int64_t t0 = tu_mono_ms();
				if (expect_fast_failure(b, keys[i], timeout_ms,
							failed == 0,
							dead_port_no)) {
					b->destroy(b);
					for (int j = 0; j < 3; j++)
						drl_fixture_stop(&s[j]);
					print_message("the dead server's port "
						      "was taken by another "
						      "process: skipping\n");
					skip();
				}
				worst = drl__max64(worst, tu_mono_ms() - t0);
				failed++;
			}
			continue;
		}
		/* the others carry on, no key moved */
		assert_int_equal(incr_ok(b, K(keys[i]), 1), 2);
		fine++;
	}
	print_message("%s: %d failures (worst %" PRId64 " ms), %d fine\n", mode,
		      failed, worst, fine);
	assert_true(failed > 0);
	/* get_many: fine over live servers, an error when one key is dead */
	drl_bytes live[2], mixed[2];
	int64_t vals[2];
	int nl = 0, dead = -1;
	for (int i = 0; i < POOL_KEYS && nl < 2; i++)
		if (owner[i] != 1)
			live[nl++] = K(keys[i]);
	for (int i = 0; i < POOL_KEYS && dead < 0; i++)
		if (owner[i] == 1)
			dead = i;
	assert_int_equal(b->get_many(b, 2, live, vals, &err), 0);
	assert_int_equal(vals[0], 2);
	assert_int_equal(vals[1], 2);
	mixed[0] = live[0];
	mixed[1] = K(keys[dead]);
	int64_t t0 = tu_mono_ms();
	int rc = b->get_many(b, 2, mixed, vals, &err);
	assert_true(rc == DRL_EUNAVAILABLE || rc == DRL_ETIMEDOUT);
	assert_true(tu_mono_ms() - t0 < 2 * timeout_ms + tu_bound_ms(250));
	/* load/cas for a dead key fail too; for a live key they work */
	char buf[32];
	size_t len;
	uint64_t ver;
	rc = b->load(b, K(keys[dead]), buf, sizeof buf, &len, &ver, &err);
	assert_true(rc == DRL_EUNAVAILABLE || rc == DRL_ETIMEDOUT);
	rc = b->cas(b, K(keys[dead]), "x", 1, 0, LONG_TTL, &err);
	assert_true(rc == DRL_EUNAVAILABLE || rc == DRL_ETIMEDOUT);
	assert_int_equal(b->load(b, live[0], buf, sizeof buf, &len, &ver, &err),
			 0);
	assert_true(ver != 0);

	if (strcmp(mode, "pause") == 0) {
		/* it comes back: its keys work again, with their state */
		assert_int_equal(drl_fixture_resume(&s[1]), 0);
		int64_t v = 0;
		int ok = 0;
		for (int i = 0; i < 100 && !ok; i++) {
			ok = b->incr(b, K(keys[dead]), 0, LONG_TTL, &v, &err) ==
			     0;
			if (!ok)
				tu_sleep_ms(100);
		}
		assert_true(ok);
		assert_true(v >= 1 && v <= 2);
	}
	b->destroy(b);
	for (int j = 0; j < 3; j++)
		drl_fixture_stop(&s[j]);
}

/* A pool of the servers s[order[0]], ..., s[order[n - 1]], listed in that
 * order (prefix ch_). */
static drl_backend *open_pool(const drl_server *s, const int *order, int n)
{
	char uri[256];
	size_t o = 0;
	o += (size_t)snprintf(uri, sizeof uri, "memcached://");
	for (int i = 0; i < n; i++)
		o += (size_t)snprintf(uri + o, sizeof uri - o, "%s127.0.0.1:%d",
				      i ? "," : "", s[order[i]].port);
	snprintf(uri + o, sizeof uri - o, "?timeout_ms=5000&prefix=ch_");
	drl_backend *b;
	drl_error err = {0};
	if (try_open(&b, &err, "%s", uri))
		fail_msg("%s: %s", uri, err.message);
	return b;
}

/* Adding a fourth server moves about a quarter of the keys, not all; the
 * order servers are listed in does not matter. */
static void test_pool_consistent_hashing(void **state)
{
	enum { NKEYS = 400 };
	drl_server s[4];
	char key[16];
	int kept = 0;
	(void)state;

	for (int j = 0; j < 4; j++)
		start_or_skip(&s[j], NULL);
	drl_backend *b3 = open_pool(s, (const int[]){0, 1, 2}, 3);
	drl_backend *b3r = open_pool(s, (const int[]){2, 0, 1}, 3);
	drl_backend *b4 = open_pool(s, (const int[]){0, 1, 2, 3}, 4);
	for (int i = 0; i < NKEYS; i++) {
		snprintf(key, sizeof key, "k%d", i);
		assert_int_equal(incr_ok(b3, K(key), 1), 1);
	}
	for (int i = 0; i < NKEYS; i++) {
		snprintf(key, sizeof key, "k%d", i);
		assert_int_equal(get_ok(b3r, K(key)), 1);
		kept += get_ok(b4, K(key)) == 1;
	}
	print_message("4th server: %d of %d keys stayed\n", kept, NKEYS);
	assert_true(kept >= NKEYS / 2);
	assert_true(kept < NKEYS);
	b3->destroy(b3);
	b3r->destroy(b3r);
	b4->destroy(b4);
	for (int j = 0; j < 4; j++)
		drl_fixture_stop(&s[j]);
}

static void test_pool_server_killed(void **state)
{
	(void)state;
	pool_with_failure("kill");
}

static void test_pool_server_hung(void **state)
{
	(void)state;
	pool_with_failure("pause");
}

/* memcached+unix, and a restart: the state is gone, limits start over,
 * errors stop once the server is back. */
static void test_unix_socket_and_restart(void **state)
{
	char dir[] = "/tmp/drl-mcsock-XXXXXX", sock[128];
	drl_server s;
	drl_error err = {0};
	drl_backend *b;
	int64_t v;
	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(sock, sizeof sock, "%s/mc.sock", dir);
	const char *extra[] = {"-s", sock, NULL};
	start_or_skip(&s, extra);

	assert_int_equal(
		try_open(&b, &err, "memcached+unix://%s?timeout_ms=300", sock),
		0);
	assert_int_equal(incr_ok(b, K("u"), 5), 5);
	char buf[8];
	size_t len;
	uint64_t ver;
	assert_int_equal(b->cas(b, K("st"), "abc", 3, 0, LONG_TTL, &err), 0);

	drl_fixture_stop(&s);
	/* down: errors, quickly */
	int64_t t0 = tu_mono_ms();
	int rc = b->incr(b, K("u"), 1, LONG_TTL, &v, &err);
	assert_true(rc == DRL_EUNAVAILABLE || rc == DRL_ETIMEDOUT);
	assert_true(tu_mono_ms() - t0 < 300 + tu_bound_ms(400));

	/* restarted on the same socket: state lost, counting starts over */
	start_or_skip(&s, extra);
	int errors = 0, ok = 0;
	for (int i = 0; i < 100 && !ok; i++) {
		rc = b->incr(b, K("u"), 1, LONG_TTL, &v, &err);
		if (rc == 0)
			ok = 1;
		else {
			errors++;
			tu_sleep_ms(50);
		}
	}
	print_message("restart: %d errors before the first success\n", errors);
	assert_true(ok);
	assert_int_equal(v, 1);
	assert_int_equal(b->load(b, K("st"), buf, sizeof buf, &len, &ver, &err),
			 0);
	assert_int_equal(ver, 0);
	/* no error storm afterwards */
	for (int i = 0; i < 200; i++)
		incr_ok(b, K("u"), 1);
	assert_int_equal(get_ok(b, K("u")), 201);
	b->destroy(b);
	drl_fixture_stop(&s);
	unlink(sock); /* memcached leaves its socket file behind */
	rmdir(dir);
}

/* An eviction (here: flush_all) loses the state; nothing else happens. */
static void test_eviction_starts_over(void **state)
{
	drl_error err = {0};
	char buf[8];
	size_t len;
	uint64_t ver;
	(void)state;
	drl_backend *b = open_srv("prefix=ev_");
	assert_int_equal(incr_ok(b, K("c"), 9), 9);
	assert_int_equal(b->cas(b, K("s"), "x", 1, 0, LONG_TTL, &err), 0);
	memcached_st *raw = raw_client(srv.port);
	assert_int_equal(memcached_flush(raw, 0), MEMCACHED_SUCCESS);
	memcached_free(raw);
	assert_int_equal(get_ok(b, K("c")), 0);
	assert_int_equal(incr_ok(b, K("c"), 1), 1);
	assert_int_equal(b->load(b, K("s"), buf, sizeof buf, &len, &ver, &err),
			 0);
	assert_int_equal(ver, 0);
	assert_int_equal(b->cas(b, K("s"), "y", 1, 0, LONG_TTL, &err), 0);
	b->destroy(b);
}

/* ---- end to end, through the public API ---------------------------------- */

static const char *const specs[] = {
	"fixed_window:5/1s",
	"sliding_window:5/1s",
	"subwindow:10/1s,subwindows=5",
	"token_bucket:5/1s,burst=3",
	"gcra:5/1s,burst=3",
	"sliding_log:5/1s",
};

/* Open a store and a limiter through the public API. */
static void open_pub(const char *uri, const char *spec, const char *prefix,
		     drl_store **st, drl_limiter **lim)
{
	drl_error err = {0};
	if (drl_store_open(st, uri, &err))
		fail_msg("store %s: %s", uri, err.message);
	if (drl_limiter_new(lim, *st, spec, prefix, &err))
		fail_msg("limiter %s: %s", spec, err.message);
}

/* Same decisions as memory:// for every algorithm, over a pseudo-random
 * workload at explicit times (the differential test). */
static void test_e2e_same_decisions_as_memory(void **state)
{
	const char *proto = *state;
	char uri[256];
	snprintf(uri, sizeof uri,
		 "memcached://127.0.0.1:%d"
		 "?timeout_ms=5000&%s&prefix=e2e%s_",
		 srv.port, proto, strchr(proto, '0') ? "a" : "b");
	for (size_t si = 0; si < sizeof specs / sizeof specs[0]; si++) {
		drl_store *ms, *cs;
		drl_limiter *ml, *cl;
		char prefix[32];
		snprintf(prefix, sizeof prefix, "d%zu", si);
		open_pub("memory://", specs[si], prefix, &ms, &ml);
		open_pub(uri, specs[si], prefix, &cs, &cl);
		uint64_t seed = 12345 + si;
		int64_t now = INT64_C(1700000000) * SEC;
		int allowed = 0;
		for (int step = 0; step < 400; step++) {
			seed = seed * 6364136223846793005u +
			       1442695040888963407u;
			now += (int64_t)((seed >> 33) % 120) * 1000;
			char key[8];
			snprintf(key, sizeof key, "u%d",
				 (int)((seed >> 20) % 3));
			int64_t cost = (int64_t)((seed >> 40) % 4);
			drl_result a, c;
			drl_error err = {0};
			if (drl_allow_at(ml, key, strlen(key), cost, now, &a,
					 &err))
				fail_msg("memory %s: %s", specs[si],
					 err.message);
			if (drl_allow_at(cl, key, strlen(key), cost, now, &c,
					 &err))
				fail_msg("memcached %s: %s", specs[si],
					 err.message);
			if (a.allowed != c.allowed ||
			    a.remaining != c.remaining ||
			    a.reset_after_us != c.reset_after_us ||
			    a.retry_after_us != c.retry_after_us ||
			    a.limit != c.limit)
				fail_msg("%s step %d key %s cost %" PRId64
					 ": memory (%d, rem %" PRId64
					 ", reset %" PRId64 ", retry %" PRId64
					 ") vs memcached (%d, rem %" PRId64
					 ", reset %" PRId64 ", retry %" PRId64
					 ")",
					 specs[si], step, key, cost, a.allowed,
					 a.remaining, a.reset_after_us,
					 a.retry_after_us, c.allowed,
					 c.remaining, c.reset_after_us,
					 c.retry_after_us);
			allowed += a.allowed && cost > 0;
		}
		assert_true(allowed > 10); /* the workload did something */
		drl_limiter_free(ml);
		drl_limiter_free(cl);
		drl_store_free(ms);
		drl_store_free(cs);
	}
}

/* ---- main ---------------------------------------------------------------- */

/* Group teardown: stop the shared server. */
static int teardown_server(void **state)
{
	(void)state;
	drl_fixture_stop(&srv);
	return 0;
}

#define BOTH(fn)                                                               \
	cmocka_unit_test_prestate(fn, (void *)"binary=1"),                     \
		cmocka_unit_test_prestate(fn, (void *)"binary=0")

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_rejects_bad_uris),
		cmocka_unit_test(test_open_fails_fast_without_server),
		BOTH(test_counter_conformance),
		BOTH(test_get_many_one_request),
		BOTH(test_large_blobs),
		cmocka_unit_test(test_hostile_keys),
		cmocka_unit_test(test_ttl_short),
		cmocka_unit_test(test_ttl_long),
		cmocka_unit_test(test_eviction_starts_over),
		cmocka_unit_test(test_pool_consistent_hashing),
		cmocka_unit_test(test_pool_server_killed),
		cmocka_unit_test(test_pool_server_hung),
		cmocka_unit_test(test_unix_socket_and_restart),
		BOTH(test_e2e_same_decisions_as_memory),
	};
	int rc = drl_fixture_memcached_start(&srv, NULL);
	if (rc == 1) {
		printf("memcached not installed: skipping\n");
		return 77; /* meson: skipped */
	}
	if (rc != 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, teardown_server);
}
