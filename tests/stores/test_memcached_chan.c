/*
 * The async API in fd mode on memcached: the counter algorithms' started
 * calls go out on the store's channel (backends/memcached/chan.c, the text
 * protocol by hand) and the loop's thread does the I/O, against real
 * memcached processes:
 *
 * - no worker thread is started for fixed_window and sliding_window
 *   decisions, and drl_async_path() says so; token_bucket (gets/cas) and
 *   channels=0 go to workers;
 * - decisions equal the blocking API's on a random sequence, for every
 *   algorithm (tests/fixtures/async_check.c), on one server and on a pool
 *   of two (a key goes to the server the blocking calls use);
 * - started and blocking calls (binary and ASCII protocol) share one
 *   counter;
 * - a hot key decided from 3 processes, each with its own loop and
 *   channel, admits exactly the limit;
 * - a server that stops answering (SIGSTOP) fails every call in flight
 *   with DRL_ETIMEDOUT by timeout_ms while the loop keeps turning, and the
 *   store decides again after SIGCONT;
 * - a server killed with calls written to it fails them with
 *   DRL_EUNAVAILABLE, and the next calls connect afresh once it is back;
 *   in a pool with one server dead, the other's keys decide;
 * - a reply that comes one byte at a time (tests/fixtures/fake_server.c)
 *   is read whole; a reply that is not memcached's fails the call with
 *   DRL_EUNAVAILABLE.
 *
 * Skips when memcached is missing, except under CI=true (fails).
 */
#include <drl/async.h>
#include <drl/drl.h>

#include "async_check.h"
#include "async_run.h"
#include "fake_server.h"
#include "server_fixture.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

static drl_server srv, srv2;
static int have_srv, have_srv2;

#define NEED_SERVER() DRL_FIXTURE_NEED(have_srv)

static void uri_of(char *buf, size_t cap, const char *opts)
{
	snprintf(
		buf, cap, "memcached://127.0.0.1:%d?timeout_ms=%" PRId64 "%s%s",
		srv.port, tu_bound_ms(2000), opts ? "&" : "", opts ? opts : "");
}

/* ---- the path ------------------------------------------------------------- */

static void test_counters_on_the_loop(void **state)
{
	(void)state;
	NEED_SERVER();
	char uri[256], off[256];
	uri_of(uri, sizeof uri, NULL);
	uri_of(off, sizeof off, "channels=0");
	static const char *const specs[] = {"fixed_window:1000/1h",
					    "sliding_window:1000/1h"};
	drl_async *a = async_run_ctx();
	for (size_t i = 0; i < 2; i++) {
		tu t = tu_open(uri, specs[i]);
		const char *why = NULL;
		if (drl_async_path(t.lim, &why) != 1)
			fail_msg("%s: %s", specs[i], why);
		assert_non_null(strstr(why, "context's own connection"));
		int before = async_threads_now();
		async_run r = {
			.a = a, .lim = t.lim, .key = "path", .total = 300};
		async_run_all(&r, 16);
		assert_int_equal(r.allowed, 300);
		/* no worker, no I/O thread */
		if (async_threads_now() != before)
			fail_msg("%s: %d threads after, %d before", specs[i],
				 async_threads_now(), before);
		tu_free(&t);
	}
	/* The state algorithms and channels=0: workers. */
	tu t = tu_open(uri, "token_bucket:10/1s");
	const char *why = NULL;
	assert_int_equal(drl_async_path(t.lim, &why), 0);
	assert_non_null(strstr(why, "gets/cas"));
	tu_free(&t);
	t = tu_open(off, "fixed_window:10/1s");
	assert_int_equal(drl_async_path(t.lim, &why), 0);
	assert_non_null(strstr(why, "channels=0"));
	tu_free(&t);
	drl_async_free(a);
}

/* ---- decisions -------------------------------------------------------------- */

static const char *const all_specs[] = {"fixed_window:5/1s",
					"sliding_window:5/1s",
					"subwindow:8/1s,subwindows=4",
					"token_bucket:5/1s",
					"gcra:5/1s",
					"sliding_log:5/1s"};

