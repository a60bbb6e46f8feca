/*
 * The claims of docs/security.md that need no server:
 * - a password in a store URI never appears in a message, whatever is
 *   wrong with the URI and however it fails (parse, option, connect);
 * - key isolation: user key bytes stay inside their braces. Every store
 *   key a limiter writes is exactly prefix + limit tag + ":{" + encoded
 *   key + "}" [+ ":" + index], so (prefix, limit, key) triples whose naive
 *   concatenations are equal get disjoint store keys and separate quotas;
 *   all keys of one (limit, key) share one Redis Cluster hash tag;
 * - store keys are bounded in length whatever the user key's length.
 * The memory store is wrapped in the spy (spy_backend.h), which records
 * every key written. The CLI's half (drl check / bench output) is in
 * test_cli.sh, Redis AUTH failures in test_redis_store.c.
 */
#include "drl_config.h"
#include "internal.h"
#include "server_fixture.h"
#include "spy_backend.h"

#include <netinet/in.h>
#include <openssl/sha.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#define NOW (INT64_C(1700000000) * 1000000)

/* ---- passwords ----------------------------------------------------------- */

/* A loopback port nothing listens on (bound, then closed). */
static int closed_port(void)
{
	int port = drl_fixture_free_port();
	assert_true(port > 0);
	return port;
}

/* URIs holding the password "S3cret-Pw" (raw, or %-encoded as S3cret%2DPw,
 * or with a '@' encoded in it); "{addr}" is 127.0.0.1:<closed port>. Every
 * one fails to open, at parse, option, connect or AUTH time. */
static const char *const secret_uris[] = {
	"memory://u:S3cret-Pw@",
	"memory://:S3cret-Pw@?shards=3",
	"bogus://:S3cret-Pw@{addr}",
	"redis://:S3cret-Pw@{addr}",
	"redis://u:S3cret-Pw@{addr}",
	"redis://u:S3cret%2DPw@{addr}",
	"redis://u:S3cret%40Pw@{addr}",
	"redis://:S3cret-Pw@{addr}?tx=bogus",
	"redis://:S3cret-Pw@{addr}?bogus=1",
	"redis://:S3cret-Pw@{addr}?tx=lua&tx=lua",
	"redis://:S3cret-Pw@{addr}/x",
	"redis://:S3cret-Pw@{addr},{addr}",
	"redis://:S3cret-Pw@127.0.0.1:99999",
	"redis://:S3cret-Pw%zz@{addr}",
	"redis://:S3cret-Pw%00@{addr}",
	"redis://:S3cret-Pw@{addr}/x@y",
	"redis://:S3cret-Pw@@{addr}",
	"redis://:S3cret-Pw@{addr}?x=%zz",
	"redis://:S3cret-Pw@{addr}?a b=1",
	"redis://:S3cret-Pw@{addr}?\x01",
	"redis:/:S3cret-Pw@{addr}",
	"redis+unix://:S3cret-Pw@/nonexistent/drl.sock",
	"memcached://:S3cret-Pw@{addr}",
	"memcached://u:S3cret-Pw@{addr}?bogus=1",
};

/* Each form the password may take in a message. */
static const char *const secret_forms[] = {"S3cret", "%2DPw", "%40Pw"};

static void test_password_never_in_messages(void **state)
{
	(void)state;
	char addr[32];
	snprintf(addr, sizeof addr, "127.0.0.1:%d", closed_port());
	for (size_t i = 0; i < sizeof secret_uris / sizeof *secret_uris; i++) {
		char uri[256];
		const char *u = secret_uris[i];
		const char *a = strstr(u, "{addr}");
		size_t o = 0;
		while (a != NULL) { /* replace every {addr} */
			o += (size_t)snprintf(uri + o, sizeof uri - o, "%.*s%s",
					      (int)(a - u), u, addr);
			u = a + 6;
			a = strstr(u, "{addr}");
		}
		snprintf(uri + o, sizeof uri - o, "%s", u);
		if (!DRL_HAVE_REDIS && strncmp(uri, "redis", 5) == 0)
			continue;
		if (!DRL_HAVE_MEMCACHED && strncmp(uri, "memcached", 9) == 0)
			continue;
		drl_store *s = NULL;
		drl_error err = {0};
		int rc = drl_store_open(&s, uri, &err);
		if (rc == 0)
			fail_msg("%s opened", uri);
		for (size_t f = 0;
		     f < sizeof secret_forms / sizeof *secret_forms; f++)
			if (strstr(err.message, secret_forms[f]))
				fail_msg("%s: the message shows the password: "
					 "%s",
					 uri, err.message);
		if (err.message[0] == '\0')
			fail_msg("%s: no message", uri);
	}
}

