/* Store URIs (core/uri.c) and strict integers (core/parse.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Parse `text`, expecting success. */
static void parse_ok(drl__uri *u, const char *text)
{
	drl_error err = {0};
	int rc = drl__uri_parse(u, text, &err);
	if (rc)
		fail_msg("parse(\"%s\") = %d: %s", text, rc, err.message);
}

/* Parse `text`, expecting DRL_EINVAL with a message containing `want`
 * (when not NULL); the uri must come back cleared. Returns the message. */
static const char *parse_bad(const char *text, const char *want)
{
	static drl_error err;
	drl__uri u;
	memset(&err, 0, sizeof err);
	memset(&u, 0xab, sizeof u); /* garbage: parse must not read it */
	int rc = drl__uri_parse(&u, text, &err);
	if (rc != DRL_EINVAL)
		fail_msg("parse(\"%s\") = %d, want DRL_EINVAL", text, rc);
	assert_int_equal(err.code, DRL_EINVAL);
	if (want && !strstr(err.message, want))
		fail_msg("parse(\"%s\"): message \"%s\" lacks \"%s\"", text,
			 err.message, want);
	drl__uri zero;
	memset(&zero, 0, sizeof zero);
	assert_memory_equal(&u, &zero, sizeof u);
	drl__uri_clear(&u); /* idempotent on a cleared uri */
	return err.message;
}

static void test_memory(void **state)
{
	(void)state;
	drl__uri u;
	parse_ok(&u, "memory://");
	assert_string_equal(u.scheme, "memory");
	assert_null(u.user);
	assert_null(u.password);
	assert_null(u.hosts);
	assert_null(u.path);
	assert_int_equal(u.nopts, 0);
	assert_int_equal(drl_uri_check_all_used(&u, NULL), 0);
	drl__uri_clear(&u);

	parse_ok(&u, "memory://?shards=16");
	assert_null(u.hosts);
	assert_null(u.path);
	assert_int_equal(u.nopts, 1);
	int64_t v = 0;
	assert_int_equal(
		drl_uri_option_int(&u, "shards", 1, 1024, 64, &v, NULL), 0);
	assert_int_equal(v, 16);
	drl__uri_clear(&u);

	parse_ok(&u, "memory://?"); /* a lone '?': no options */
	assert_int_equal(u.nopts, 0);
	drl__uri_clear(&u);
}

static void test_redis(void **state)
{
	(void)state;
	drl__uri u;
	parse_ok(&u, "redis://user:pw@h:1/2?tx=lua&timeout_ms=5");
	assert_string_equal(u.scheme, "redis");
	assert_string_equal(u.user, "user");
	assert_string_equal(u.password, "pw");
	assert_string_equal(u.hosts, "h:1");
	assert_string_equal(u.path, "2");
	assert_int_equal(u.nopts, 2);
	assert_string_equal(drl_uri_option(&u, "tx"), "lua");
	int64_t t = 0;
	drl_error err = {0};
	assert_int_equal(
		drl_uri_option_int(&u, "timeout_ms", 1, 60000, 100, &t, &err),
		0);
	assert_int_equal(t, 5);
	assert_int_equal(drl_uri_check_all_used(&u, &err), 0);
	assert_null(drl_uri_option(&u, "absent"));
	drl__uri_clear(&u);
	drl__uri_clear(&u);

	parse_ok(&u, "redis://h:6379");
	assert_string_equal(u.hosts, "h:6379");
	assert_null(u.path);
	assert_null(u.user);
	drl__uri_clear(&u);

	parse_ok(&u, "redis://h/");
	assert_string_equal(u.path, "");
	drl__uri_clear(&u);

	/* A user without a password, a password without a user. */
	parse_ok(&u, "redis://alice@h");
	assert_string_equal(u.user, "alice");
	assert_null(u.password);
	drl__uri_clear(&u);
	parse_ok(&u, "redis://:pw@h");
	assert_null(u.user);
	assert_string_equal(u.password, "pw");
	drl__uri_clear(&u);

	/* The userinfo ends at the last '@': a raw '@' in a password. */
	parse_ok(&u, "redis://:p@ss@h");
	assert_string_equal(u.password, "p@ss");
	assert_string_equal(u.hosts, "h");
	drl__uri_clear(&u);
}