static void check_equal_on(const char *uri, int seed)
{
	drl_store *s = tu_store(uri);
	drl_async *a = async_run_ctx();
	for (size_t j = 0; j < sizeof all_specs / sizeof all_specs[0]; j++) {
		char what[300];
		snprintf(what, sizeof what, "%s on %s", all_specs[j], uri);
		async_check_equal(a, s, all_specs[j], what, seed + (int)j);
	}
	drl_async_free(a);
	drl_store_free(s);
}

static void test_equals_blocking(void **state)
{
	(void)state;
	NEED_SERVER();
	char uri[256];
	uri_of(uri, sizeof uri, NULL);
	check_equal_on(uri, 8100);
	uri_of(uri, sizeof uri, "binary=0");
	check_equal_on(uri, 8200);
}

static void test_equals_blocking_pool(void **state)
{
	(void)state;
	NEED_SERVER();
	DRL_FIXTURE_NEED(have_srv2);
	char uri[256];
	snprintf(uri, sizeof uri,
		 "memcached://127.0.0.1:%d,127.0.0.1:%d?timeout_ms=%" PRId64,
		 srv.port, srv2.port, tu_bound_ms(2000));
	check_equal_on(uri, 8300);
}

/* Blocking calls (both protocols) and started ones on one key count
 * against one limit: 4 + 4 blocking, then 4 started of a limit of 10,
 * on each of `nkeys` keys (on a pool: a key goes to the server the
 * blocking calls use, or the started calls would see nothing used). */
static void check_shared(const char *bin, const char *ascii, int nkeys, int tag)
{
	static const char *const specs[] = {"fixed_window:10/1h",
					    "sliding_window:10/1h"};
	for (size_t i = 0; i < 2; i++) {
		char prefix[64];
		snprintf(prefix, sizeof prefix, "mix%d_%zu_%d:", tag, i,
			 getpid());
		drl_store *sb = tu_store(bin), *sa = tu_store(ascii);
		drl_limiter *lb = tu_limiter(sb, specs[i], prefix);
		drl_limiter *la = tu_limiter(sa, specs[i], prefix);
		int64_t at =
			INT64_C(1796000000000000) + (int64_t)i * 7200 * SEC;
		drl_async *a = async_run_ctx();
		for (int key = 0; key < nkeys; key++) {
			char kb[32];
			snprintf(kb, sizeof kb, "mixed%d", key);
			for (int k = 0; k < 8; k++) {
				drl_result res;
				drl_error e = {0};
				if (drl_allow_at(k < 4 ? lb : la, kb,
						 strlen(kb), 1, at, &res, &e))
					fail_msg("blocking: %s", e.message);
				assert_true(res.allowed);
			}
			async_run r = {.a = a,
				       .lim = lb,
				       .key = kb,
				       .at = at,
				       .total = 4};
			async_run_all(&r, 1);
			if (r.allowed != 2 || r.denied != 2)
				fail_msg("%s, key %s: %d allowed, %d denied "
					 "after 8 blocking of 10",
					 specs[i], kb, r.allowed, r.denied);
		}
		drl_async_free(a);
		drl_limiter_free(lb);
		drl_limiter_free(la);
		drl_store_free(sb);
		drl_store_free(sa);
	}
}

static void test_shares_items_with_blocking(void **state)
{
	(void)state;
	NEED_SERVER();
	char bin[256], ascii[300];
	uri_of(bin, sizeof bin, NULL);
	uri_of(ascii, sizeof ascii, "binary=0");
	check_shared(bin, ascii, 1, 0);
	DRL_FIXTURE_NEED(have_srv2);
	snprintf(bin, sizeof bin,
		 "memcached://127.0.0.1:%d,127.0.0.1:%d?timeout_ms=%" PRId64,
		 srv.port, srv2.port, tu_bound_ms(2000));
	snprintf(ascii, sizeof ascii, "%s&binary=0", bin);
	check_shared(bin, ascii, 24, 1);
}

enum { PROCS = 3, PER_PROC = 150, LIMIT = 200 };