/* ---- key isolation ---------------------------------------------------- */

typedef struct triple {
	const char *prefix;
	const char *spec;
	const char *key;
	size_t keylen; /* 0: strlen(key) */
} triple;

static char long_k200[200], long_j200[200], long_k129[129], long_k128[128];
static char hashed_k200[66]; /* "#" + the hex SHA-256 of long_k200 */

/* Triples whose naive concatenations (prefix + key, prefix + spec + key)
 * coincide, keys holding the bytes of the encoding ('{', '}', ':', NUL,
 * '#'), every algorithm and parameter change, and keys around the 128
 * bytes above which keys are stored hashed. */
static const triple triples[] = {
	{"a:", "fixed_window:10/1s", "x", 0},
	{"a", "fixed_window:10/1s", ":x", 0},
	{"", "fixed_window:10/1s", "a:x", 0},
	{"", "fixed_window:10/1s", "a:fixed_window:10/1sx", 0},
	{"a:", "fixed_window:10/1s", "{x}", 0},
	{"a:", "fixed_window:10/1s", "x}", 0},
	{"a:", "fixed_window:10/1s", "}", 0},
	{"a:", "fixed_window:10/1s", "{", 0},
	{"a:", "fixed_window:10/1s", ":", 0},
	{"a:", "fixed_window:10/1s", "x}:1", 0},
	{"a:", "fixed_window:10/1s", "1:x", 0},
	{"a:", "fixed_window:10/1s", "x\0", 2},
	{"a:", "fixed_window:10/1s", "x\0y", 3},
	{"a:", "fixed_window:10/1s", "\0", 1},
	{"a:", "fixed_window:10/1s", "#x", 0},
	{"a:", "fixed_window:10/2s", "x", 0},
	/* a log's LIMIT is in its state, its PERIOD in the key */
	{"a:", "sliding_log:11/2s", "x", 0},
	{"a:", "sliding_window:10/1s", "x", 0},
	{"a:", "subwindow:10/1s,subwindows=2", "x", 0},
	{"a:", "subwindow:10/1s,subwindows=2,trailing=1", "x", 0},
	{"a:", "token_bucket:10/1s", "x", 0},
	/* a bucket's LIMIT and burst are in its state, its PERIOD in the
	 * key */
	{"a:", "token_bucket:10/2s,burst=11", "x", 0},
	{"a:", "gcra:10/1s", "x", 0},
	{"a:", "sliding_log:10/1s", "x", 0},
	{"a:", "fixed_window:10/1s", long_k200, sizeof long_k200},
	{"a:", "fixed_window:10/1s", long_j200, sizeof long_j200},
	{"a:", "fixed_window:10/1s", long_k129, sizeof long_k129},
	{"a:", "fixed_window:10/1s", long_k128, sizeof long_k128},
	{"a:", "fixed_window:10/1s", hashed_k200, 65},
};
#define NTRIPLES (sizeof triples / sizeof triples[0])

