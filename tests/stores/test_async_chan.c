/*
 * The async API in fd mode on Redis: the loop's thread does the store's
 * I/O (a channel of the store per context, core/async_io.c and
 * backends/redis/chan.c), against a real redis-server:
 *
 * - no thread is started for it: the process has as many threads after
 *   hundreds of decisions on tx=auto and tx=lua as before (with
 *   drl_async_notify() set, the pipes' I/O thread starts: the count
 *   tells the two paths apart), and drl_async_path() says so;
 * - decisions equal the blocking API's, field by field and message by
 *   message (tests/fixtures/async_check.c), and a hot key admits exactly its
 *   limit with 400 requests in flight on one loop, and from 3 processes, each
 *   with its own loop and connection (total allowed == limit);
 * - the requests a round's callbacks start reach the server while the
 *   round goes on (written in parts, not all at its end);
 * - a server that stops answering (SIGSTOP) fails every call in flight
 *   with DRL_ETIMEDOUT by timeout_ms, rung by the timerfd in
 *   drl_async_fd() (no thread counts the time), and the store decides
 *   again after SIGCONT; a server that stops before the connection is
 *   made keeps the calls unsent; more than the socket buffers hold
 *   written to a stopped server waits for POLLOUT without a hang;
 * - a server that goes away (killed with calls written to it) fails the
 *   calls in flight with DRL_EUNAVAILABLE, and the next start connects
 *   afresh once it is back;
 * - drl_async_free() and drl_async_drain() with calls in flight: every
 *   callback exactly once, with its decision;
 * - a store freed before the context closes the context's channel of it
 *   (ASan: no use after free), and the context goes on with another.
 *
 * Skips when redis-server is missing, except under CI=true (fails).
 */
#include <drl/async.h>
#include <drl/drl.h>

#include "async_check.h"
#include "async_run.h"
#include "server_fixture.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <hiredis/hiredis.h>

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static drl_server srv;
static int have_srv;

#define NEED_SERVER() DRL_FIXTURE_NEED(have_srv)

static void uri_of(char *buf, size_t cap, const char *opts)
{
	snprintf(buf, cap, "redis://127.0.0.1:%d?timeout_ms=%" PRId64 "%s%s",
		 srv.port, tu_bound_ms(2000), opts ? "&" : "",
		 opts ? opts : "");
}

/* A limiter of spec on a store of uri_of(NULL): both freed by tu_free(). */
static tu plain_open(const char *spec)
{
	char uri[256];
	uri_of(uri, sizeof uri, NULL);
	return tu_open(uri, spec);
}

/* timeout_ms, and no breaker: every call goes to the server. */
static void uri_no_breaker(char *buf, size_t cap, int64_t timeout_ms)
{
	snprintf(buf, cap,
		 "redis://127.0.0.1:%d?timeout_ms=%" PRId64
		 "&breaker_failures=0",
		 srv.port, timeout_ms);
}

/* ---- a round's writes ------------------------------------------------------ */

#define ROUND 20

/* One round of ROUND callbacks, each starting a request on a key of its
 * own; the last one asks the server (on a connection of the test's)
 * whether the first one's request has reached it. */
typedef struct parts {
	drl_async *a;
	drl_limiter *lim;
	redisContext *peek;
	int round;        /* drl_async_process() calls so far */
	int first[ROUND]; /* the round each first-batch callback ran in */
	int done, more_done, errors;
	bool one_write; /* drl_async_write_parts(1): look, do not wait */
	bool seen;      /* the last callback saw the first request */
} parts;

static long long dbsize(redisContext *c)
{
	redisReply *r = redisCommand(c, "DBSIZE");
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_INTEGER);
	long long n = r->integer;
	freeReplyObject(r);
	return n;
}

static void parts_more_cb(drl_async *a, int rc, const drl_result *res,
			  const drl_error *err, void *arg)
{
	(void)a, (void)res, (void)err;
	parts *p = arg;
	p->more_done++;
	p->errors += rc != 0;
}

