/*
 * Hostile servers: the Redis and memcached stores against a fake peer
 * (tests/fixtures/fake_server.h) that answers garbage, truncated or absurd
 * replies, replies of the wrong type for each command the store sends, or never
 * answers. Every case goes through the public API (drl_store_open,
 * drl_limiter_new, drl_allow) and must end in a clean error:
 *
 * - a negative code from the case's set (docs/failure.md, "Hostile
 *   servers", says which and why),
 * - a non-empty message that never holds the URI's password,
 * - result.allowed == 0 (the result is poisoned with allowed = 1 first),
 * - within time_limit_ms() (timeout_ms is 200 for the cases about timing
 *   out, 1500 for the others; the margin above that scales with
 *   tu_slowdown(): ASan, a busy machine),
 * - and nothing crashes or leaks (this test also runs under ASan+UBSan
 *   and valgrind).
 *
 * After each kind of failure a store must recover: the next call, on a new
 * connection that answers properly, decides (allowed, rc 0).
 *
 * Connection-class failures (EOF, reset, bytes that are not the protocol)
 * are DRL_EUNAVAILABLE (CONN below).
 */
#include <drl/async.h>
#include <drl/drl.h>

#include "async_check.h"
#include "fake_server.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SECRET "s3cr3tPW"
#define SHORT_MS 200 /* timeout_ms for the cases about timing out */
#define LONG_MS 1500 /* for the others, where a slow fake must not time out */
#define RECOVER_TRIES 30 /* calls (50 ms apart) a store may need to recover */

/* How long a case may take: its longest timeout plus what this machine
 * needs besides (500 ms on a quiet machine). */
static int64_t time_limit_ms(void)
{
	return LONG_MS + tu_bound_ms(125);
}

/* Sets of codes a case may return: C(DRL_ESTORE) | ... */
#define C(code) (1u << (unsigned)-(code))
#define CONN C(DRL_EUNAVAILABLE)
#define TIMEOUT C(DRL_ETIMEDOUT)
#define STORE C(DRL_ESTORE)
#define CORRUPT C(DRL_ECORRUPT)
#define NOMEM C(DRL_ENOMEM)
#define RANGE C(DRL_ERANGE)
/* eval()'s own contract for a script answer that is not integers (or more
 * of them than asked for): DRL_EINTERNAL (DRL_ERANGE). libdrl's twins never
 * answer so; only a server that is not Redis does. */
#define SHAPE C(DRL_EINTERNAL)

#define LIT(s) s, sizeof(s) - 1
/* A hostile reply; HC: one cut in two pieces (hostile.cut). */
#define H(name, bytes, end, dribble, codes)                                    \
	{                                                                      \
		name, LIT(bytes), end, dribble, codes, 0                       \
	}
#define HC(name, bytes, end, dribble, codes, cut)                              \
	{                                                                      \
		name, LIT(bytes), end, dribble, codes, cut                     \
	}

/* What the fake sends after the store's connection setup (as the answer to
 * the next request, or two: see cut), and the codes a call may return then.
 * dribble_ms > 0: one byte every dribble_ms. */
typedef struct hostile {
	const char *name;
	const char *bytes;
	size_t len;
	fake_end end;
	int dribble_ms;
	unsigned codes;
	size_t cut; /* > 0: bytes after this offset wait for the next request */
} hostile;

/* A store configuration a case runs against: URI options, a spec, and
 * the replies that make one decision succeed (after setup). */
typedef struct target {
	const char *name;
	const char *scheme; /* "redis", "memcached" */
	const char *opts;
	const char *spec;
	const char *ok;
	size_t oklen;
	size_t cut; /* as hostile.cut, for ok */
} target;

/* How one attempt ended. */
typedef struct outcome {
	int opened; /* 0: drl_store_open failed (rc is its code) */
	int rc;     /* of the last call made */
	drl_error err;
	drl_result res;
	int64_t ms;     /* time the last call took */
	unsigned conns; /* connections the fake accepted */
} outcome;

/* "SCHEME://[USERINFO@]127.0.0.1:PORT?OPTS&timeout_ms=MS" into buf. */
static void make_uri(char *buf, size_t cap, const target *t, int port,
		     const char *userinfo, int timeout_ms)
{
	snprintf(buf, cap, "%s://%s%s127.0.0.1:%d?%s%stimeout_ms=%d", t->scheme,
		 userinfo ? userinfo : "", userinfo ? "@" : "", port, t->opts,
		 t->opts[0] ? "&" : "", timeout_ms);
}

/* The timeout a case runs with: SHORT_MS when it is about timing out,
 * else LONG_MS, so that a fake delayed by a loaded machine cannot turn
 * another case into a timeout. */
static int timeout_for(unsigned codes)
{
	return codes & TIMEOUT ? SHORT_MS : LONG_MS;
}

/* The *_started tests: each decision goes through the async API, which
 * on Redis tx=lua sends it without a worker (a started call finished by
 * the pipe's I/O thread): the same failures must come out of that path,
 * in one callback. */
static bool via_async;

/* drl_allow(lim, "k1", 2, 1) through a context of one worker: the
 * callback's outcome, which must come once and by the case's bound. */
static int allow_async(drl_limiter *lim, drl_result *res, drl_error *err)
{
	drl_async *a = NULL;
	drl_async_opts opts = {.threads = 1};
	async_one c = {0};
	assert_int_equal(drl_async_new(&a, &opts, NULL), 0);
	assert_int_equal(
		drl_async_allow(a, lim, "k1", 2, 1, async_one_cb, &c, NULL), 0);
	int64_t end = tu_mono_ms() + 2 * time_limit_ms();
	while (c.count == 0 && tu_mono_ms() < end) {
		struct pollfd pfd = {.fd = drl_async_fd(a), .events = POLLIN};
		if (poll(&pfd, 1, 50) > 0)
			drl_async_process(a);
	}
	drl_async_free(a); /* runs a late callback: counted below */
	if (c.count != 1)
		fail_msg("%d callbacks for one started request", c.count);
	*res = c.result;
	*err = c.err;
	return c.rc;
}

/* Start a fake with `plans`, open t's store on it (timeout_ms) and decide
 * once, or up to `tries` times, 50 ms apart, until a call succeeds. */