static void test_hot_key_processes(void **state)
{
	(void)state;
	NEED_SERVER();
	static const char *const specs[] = {
		"fixed_window:200/1h", "sliding_window:200/1h",
		"subwindow:200/1h,subwindows=6", "token_bucket:200/1h"};
	char uri[256];
	uri_of(uri, sizeof uri, NULL);
	async_run_hot_specs(uri, specs, sizeof specs / sizeof specs[0],
			    "mcproc", PROCS, PER_PROC, LIMIT);
}

/* ---- a server that stops answering ------------------------------------------ */

static void test_stopped_server_times_out(void **state)
{
	(void)state;
	NEED_SERVER();
	int64_t timeout = tu_bound_ms(200);
	char uri[256];
	snprintf(uri, sizeof uri,
		 "memcached://127.0.0.1:%d?timeout_ms=%" PRId64
		 "&breaker_failures=0",
		 srv.port, timeout);
	/* A timer ringing every timeout/8: a loop the channel never blocks
	 * sees it ring while the calls wait (one blocked until the deadline
	 * would see at most one ring, the reads of a timerfd coalesce). */
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	assert_true(tfd >= 0);
	int64_t every_us = timeout * 1000 / 8;
	struct itimerspec its = {
		.it_interval = {every_us / 1000000,
				(every_us % 1000000) * 1000},
		.it_value = {every_us / 1000000, (every_us % 1000000) * 1000}};
	assert_int_equal(timerfd_settime(tfd, 0, &its, NULL), 0);
	int ticks = 0;
	int64_t took = async_run_stopped(uri, "sliding_window:1000000/1h", &srv,
					 timeout, tfd, &ticks);
	close(tfd);
	if (ticks < 2)
		fail_msg("the loop saw the timer ring %d times while the "
			 "calls waited %" PRId64 " ms",
			 ticks, took);
}

/* ---- a server that goes away ------------------------------------------------- */

static void test_server_gone_reconnects(void **state)
{
	(void)state;
	NEED_SERVER();
	char uri[256];
	snprintf(uri, sizeof uri,
		 "memcached://127.0.0.1:%d?timeout_ms=%" PRId64
		 "&breaker_failures=0",
		 srv.port, tu_bound_ms(5000));
	async_run_server_gone(uri, "sliding_window:1000000/1h", &srv);
}

/* A pool with one server dead: the keys of the live one decide, those
 * of the dead one fail DRL_EUNAVAILABLE (refused), each on its own. */
static void test_pool_one_server_dead(void **state)
{
	(void)state;
	NEED_SERVER();
	DRL_FIXTURE_NEED(have_srv2);
	char uri[256];
	snprintf(uri, sizeof uri,
		 "memcached://127.0.0.1:%d,127.0.0.1:%d?timeout_ms=%" PRId64,
		 srv.port, srv2.port, tu_bound_ms(5000));
	tu t = tu_open(uri, "fixed_window:1000000/1h");
	drl_fixture_kill(&srv2);
	drl_async *a = async_run_ctx();
	int ok = 0, down = 0;
	for (int k = 0; k < 24; k++) {
		char key[16];
		snprintf(key, sizeof key, "dead%d", k);
		async_run r = {.a = a, .lim = t.lim, .key = key, .total = 2};
		async_run_all(&r, 2);
		if (r.allowed == 2)
			ok++;
		else if (r.unavailable == 2)
			down++;
		else
			fail_msg("key %s: %d allowed, %d unavailable; last: %s",
				 key, r.allowed, r.unavailable, r.last);
	}
	assert_int_equal(ok + down, 24);
	assert_true(ok > 0 && down > 0);
	assert_int_equal(drl_fixture_restart(&srv2), 0);
	drl_async_free(a);
	tu_free(&t);
}

/* ---- hostile replies (a fake server) ---------------------------------------- */

/* One decision of `spec` at a fixed time on a fake server that answers
 * `reply` one byte every ms: its outcome in *o. */