static void parts_cb(drl_async *a, int rc, const drl_result *res,
		     const drl_error *err, void *arg)
{
	(void)res, (void)err;
	parts *p = arg;
	p->errors += rc != 0;
	p->first[p->done] = p->round;
	char key[16];
	int n = snprintf(key, sizeof key, "more%d", p->done);
	drl_error e = {0};
	if (drl_async_allow(a, p->lim, key, (size_t)n, 1, parts_more_cb, p, &e))
		fail_msg("start: %s", e.message);
	if (++p->done < ROUND)
		return;
	/* The round's last callback: "more0" is the round's first start.
	 * Written at the round's end, it could not reach the server while
	 * this callback waits; written in parts, it has (ROUND keys of the
	 * first batch, one more when it is decided). */
	p->seen = p->one_write ? dbsize(p->peek) > ROUND
			       : TU_WAIT_FOR(dbsize(p->peek) > ROUND,
					     tu_bound_ms(10000));
}

/* The requests a round's callbacks start go out while the round goes on
 * (core/async.c, WRITE_PARTS), not all at its end: the server decides
 * the first while the loop runs the others' callbacks. A new channel
 * holds its calls until its connection's setup is answered, then writes
 * them in one sendmsg(); their replies come back in one write, and one
 * drl_async_process() delivers all ROUND (asserted: a round of one
 * would prove nothing). */
static void round_in_parts(int write_parts)
{
	char uri[256];
	/* Calls outlive the last callback's wait, also when it fails. */
	uri_no_breaker(uri, sizeof uri, tu_bound_ms(30000));
	tu t = tu_open(uri, "fixed_window:1000000/1h");
	parts p = {.a = async_run_ctx(),
		   .lim = t.lim,
		   .one_write = write_parts == 1};
	if (write_parts)
		assert_int_equal(drl_async_write_parts(p.a, write_parts), 0);
	p.peek = redisConnect("127.0.0.1", srv.port);
	assert_non_null(p.peek);
	assert_int_equal(p.peek->err, 0);
	freeReplyObject(redisCommand(p.peek, "FLUSHDB"));
	for (int i = 0; i < ROUND; i++) {
		char key[16];
		int n = snprintf(key, sizeof key, "first%d", i);
		drl_error e = {0};
		assert_int_equal(drl_async_allow(p.a, t.lim, key, (size_t)n, 1,
						 parts_cb, &p, &e),
				 0);
	}
	int64_t end = tu_mono_ms() + tu_bound_ms(60000);
	while (p.more_done < ROUND) {
		if (tu_mono_ms() > end)
			fail_msg("%d + %d of %d callbacks after the deadline",
				 p.done, p.more_done, 2 * ROUND);
		struct pollfd pf = {.fd = drl_async_fd(p.a), .events = POLLIN};
		if (poll(&pf, 1, 100) > 0) {
			p.round++;
			drl_async_process(p.a);
		}
	}
	for (int i = 1; i < ROUND; i++)
		if (p.first[i] != p.first[0])
			fail_msg(
				"the first batch's replies came in more than "
				"one round (callback %d in round %d, the first "
				"in %d)",
				i, p.first[i], p.first[0]);
	if (!p.seen && !p.one_write)
		fail_msg("the round's first request had not reached the "
			 "server by its last callback");
	if (p.seen && p.one_write)
		fail_msg("write_parts 1: a request of the round was written "
			 "before its last callback");
	assert_int_equal(p.errors, 0);
	assert_int_equal(dbsize(p.peek), 2 * ROUND);
	redisFree(p.peek);
	drl_async_free(p.a);
	tu_free(&t);
}

static void test_round_writes_in_parts(void **state)
{
	(void)state;
	NEED_SERVER();
	round_in_parts(0); /* the default: DRL_ASYNC_WRITE_PARTS_DEFAULT */
	round_in_parts(10);
}

/* drl_async_write_parts(1): the requests a round's callbacks start wait
 * for the round's end, one write (nothing of them at the server during
 * its last callback); out of range, or no context: DRL_EINVAL. */