static outcome attempt(const target *t, const char *userinfo,
		       const fake_plan *plans, size_t n, int timeout_ms,
		       int tries)
{
	outcome o;
	fake_server *fs = NULL;
	drl_store *store = NULL;
	drl_limiter *lim = NULL;
	char uri[256];
	memset(&o, 0, sizeof o);
	assert_int_equal(fake_server_start_tcp(&fs, plans, n), 0);
	make_uri(uri, sizeof uri, t, fake_server_port(fs), userinfo,
		 timeout_ms);

	int64_t t0 = tu_mono_ms();
	o.rc = drl_store_open(&store, uri, &o.err);
	o.ms = tu_mono_ms() - t0;
	o.opened = o.rc == 0;
	if (o.opened) {
		drl_error e = {0};
		if (drl_limiter_new(&lim, store, t->spec, NULL, &e) != 0)
			fail_msg("%s: spec %s: %s", t->name, t->spec,
				 e.message);
	}
	for (int i = 0; o.opened && i < tries; i++) {
		if (i > 0)
			nanosleep(&(struct timespec){0, 50000000L}, NULL);
		memset(&o.err, 0, sizeof o.err);
		memset(&o.res, 0, sizeof o.res);
		o.res.allowed = 1; /* must be overwritten on failure */
		t0 = tu_mono_ms();
		o.rc = via_async ? allow_async(lim, &o.res, &o.err)
				 : drl_allow(lim, "k1", 2, 1, &o.res, &o.err);
		o.ms = tu_mono_ms() - t0;
		if (o.rc == 0)
			break;
	}
	drl_limiter_free(lim);
	drl_store_free(store);
	o.conns = fake_server_accepted(fs);
	fake_server_stop(fs);
	return o;
}

/* attempt() with one decision, for a case whose hostile bytes come after
 * a valid setup: an open that timed out (the fake, or this process, kept
 * off the CPU for SHORT_MS by a loaded machine: the setup is not what the
 * case is about) is tried again on a fresh fake, up to 5 times. */
static outcome attempt_opened(const target *t, const char *userinfo,
			      const fake_plan *plans, size_t n, int timeout_ms)
{
	outcome o = attempt(t, userinfo, plans, n, timeout_ms, 1);
	for (int i = 1; i < 5 && !o.opened && o.rc == DRL_ETIMEDOUT; i++)
		o = attempt(t, userinfo, plans, n, timeout_ms, 1);
	return o;
}

/* The checks every failure must pass. */
static void expect_failure(const char *what, const outcome *o, unsigned codes,
			   const char *secret)
{
	printf("  %-44s %-17s %4lld ms  %s%.90s\n", what, drl_err_name(o->rc),
	       (long long)o->ms, o->opened ? "" : "[open] ", o->err.message);
	if (o->rc >= 0)
		fail_msg("%s: rc %d, a failure was expected", what, o->rc);
	if (-o->rc >= 32 || !(codes & C(o->rc)))
		fail_msg("%s: unexpected %s: %s", what, drl_err_name(o->rc),
			 o->err.message);
	assert_int_equal(o->err.code, o->rc);
	if (o->err.message[0] == '\0')
		fail_msg("%s: empty message", what);
	if (secret && strstr(o->err.message, secret))
		fail_msg("%s: the message quotes the password: %s", what,
			 o->err.message);
	if (o->opened && o->res.allowed != 0)
		fail_msg("%s: allowed = %d on an error", what, o->res.allowed);
	if (o->ms > time_limit_ms())
		fail_msg("%s: took %lld ms", what, (long long)o->ms);
}

/* One connection's plan: `setup` answers the first request, h's bytes the
 * next one (two when h->cut is set), dribbled from there when h says so. */
static fake_plan hostile_plan(char *buf, size_t cap, const char *setup,
			      size_t setuplen, const hostile *h)
{
	fake_plan p = {.wait_request = 1, .end = h->end};
	size_t n = 0;
	assert_true(setuplen + h->len <= cap);
	memcpy(buf, setup, setuplen);
	memcpy(buf + setuplen, h->bytes, h->len);
	p.reply = buf;
	p.len = setuplen + h->len;
	if (setuplen > 0)
		p.split[n++] = setuplen;
	if (h->cut > 0)
		p.split[n++] = setuplen + h->cut;
	p.dribble_ms = h->dribble_ms;
	p.dribble_from = setuplen;
	return p;
}

/* ---- Redis ---------------------------------------------------------------- */

#define PONG "+PONG\r\n"
#define AUTH_PONG "+OK\r\n+PONG\r\n"
#define USERINFO "drluser:" SECRET

/* A decision each twin / transaction can answer with. */
#define EVAL_OK "*5\r\n:1\r\n:4\r\n:200000\r\n:0\r\n:1\r\n"
#define LOAD_NIL "+OK\r\n$-1\r\n"
#define CAS_OK "+OK\r\n+QUEUED\r\n*1\r\n+OK\r\n"
/* MULTI, INCRBY and PEXPIRE queued: EXEC's array comes next. */
#define QUEUED2 "+OK\r\n+QUEUED\r\n+QUEUED\r\n"
#define INCR_OK QUEUED2 "*2\r\n:1\r\n:1\r\n"
#define TIME_OK "*2\r\n$10\r\n1795351356\r\n$6\r\n440964\r\n"
#define CUT_LOAD (sizeof LOAD_NIL - 1) /* WATCH/GET answered, then cas */

/* fixed_window's twin answers the five fields of the common form;
 * token_bucket's what is used before the call (one integer, or {used,
 * ahead}): 0 units of 1/PERIOD token, full, as {0, 0} (long enough for
 * "dribbles a valid reply" to outlast the timeout). */
static const target redis_lua = {"redis tx=lua",      "redis",      "tx=lua",
				 "fixed_window:5/1s", LIT(EVAL_OK), 0};
static const target redis_lua_compact = {
	"redis tx=lua (compact answer)", "redis", "tx=lua", "token_bucket:5/1s",
	LIT("*2\r\n:0\r\n:0\r\n"),       0};
static const target redis_watch = {
	"redis tx=watch (state)", "redis", "tx=watch", "gcra:5/1s",
	LIT(LOAD_NIL CAS_OK),     CUT_LOAD};