static void fake_decide(const char *spec, const char *reply, int dribble,
			async_one *o)
{
	fake_plan plan = {.reply = reply,
			  .len = strlen(reply),
			  .wait_request = 1,
			  .dribble_ms = dribble,
			  .end = FAKE_END_HANG};
	fake_server *fs = NULL;
	assert_int_equal(fake_server_start_tcp(&fs, &plan, 1), 0);
	char uri[256];
	snprintf(uri, sizeof uri,
		 "memcached://127.0.0.1:%d?connect=lazy&timeout_ms=%" PRId64,
		 fake_server_port(fs), tu_bound_ms(5000));
	tu t = tu_open(uri, spec);
	drl_async *a = async_run_ctx();
	drl_error e = {0};
	*o = (async_one){0};
	if (drl_async_allow_at(a, t.lim, "k", 1, 1, ASYNC_T0, async_one_cb, o,
			       &e))
		fail_msg("start: %s", e.message);
	async_process_until(a, &o->count, 1);
	drl_async_free(a);
	tu_free(&t);
	fake_server_stop(fs);
}

/* memcached's counters hold value + 2^62. */
#define ONE "4611686018427387905"
#define TWO "4611686018427387906"

static void test_reply_byte_by_byte(void **state)
{
	(void)state;
	async_one o;
	/* fixed_window: one incr */
	fake_decide("fixed_window:10/1h", ONE "\r\n", 1, &o);
	if (o.rc)
		fail_msg("fixed_window: %s", o.err.message);
	assert_true(o.result.allowed);
	assert_int_equal(o.result.remaining, 9);
	/* sliding_window: the incr, then a get of the previous window */
	fake_decide("sliding_window:10/1h",
		    ONE "\r\nVALUE x 0 19\r\n" TWO "\r\nEND\r\n", 1, &o);
	if (o.rc)
		fail_msg("sliding_window: %s", o.err.message);
	assert_true(o.result.allowed);
	assert_true(o.result.remaining < 9); /* the previous window counts */
	/* the increment's key absent: NOT_FOUND, then the add's STORED */
	fake_decide("fixed_window:10/1h", "NOT_FOUND\r\nSTORED\r\n", 1, &o);
	if (o.rc)
		fail_msg("add: %s", o.err.message);
	assert_true(o.result.allowed);
	assert_int_equal(o.result.remaining, 9);
}

static void test_reply_not_memcached(void **state)
{
	(void)state;
	async_one o;
	fake_decide("fixed_window:10/1h", "+OK\r\n", 0, &o);
	assert_int_equal(o.rc, DRL_EUNAVAILABLE);
	assert_non_null(strstr(o.err.message, "not a memcached reply"));
	/* a counter key holding something else */
	fake_decide("sliding_window:10/1h",
		    ONE "\r\nVALUE x 0 3\r\nabc\r\nEND\r\n", 0, &o);
	assert_int_equal(o.rc, DRL_ECORRUPT);
	fake_decide("fixed_window:10/1h",
		    "CLIENT_ERROR cannot increment or decrement non-numeric "
		    "value\r\n",
		    0, &o);
	assert_int_equal(o.rc, DRL_ECORRUPT);
}

static int setup(void **state)
{
	(void)state;
	int rc = drl_fixture_memcached_start(&srv, NULL);
	if (rc < 0)
		return -1;
	have_srv = rc == 0;
	if (have_srv) {
		rc = drl_fixture_memcached_start(&srv2, NULL);
		if (rc < 0)
			return -1;
		have_srv2 = rc == 0;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (have_srv)
		drl_fixture_stop(&srv);
	if (have_srv2)
		drl_fixture_stop(&srv2);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counters_on_the_loop),
		cmocka_unit_test(test_equals_blocking),
		cmocka_unit_test(test_equals_blocking_pool),
		cmocka_unit_test(test_shares_items_with_blocking),
		cmocka_unit_test(test_hot_key_processes),
		cmocka_unit_test(test_stopped_server_times_out),
		cmocka_unit_test(test_server_gone_reconnects),
		cmocka_unit_test(test_pool_one_server_dead),
		cmocka_unit_test(test_reply_byte_by_byte),
		cmocka_unit_test(test_reply_not_memcached),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