static void test_round_in_one_write(void **state)
{
	(void)state;
	NEED_SERVER();
	round_in_parts(1);
	drl_async *a = async_run_ctx();
	assert_int_equal(drl_async_write_parts(a, 0), DRL_EINVAL);
	assert_int_equal(
		drl_async_write_parts(a, DRL_ASYNC_WRITE_PARTS_MAX + 1),
		DRL_EINVAL);
	assert_int_equal(drl_async_write_parts(NULL, 2), DRL_EINVAL);
	assert_int_equal(drl_async_write_parts(a, DRL_ASYNC_WRITE_PARTS_MAX),
			 0);
	drl_async_free(a);
}

/* ---- starts from other threads ------------------------------------------- */

typedef struct mt_run {
	drl_async *a;
	drl_limiter *lim;
	atomic_int done, allowed, errors;
} mt_run;

static void mt_cb(drl_async *a, int rc, const drl_result *res,
		  const drl_error *err, void *arg)
{
	(void)a, (void)err;
	mt_run *m = arg;
	if (rc == 0 && res->allowed)
		atomic_fetch_add(&m->allowed, 1);
	else if (rc != 0)
		atomic_fetch_add(&m->errors, 1);
	atomic_fetch_add(&m->done, 1);
}

#define MT_THREADS 4
#define MT_EACH 100

static void *mt_starter(void *p)
{
	mt_run *m = p;
	for (int i = 0; i < MT_EACH; i++) {
		drl_error e = {0};
		if (drl_async_allow(m->a, m->lim, "mt", 2, 1, mt_cb, m, &e))
			atomic_fetch_add(&m->errors, 1000);
	}
	return NULL;
}

/* Threads that are not the loop's start requests on its context (drld's
 * HTTP threads do) while the loop processes: each start queues on the
 * channel under the lock the loop drives it with (TSan saw two threads
 * write the channel's queue at once), every callback comes once, and the
 * hot key admits exactly its limit. */
static void test_starts_from_threads(void **state)
{
	(void)state;
	NEED_SERVER();
	tu t = plain_open("fixed_window:150/1h");
	mt_run m = {.a = async_run_ctx(), .lim = t.lim};
	pthread_t th[MT_THREADS];
	for (int i = 0; i < MT_THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, mt_starter, &m),
				 0);
	int64_t end = tu_mono_ms() + tu_bound_ms(60000);
	while (atomic_load(&m.done) < MT_THREADS * MT_EACH) {
		if (tu_mono_ms() > end)
			fail_msg("%d of %d callbacks after the deadline",
				 atomic_load(&m.done), MT_THREADS * MT_EACH);
		struct pollfd p = {.fd = drl_async_fd(m.a), .events = POLLIN};
		if (poll(&p, 1, 100) > 0)
			drl_async_process(m.a);
	}
	for (int i = 0; i < MT_THREADS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&m.errors), 0);
	assert_int_equal(atomic_load(&m.allowed), 150);
	drl_async_free(m.a);
	tu_free(&t);
}

/* ---- counter groups on a channel -------------------------------------------- */

/* A started counter decision trims its group on the channel too: the
 * Redis hash of its counters gets its TTL there (a decision whose trim
 * was skipped left a hash without one: it never went), and still no
 * thread is started. */
static void test_group_trim_on_channel(void **state)
{
	(void)state;
	NEED_SERVER();
	char uri[256];
	uri_of(uri, sizeof uri, NULL);
	async_run r = async_run_open(uri, "subwindow:100/1h,subwindows=4",
				     "grouptrim", 1);
	int before = async_threads_now();
	async_run_all(&r, 1);
	assert_int_equal(r.allowed, 1);
	assert_int_equal(async_threads_now(), before);
	redisContext *c = redisConnect("127.0.0.1", srv.port);
	assert_non_null(c);
	assert_int_equal(c->err, 0);
	redisReply *k = redisCommand(c, "KEYS *grouptrim*");
	assert_int_equal(k->type, REDIS_REPLY_ARRAY);
	assert_int_equal(k->elements, 1);
	redisReply *ty = redisCommand(c, "TYPE %b", k->element[0]->str,
				      k->element[0]->len);
	assert_string_equal(ty->str, "hash");
	redisReply *p = redisCommand(c, "PTTL %b", k->element[0]->str,
				     k->element[0]->len);
	if (p->integer <= 0)
		fail_msg("the group's hash has no TTL (PTTL %lld)",
			 (long long)p->integer);
	freeReplyObject(p);
	freeReplyObject(ty);
	freeReplyObject(k);
	redisFree(c);
	async_run_close(&r);
}