static const target redis_incr = {
	"redis tx=watch (counter)", "redis",      "tx=watch",
	"fixed_window:5/1s",        LIT(INCR_OK), 0};
static const target redis_clock = {"redis clock=server",    "redis",
				   "tx=watch&clock=server", "fixed_window:5/1s",
				   LIT(TIME_OK INCR_OK),    sizeof TIME_OK - 1};
static const target redis_lua_clock = {
	"redis tx=lua clock=server",
	"redis",
	"tx=lua&clock=server",
	"sliding_window:5/1s",
	LIT("*5\r\n:1\r\n:4\r\n:1552563\r\n:0\r\n:1795351356\r\n"),
	0};

/* tx=auto's counters, the fields of one hash (counter groups): HINCRBY,
 * and an HMGET of the other sub-windows, pipelined, no script; then, the
 * field being new, the trim: HDEL, PEXPIRE (its own request: the cut).
 * Four sub-windows, not fixed_window: a lone HINCRBY's 4 bytes dribbled
 * would arrive within SHORT_MS. */
#define AUTO_OK ":1\r\n*3\r\n$-1\r\n$-1\r\n$-1\r\n"
static const target redis_auto = {"redis tx=auto (counter)",
				  "redis",
				  "tx=auto",
				  "subwindow:5/1s,subwindows=4",
				  LIT(AUTO_OK ":0\r\n:1\r\n"),
				  sizeof AUTO_OK - 1};
static const target redis_auto_mget = {"redis tx=auto (counter, HMGET)",
				       "redis",
				       "tx=auto",
				       "sliding_window:5/1s",
				       LIT(":1\r\n*1\r\n$-1\r\n:0\r\n:1\r\n"),
				       sizeof ":1\r\n*1\r\n$-1\r\n" - 1};

static const target *const redis_targets[] = {
	&redis_lua,       &redis_watch,       &redis_incr, &redis_clock,
	&redis_lua_clock, &redis_lua_compact, &redis_auto, &redis_auto_mget};
#define N_REDIS_TARGETS (sizeof redis_targets / sizeof redis_targets[0])

/* Filled by group setup: one error reply of 64 KiB. */
static char long_error[65536 + 8];
static size_t long_error_len;

/* Replies that are wrong whatever the command: the first reply after
 * setup. */
static hostile redis_any[] = {
	H("garbage bytes", "\x01\x02\x03garbage\xfe\xff\r\n", FAKE_END_CLOSE, 0,
	  CONN),
	H("a non-RESP line", "HTTP/1.1 400 Bad Request\r\n\r\n", FAKE_END_CLOSE,
	  0, CONN),
	H("NUL bytes", "\0\0\0\0\0\0\r\n", FAKE_END_CLOSE, 0, CONN),
	H("truncated bulk, then close", "$100\r\nabc", FAKE_END_CLOSE, 0, CONN),
	H("truncated bulk, then hang", "$100\r\nabc", FAKE_END_HANG, 0,
	  TIMEOUT),
	H("absurd bulk length", "$9999999999\r\n", FAKE_END_CLOSE, 0, CONN),
	H("bulk length past int64", "$99999999999999999999999\r\n",
	  FAKE_END_CLOSE, 0, CONN),
	H("negative array count", "*-7\r\n", FAKE_END_CLOSE, 0, CONN | CORRUPT),
	H("huge array count", "*9999999999\r\n", FAKE_END_CLOSE, 0,
	  CONN | NOMEM),
	H("deeply nested arrays",
	  "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n"
	  "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n",
	  FAKE_END_CLOSE, 0, CONN),
	H("integer past int64", ":99999999999999999999999\r\n", FAKE_END_CLOSE,
	  0, CONN | STORE | CORRUPT),
	/* An error for the first reply; EOF for the next ones, when the
	 * command expects more (WATCH/GET). */
	{"long error reply", NULL, 0, FAKE_END_CLOSE, 0, STORE | CONN, 0},
	H("never answers", "", FAKE_END_HANG, 0, TIMEOUT),
	H("closes after setup", "", FAKE_END_CLOSE, 0, CONN),
	H("resets after setup", "", FAKE_END_RESET, 0, CONN),
	{"dribbles a valid reply", NULL, 0, FAKE_END_HANG, 60, TIMEOUT, 0},
};
#define N_REDIS_ANY (sizeof redis_any / sizeof redis_any[0])

/* A reply of the wrong type (or shape) for one command. */
typedef struct typed {
	const target *t;
	hostile h;
} typed;