static void hex_sha256(char *out, const void *p, size_t n)
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256(p, n, md);
	for (size_t i = 0; i < sizeof md; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static void fill_keys(void)
{
	memset(long_k200, 'k', sizeof long_k200);
	memset(long_j200, 'k', sizeof long_j200);
	long_j200[sizeof long_j200 - 1] = 'j';
	memset(long_k129, 'k', sizeof long_k129);
	memset(long_k128, 'k', sizeof long_k128);
	hashed_k200[0] = '#';
	hex_sha256(hashed_k200 + 1, long_k200, sizeof long_k200);
}

/* The store key base of (prefix, the limiter's only limit, key): what
 * core/key.c promises, built independently here. */
static size_t expected_base(char *out, const drl_limiter *l, const void *key,
			    size_t keylen)
{
	size_t n = (size_t)sprintf(out, "%s%.*s:{", l->prefix,
				   (int)l->limits[0].taglen, l->limits[0].tag);
	if (keylen <= 128) {
		n += (size_t)sprintf(out + n, "%zu:", keylen);
		memcpy(out + n, key, keylen);
		n += keylen;
	} else {
		out[n++] = '#';
		hex_sha256(out + n, key, keylen);
		n += 64;
	}
	out[n++] = '}';
	return n;
}

/* k is base, or base + ":" + an optional '-' and digits. */
static bool is_base_or_indexed(const drl_bytes *k, const char *base,
			       size_t blen)
{
	const char *p = k->data;
	if (k->len < blen || memcmp(p, base, blen) != 0)
		return false;
	if (k->len == blen)
		return true;
	size_t i = blen;
	if (p[i++] != ':')
		return false;
	if (i < k->len && p[i] == '-')
		i++;
	if (i == k->len)
		return false;
	for (; i < k->len; i++)
		if (p[i] < '0' || p[i] > '9')
			return false;
	return true;
}

/* Redis Cluster's hash tag of k: what lies between the first '{' and the
 * first '}' after it, when that is not empty; else the whole key. */
static drl_bytes hash_tag(const drl_bytes *k)
{
	const char *p = k->data;
	const char *open = memchr(p, '{', k->len);
	if (open != NULL) {
		size_t rest = k->len - (size_t)(open + 1 - p);
		const char *close = memchr(open + 1, '}', rest);
		if (close != NULL && close > open + 1)
			return (drl_bytes){open + 1,
					   (size_t)(close - open - 1)};
	}
	return *k;
}

static void test_key_isolation(void **state)
{
	(void)state;
	fill_keys();
	spy *sp;
	drl_store *s = spy_open("memory://", &sp);
	/* keys[i]: the store keys triple i wrote (copies). */
	drl_bytes *keys[NTRIPLES];
	size_t nkeys[NTRIPLES];
	for (size_t i = 0; i < NTRIPLES; i++) {
		const triple *t = &triples[i];
		size_t klen = t->keylen ? t->keylen : strlen(t->key);
		drl_limiter *l = NULL;
		drl_error err = {0};
		drl_result r;
		if (drl_limiter_new(&l, s, t->spec, t->prefix, &err))
			fail_msg("%s: %s", t->spec, err.message);
		/* No triple before this one touched its quota ... */
		assert_int_equal(
			drl_allow_at(l, t->key, klen, 0, NOW, &r, &err), 0);
		if (r.remaining != r.limit)
			fail_msg("triple %zu (%s %s) starts with %lld of %lld",
				 i, t->prefix, t->spec, (long long)r.remaining,
				 (long long)r.limit);
		/* ... and it takes all of it, recording its keys. */
		spy_forget_keys(sp);
		spy_record(sp, 1);
		assert_int_equal(
			drl_allow_at(l, t->key, klen, r.limit, NOW, &r, &err),
			0);
		assert_true(r.allowed);
		spy_record(sp, 0);

		char base[1024];
		size_t blen = expected_base(base, l, t->key, klen);
		nkeys[i] = spy_nkeys(sp);
		assert_true(nkeys[i] > 0);
		keys[i] = calloc(nkeys[i], sizeof *keys[i]);
		assert_non_null(keys[i]);
		drl_bytes tag0 = {0};
		for (size_t j = 0; j < nkeys[i]; j++) {
			const drl_bytes *k = spy_key(sp, j);
			if (!is_base_or_indexed(k, base, blen))
				fail_msg(
					"triple %zu: store key \"%.*s\" is not "
					"\"%.*s\"[:N]",
					i, (int)k->len, (const char *)k->data,
					(int)blen, base);
			drl_bytes tag = hash_tag(k);
			if (j == 0)
				tag0 = tag;
			else if (tag.len != tag0.len ||
				 memcmp(tag.data, tag0.data, tag.len) != 0)
				fail_msg("triple %zu: keys in two hash slots",
					 i);
			void *copy = malloc(k->len);
			assert_non_null(copy);
			memcpy(copy, k->data, k->len);
			keys[i][j] = (drl_bytes){copy, k->len};
		}
		drl_limiter_free(l);
	}
	/* No two triples share a store key. */
	for (size_t i = 0; i < NTRIPLES; i++)
		for (size_t j = i + 1; j < NTRIPLES; j++)
			for (size_t a = 0; a < nkeys[i]; a++)
				for (size_t b = 0; b < nkeys[j]; b++)
					if (keys[i][a].len == keys[j][b].len &&
					    memcmp(keys[i][a].data,
						   keys[j][b].data,
						   keys[i][a].len) == 0)
						fail_msg("triples %zu and %zu "
							 "share a store key",
							 i, j);
	for (size_t i = 0; i < NTRIPLES; i++) {
		for (size_t j = 0; j < nkeys[i]; j++)
			free((void *)keys[i][j].data);
		free(keys[i]);
	}
	drl_store_free(s);
}

/* ---- bounded store keys ------------------------------------------------ */

/* The longest store key: a 128-byte prefix, the longest tag (a
 * subwindow's with the longest PERIOD and sub-windows, trailing; gcra's
 * and sliding_log's name PERIOD alone, their LIMIT is in their state) or
 * the most digits of
 * a window index (1ms sub-windows late in time), and any user key, up to
 * DRL_KEY_MAX bytes: never above STORE_KEY_MAX, computed in
 * docs/security.md. */
#define STORE_KEY_MAX 340

/* What a store makes of a key with DRL_CAP_COUNTER_GROUPS: the core's
 * grouped keys split at their last '#', a user key's '#' inside the
 * group (the key is parsed from its end), anything else ordinary (an
 * empty group, which the core never makes, splits as one). */
static void test_group_split(void **state)
{
	(void)state;
	static const struct {
		const char *key;
		long glen; /* -1: ordinary */
	} cases[] = {
		{"g#0", 1},         {"g#12", 1},  {"g#-3", 1}, {"a#b#7", 3},
		{"user#1:x#42", 8}, {"#5", 0},    {"g#", -1},  {"g#-", -1},
		{"g5", -1},         {"g#1x", -1}, {"g-#1", 2}, {"", -1},
		{"g#--1", -1},      {"#-1", 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		size_t glen = 99;
		drl_bytes k = {cases[i].key, strlen(cases[i].key)};
		bool g = drl_key_group_split(k, &glen);
		if (g != (cases[i].glen >= 0) ||
		    (g && (long)glen != cases[i].glen))
			fail_msg("%s: %s %zu", cases[i].key,
				 g ? "grouped" : "ordinary", glen);
	}
	/* the core's own grouped keys split back to their group */
	drl__limit lim;
	drl_error err = {0};
	assert_int_equal(drl__limit_parse(&lim, "subwindow:10/1m,subwindows=4",
					  28, &err),
			 0);
	drl__keybase kb;
	drl__key k;
	drl__keybase_make(&kb, "drl:", 4, &lim, "us#er#7", 7);
	for (int64_t idx = -2; idx <= 2; idx++) {
		drl_bytes b = drl__key_grouped(&k, &kb, idx);
		size_t glen = 0;
		assert_true(drl_key_group_split(b, &glen));
		assert_true(glen < b.len &&
			    ((const char *)b.data)[glen] == '#');
	}
}

/* drl_key_show: what a hostile key looks like in a message. Quotes,
 * backslashes and control bytes escaped (no way to close the message's
 * quotes or forge a line), a long key cut after DRL_KEY_SHOW_MAX bytes,
 * a short buffer cut early yet terminated, and never overrun. */
static void test_key_show(void **state)
{
	(void)state;
	char buf[DRL_KEY_SHOW_BUF + 8];
	drl_bytes k = {"a\"b\\c\n\x7f\xffz", 9};
	assert_string_equal(drl_key_show(buf, DRL_KEY_SHOW_BUF, k),
			    "a\\x22b\\x5cc\\x0a\\x7f\\xffz");
	assert_string_equal(
		drl_key_show(buf, DRL_KEY_SHOW_BUF, (drl_bytes){"", 0}), "");
	/* the longest key's form fits DRL_KEY_SHOW_BUF, cut with "..." */
	char big[DRL_KEY_SHOW_MAX + 10];
	memset(big, 0x01, sizeof big);
	memset(buf, 'Z', sizeof buf);
	drl_key_show(buf, DRL_KEY_SHOW_BUF, (drl_bytes){big, sizeof big});
	assert_int_equal(strlen(buf), DRL_KEY_SHOW_MAX * 4 + 3);
	assert_memory_equal(buf + DRL_KEY_SHOW_MAX * 4, "...", 4);
	assert_int_equal(buf[DRL_KEY_SHOW_BUF], 'Z'); /* not overrun */
	/* exactly DRL_KEY_SHOW_MAX bytes: whole, no "..." */
	drl_key_show(buf, DRL_KEY_SHOW_BUF, (drl_bytes){big, DRL_KEY_SHOW_MAX});
	assert_int_equal(strlen(buf), DRL_KEY_SHOW_MAX * 4);
	/* every short cap: terminated within cap, "..." when cut */
	for (size_t cap = 0; cap < 24; cap++) {
		memset(buf, 'Z', sizeof buf);
		drl_key_show(buf, cap, (drl_bytes){"q\x01q\x01q\x01q", 7});
		if (cap == 0) {
			assert_int_equal(buf[0], 'Z');
			continue;
		}
		size_t n = strnlen(buf, cap);
		assert_true(n < cap);
		assert_int_equal(buf[cap], 'Z');
		if (n != strlen("q\\x01q\\x01q\\x01q") && n > 0)
			assert_memory_equal(buf + n - 3, "...", 3);
	}
}

static void test_store_key_bound(void **state)
{
	(void)state;
	static const char *const specs[] = {
		"gcra:1000000000/366d,burst=1000000000",
		"sliding_log:10000/366d",
		"subwindow:1000000000/60ms,subwindows=60,trailing=1",
		"sliding_window:1000000000/1ms",
		"fixed_window:1000000000/1ms",
	};
	char prefix[129];
	memset(prefix, 'p', 128);
	prefix[128] = '\0';
	char *big = malloc(DRL_KEY_MAX);
	assert_non_null(big);
	memset(big, '}', DRL_KEY_MAX);
	static const size_t lens[] = {1, 127, 128, 129, 4096, DRL_KEY_MAX};
	spy *sp;
	drl_store *s = spy_open("memory://", &sp);
	spy_record(sp, 1);
	size_t longest = 0;
	for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
		drl_limiter *l = NULL;
		drl_error err = {0};
		drl_result r;
		if (drl_limiter_new(&l, s, specs[i], prefix, &err))
			fail_msg("%s: %s", specs[i], err.message);
		for (size_t k = 0; k < sizeof lens / sizeof *lens; k++)
			assert_int_equal(drl_allow_at(l, big, lens[k], 1,
						      DRL_TIME_MAX_US, &r,
						      &err),
					 0);
		drl_limiter_free(l);
	}
	for (size_t j = 0; j < spy_nkeys(sp); j++)
		if (spy_key(sp, j)->len > longest)
			longest = spy_key(sp, j)->len;
	print_message("longest store key: %zu bytes\n", longest);
	assert_true(longest <= STORE_KEY_MAX);
	assert_true(longest > 200); /* the worst case was reached */
	drl_store_free(s);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_password_never_in_messages),
		cmocka_unit_test(test_key_isolation),
		cmocka_unit_test(test_store_key_bound),
		cmocka_unit_test(test_group_split),
		cmocka_unit_test(test_key_show),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