/* ---- no thread ------------------------------------------------------------ */

static void test_no_io_thread(void **state)
{
	(void)state;
	NEED_SERVER();
	static const char *const tx[] = {NULL, "tx=lua"};
	for (size_t i = 0; i < 2; i++) {
		char uri[256];
		uri_of(uri, sizeof uri, tx[i]);
		async_run r = async_run_open(uri, "fixed_window:1000000/1h",
					     "nothread", 300);
		int before = async_threads_now();
		const char *why = NULL;
		assert_int_equal(drl_async_path(r.lim, &why), 1);
		assert_non_null(strstr(why, "drl_async_process"));
		async_run_all(&r, 16);
		assert_int_equal(r.errors, 0);
		assert_int_equal(r.allowed, 300);
		assert_int_equal(async_threads_now(), before);
		async_run_close(&r);
	}
}

static void wake_nothing(void *arg)
{
	(void)arg;
}

/* The other path, for contrast: with a notify hook no loop polls the
 * channels, and the pipes' I/O thread finishes the calls. */
static void test_notify_keeps_io_thread(void **state)
{
	(void)state;
	NEED_SERVER();
	tu t = plain_open("fixed_window:1000000/1h");
	int before = async_threads_now();
	drl_async *a = async_run_ctx();
	assert_int_equal(drl_async_notify(a, wake_nothing, NULL), 0);
	async_one one = {0};
	drl_error e = {0};
	assert_int_equal(
		drl_async_allow(a, t.lim, "k", 1, 1, async_one_cb, &one, &e),
		0);
	assert_true(TU_WAIT_FOR((drl_async_process(a), one.count == 1),
				tu_bound_ms(10000)));
	assert_int_equal(one.rc, 0);
	/* At least the I/O thread (a sanitizer may start one of its own
	 * with the process's first thread). */
	assert_true(async_threads_now() > before);
	drl_async_free(a);
	tu_free(&t);
}

/* ---- decisions -------------------------------------------------------------- */

static void test_equals_blocking(void **state)
{
	(void)state;
	NEED_SERVER();
	static const char *const specs[] = {"fixed_window:5/1s",
					    "sliding_window:5/1s",
					    "subwindow:8/1s,subwindows=4",
					    "token_bucket:5/1s",
					    "gcra:5/1s",
					    "sliding_log:5/1s"};
	static const char *const tx[] = {NULL, "tx=lua"};
	int n = 0;
	for (size_t i = 0; i < 2; i++) {
		char uri[256];
		uri_of(uri, sizeof uri, tx[i]);
		drl_store *s = tu_store(uri);
		drl_async *a = async_run_ctx();
		for (size_t j = 0; j < sizeof specs / sizeof specs[0]; j++) {
			char what[128];
			snprintf(what, sizeof what, "%s on %s", specs[j],
				 tx[i] ? tx[i] : "tx=auto");
			async_check_equal(a, s, specs[j], what, 7000 + n++);
		}
		drl_async_free(a);
		drl_store_free(s);
	}
}

static void test_hot_key_one_loop(void **state)
{
	(void)state;
	NEED_SERVER();
	static const char *const specs[] = {
		"fixed_window:100/1h", "sliding_window:100/1h",
		"token_bucket:100/1h", "gcra:100/1h"};
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
		char uri[256], prefix[64];
		uri_of(uri, sizeof uri, NULL);
		drl_store *s = tu_store(uri);
		snprintf(prefix, sizeof prefix, "chanhot%zu%d:", i, getpid());
		drl_limiter *l = tu_limiter(s, specs[i], prefix);
		drl_async *a = async_run_ctx();
		async_check_hot(a, l, specs[i], false);
		async_check_hot(a, l, specs[i], true);
		drl_async_free(a);
		drl_limiter_free(l);
		drl_store_free(s);
	}
}

enum { PROCS = 3, PER_PROC = 150, LIMIT = 200 };