static const typed redis_typed[] = {
	/* EVALSHA (tx=lua): the twin answers five integers. */
	{&redis_lua, H("EVALSHA: status", "+OK\r\n", 0, 0, SHAPE)},
	{&redis_lua, H("EVALSHA: string", "$2\r\nhi\r\n", 0, 0, SHAPE)},
	{&redis_lua, H("EVALSHA: nil", "$-1\r\n", 0, 0, CORRUPT)},
	{&redis_lua, H("EVALSHA: one integer", ":1\r\n", 0, 0, CORRUPT)},
	{&redis_lua,
	 H("EVALSHA: strings",
	   "*5\r\n$1\r\n1\r\n$1\r\n1\r\n$1\r\n1\r\n$1\r\n1\r\n$1\r\n1\r\n", 0,
	   0, SHAPE)},
	{&redis_lua,
	 H("EVALSHA: six integers",
	   "*6\r\n:1\r\n:1\r\n:1\r\n:1\r\n:1\r\n:1\r\n", 0, 0, RANGE)},
	{&redis_lua, H("EVALSHA: three integers", "*3\r\n:1\r\n:1\r\n:1\r\n", 0,
		       0, CORRUPT)},
	{&redis_lua, H("EVALSHA: allowed = 7",
		       "*5\r\n:7\r\n:1\r\n:1\r\n:0\r\n:1\r\n", 0, 0, CORRUPT)},
	{&redis_lua, H("EVALSHA: remaining < 0",
		       "*5\r\n:1\r\n:1\r\n:-5\r\n:0\r\n:1\r\n", 0, 0, CORRUPT)},
	{&redis_lua,
	 H("EVALSHA: nested array",
	   "*5\r\n*1\r\n:1\r\n:1\r\n:1\r\n:0\r\n:1\r\n", 0, 0, SHAPE)},
	/* A compact answer (token_bucket: what is used, 0 .. 2 x burst x
	 * PERIOD with a penalty's debt, how far ahead, and a newer stored
	 * version's LIMIT and burst): out of its range or of its shape. */
	{&redis_lua_compact,
	 H("EVALSHA: used above 2 x full", ":10000001\r\n", 0, 0, CORRUPT)},
	{&redis_lua_compact,
	 H("EVALSHA: negative used", ":-1\r\n", 0, 0, CORRUPT)},
	{&redis_lua_compact,
	 H("EVALSHA: negative ahead", "*2\r\n:0\r\n:-1\r\n", 0, 0, CORRUPT)},
	{&redis_lua_compact,
	 H("EVALSHA: three values", "*3\r\n:0\r\n:0\r\n:0\r\n", 0, 0, CORRUPT)},
	{&redis_lua_compact, H("EVALSHA: no value", "*0\r\n", 0, 0, CORRUPT)},
	/* four: a newer stored version's LIMIT and burst, 1 .. 10^9 each */
	{&redis_lua_compact,
	 H("EVALSHA: a stored LIMIT of 0", "*4\r\n:0\r\n:0\r\n:0\r\n:5\r\n", 0,
	   0, CORRUPT)},
	{&redis_lua_compact,
	 H("EVALSHA: a stored burst above 10^9",
	   "*4\r\n:0\r\n:0\r\n:5\r\n:1000000001\r\n", 0, 0, CORRUPT)},
	/* five values are the common form (drl__twin_answer): one that
	 * is not a decision */
	{&redis_lua_compact,
	 H("EVALSHA: five values, allowed = 5",
	   "*5\r\n:5\r\n:0\r\n:5\r\n:5\r\n:0\r\n", 0, 0, CORRUPT)},
	/* tx=auto's counter commands. */
	{&redis_auto, H("INCRBY: string", "$1\r\n1\r\n:1\r\n", 0, 0, STORE)},
	{&redis_auto,
	 H("INCRBY: WRONGTYPE", "-WRONGTYPE Operation against a key\r\n:1\r\n",
	   0, 0, STORE)},
	{&redis_auto_mget,
	 H("HMGET: error", ":1\r\n-ERR nope\r\n", 0, 0, STORE)},
	{&redis_auto_mget,
	 H("HMGET: not an array", ":1\r\n:7\r\n", 0, 0, STORE)},
	{&redis_auto_mget, H("HMGET: two values for one key",
			     ":1\r\n*2\r\n$-1\r\n$-1\r\n", 0, 0, STORE)},
	{&redis_auto_mget,
	 H("HMGET: not a number", ":1\r\n*1\r\n$2\r\nhi\r\n", 0, 0, CORRUPT)},
	{&redis_lua,
	 HC("SCRIPT LOAD: status", "-NOSCRIPT gone\r\n+OK\r\n" EVAL_OK, 0, 0,
	    STORE, sizeof "-NOSCRIPT gone\r\n" - 1)},
	{&redis_lua, HC("SCRIPT LOAD: another SHA1",
			"-NOSCRIPT gone\r\n$40\r\n"
			"0000000000000000000000000000000000000000\r\n" EVAL_OK,
			0, 0, SHAPE, sizeof "-NOSCRIPT gone\r\n" - 1)},
	/* The script loaded, then EOF before EVALSHA's answer (once a double
	 * free in drl__redis_eval). */
	{&redis_lua, HC("SCRIPT LOAD, then EOF",
			"-NOSCRIPT gone\r\n$40\r\n"
			"0000000000000000000000000000000000000000\r\n",
			0, 0, CONN, sizeof "-NOSCRIPT gone\r\n" - 1)},
	/* WATCH/GET (tx=watch, state). */
	{&redis_watch, H("WATCH: integer", ":1\r\n$-1\r\n", 0, 0, STORE)},
	{&redis_watch, H("WATCH: array", "*1\r\n:1\r\n$-1\r\n", 0, 0, STORE)},
	{&redis_watch, H("GET: integer", "+OK\r\n:5\r\n", 0, 0, STORE)},
	{&redis_watch, H("GET: status", "+OK\r\n+OK\r\n", 0, 0, STORE)},
	{&redis_watch, H("GET: 5 bytes of garbage state",
			 "+OK\r\n$5\r\nhello\r\n", 0, 0, CORRUPT)},
	/* MULTI/SET/EXEC (tx=watch, state). */
	{&redis_watch,
	 HC("MULTI: integer", LOAD_NIL ":1\r\n+QUEUED\r\n*1\r\n+OK\r\n", 0, 0,
	    STORE, CUT_LOAD)},
	{&redis_watch,
	 HC("SET queued: integer", LOAD_NIL "+OK\r\n:1\r\n*1\r\n+OK\r\n", 0, 0,
	    STORE, CUT_LOAD)},
	{&redis_watch, HC("EXEC: integer", LOAD_NIL "+OK\r\n+QUEUED\r\n:1\r\n",
			  0, 0, STORE, CUT_LOAD)},
	{&redis_watch, HC("EXEC: two results",
			  LOAD_NIL "+OK\r\n+QUEUED\r\n*2\r\n+OK\r\n+OK\r\n", 0,
			  0, STORE, CUT_LOAD)},
	{&redis_watch,
	 HC("EXEC: SET answered nil",
	    LOAD_NIL "+OK\r\n+QUEUED\r\n*1\r\n$-1\r\n", 0, 0, STORE, CUT_LOAD)},
	{&redis_watch,
	 HC("EXEC: nil, then EOF", LOAD_NIL "+OK\r\n+QUEUED\r\n*-1\r\n", 0, 0,
	    CONN, CUT_LOAD)},
	/* MULTI/INCRBY/PEXPIRE/EXEC (tx=watch, counter). */
	{&redis_incr,
	 H("INCRBY: string", QUEUED2 "*2\r\n$1\r\nx\r\n:1\r\n", 0, 0, STORE)},
	{&redis_incr,
	 H("INCRBY: not an integer",
	   QUEUED2 "*2\r\n"
		   "-ERR value is not an integer or out of range\r\n:1\r\n",
	   0, 0, CORRUPT)},
	{&redis_incr, H("INCRBY: 2^60",
			QUEUED2 "*2\r\n"
				":1152921504606846976\r\n:1\r\n",
			0, 0, CORRUPT)},
	{&redis_incr,
	 H("PEXPIRE: status", QUEUED2 "*2\r\n:1\r\n+OK\r\n", 0, 0, STORE)},
	{&redis_incr,
	 H("EXEC: one result", QUEUED2 "*1\r\n:1\r\n", 0, 0, STORE)},
	{&redis_incr, H("EXEC: aborted", QUEUED2 "*-1\r\n", 0, 0, STORE)},
	/* TIME (clock=server). */
	{&redis_clock, H("TIME: status", "+OK\r\n", 0, 0, CORRUPT)},
	{&redis_clock,
	 H("TIME: integers", "*2\r\n:1\r\n:2\r\n", 0, 0, CORRUPT)},
	{&redis_clock, H("TIME: not digits", "*2\r\n$3\r\nabc\r\n$1\r\n0\r\n",
			 0, 0, CORRUPT)},
	{&redis_clock,
	 H("TIME: seconds out of range",
	   "*2\r\n$11\r\n99999999999\r\n$1\r\n0\r\n", 0, 0, CORRUPT)},
	{&redis_clock,
	 H("TIME: three elements", "*3\r\n$1\r\n1\r\n$1\r\n0\r\n$1\r\n0\r\n", 0,
	   0, CORRUPT)},
	{&redis_clock, H("TIME: error", "-ERR no clock\r\n", 0, 0, STORE)},
};
#define N_REDIS_TYPED (sizeof redis_typed / sizeof redis_typed[0])