static void test_unix_and_memcached(void **state)
{
	(void)state;
	drl__uri u;
	parse_ok(&u, "redis+unix:///tmp/x.sock?tx=watch");
	assert_string_equal(u.scheme, "redis+unix");
	assert_null(u.hosts);
	assert_string_equal(u.path, "/tmp/x.sock");
	assert_string_equal(drl_uri_option(&u, "tx"), "watch");
	drl__uri_clear(&u);

	parse_ok(&u, "redis+unix://:pw@/run/r.sock");
	assert_string_equal(u.password, "pw");
	assert_null(u.hosts);
	assert_string_equal(u.path, "/run/r.sock");
	drl__uri_clear(&u);

	parse_ok(&u, "memcached://a:1,b:2?binary=1");
	assert_string_equal(u.scheme, "memcached");
	assert_string_equal(u.hosts, "a:1,b:2");
	assert_null(u.path);
	int64_t v = 0;
	assert_int_equal(drl_uri_option_int(&u, "binary", 0, 1, 0, &v, NULL),
			 0);
	assert_int_equal(v, 1);
	drl__uri_clear(&u);

	parse_ok(&u, "a1+b.c-d://x");
	assert_string_equal(u.scheme, "a1+b.c-d");
	drl__uri_clear(&u);
}

static void test_percent_decoding(void **state)
{
	(void)state;
	drl__uri u;
	parse_ok(&u, "redis://us%40er:p%3Aw%2f%3F%25@h:1/a%20b?k=v%26x%3D1&e=");
	assert_string_equal(u.user, "us@er");
	assert_string_equal(u.password, "p:w/?%");
	assert_string_equal(u.hosts, "h:1");
	assert_string_equal(u.path, "a b");
	assert_string_equal(drl_uri_option(&u, "k"), "v&x=1");
	assert_string_equal(drl_uri_option(&u, "e"), "");
	drl__uri_clear(&u);

	/* '=' after the first one belongs to the value; bytes >= 0x80 pass. */
	parse_ok(&u, "redis://h?k=a=b&u=%C3%A9\xc3\xa9");
	assert_string_equal(drl_uri_option(&u, "k"), "a=b");
	assert_string_equal(drl_uri_option(&u, "u"), "\xc3\xa9\xc3\xa9");
	drl__uri_clear(&u);

	/* Hosts are kept raw. */
	parse_ok(&u, "redis://[fe80::1%25eth0]:6379");
	assert_string_equal(u.hosts, "[fe80::1%25eth0]:6379");
	drl__uri_clear(&u);
}

static void test_rejections(void **state)
{
	(void)state;
	parse_bad("redis//h:6379", "missing \"://\"");
	parse_bad("h:6379", "missing \"://\"");
	parse_bad("", "missing \"://\"");
	parse_bad("://h", "empty scheme");
	parse_bad("Redis://h", "bad scheme \"Redis\"");
	parse_bad("1redis://h", "bad scheme \"1redis\"");
	parse_bad("re_dis://h", "bad scheme");
	parse_bad("redis://h/%zz", "bad %-escape \"%zz\" in the path");
	parse_bad("redis://h/a%4", "bad %-escape \"%4\" in the path");
	parse_bad("redis://h/a%", "bad %-escape \"%\" in the path");
	parse_bad("redis://us%g0@h", "bad %-escape \"%g0\" in the user");
	parse_bad("redis://h?k=%0", "in the value of option \"k\"");
	parse_bad("redis://h?k=a%00b", "\"%00\" is not allowed");
	const char *m = parse_bad("redis://h:6379?tx", NULL);
	assert_string_equal(m, "invalid URI \"redis://h:6379?tx\": option "
			       "\"tx\" has no value");
	parse_bad("redis://h?a=1&tx", "option \"tx\" has no value");
	parse_bad("redis://h?=v", "empty name");
	parse_bad("redis://h?a=1&=v", "empty name");
	parse_bad("redis://h?a=1&a=2", "option \"a\" given twice");
	parse_bad("redis://h?a=1&b=2&a=1", "option \"a\" given twice");
	parse_bad("redis://h?a=1&&b=2", "empty option");
	parse_bad("redis://h?a=1&", "empty option");
	parse_bad("redis://h?&", "empty option");
	parse_bad("redis://h?k:x=1", "bad option name \"k:x\"");
	parse_bad("redis://h ost", "space at byte 9");
	parse_bad(" redis://h", "space at byte 0");
	parse_bad("redis://h\tx", "control byte 0x09");
	parse_bad("redis://h\x7f", "control byte 0x7f");
	parse_bad("redis://h?k=a\nb", "control byte 0x0a");
	parse_bad("redis://h\r\n", "control byte 0x0d");
	/* The control byte itself is escaped in the quoted URI. */
	parse_bad("redis://h\tx", "\"redis://h\\x09x\"");
	parse_bad("redis://h?x=a@b", "raw '@' after the host part");
	parse_bad("redis+unix:///tmp/a@b", "raw '@'");

	drl_error err = {0};
	drl__uri u;
	assert_int_equal(drl__uri_parse(&u, NULL, &err), DRL_EINVAL);
	assert_null(u.scheme);
	assert_int_equal(drl__uri_parse(NULL, "memory://", NULL), DRL_EINVAL);
}