static void test_hot_key_processes(void **state)
{
	(void)state;
	NEED_SERVER();
	static const char *const specs[] = {
		"fixed_window:200/1h", "sliding_window:200/1h",
		"subwindow:200/1h,subwindows=6", "token_bucket:200/1h",
		"gcra:200/1h"};
	char uri[256];
	uri_of(uri, sizeof uri, NULL);
	async_run_hot_specs(uri, specs, sizeof specs / sizeof specs[0],
			    "chanproc", PROCS, PER_PROC, LIMIT);
}

/* ---- a server that stops answering, or goes away -------------------------- */

static void test_stopped_server_times_out(void **state)
{
	(void)state;
	NEED_SERVER();
	int64_t timeout = tu_bound_ms(100);
	char uri[256];
	uri_no_breaker(uri, sizeof uri, timeout);
	async_run_stopped(uri, "fixed_window:1000000/1h", &srv, timeout, 0,
			  NULL);
}

/* More than the socket buffers hold, written to a stopped server: the
 * channel waits for POLLOUT (a partial write), nothing hangs, every
 * batch's callback comes once, each item timed out; the store decides
 * again after SIGCONT. */
enum { BIG_BATCHES = 400, BIG_ITEMS = 200, BIG_KEY = 120 };

static void big_cb(drl_async *a, int rc, const drl_batch_item *items, size_t n,
		   const drl_error *err, void *arg)
{
	(void)a;
	(void)rc;
	(void)err;
	int *counts = arg; /* [0] callbacks, [1] items timed out */
	counts[0]++;
	for (size_t i = 0; i < n; i++)
		counts[1] += items[i].rc == DRL_ETIMEDOUT;
}

static void test_stopped_server_backpressure(void **state)
{
	(void)state;
	NEED_SERVER();
	char uri[256];
	uri_no_breaker(uri, sizeof uri, tu_bound_ms(300));
	char full[300];
	snprintf(full, sizeof full, "%s&tx=lua", uri);
	async_run r =
		async_run_connected(full, "fixed_window:1000000/1h", "big");
	static drl_batch_item items[BIG_ITEMS];
	static char keys[BIG_ITEMS][BIG_KEY];
	for (int i = 0; i < BIG_ITEMS; i++) {
		memset(keys[i], 'k', BIG_KEY);
		snprintf(keys[i], BIG_KEY, "%d", i);
		keys[i][strlen(keys[i])] = 'k';
		items[i] = (drl_batch_item){
			.key = keys[i], .keylen = BIG_KEY, .cost = 1};
	}
	assert_int_equal(drl_fixture_pause(&srv), 0);
	int counts[2] = {0, 0};
	for (int b = 0; b < BIG_BATCHES; b++) {
		drl_error e = {0};
		if (drl_async_batch(r.a, r.lim, items, BIG_ITEMS, big_cb,
				    counts, &e))
			fail_msg("batch %d: %s", b, e.message);
	}
	int64_t end = tu_mono_ms() + tu_bound_ms(60000);
	while (counts[0] < BIG_BATCHES && tu_mono_ms() < end) {
		struct pollfd p = {.fd = drl_async_fd(r.a), .events = POLLIN};
		if (poll(&p, 1, 100) > 0)
			drl_async_process(r.a);
	}
	assert_int_equal(drl_fixture_resume(&srv), 0);
	assert_int_equal(counts[0], BIG_BATCHES);
	assert_int_equal(counts[1], BIG_BATCHES * BIG_ITEMS);
	async_run_again(&r, 2, 0);
	async_run_all(&r, 2);
	if (r.allowed != 2)
		fail_msg("%d of 2 allowed after SIGCONT; last: %s", r.allowed,
			 r.last);
	async_run_close(&r);
}

/* Stopped before the connection is made: the setup is not answered, the
 * calls stay unsent (nothing of them runs when the server comes back). */