/* Replies to connection setup (AUTH, PING): drl_store_open fails. */
static const hostile redis_setup[] = {
	H("PING: integer", ":1\r\n", FAKE_END_CLOSE, 0, STORE),
	H("PING: error", "-ERR unknown command\r\n", FAKE_END_CLOSE, 0, STORE),
	H("PING: garbage", "\xff\xfe\r\n", FAKE_END_CLOSE, 0, CONN),
	H("PING: never answered", "", FAKE_END_HANG, 0, TIMEOUT),
	H("PING: dribbled", PONG, FAKE_END_HANG, 80, TIMEOUT),
	H("closes at once", "", FAKE_END_CLOSE, 0, CONN),
	H("resets at once", "", FAKE_END_RESET, 0, CONN),
};

/* Replies to AUTH that quote the password, or are not what AUTH says. */
static const hostile redis_auth[] = {
	H("AUTH: error quoting the password",
	  "-ERR unknown command 'AUTH', with args beginning with: "
	  "'drluser' '" SECRET "'\r\n" PONG,
	  FAKE_END_CLOSE, 0, STORE),
	H("AUTH: status of the password", "+" SECRET "\r\n" PONG,
	  FAKE_END_CLOSE, 0, STORE),
	H("AUTH: bulk of the password", "$8\r\n" SECRET "\r\n" PONG,
	  FAKE_END_CLOSE, 0, STORE),
	H("AUTH: the password, not RESP", SECRET "\r\n" PONG, FAKE_END_CLOSE, 0,
	  CONN),
	H("AUTH: integer", ":1\r\n" PONG, FAKE_END_CLOSE, 0, STORE),
};

/* Setup bytes for a URI with or without a password. */
static const char *redis_setup_bytes(const char *userinfo, size_t *len)
{
	*len = userinfo ? sizeof AUTH_PONG - 1 : sizeof PONG - 1;
	return userinfo ? AUTH_PONG : PONG;
}

/* One decision against t with h after setup; then check it failed. */
static void redis_case(const target *t, const hostile *h, const char *userinfo)
{
	static char buf[sizeof long_error + 256];
	char what[160];
	size_t slen;
	const char *setup = redis_setup_bytes(userinfo, &slen);
	fake_plan p = hostile_plan(buf, sizeof buf, setup, slen, h);
	outcome o = attempt_opened(t, userinfo, &p, 1, timeout_for(h->codes));
	snprintf(what, sizeof what, "%s%s: %s", t->name,
		 userinfo ? " +auth" : "", h->name);
	if (!o.opened)
		fail_msg("%s: open failed: %s", what, o.err.message);
	expect_failure(what, &o, h->codes, userinfo ? SECRET : NULL);
}

/* The generic cases need per-target bytes: a long error, a dribbled valid
 * decision. */
static hostile redis_any_for(const target *t, size_t i)
{
	hostile h = redis_any[i];
	if (h.bytes == NULL && h.dribble_ms == 0) {
		h.bytes = long_error;
		h.len = long_error_len;
	} else if (h.bytes == NULL) {
		h.bytes = t->ok;
		h.len = t->oklen;
		h.cut = t->cut;
	}
	return h;
}

static void test_redis_any_reply(void **state)
{
	const char *userinfo = *state;
	for (size_t i = 0; i < N_REDIS_TARGETS; i++)
		for (size_t j = 0; j < N_REDIS_ANY; j++) {
			hostile h = redis_any_for(redis_targets[i], j);
			redis_case(redis_targets[i], &h, userinfo);
		}
}

static void test_redis_wrong_type(void **state)
{
	const char *userinfo = *state;
	for (size_t i = 0; i < N_REDIS_TYPED; i++)
		redis_case(redis_typed[i].t, &redis_typed[i].h, userinfo);
}

/* The generic cases and the wrong EVALSHA replies on tx=lua, each decision
 * started through the async API (sent without a worker): the same
 * failures, each in exactly one callback. */
static void test_redis_started(void **state)
{
	const char *userinfo = *state;
	const target *lua[] = {&redis_lua, &redis_lua_clock};
	via_async = true;
	for (size_t i = 0; i < 2; i++)
		for (size_t j = 0; j < N_REDIS_ANY; j++) {
			hostile h = redis_any_for(lua[i], j);
			redis_case(lua[i], &h, userinfo);
		}
	for (size_t i = 0; i < N_REDIS_TYPED; i++)
		if (redis_typed[i].t == &redis_lua &&
		    strncmp(redis_typed[i].h.name, "EVALSHA:", 8) == 0)
			redis_case(&redis_lua, &redis_typed[i].h, userinfo);
	via_async = false;
}