static void test_option_limit(void **state)
{
	(void)state;
	char text[512];
	int o = snprintf(text, sizeof text, "memory://?");
	for (int i = 0; i < DRL__URI_OPTS_MAX; i++)
		o += snprintf(text + o, sizeof text - (size_t)o, "%so%d=%d",
			      i ? "&" : "", i, i);
	drl__uri u;
	parse_ok(&u, text);
	assert_int_equal(u.nopts, DRL__URI_OPTS_MAX);
	drl__uri_clear(&u);
	snprintf(text + o, sizeof text - (size_t)o, "&one=more");
	parse_bad(text, "more than 16 options");
}

/* Count occurrences of needle in hay. */
static int occurrences(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

static void test_password_never_in_message(void **state)
{
	(void)state;
	/* Every bad URI holds the password "s3cr3t" (or pieces of it). */
	static const char *const bad[] = {
		"redis://u:s3cr3t@h:6379?tx",
		"redis://u:s3cr3t@h/%zz",
		"redis://u:s3cr3t@h?a=1&a=2",
		"redis://u:s3cr3t@h?=1",
		"redis://u:s3cr3t@h ost",
		"redis://u:s3cr3t@h\x01",
		"Redis://u:s3cr3t@h",
		"redis//u:s3cr3t@h",
		"u:s3cr3t@h",
		"redis://u:s3%zzcr3t@h",
		"redis://u:s3cr3t%00@h",
		"redis://u:s3/cr3t@h/0",
		"redis://u:s3?cr3t@h",
		"redis://u:s3cr3t@h?x=a@b",
		"redis://u:s3cr3t@h?k%=1",
		"redis://:s3cr3t@h?tx",
		"redis://:s3:cr3t@h?tx",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		const char *m = parse_bad(bad[i], NULL);
		if (strstr(m, "cr3t") || strstr(m, "s3"))
			fail_msg("password leaked for \"%s\": %s", bad[i], m);
		if (!strstr(m, "***"))
			fail_msg("no *** for \"%s\": %s", bad[i], m);
	}
	/* The rest of the URI is still shown. */
	const char *m = parse_bad("redis://u:s3cr3t@h:6379?tx", NULL);
	assert_string_equal(m, "invalid URI \"redis://u:***@h:6379?tx\": "
			       "option \"tx\" has no value");
	m = parse_bad("redis://u:s3%zzcr3t@h", "bad %-escape in the password");
	assert_int_equal(occurrences(m, "%zz"), 0);
}

static void test_long_uri_message(void **state)
{
	(void)state;
	char text[4096];
	memset(text, 'a', sizeof text);
	memcpy(text, "redis://", 8);
	memcpy(text + 2000, "?k", 2);
	text[sizeof text - 1] = '\0';
	const char *m = parse_bad(text, "...");
	assert_true(strlen(m) < DRL_ERROR_MESSAGE_MAX);
	assert_non_null(strstr(m, "has no value"));
}

static void test_get_int(void **state)
{
	(void)state;
	drl__uri u;
	parse_ok(&u, "memory://?a=16&b=abc&c=-5&d=99999999999999999999&e=&"
		     "f=%2B7&g=1024&h=1025&i=-0");
	drl_error err = {0};
	int64_t v = 42;
	assert_int_equal(drl_uri_option_int(&u, "a", 1, 1024, 64, &v, &err), 0);
	assert_int_equal(v, 16);
	assert_int_equal(drl_uri_option_int(&u, "zz", 1, 1024, 64, &v, &err),
			 0);
	assert_int_equal(v, 64);

	v = 7;
	assert_int_equal(drl_uri_option_int(&u, "b", 1, 1024, 64, &v, &err),
			 DRL_EINVAL);
	assert_int_equal(v, 7);
	assert_int_equal(err.code, DRL_EINVAL);
	assert_non_null(strstr(err.message, "b=\"abc\""));
	assert_non_null(strstr(err.message, "[1, 1024]"));

	assert_int_equal(drl_uri_option_int(&u, "c", 0, 10, 1, &v, &err),
			 DRL_EINVAL);
	assert_non_null(strstr(err.message, "c=\"-5\""));
	assert_non_null(strstr(err.message, "[0, 10]"));
	assert_int_equal(drl_uri_option_int(&u, "d", 0, INT64_MAX, 1, &v, &err),
			 DRL_EINVAL);
	assert_int_equal(drl_uri_option_int(&u, "e", 0, 10, 1, &v, &err),
			 DRL_EINVAL);
	assert_int_equal(drl_uri_option_int(&u, "f", 0, 10, 1, &v, &err),
			 DRL_EINVAL);
	assert_int_equal(drl_uri_option_int(&u, "g", 1, 1024, 1, &v, &err), 0);
	assert_int_equal(v, 1024);
	assert_int_equal(drl_uri_option_int(&u, "h", 1, 1024, 1, &v, &err),
			 DRL_EINVAL);
	assert_non_null(strstr(err.message, "h=\"1025\""));
	assert_int_equal(drl_uri_option_int(&u, "i", -1, 1, 1, &v, &err), 0);
	assert_int_equal(v, 0);
	/* every option was asked for, even the bad ones */
	assert_int_equal(drl_uri_check_all_used(&u, &err), 0);
	drl__uri_clear(&u);
}

static void test_unused_options(void **state)
{
	(void)state;
	drl__uri u;
	parse_ok(&u, "redis://h?tx=lua&tmeout_ms=5");
	drl_error err = {0};
	assert_non_null(drl_uri_option(&u, "tx"));
	assert_int_equal(drl_uri_check_all_used(&u, &err), DRL_EINVAL);
	assert_int_equal(err.code, DRL_EINVAL);
	assert_non_null(strstr(err.message, "\"tmeout_ms\""));
	assert_non_null(strstr(err.message, "redis"));
	assert_null(drl_uri_option(&u, "timeout_ms"));
	assert_int_equal(drl_uri_check_all_used(&u, &err), DRL_EINVAL);
	assert_non_null(drl_uri_option(&u, "tmeout_ms"));
	assert_int_equal(drl_uri_check_all_used(&u, &err), 0);
	drl__uri_clear(&u);
}

static void test_clear(void **state)
{
	(void)state;
	drl__uri u;
	memset(&u, 0, sizeof u);
	drl__uri_clear(&u);
	drl__uri_clear(&u);
	drl__uri_clear(NULL);
	parse_ok(&u, "redis://u:p@h/0?a=1&b=2");
	drl__uri_clear(&u);
	assert_null(u.scheme);
	assert_null(u.password);
	assert_int_equal(u.nopts, 0);
	drl__uri_clear(&u);
	/* A failure after options were stored frees them (see valgrind). */
	parse_bad("redis://u:p@h/0?a=1&b=2&b=3", "given twice");
	parse_bad("redis://u:p@h/0?a=1&b=%zz", "bad %-escape");
}

static void test_parse_int(void **state)
{
	(void)state;
	int64_t v = 99;
#define OK(s, want)                                                            \
	do {                                                                   \
		v = 99;                                                        \
		assert_int_equal(                                              \
			drl_parse_int(s, strlen(s), INT64_MIN, INT64_MAX, &v), \
			0);                                                    \
		assert_true(v == (want));                                      \
	} while (0)
#define BAD(s, lo, hi)                                                         \
	do {                                                                   \
		v = 99;                                                        \
		assert_int_equal(drl_parse_int(s, strlen(s), lo, hi, &v),      \
				 DRL_EINVAL);                                  \
		assert_int_equal(v, 99);                                       \
	} while (0)
	OK("0", 0);
	OK("-0", 0);
	OK("007", 7);
	OK("123", 123);
	OK("-123", -123);
	OK("9223372036854775807", INT64_MAX);
	OK("-9223372036854775808", INT64_MIN);
	BAD("9223372036854775808", INT64_MIN, INT64_MAX);
	BAD("-9223372036854775809", INT64_MIN, INT64_MAX);
	BAD("99999999999999999999999", INT64_MIN, INT64_MAX);
	BAD("", INT64_MIN, INT64_MAX);
	BAD("-", INT64_MIN, INT64_MAX);
	BAD("+1", INT64_MIN, INT64_MAX);
	BAD(" 1", INT64_MIN, INT64_MAX);
	BAD("1 ", INT64_MIN, INT64_MAX);
	BAD("1a", INT64_MIN, INT64_MAX);
	BAD("0x10", INT64_MIN, INT64_MAX);
	BAD("--1", INT64_MIN, INT64_MAX);
	BAD("1-", INT64_MIN, INT64_MAX);
	BAD("1.5", INT64_MIN, INT64_MAX);
	BAD("5", 6, 10);
	BAD("11", 6, 10);
	BAD("-1", 0, 10);
	BAD("5", 10, 6); /* min > max */
	assert_int_equal(drl_parse_int("10", 2, 10, 10, &v), 0);
	assert_int_equal(v, 10);
	/* Only len bytes are read: no NUL needed, trailing bytes ignored. */
	const char buf[5] = {'1', '2', '3', '4', '5'};
	assert_int_equal(drl_parse_int(buf, 3, 0, 1000, &v), 0);
	assert_int_equal(v, 123);
	assert_int_equal(drl_parse_int("12x", 2, 0, 1000, &v), 0);
	assert_int_equal(v, 12);
	assert_int_equal(drl_parse_int("1\0"
				       "2",
				       3, 0, 1000, &v),
			 DRL_EINVAL);
	assert_int_equal(drl_parse_int(NULL, 1, 0, 1, &v), DRL_EINVAL);
#undef OK
#undef BAD
}

/* drl_hostport_parse(): the one host:port grammar of every store. */
static void hp_ok(const char *s, int def, const char *host, int port, bool ipv6)
{
	drl_hostport hp;
	drl_error err = {0};
	int rc = drl_hostport_parse(s, strlen(s), def, "test URI", &hp, &err);
	if (rc)
		fail_msg("hostport(\"%s\") = %d: %s", s, rc, err.message);
	assert_string_equal(hp.host, host);
	assert_int_equal(hp.port, port);
	assert_int_equal(hp.ipv6, ipv6);
}

static void hp_bad(const char *s, size_t len, const char *want)
{
	drl_hostport hp;
	drl_error err = {0};
	int rc = drl_hostport_parse(s, len, 6379, "test URI", &hp, &err);
	if (rc != DRL_EINVAL)
		fail_msg("hostport(\"%.*s\") = %d, want DRL_EINVAL", (int)len,
			 s, rc);
	if (strncmp(err.message, "test URI: ", 10) != 0 ||
	    !strstr(err.message, want))
		fail_msg("hostport(\"%.*s\"): message \"%s\" lacks \"%s\"",
			 (int)len, s, err.message, want);
}

static void test_hostport(void **state)
{
	(void)state;
	hp_ok("localhost", 6379, "localhost", 6379, false);
	hp_ok("127.0.0.1:7000", 6379, "127.0.0.1", 7000, false);
	hp_ok("my-host_1.example.org:1", 11211, "my-host_1.example.org", 1,
	      false);
	hp_ok("[::1]", 11211, "::1", 11211, true);
	hp_ok("[fe80::1]:65535", 1, "fe80::1", 65535, true);
	hp_bad("[fe80::1%eth0]", 14, "bad IPv6 address");

	hp_bad("", 0, "empty server");
	hp_bad(":6379", 5, "empty host");
	hp_bad("[]:1", 4, "empty host");
	hp_bad("::1:6379", 8, "write an IPv6 address in brackets");
	hp_bad("[::1", 4, "'[' without ']'");
	hp_bad("[::1]x", 6, "expected ':' after ']'");
	hp_bad("[::g]", 5, "bad IPv6 address");
	hp_bad("a b", 3, "bad character");
	hp_bad("h/x:1", 5, "bad character");
	hp_bad("h:0", 3, "port must be an integer in [1, 65535]");
	hp_bad("h:65536", 7, "port must be");
	hp_bad("h:", 2, "port must be");
	hp_bad("h:+1", 4, "port must be");
	hp_bad("h:-1", 4, "port must be");
	/* len is what counts, not a NUL: "h:12" cut after the colon. */
	hp_bad("h:12", 2, "port must be");
	char longhost[300];
	memset(longhost, 'a', sizeof longhost);
	hp_bad(longhost, DRL_HOST_MAX + 1, "longer than 255 bytes");
	hp_ok("x", 0 + 1, "x", 1, false);
	/* A default port out of range is the caller's mistake, refused. */
	drl_hostport hp;
	assert_int_equal(drl_hostport_parse("h", 1, 0, NULL, &hp, NULL),
			 DRL_EINVAL);
	assert_int_equal(drl_hostport_parse("h", 1, 1, NULL, NULL, NULL),
			 DRL_EINVAL);
}

static void test_hostport_list(void **state)
{
	(void)state;
	drl_hostport hp[3];
	size_t n = 99;
	drl_error err = {0};
	assert_int_equal(drl_hostport_list("a,b:2,[::1]:3", 11211, "mc URI", hp,
					   3, &n, &err),
			 0);
	assert_int_equal(n, 3);
	assert_string_equal(hp[0].host, "a");
	assert_int_equal(hp[0].port, 11211);
	assert_string_equal(hp[1].host, "b");
	assert_int_equal(hp[1].port, 2);
	assert_string_equal(hp[2].host, "::1");
	assert_int_equal(hp[2].port, 3);

	struct {
		const char *hosts;
		const char *want;
	} bad[] = {
		{"", "no server"},
		{"a,", "empty server"},
		{",a", "empty server"},
		{"a,,b", "empty server"},
		{"a,a:11211", "server a:11211 listed twice"},
		{"[::1],[::1]:11211", "server [::1]:11211 listed twice"},
		{"a,b,c,d", "more than 3 servers"},
		{"a,b:x", "port must be"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		memset(&err, 0, sizeof err);
		n = 99;
		int rc = drl_hostport_list(bad[i].hosts, 11211, "mc URI", hp, 3,
					   &n, &err);
		if (rc != DRL_EINVAL || n != 0 ||
		    !strstr(err.message, bad[i].want))
			fail_msg("list(\"%s\") = %d, n %zu, \"%s\": want "
				 "\"%s\"",
				 bad[i].hosts, rc, n, err.message, bad[i].want);
	}
	assert_int_equal(drl_hostport_list(NULL, 1, NULL, hp, 3, &n, NULL),
			 DRL_EINVAL);
	assert_int_equal(drl_hostport_list("a", 1, NULL, hp, 3, NULL, NULL),
			 DRL_EINVAL);
}

/* The accessors a store's opener uses see what the parser saw. */
/* drl_uri_redact, public: passwords hidden, any buffer size safe. */
static void test_redact(void **state)
{
	(void)state;
	char buf[DRL_URI_SHOW_MAX];
	assert_string_equal(
		drl_uri_redact(buf, sizeof buf, "redis://u:secret@h:1/0?a=1"),
		"redis://u:***@h:1/0?a=1");
	assert_string_equal(drl_uri_redact(buf, sizeof buf, "memory://"),
			    "memory://");
	/* The sentinels' password is an option: hidden too, wherever. */
	assert_string_equal(
		drl_uri_redact(buf, sizeof buf,
			       "redis-sentinel://:m@h:1/n?sentinel_password=s&"
			       "sentinel_user=u&timeout_ms=5"),
		"redis-sentinel://:***@h:1/n?sentinel_password=***&"
		"sentinel_user=u&timeout_ms=5");
	assert_string_equal(
		drl_uri_redact(buf, sizeof buf,
			       "redis-sentinel://h/n?a=1&sentinel_password="
			       "secret%26x"),
		"redis-sentinel://h/n?a=1&sentinel_password=***");
	assert_string_equal(drl_uri_redact(buf, sizeof buf, "x://h/password=p"),
			    "x://h/password=p"); /* a path, not an option */
	assert_string_equal(drl_uri_redact(buf, sizeof buf, "a\nb"), "a\\x0ab");
	assert_string_equal(drl_uri_redact(buf, sizeof buf, NULL), "(null)");
	char big[4096];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	memcpy(big, "redis://u:", 10);
	big[3000] = '@';
	const char *r = drl_uri_redact(buf, sizeof buf, big);
	assert_true(strlen(r) < DRL_URI_SHOW_MAX);
	assert_null(strstr(r, "xxxxxxxxxx@"));
	for (size_t cap = 1; cap < 12; cap++) {
		char small[12];
		memset(small, 'Z', sizeof small);
		drl_uri_redact(small, cap, "redis://u:pw@h");
		assert_true(memchr(small, '\0', cap) != NULL);
		assert_int_equal(small[cap < sizeof small ? cap : 0],
				 cap < sizeof small ? 'Z' : small[0]);
		assert_null(strstr(small, "pw"));
	}
	assert_string_equal(drl_uri_redact(NULL, 10, "x"), "");
}

static void test_accessors(void **state)
{
	(void)state;
	drl__uri u;
	parse_ok(&u, "x+y://us%40r:p%3Ass@h1:1,h2/db?a=1&b=two&connect=maybe");
	assert_string_equal(drl_uri_scheme(&u), "x+y");
	assert_string_equal(drl_uri_user(&u), "us@r");
	assert_string_equal(drl_uri_password(&u), "p:ss");
	assert_string_equal(drl_uri_hosts(&u), "h1:1,h2");
	assert_string_equal(drl_uri_path(&u), "db");
	drl_error err = {0};
	assert_int_equal(drl_uri_check_all_used(&u, &err), DRL_EINVAL);
	assert_non_null(strstr(err.message, "unknown URI option \"a\""));
	int64_t v = 0;
	assert_int_equal(drl_uri_option_int(&u, "a", 0, 9, 5, &v, NULL), 0);
	assert_int_equal(v, 1);
	assert_string_equal(drl_uri_option(&u, "b"), "two");
	assert_int_equal(drl_uri_option_int(&u, "absent", 0, 9, 5, &v, NULL),
			 0);
	assert_int_equal(v, 5);
	bool lazy = false;
	assert_int_equal(drl_uri_option_lazy(&u, &lazy, &err), DRL_EINVAL);
	assert_non_null(strstr(err.message, "connect"));
	assert_int_equal(drl_uri_check_all_used(&u, &err), 0);
	/* NULL outputs of the public accessors: an error, not a crash. */
	assert_int_equal(drl_uri_option_int(&u, "a", 0, 9, 5, NULL, &err),
			 DRL_EINVAL);
	assert_non_null(strstr(err.message, "out is NULL"));
	assert_int_equal(drl_uri_option_lazy(&u, NULL, &err), DRL_EINVAL);
	assert_non_null(strstr(err.message, "lazy is NULL"));
	drl_uri_set_servers(&u, 3);
	assert_int_equal(u.servers, 3);
	drl__uri_clear(&u);
	assert_null(drl_uri_scheme(NULL));
	assert_null(drl_uri_hosts(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_memory),
		cmocka_unit_test(test_redis),
		cmocka_unit_test(test_unix_and_memcached),
		cmocka_unit_test(test_percent_decoding),
		cmocka_unit_test(test_rejections),
		cmocka_unit_test(test_option_limit),
		cmocka_unit_test(test_password_never_in_message),
		cmocka_unit_test(test_long_uri_message),
		cmocka_unit_test(test_get_int),
		cmocka_unit_test(test_unused_options),
		cmocka_unit_test(test_clear),
		cmocka_unit_test(test_parse_int),
		cmocka_unit_test(test_hostport),
		cmocka_unit_test(test_hostport_list),
		cmocka_unit_test(test_accessors),
		cmocka_unit_test(test_redact),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