static void test_stopped_before_connect(void **state)
{
	(void)state;
	NEED_SERVER();
	char uri[256];
	uri_no_breaker(uri, sizeof uri, tu_bound_ms(100));
	async_run r = async_run_open(uri, "fixed_window:5/1h", "unsent", 20);
	r.at = INT64_C(1797000000000000);
	assert_int_equal(drl_fixture_pause(&srv), 0);
	async_run_all(&r, 20);
	assert_int_equal(drl_fixture_resume(&srv), 0);
	assert_int_equal(r.timeouts, 20);
	/* None of the 20 ran: a limit of 5 still has all 5. */
	async_run_again(&r, 6, 0);
	async_run_all(&r, 1);
	assert_int_equal(r.errors, 0);
	assert_int_equal(r.allowed, 5);
	assert_int_equal(r.denied, 1);
	async_run_close(&r);
}

static void test_server_gone_reconnects(void **state)
{
	(void)state;
	NEED_SERVER();
	char uri[256];
	uri_no_breaker(uri, sizeof uri, tu_bound_ms(5000));
	async_run_server_gone(uri, "fixed_window:1000000/1h", &srv);
}

/* ---- free and drain with calls in flight ---------------------------------- */

/* *r: a run of n requests for key on the plain URI, all started (in
 * flight: their callbacks hold r). */
static void in_flight(async_run *r, const char *key, int n)
{
	char uri[256];
	uri_of(uri, sizeof uri, NULL);
	*r = async_run_open(uri, "fixed_window:1000000/1h", key, n);
	for (int i = 0; i < n; i++)
		async_run_start(r);
}

static void test_free_in_flight(void **state)
{
	(void)state;
	NEED_SERVER();
	async_run r;
	in_flight(&r, "free", 64);
	/* Their callbacks must not start more: the context is going. */
	r.total = r.started;
	drl_async_free(r.a);
	r.a = NULL;
	assert_int_equal(r.done, 64);
	assert_int_equal(r.errors, 0);
	assert_int_equal(r.allowed, 64);
	async_run_close(&r);
}

static void drained(drl_async *a, void *arg)
{
	(void)a;
	async_run *r = arg;
	r->denied = -r->done; /* -(callbacks before the drain's) */
}

static void test_drain_in_flight(void **state)
{
	(void)state;
	NEED_SERVER();
	async_run r;
	in_flight(&r, "drain", 32);
	drl_error e = {0};
	assert_int_equal(drl_async_drain(r.a, drained, &r, &e), 0);
	int64_t end = tu_mono_ms() + tu_bound_ms(30000);
	while (r.denied == 0 && tu_mono_ms() < end) {
		struct pollfd p = {.fd = drl_async_fd(r.a), .events = POLLIN};
		if (poll(&p, 1, 100) > 0)
			drl_async_process(r.a);
	}
	assert_int_equal(r.denied, -32); /* every callback, then the drain */
	assert_int_equal(r.allowed, 32);
	async_run_close(&r);
}

/* A store freed while the context lives: its channel goes with it. */
static void test_store_freed_first(void **state)
{
	(void)state;
	NEED_SERVER();
	drl_async *a = async_run_ctx();
	for (int i = 0; i < 3; i++) {
		tu t = plain_open("fixed_window:1000000/1h");
		async_run r = {
			.a = a, .lim = t.lim, .key = "first", .total = 20};
		async_run_all(&r, 8);
		assert_int_equal(r.allowed, 20);
		tu_free(&t);
	}
	drl_async_free(a);
}

DRL_FIXTURE_REDIS_GROUP(srv, have_srv)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_io_thread),
		cmocka_unit_test(test_group_trim_on_channel),
		cmocka_unit_test(test_starts_from_threads),
		cmocka_unit_test(test_notify_keeps_io_thread),
		cmocka_unit_test(test_equals_blocking),
		cmocka_unit_test(test_round_writes_in_parts),
		cmocka_unit_test(test_round_in_one_write),
		cmocka_unit_test(test_hot_key_one_loop),
		cmocka_unit_test(test_hot_key_processes),
		cmocka_unit_test(test_stopped_server_times_out),
		cmocka_unit_test(test_stopped_before_connect),
		cmocka_unit_test(test_stopped_server_backpressure),
		cmocka_unit_test(test_server_gone_reconnects),
		cmocka_unit_test(test_free_in_flight),
		cmocka_unit_test(test_drain_in_flight),
		cmocka_unit_test(test_store_freed_first),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