/* A case that still breaks the time bound (a known issue, reported): say
 * what was measured and return 1 (the test then skips), or 0 when it kept
 * the bound (then its result is checked as any other). */
static int known_slow(const char *what, const outcome *o, const char *why)
{
	if (o->ms <= time_limit_ms())
		return 0;
	printf("  %-44s KNOWN ISSUE: %s after %lld ms (%s)\n", what,
	       drl_err_name(o->rc), (long long)o->ms, why);
	return 1;
}

/* An array header of 2^29-1 elements: hiredis 0.14 would allocate the
 * whole element table (4 GiB) before any element arrives, and walk it
 * again to free it on EOF, seconds after timeout_ms; the store's readers
 * refuse arrays over 65536 elements (backends/redis/store.c), so this is a
 * quick DRL_EUNAVAILABLE. */
static void test_redis_huge_array(void **state)
{
	(void)state;
	static char buf[64];
	hostile h = H("array count 2^29-1", "*536870911\r\n", FAKE_END_CLOSE, 0,
		      CONN);
	fake_plan p = hostile_plan(buf, sizeof buf, PONG, sizeof PONG - 1, &h);
	outcome o = attempt(&redis_lua, NULL, &p, 1, timeout_for(h.codes), 1);
	expect_failure("redis tx=lua: array count 2^29-1", &o, h.codes, NULL);
}

/* drl_store_open itself meets the hostile reply. */
static void open_case(const target *t, const hostile *h, const char *userinfo)
{
	char what[160];
	fake_plan p = {.reply = h->bytes,
		       .len = h->len,
		       .wait_request = 1,
		       .dribble_ms = h->dribble_ms,
		       .end = h->end};
	if (h->len == 0 && h->end != FAKE_END_HANG)
		p.wait_request = 0; /* closes (or resets) at once */
	outcome o = attempt(t, userinfo, &p, 1, timeout_for(h->codes), 1);
	snprintf(what, sizeof what, "%s: %s", t->name, h->name);
	if (o.opened)
		fail_msg("%s: the store opened", what);
	expect_failure(what, &o, h->codes, userinfo ? SECRET : NULL);
}

static void test_redis_setup(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof redis_setup / sizeof redis_setup[0]; i++)
		open_case(&redis_lua, &redis_setup[i], NULL);
	for (size_t i = 0; i < sizeof redis_auth / sizeof redis_auth[0]; i++)
		open_case(&redis_lua, &redis_auth[i], USERINFO);
}

/* After h on one connection, the next call (a new connection that answers
 * properly) decides. */
static void recover_case(const target *t, const char *setup, size_t slen,
			 const hostile *h, const char *userinfo)
{
	static char bad[sizeof long_error + 256], good[512];
	hostile okh = {"ok", t->ok, t->oklen, FAKE_END_CLOSE, 0, 0, t->cut};
	fake_plan p[2];
	char what[160];
	p[0] = hostile_plan(bad, sizeof bad, setup, slen, h);
	p[1] = hostile_plan(good, sizeof good, setup, slen, &okh);
	/* LONG_MS: the good connection after the bad one must not time out
	 * on a busy machine (a hang costs its whole timeout, once). */
	outcome o = attempt(t, userinfo, p, 2, LONG_MS, RECOVER_TRIES);
	snprintf(what, sizeof what, "%s: recovers after %s", t->name, h->name);
	if (o.rc != 0)
		fail_msg("%s: %s: %s", what, drl_err_name(o.rc), o.err.message);
	assert_int_equal(o.res.allowed, 1);
	assert_int_equal(o.res.remaining, 4);
	printf("  %-44s ok after %u connections\n", what, o.conns);
}

/* The failures every recovery is tried after. */
static const hostile recover_after[] = {
	H("garbage", "\x01garbage\r\n", FAKE_END_CLOSE, 0, 0),
	H("a truncated bulk", "$100\r\nabc", FAKE_END_CLOSE, 0, 0),
	H("a hang", "", FAKE_END_HANG, 0, 0),
	H("a reset", "", FAKE_END_RESET, 0, 0),
};

static void test_redis_recovers(void **state)
{
	const char *userinfo = *state;
	size_t slen;
	const char *setup = redis_setup_bytes(userinfo, &slen);
	for (size_t i = 0; i < N_REDIS_TARGETS; i++)
		for (size_t j = 0;
		     j < sizeof recover_after / sizeof *recover_after; j++)
			recover_case(redis_targets[i], setup, slen,
				     &recover_after[j], userinfo);
}

/* ---- memcached (binary protocol) ------------------------------------------ */

/* Real responses of memcached 1.6 to what libmemcached sends (24-byte
 * header: magic 0x81, opcode, key length, extras length, data type,
 * status, body length, opaque, CAS). */
#define MC_VERSION                                                             \
	"\x81\x0b\x00\x00\x00\x00\x00\x00\x00\x00\x00\x06\x00\x01\x00\x00"     \
	"\x00\x00\x00\x00\x00\x00\x00\x00"                                     \
	"1.6.18"
/* The probe connection of drl_store_open: its version, then EOF. */
#define MC_VERSION_PLAN                                                        \
	{                                                                      \
		.reply = MC_VERSION, .len = sizeof MC_VERSION - 1,             \
		.wait_request = 1, .end = FAKE_END_CLOSE                       \
	}
#define MC_INCR_HDR                                                            \
	"\x81\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00\x08\x00\x01\x00\x00"     \
	"\x00\x00\x00\x00\x00\x00\x00\x01"
#define MC_INCR_OK MC_INCR_HDR "\x40\x00\x00\x00\x00\x00\x00\x01"
#define MC_NOOP                                                                \
	"\x81\x0a\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00"     \
	"\x00\x00\x00\x00\x00\x00\x00\x00"
#define MC_ADD_OK                                                              \
	"\x81\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00"     \
	"\x00\x00\x00\x00\x00\x00\x00\x02"

static const target mc_incr = {"memcached (counter)", "memcached",     "",
			       "fixed_window:5/1s",   LIT(MC_INCR_OK), 0};
static const target mc_state = {
	"memcached (state)",    "memcached",       "", "token_bucket:5/1s",
	LIT(MC_NOOP MC_ADD_OK), sizeof MC_NOOP - 1};
static const target *const mc_targets[] = {&mc_incr, &mc_state};

static const hostile mc_any[] = {
	H("wrong magic (0x80)",
	  "\x80\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00\x08\x00\x01\x00\x00"
	  "\x00\x00\x00\x00\x00\x00\x00\x01\x40\x00\x00\x00\x00\x00\x00"
	  "\x01",
	  FAKE_END_CLOSE, 0, CONN),
	H("truncated header", "\x81\x05\x00\x00\x00\x00\x00\x00\x00\x00",
	  FAKE_END_CLOSE, 0, CONN),
	H("truncated header, then hang",
	  "\x81\x05\x00\x00\x00\x00\x00\x00\x00\x00", FAKE_END_HANG, 0,
	  TIMEOUT),
	H("absurd body length",
	  "\x81\x05\x00\x00\x00\x00\x00\x00\xff\xff\xff\xf0\x00\x01\x00\x00"
	  "\x00\x00\x00\x00\x00\x00\x00\x01",
	  FAKE_END_CLOSE, 0, CONN),
	/* libmemcached 1.1 does not check the opcode: an increment takes it
	 * for one that delivered no value (UINT64_MAX: out of range), a gets
	 * for a value without a CAS id (DRL_ESTORE). */
	H("wrong opcode (SET)",
	  "\x81\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x08\x00\x01\x00\x00"
	  "\x00\x00\x00\x00\x00\x00\x00\x01\x40\x00\x00\x00\x00\x00\x00"
	  "\x01",
	  FAKE_END_CLOSE, 0, RANGE | STORE),
	H("unknown status",
	  "\x81\x05\x00\x00\x00\x00\x77\x77\x00\x00\x00\x00"
	  "\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01",
	  FAKE_END_CLOSE, 0, CONN),
	H("garbage", "\x01\x02\x03garbage\xfe\xff\r\n", FAKE_END_CLOSE, 0,
	  CONN),
	H("an ASCII error", "SERVER_ERROR out of memory\r\n", FAKE_END_CLOSE, 0,
	  CONN),
	H("NUL bytes", "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
	  FAKE_END_CLOSE, 0, CONN),
	H("never answers", "", FAKE_END_HANG, 0, TIMEOUT),
	/* A gets (state) sees this as SOME_ERRORS: DRL_ESTORE. */
	H("closes at once", "", FAKE_END_CLOSE, 0, CONN | STORE),
	H("resets at once", "", FAKE_END_RESET, 0, CONN),
};
#define N_MC_ANY (sizeof mc_any / sizeof mc_any[0])

/* The cases that only make sense for one operation. */
static const typed mc_typed[] = {
	{&mc_incr,
	 H("incr: value of 3 bytes",
	   "\x81\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00\x01\x00\x00"
	   "\x00\x00\x00\x00\x00\x00\x00\x01xyz",
	   FAKE_END_CLOSE, 0, CONN)},
	{&mc_incr, H("incr: counter 0 (below the bias)",
		     MC_INCR_HDR "\x00\x00\x00\x00\x00\x00\x00\x00",
		     FAKE_END_CLOSE, 0, RANGE)},
	{&mc_state,
	 H("get: garbage state",
	   "\x81\x0c\x00\x15\x04\x00\x00\x00\x00\x00\x00\x1e\x00\x01\x00\x00"
	   "\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00\x00\x00"
	   "drl:tb:1000000:{2:k1}hello" MC_NOOP,
	   FAKE_END_CLOSE, 0, CORRUPT)},
	/* libmemcached allocates body - key - extras bytes before reading
	 * them: 4 GiB here (ENOMEM where that fails), then EOF. */
	{&mc_state,
	 H("gets: body shorter than its key",
	   "\x81\x0c\x00\x1a\x04\x00\x00\x00\x00\x00\x00\x08\x00\x01\x00\x00"
	   "\x00\x00\x00\x00\x00\x00\x00\x09",
	   FAKE_END_CLOSE, 0, CONN | NOMEM)},
	{&mc_state, HC("add: status 0x7777",
		       MC_NOOP "\x81\x02\x00\x00\x00\x00\x77\x77"
			       "\x00\x00\x00\x00\x00\x03\x00\x00"
			       "\x00\x00\x00\x00\x00\x00\x00\x00",
		       FAKE_END_CLOSE, 0, CONN, sizeof MC_NOOP - 1)},
};

/* The probe connection of drl_store_open gets a version reply; the next
 * connection gets h. */
static void mc_case(const target *t, const hostile *h)
{
	static char buf[4096];
	char what[160];
	fake_plan p[2] = {MC_VERSION_PLAN};
	p[1] = hostile_plan(buf, sizeof buf, "", 0, h);
	if (h->len == 0 && h->end != FAKE_END_HANG)
		p[1].wait_request = 0; /* at once */
	outcome o = attempt_opened(t, NULL, p, 2, timeout_for(h->codes));
	snprintf(what, sizeof what, "%s: %s", t->name, h->name);
	if (!o.opened)
		fail_msg("%s: open failed: %s", what, o.err.message);
	expect_failure(what, &o, h->codes, NULL);
}

static void test_memcached_any_reply(void **state)
{
	(void)state;
	for (size_t i = 0; i < 2; i++)
		for (size_t j = 0; j < N_MC_ANY; j++) {
			hostile h = mc_any[j];
			if (h.bytes == NULL) {
				h.bytes = mc_targets[i]->ok;
				h.len = mc_targets[i]->oklen;
				h.cut = mc_targets[i]->cut;
			}
			mc_case(mc_targets[i], &h);
		}
	for (size_t i = 0; i < sizeof mc_typed / sizeof mc_typed[0]; i++)
		mc_case(mc_typed[i].t, &mc_typed[i].h);
}

/* A server that sends a valid reply one byte per 100 ms, each byte within
 * timeout_ms (200). Redis bounds the whole call by timeout_ms; memcached
 * (libmemcached) bounds each wait for bytes, so such a call succeeds after
 * seconds. Until the store bounds the call, this case reports what it
 * measured and skips (known issue); then it asserts the failure contract. */
static void test_memcached_dribble(void **state)
{
	(void)state;
	static char buf[256];
	int slow = 0;
	for (size_t i = 0; i < 2; i++) {
		const target *t = mc_targets[i];
		hostile h = {"dribbles a valid reply",
			     t->ok,
			     t->oklen,
			     FAKE_END_HANG,
			     100,
			     TIMEOUT,
			     t->cut};
		fake_plan p[2] = {MC_VERSION_PLAN};
		char what[160];
		p[1] = hostile_plan(buf, sizeof buf, "", 0, &h);
		outcome o = attempt(t, NULL, p, 2, SHORT_MS, 1);
		snprintf(what, sizeof what, "%s: %s", t->name, h.name);
		if (known_slow(what, &o,
			       "timeout_ms bounds each read, not the call")) {
			slow = 1;
			continue;
		}
		expect_failure(what, &o, h.codes, NULL);
	}
	if (slow)
		skip();
}

static void test_memcached_setup(void **state)
{
	(void)state;
	static const hostile probe[] = {
		H("version: garbage", "garbage\r\n", FAKE_END_CLOSE, 0, CONN),
		H("version: never answered", "", FAKE_END_HANG, 0,
		  TIMEOUT | CONN),
		H("closes at once", "", FAKE_END_CLOSE, 0, CONN),
	};
	for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++)
		open_case(&mc_incr, &probe[i], NULL);
}

static void test_memcached_recovers(void **state)
{
	(void)state;
	static char bad[256], good[256];
	for (size_t i = 0; i < 2; i++) {
		for (size_t j = 0;
		     j < sizeof recover_after / sizeof *recover_after; j++) {
			const target *t = mc_targets[i];
			hostile okh = {"ok", t->ok, t->oklen, FAKE_END_CLOSE,
				       0,    0,     t->cut};
			fake_plan p[3] = {MC_VERSION_PLAN};
			char what[160];
			p[1] = hostile_plan(bad, sizeof bad, "", 0,
					    &recover_after[j]);
			p[2] = hostile_plan(good, sizeof good, "", 0, &okh);
			outcome o =
				attempt(t, NULL, p, 3, LONG_MS, RECOVER_TRIES);
			snprintf(what, sizeof what, "%s: recovers after %s",
				 t->name, recover_after[j].name);
			if (o.rc != 0)
				fail_msg("%s: %s: %s", what, drl_err_name(o.rc),
					 o.err.message);
			assert_int_equal(o.res.allowed, 1);
			printf("  %-44s ok after %u connections\n", what,
			       o.conns);
		}
	}
}

/* ---- canned replies --------------------------------------------------------- */

/* Every target's valid replies decide (the baseline the cases break). */
static void test_valid_replies(void **state)
{
	(void)state;
	static char buf[512];
	hostile ok = {"ok", NULL, 0, FAKE_END_CLOSE, 0, 0, 0};
	for (size_t i = 0; i < N_REDIS_TARGETS + 2; i++) {
		const target *t = i < N_REDIS_TARGETS
					  ? redis_targets[i]
					  : mc_targets[i - N_REDIS_TARGETS];
		int redis = i < N_REDIS_TARGETS;
		fake_plan p[2] = {MC_VERSION_PLAN};
		ok.bytes = t->ok;
		ok.len = t->oklen;
		ok.cut = t->cut;
		p[redis ? 0 : 1] =
			hostile_plan(buf, sizeof buf, redis ? PONG : "",
				     redis ? sizeof PONG - 1 : 0, &ok);
		outcome o = attempt(t, NULL, p, redis ? 1 : 2, LONG_MS, 1);
		if (o.rc != 0)
			fail_msg("%s: %s: %s", t->name, drl_err_name(o.rc),
				 o.err.message);
		assert_int_equal(o.res.allowed, 1);
		assert_int_equal(o.res.remaining, 4);
		printf("  %-44s ok, %lld ms\n", t->name, (long long)o.ms);
	}
}

/* ---- the fake server itself ------------------------------------------------ */

/* Stop is bounded even with connections that hang, and counts them. */
static void test_fake_server_stop(void **state)
{
	(void)state;
	fake_plan hang = {.wait_request = 1, .end = FAKE_END_HANG};
	fake_server *fs = NULL;
	drl_store *s[3] = {NULL, NULL, NULL};
	char uri[128];
	assert_int_equal(fake_server_start_tcp(&fs, &hang, 1), 0);
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d?timeout_ms=50",
		 fake_server_port(fs));
	for (int i = 0; i < 3; i++) {
		drl_error e = {0};
		assert_int_equal(drl_store_open(&s[i], uri, &e), DRL_ETIMEDOUT);
	}
	assert_int_equal(fake_server_accepted(fs), 3);
	int64_t t0 = tu_mono_ms();
	fake_server_stop(fs);
	assert_true(tu_mono_ms() - t0 < tu_bound_ms(250));
}

static int group_setup(void **state)
{
	(void)state;
	size_t n = 0;
	n += (size_t)snprintf(long_error, sizeof long_error, "-ERR ");
	memset(long_error + n, 'x', 65536);
	n += 65536;
	memcpy(long_error + n, "\r\n", 2);
	long_error_len = n + 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	return 0;
}

#define BOTH_AUTH(fn)                                                          \
	cmocka_unit_test_prestate(fn, NULL),                                   \
		cmocka_unit_test_prestate(fn, USERINFO)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fake_server_stop),
		cmocka_unit_test(test_valid_replies),
		BOTH_AUTH(test_redis_any_reply),
		BOTH_AUTH(test_redis_wrong_type),
		BOTH_AUTH(test_redis_started),
		cmocka_unit_test(test_redis_huge_array),
		cmocka_unit_test(test_redis_setup),
		BOTH_AUTH(test_redis_recovers),
		cmocka_unit_test(test_memcached_any_reply),
		cmocka_unit_test(test_memcached_setup),
		cmocka_unit_test(test_memcached_dribble),
		cmocka_unit_test(test_memcached_recovers),
	};
	return cmocka_run_group_tests(tests, group_setup, NULL);
}
