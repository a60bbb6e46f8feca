/*
 * Faults survived: real redis-server and memcached processes stopped
 * (SIGSTOP) and resumed, killed and restarted on the same port, while four
 * threads decide; every on_error policy on every store and strategy.
 *
 * Asserted for each run: no call hangs (each returns within timeout_ms and
 * a margin); the policy does what docs/failure.md says (no policy: only
 * DRL_EUNAVAILABLE/DRL_ETIMEDOUT, never an allow; deny: denials on path
 * FAIL_CLOSED; allow: allows on path FAIL_OPEN; local: this process's own
 * limit, never more than LIMIT); the breaker opened and refused calls; the
 * store path never admitted more than the limit allows; and after recovery
 * the shared limit is exact again (a hot key at one instant: exactly
 * LIMIT admitted, all by the store).
 *
 * Then the server faults that keep the server up (FLUSHALL, OOM, a key of
 * another type) with the policies, and the breaker's own contract: a dead
 * server sees a handful of calls instead of every caller's.
 */
#include "server_fixture.h"
#include "testutil.h"

#include <hiredis/hiredis.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

enum { THREADS = 4, LIMIT = 20, CALLS_MAX = 200000 };

#define TIMEOUT_MS 400 /* above a loaded 2-core box's worst round trip */
/* A call may take timeout_ms, plus scheduling on a loaded 2-core box
 * under sanitizers (tu_slowdown). */
#define CALL_BOUND_MS (TIMEOUT_MS + tu_bound_ms(325))
#define BREAKER "breaker_open_ms=50&breaker_max_ms=400"

typedef enum store_kind { REDIS_LUA, REDIS_WATCH, MEMCACHED } store_kind;
typedef enum fault { PAUSE, KILL } fault;

static const char *const policies[] = {"", ";on_error=deny", ";on_error=allow",
				       ";on_error=local"};
enum { NONE, DENY, ALLOW, LOCAL };

static int unreachable_rc(int rc)
{
	return rc == DRL_EUNAVAILABLE || rc == DRL_ETIMEDOUT;
}

/* Start the server a store kind needs; skips when it is missing (never
 * under CI=true: then the start fails). */
static void start(drl_server *srv, store_kind k)
{
	int rc = k == MEMCACHED ? drl_fixture_memcached_start(srv, NULL)
				: drl_fixture_redis_start(srv, NULL);
	if (rc == 1)
		skip();
	assert_int_equal(rc, 0);
}

static void uri_with_timeout(char *buf, size_t cap, store_kind k, int port,
			     int64_t timeout_ms, const char *extra)
{
	if (k == MEMCACHED)
		snprintf(buf, cap,
			 "memcached://127.0.0.1:%d?timeout_ms=%" PRId64
			 "&" BREAKER "%s",
			 port, timeout_ms, extra);
	else
		snprintf(buf, cap,
			 "redis://127.0.0.1:%d?tx=%s&timeout_ms=%" PRId64
			 "&" BREAKER "%s",
			 port, k == REDIS_LUA ? "lua" : "watch", timeout_ms,
			 extra);
}

/* The URI of the fault tests: calls must time out (TIMEOUT_MS) while
 * the server is paused. */
static void uri_of(char *buf, size_t cap, store_kind k, int port,
		   const char *extra)
{
	uri_with_timeout(buf, cap, k, port, TIMEOUT_MS, extra);
}

/* The URI of the tests whose server stays up and answers (restarts,
 * FLUSHALL, error replies): no call of theirs should time out, so the
 * timeout is a bound for a loaded machine under a sanitizer, not
 * TIMEOUT_MS (a connection setup under TSan took over 400 ms in a
 * busy-core run). */
static void uri_patient(char *buf, size_t cap, store_kind k, int port,
			const char *extra)
{
	uri_with_timeout(buf, cap, k, port, tu_bound_ms(2000), extra);
}

static int admitted(drl_limiter *l, const char *key, int n, int64_t now);

/* A server of kind k started into *srv (a skip when its binary is
 * missing), a store on it (uri_patient's URI, or uri_of's when not
 * patient; extra appended) and a limiter of spec with prefix into *l;
 * the test fails, naming the URI, when one cannot be made. */
static drl_store *serve(drl_server *srv, store_kind k, bool patient,
			const char *extra, const char *spec, const char *prefix,
			drl_limiter **l)
{
	char uri[256];
	drl_store *s;
	drl_error e = {0};
	start(srv, k);
	if (patient)
		uri_patient(uri, sizeof uri, k, srv->port, extra);
	else
		uri_of(uri, sizeof uri, k, srv->port, extra);
	if (drl_store_open(&s, uri, &e) ||
	    drl_limiter_new(l, s, spec, prefix, &e))
		fail_msg("%s: %s", uri, e.message);
	return s;
}

/* ---- a multi-threaded run through a fault -------------------------------- */

typedef struct tally {
	long calls;
	long errors[16];       /* by -rc */
	long paths[4];         /* by result.path, calls that returned 0 */
	long allowed[4];       /* of those, allowed */
	long allowed_on_error; /* must stay 0 */
	int64_t max_us;        /* slowest call */
	char odd[DRL_ERROR_MESSAGE_MAX]; /* an error of another kind */
} tally;

typedef struct worker_arg {
	drl_limiter *lim;
	atomic_int *stop;
	tally t;
} worker_arg;

static void record(tally *t, int rc, const drl_result *r, const drl_error *e,
		   int64_t us)
{
	t->calls++;
	if (us > t->max_us)
		t->max_us = us;
	if (rc && !unreachable_rc(rc))
		snprintf(t->odd, sizeof t->odd, "%s: %.200s", drl_err_name(rc),
			 e->message);
	if (rc) {
		t->errors[-rc < 16 ? -rc : 0]++;
		t->allowed_on_error += r->allowed != 0;
		return;
	}
	t->paths[r->path & 3]++;
	t->allowed[r->path & 3] += r->allowed != 0;
}

static void *worker(void *p)
{
	worker_arg *w = p;
	while (!atomic_load(w->stop) && w->t.calls < CALLS_MAX) {
		drl_result r;
		drl_error e = {0};
		int64_t t0 = tu_mono_us();
		int rc = drl_allow(w->lim, "k", 1, 1, &r, &e);
		record(&w->t, rc, &r, &e, tu_mono_us() - t0);
		usleep(300); /* a client, not a spin loop */
	}
	return NULL;
}

/* THREADS workers deciding on one limiter until workers_stop(). */
typedef struct workers {
	pthread_t th[THREADS];
	worker_arg w[THREADS];
	atomic_int stop;
} workers;

static void workers_start(workers *ws, drl_limiter *l)
{
	atomic_init(&ws->stop, 0);
	for (int i = 0; i < THREADS; i++) {
		ws->w[i] = (worker_arg){.lim = l, .stop = &ws->stop};
		assert_int_equal(
			pthread_create(&ws->th[i], NULL, worker, &ws->w[i]), 0);
	}
}

/* Add x's counts into t. */
static void tally_add(tally *t, const tally *x)
{
	t->calls += x->calls;
	for (int j = 0; j < 16; j++)
		t->errors[j] += x->errors[j];
	for (int j = 0; j < 4; j++) {
		t->paths[j] += x->paths[j];
		t->allowed[j] += x->allowed[j];
	}
	t->allowed_on_error += x->allowed_on_error;
	if (x->max_us > t->max_us)
		t->max_us = x->max_us;
}

/* Stop and join the workers; their tallies summed (an odd error of any
 * of them is printed). */
static tally workers_stop(workers *ws)
{
	tally t = {0};
	atomic_store(&ws->stop, 1);
	for (int i = 0; i < THREADS; i++) {
		const tally *x = &ws->w[i].t;
		pthread_join(ws->th[i], NULL);
		tally_add(&t, x);
		if (x->odd[0])
			print_message("thread %d: %s\n", i, x->odd);
	}
	return t;
}

/* While the server is out (the breaker has opened), the test thread asks
 * for the workers' key itself: once, which must end on the policy's path
 * (an error, fail closed, fail open), or, for on_error=local, until the
 * local limit denies one (one bucket of LIMIT per process: at most
 * LIMIT + 1 calls). So what the policy is judged by happens whatever
 * number of calls the workers managed in the outage (a busy machine may
 * give them only a few). */
static void ask_in_outage(drl_limiter *l, int policy, tally *t)
{
	for (int i = 0; i <= (policy == LOCAL ? LIMIT : 0); i++) {
		drl_result r;
		drl_error e = {0};
		int64_t t0 = tu_mono_us();
		int rc = drl_allow(l, "k", 1, 1, &r, &e);
		record(t, rc, &r, &e, tu_mono_us() - t0);
		if (rc == 0 && r.path == DRL_PATH_LOCAL && !r.allowed)
			return;
	}
}

/* Ask until the store decides again (bounded): the breaker closed. The
 * ms it took, or -1 after tu_bound_ms(2000) (the caller asserts once its
 * threads are joined: a failed assertion must not leave them running). */
static int64_t wait_store_path(drl_limiter *l)
{
	int64_t t0 = tu_mono_us();
	while (tu_mono_us() - t0 < tu_bound_ms(2000) * 1000) {
		drl_result r;
		drl_error e = {0};
		if (drl_allow(l, "probe", 5, 0, &r, &e) == 0 &&
		    r.path == DRL_PATH_STORE)
			return (tu_mono_us() - t0) / 1000;
		tu_sleep_ms(10);
	}
	return -1;
}

/* After recovery: THREADS threads on a fresh hot key at one instant;
 * exactly LIMIT allowed, every decision by the store. */
typedef struct exact_arg {
	drl_limiter *lim;
	int64_t now;
	int allowed, not_store, errors;
} exact_arg;

static void *exact_worker(void *p)
{
	exact_arg *a = p;
	for (int i = 0; i < LIMIT; i++) {
		drl_result r;
		drl_error e = {0};
		if (drl_allow_at(a->lim, "after", 5, 1, a->now, &r, &e))
			a->errors++;
		else if (r.path != DRL_PATH_STORE)
			a->not_store++;
		else
			a->allowed += r.allowed;
	}
	return NULL;
}

static void assert_exact_again(drl_limiter *l)
{
	pthread_t th[THREADS];
	exact_arg a[THREADS];
	int allowed = 0, not_store = 0, errors = 0;
	int64_t now = drl_now_us();
	for (int i = 0; i < THREADS; i++) {
		a[i] = (exact_arg){.lim = l, .now = now};
		assert_int_equal(
			pthread_create(&th[i], NULL, exact_worker, &a[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		allowed += a[i].allowed;
		not_store += a[i].not_store;
		errors += a[i].errors;
	}
	assert_int_equal(errors, 0);
	assert_int_equal(not_store, 0);
	assert_int_equal(allowed, LIMIT);
}

typedef struct fault_case {
	store_kind kind;
	fault fault;
	int policy;
} fault_case;

static void run_fault(void **state)
{
	const fault_case *fc = *state;
	drl_server srv;
	char spec[96];
	drl_limiter *l;
	snprintf(spec, sizeof spec, "token_bucket:%d/1h%s", LIMIT,
		 policies[fc->policy]);
	drl_store *s = serve(&srv, fc->kind, false, "", spec, "faults:", &l);

	workers ws;
	workers_start(&ws, l);
	tu_sleep_ms(150);
	/* The outage lasts its length and until the breaker has opened (how
	 * many calls fail in a fixed time depends on how the machine
	 * schedules the workers; the breaker opening is the event). */
	int fault_rc;
	bool opened;
	tally own = {0}; /* the test thread's calls in the outage */
	if (fc->fault == PAUSE) {
		fault_rc = drl_fixture_pause(&srv);
		tu_sleep_ms(1000);
		opened = TU_WAIT_FOR(tu_stats(s).breaker_opens >= 1,
				     tu_bound_ms(5000));
		ask_in_outage(l, fc->policy, &own);
		fault_rc |= drl_fixture_resume(&srv);
	} else {
		drl_fixture_kill(&srv);
		tu_sleep_ms(500);
		opened = TU_WAIT_FOR(tu_stats(s).breaker_opens >= 1,
				     tu_bound_ms(5000));
		ask_in_outage(l, fc->policy, &own);
		fault_rc = drl_fixture_restart(&srv);
	}
	int64_t back_ms = fault_rc ? -1 : wait_store_path(l);
	tu_sleep_ms(200); /* the workers use up connections the fault broke */
	tally t = workers_stop(&ws);
	tally_add(&t, &own);
	if (own.odd[0])
		print_message("test thread: %s\n", own.odd);
	drl_store_stats st;
	drl_store_stats_get(s, &st);
	long errors = 0;
	for (int j = 0; j < 16; j++)
		errors += t.errors[j];
	print_message("%ld calls, slowest %" PRId64 " ms, back %" PRId64
		      " ms after; errors %ld (unavailable %ld, timed out "
		      "%ld); store %ld (%ld allowed), local %ld (%ld), fail "
		      "open %ld, fail closed %ld; breaker opened %" PRIu64
		      ", refused %" PRIu64 "\n",
		      t.calls, t.max_us / 1000, back_ms, errors,
		      t.errors[-DRL_EUNAVAILABLE], t.errors[-DRL_ETIMEDOUT],
		      t.paths[DRL_PATH_STORE], t.allowed[DRL_PATH_STORE],
		      t.paths[DRL_PATH_LOCAL], t.allowed[DRL_PATH_LOCAL],
		      t.paths[DRL_PATH_FAIL_OPEN],
		      t.paths[DRL_PATH_FAIL_CLOSED], st.breaker_opens,
		      st.breaker_rejects);

	assert_int_equal(fault_rc, 0);
	assert_true(back_ms >= 0); /* the store decides again */
	/* No hang. */
	assert_true(t.max_us / 1000 <= CALL_BOUND_MS);
	/* Never an allow with an error. */
	assert_int_equal(t.allowed_on_error, 0);
	/* The store path: one bucket of LIMIT (two when a kill lost the
	 * state once). */
	assert_true(t.allowed[DRL_PATH_STORE] <=
		    (fc->fault == KILL ? 2 * LIMIT : LIMIT));
	/* The breaker saw the outage. */
	assert_true(opened);
	assert_true(st.breaker_opens >= 1);
	assert_true(st.breaker_rejects >= 1);
	assert_true(st.store_failures >= 1);

	switch (fc->policy) {
	case NONE:
		assert_true(errors > 0);
		assert_int_equal(errors, t.errors[-DRL_EUNAVAILABLE] +
						 t.errors[-DRL_ETIMEDOUT]);
		assert_int_equal(t.calls - errors, t.paths[DRL_PATH_STORE]);
		assert_int_equal(st.fallbacks, 0);
		break;
	case DENY:
		assert_int_equal(errors, 0);
		assert_true(t.paths[DRL_PATH_FAIL_CLOSED] > 0);
		assert_int_equal(t.allowed[DRL_PATH_FAIL_CLOSED], 0);
		/* (and wait_store_path's peeks: the same limiter) */
		assert_true(t.paths[DRL_PATH_FAIL_CLOSED] <=
			    (long)st.fallbacks);
		break;
	case ALLOW:
		assert_int_equal(errors, 0);
		assert_true(t.paths[DRL_PATH_FAIL_OPEN] > 0);
		assert_int_equal(t.allowed[DRL_PATH_FAIL_OPEN],
				 t.paths[DRL_PATH_FAIL_OPEN]);
		break;
	case LOCAL:
		assert_int_equal(errors, 0);
		assert_true(t.paths[DRL_PATH_LOCAL] > 0);
		/* The local limit is a limit: one bucket of LIMIT in this
		 * process, whatever the number of calls; the test thread's
		 * own calls went on until it denied one. */
		assert_true(t.allowed[DRL_PATH_LOCAL] <= LIMIT);
		assert_true(t.paths[DRL_PATH_LOCAL] >
			    t.allowed[DRL_PATH_LOCAL]);
		break;
	}
	if (fc->policy != LOCAL)
		assert_int_equal(t.paths[DRL_PATH_LOCAL], 0);
	if (fc->policy != ALLOW)
		assert_int_equal(t.paths[DRL_PATH_FAIL_OPEN], 0);
	if (fc->policy != DENY)
		assert_int_equal(t.paths[DRL_PATH_FAIL_CLOSED], 0);

	assert_exact_again(l);
	drl_limiter_free(l);
	drl_store_free(s);
	drl_fixture_stop(&srv);
}

/* ---- the breaker against a dead server ------------------------------------ */

/* Threads hammer a server that is gone (connection refused) for a second:
 * with the breaker, a few calls reach the network (the failures that open
 * it and one probe per open period); without it (breaker_failures=0)
 * every call does. */
static long dead_server_attempts(store_kind k, const char *extra, long *calls,
				 int64_t *window_ms)
{
	drl_server srv;
	drl_limiter *l;
	drl_store *s =
		serve(&srv, k, false, extra, "fixed_window:10/1s", NULL, &l);
	drl_fixture_kill(&srv);
	workers ws;
	int64_t t0 = tu_mono_us();
	workers_start(&ws, l);
	tu_sleep_ms(1000);
	tally t = workers_stop(&ws);
	*window_ms = (tu_mono_us() - t0) / 1000;
	*calls = t.calls;
	assert_int_equal(t.allowed_on_error, 0);
	drl_store_stats st;
	drl_store_stats_get(s, &st);
	assert_int_equal(st.store_failures + st.breaker_rejects,
			 (uint64_t)*calls);
	drl_limiter_free(l);
	drl_store_free(s);
	drl_fixture_stop(&srv);
	return (long)st.store_failures;
}

static void test_breaker_spares_dead_server(void **state)
{
	store_kind k = *(store_kind *)*state;
	long calls_on, calls_off;
	int64_t window_ms, ignored;
	long sent_on = dead_server_attempts(k, "", &calls_on, &window_ms);
	long sent_off = dead_server_attempts(k, "&breaker_failures=0",
					     &calls_off, &ignored);
	print_message("%" PRId64 " ms on a dead server: with the breaker %ld "
		      "of %ld calls sent, without %ld of %ld\n",
		      window_ms, sent_on, calls_on, sent_off, calls_off);
	/* 5 to open, a probe per open period (50, 100, 200, then 400 ms
	 * each: at most 4 + window/400 + 1 in the window measured), plus
	 * calls in flight when it opened. */
	assert_true(sent_on <= 5 + 5 + window_ms / 400 + THREADS);
	assert_true(calls_on > 4 * sent_on);
	assert_int_equal(sent_off, calls_off);
}

/* A memcached pool of two with one killed: no store-wide breaker by
 * default, so the live server's keys are all decided by the store (none
 * refused), and only the dead server's keys fail. */
static void test_pool_keeps_live_server(void **state)
{
	(void)state;
	drl_server a, b;
	char uri[256];
	drl_store *s;
	drl_limiter *l;
	drl_error e = {0};
	start(&a, MEMCACHED);
	start(&b, MEMCACHED);
	snprintf(uri, sizeof uri,
		 "memcached://127.0.0.1:%d,127.0.0.1:%d?timeout_ms=%d", a.port,
		 b.port, TIMEOUT_MS);
	if (drl_store_open(&s, uri, &e) ||
	    drl_limiter_new(&l, s, "fixed_window:1000000/1h", NULL, &e))
		fail_msg("%s", e.message);
	drl_fixture_kill(&b);
	long ok = 0, failed = 0;
	for (int i = 0; i < 2000; i++) {
		char key[16];
		drl_result r;
		snprintf(key, sizeof key, "k%d", i % 64);
		int rc = drl_allow(l, key, strlen(key), 1, &r, &e);
		if (rc == 0) {
			assert_int_equal(r.path, DRL_PATH_STORE);
			ok++;
		} else {
			assert_true(unreachable_rc(rc));
			failed++;
		}
	}
	drl_store_stats st;
	drl_store_stats_get(s, &st);
	print_message("pool of 2, one dead: %ld decided, %ld failed, %" PRIu64
		      " refused by a breaker\n",
		      ok, failed, st.breaker_rejects);
	assert_int_equal(st.breaker_rejects, 0);
	assert_true(ok > 0 && failed > 0);
	drl_limiter_free(l);
	drl_store_free(s);
	drl_fixture_stop(&a);
	drl_fixture_stop(&b);
}

/* A process that starts while its server is down: connect=eager (the
 * default) fails the open; connect=lazy opens, the policy decides until
 * the server is there, then the store does. */
static void test_lazy_open_while_down(void **state)
{
	store_kind k = *(store_kind *)*state;
	drl_server srv;
	char uri[256];
	drl_store *s = (drl_store *)&s;
	drl_limiter *l;
	drl_error e = {0};
	drl_result r;
	start(&srv, k);
	drl_fixture_kill(&srv);
	uri_of(uri, sizeof uri, k, srv.port, "");
	int rc = drl_store_open(&s, uri, &e);
	assert_true(unreachable_rc(rc));
	assert_null(s);
	uri_patient(uri, sizeof uri, k, srv.port, "&connect=lazy");
	if (drl_store_open(&s, uri, &e) ||
	    drl_limiter_new(&l, s, "fixed_window:3/1h;on_error=local", NULL,
			    &e))
		fail_msg("%s: %s", uri, e.message);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(drl_allow(l, "z", 1, 1, &r, &e), 0);
		assert_int_equal(r.path, DRL_PATH_LOCAL);
		assert_int_equal(r.allowed, i < 3);
	}
	assert_int_equal(drl_fixture_restart(&srv), 0);
	assert_true(wait_store_path(l) >= 0);
	assert_int_equal(admitted(l, "fresh", 5, drl_now_us()), 3);
	drl_limiter_free(l);
	drl_store_free(s);
	drl_fixture_stop(&srv);
}

/* After a Redis restart the pool's idle connections are dead; they are
 * found out without a call failing (an idle socket that turned readable
 * is the server's close), so the first decisions after the restart all
 * succeed. */
static void test_restart_replaces_stale_connections(void **state)
{
	(void)state;
	drl_server srv;
	drl_limiter *l;
	drl_store *s = serve(&srv, REDIS_LUA, true, "",
			     "fixed_window:1000000/1h", NULL, &l);
	drl_error e = {0};
	/* Several threads at once: several pooled connections. */
	workers ws;
	workers_start(&ws, l);
	tu_sleep_ms(100);
	(void)workers_stop(&ws);
	drl_store_stats before;
	drl_store_stats_get(s, &before);
	assert_int_equal(before.store_failures, 0);

	assert_int_equal(drl_fixture_restart(&srv), 0);
	tu_sleep_ms(50); /* the pool's connections have been idle a while */
	for (int i = 0; i < 20; i++) {
		drl_result r;
		int rc = drl_allow(l, "k", 1, 1, &r, &e);
		if (rc)
			fail_msg("call %d after the restart: %s", i, e.message);
		assert_int_equal(r.path, DRL_PATH_STORE);
	}
	drl_store_stats after;
	drl_store_stats_get(s, &after);
	assert_int_equal(after.store_failures, 0);
	drl_limiter_free(l);
	drl_store_free(s);
	drl_fixture_stop(&srv);
}

/* ---- server faults with the server up (Redis) ---------------------------- */

static redisContext *raw_connect(int port)
{
	redisContext *c = redisConnect("127.0.0.1", port);
	assert_non_null(c);
	assert_int_equal(c->err, 0);
	return c;
}

static void raw_ok(redisContext *c, const char *cmd)
{
	redisReply *r = redisCommand(c, cmd);
	assert_non_null(r);
	if (r->type == REDIS_REPLY_ERROR)
		fail_msg("%s: %s", cmd, r->str);
	freeReplyObject(r);
}

static int admitted(drl_limiter *l, const char *key, int n, int64_t now)
{
	int allowed = 0;
	for (int i = 0; i < n; i++) {
		drl_result r;
		drl_error e = {0};
		int rc = drl_allow_at(l, key, strlen(key), 1, now, &r, &e);
		if (rc)
			fail_msg("%s: %s", drl_err_name(rc), e.message);
		assert_int_equal(r.path, DRL_PATH_STORE);
		allowed += r.allowed;
	}
	return allowed;
}

/* FLUSHALL loses every limit's state: the limit starts over, exactly. */
static void test_flushall_starts_over(void **state)
{
	store_kind k = *(store_kind *)*state;
	drl_server srv;
	drl_limiter *l;
	drl_store *s = serve(&srv, k, true, "",
			     "sliding_window:10/1h;on_error=deny", NULL, &l);
	redisContext *raw = raw_connect(srv.port);
	int64_t now = drl_now_us();
	assert_int_equal(admitted(l, "f", 15, now), 10);
	raw_ok(raw, "FLUSHALL");
	assert_int_equal(admitted(l, "f", 15, now), 10);
	redisFree(raw);
	drl_limiter_free(l);
	drl_store_free(s);
	drl_fixture_stop(&srv);
}

/* A decision with its path and rc. */
static int decide(drl_limiter *l, const char *key, drl_result *r)
{
	drl_error e = {0};
	int rc = drl_allow(l, key, strlen(key), 1, r, &e);
	if (rc)
		assert_true(e.message[0] != '\0');
	return rc;
}

/* OOM replies (maxmemory 1, noeviction) and a key of another type are the
 * server answering with an error: DRL_ESTORE, which the policies handle,
 * but which never opens the breaker (the server is there). */
static void test_error_replies(void **state)
{
	store_kind k = *(store_kind *)*state;
	drl_server srv;
	drl_limiter *none;
	drl_store *s = serve(&srv, k, true, "", "gcra:5/1s", "p:", &none);
	drl_limiter *deny = tu_limiter(s, "gcra:5/1s;on_error=deny", "p:");
	drl_limiter *allow = tu_limiter(s, "gcra:5/1s;on_error=allow", "p:");
	drl_result r;
	redisContext *raw = raw_connect(srv.port);

	raw_ok(raw, "CONFIG SET maxmemory-policy noeviction");
	raw_ok(raw, "CONFIG SET maxmemory 1");
	for (int i = 0; i < 10; i++) {
		assert_int_equal(decide(none, "oom", &r), DRL_ESTORE);
		assert_int_equal(r.allowed, 0);
		assert_int_equal(decide(deny, "oom", &r), 0);
		assert_int_equal(r.path, DRL_PATH_FAIL_CLOSED);
		assert_int_equal(r.allowed, 0);
		assert_int_equal(decide(allow, "oom", &r), 0);
		assert_int_equal(r.path, DRL_PATH_FAIL_OPEN);
		assert_int_equal(r.allowed, 1);
	}
	raw_ok(raw, "CONFIG SET maxmemory 0");
	assert_int_equal(decide(none, "oom", &r), 0);
	assert_int_equal(r.path, DRL_PATH_STORE);
	assert_int_equal(r.allowed, 1);

	/* Every key this limiter writes for "wt" is taken by a list. */
	assert_int_equal(decide(none, "wt", &r), 0);
	redisReply *keys = redisCommand(raw, "KEYS p:*wt*");
	assert_non_null(keys);
	assert_int_equal(keys->type, REDIS_REPLY_ARRAY);
	assert_true(keys->elements >= 1);
	for (size_t i = 0; i < keys->elements; i++) {
		const char *argv[2] = {"DEL", keys->element[i]->str};
		size_t lens[2] = {3, keys->element[i]->len};
		freeReplyObject(redisCommandArgv(raw, 2, argv, lens));
		const char *push[3] = {"RPUSH", keys->element[i]->str, "x"};
		size_t plens[3] = {5, keys->element[i]->len, 1};
		freeReplyObject(redisCommandArgv(raw, 3, push, plens));
	}
	freeReplyObject(keys);
	assert_int_equal(decide(none, "wt", &r), DRL_ESTORE);
	assert_int_equal(r.allowed, 0);
	assert_int_equal(decide(deny, "wt", &r), 0);
	assert_int_equal(r.path, DRL_PATH_FAIL_CLOSED);

	drl_store_stats st;
	drl_store_stats_get(s, &st);
	assert_int_equal(st.breaker_opens, 0);
	assert_int_equal(st.breaker_rejects, 0);
	assert_true(st.store_failures >= 30);
	redisFree(raw);
	drl_limiter_free(none);
	drl_limiter_free(deny);
	drl_limiter_free(allow);
	drl_store_free(s);
	drl_fixture_stop(&srv);
}

/* ---- main ------------------------------------------------------------------ */

static fault_case cases[3 * 2 * 4];
static store_kind kinds[3] = {REDIS_LUA, REDIS_WATCH, MEMCACHED};

int main(void)
{
	static const char *const kind_names[] = {"redis_lua", "redis_watch",
						 "memcached"};
	static const char *const fault_names[] = {"pause", "kill"};
	static const char *const policy_names[] = {"none", "deny", "allow",
						   "local"};
	static char names[40][64];
	struct CMUnitTest tests[3 * 2 * 4 + 3 + 2 + 2 + 1 + 2 + 1];
	size_t n = 0;
	for (int k = 0; k < 3; k++)
		for (int f = 0; f < 2; f++)
			for (int p = 0; p < 4; p++) {
				fault_case *fc = &cases[n];
				*fc = (fault_case){(store_kind)k, (fault)f, p};
				snprintf(names[n], sizeof names[n],
					 "%s_%s_on_error_%s", kind_names[k],
					 fault_names[f], policy_names[p]);
				tests[n] = (struct CMUnitTest){
					names[n], run_fault, NULL, NULL, fc};
				n++;
			}
	for (int k = 0; k < 3; k++) {
		snprintf(names[n], sizeof names[n], "%s_breaker_spares_dead",
			 kind_names[k]);
		tests[n] = (struct CMUnitTest){names[n],
					       test_breaker_spares_dead_server,
					       NULL, NULL, &kinds[k]};
		n++;
	}
	tests[n++] = (struct CMUnitTest){
		"redis_restart_replaces_stale_connections",
		test_restart_replaces_stale_connections, NULL, NULL, NULL};
	tests[n++] = (struct CMUnitTest){"redis_lazy_open_while_down",
					 test_lazy_open_while_down, NULL, NULL,
					 &kinds[REDIS_LUA]};
	tests[n++] = (struct CMUnitTest){"memcached_lazy_open_while_down",
					 test_lazy_open_while_down, NULL, NULL,
					 &kinds[MEMCACHED]};
	tests[n++] = (struct CMUnitTest){"memcached_pool_keeps_live_server",
					 test_pool_keeps_live_server, NULL,
					 NULL, NULL};
	for (int k = 0; k < 2; k++) {
		snprintf(names[n], sizeof names[n], "%s_flushall_starts_over",
			 kind_names[k]);
		tests[n] =
			(struct CMUnitTest){names[n], test_flushall_starts_over,
					    NULL, NULL, &kinds[k]};
		n++;
		snprintf(names[n], sizeof names[n], "%s_error_replies",
			 kind_names[k]);
		tests[n] = (struct CMUnitTest){names[n], test_error_replies,
					       NULL, NULL, &kinds[k]};
		n++;
	}
	return _cmocka_run_group_tests("faults", tests, n, NULL, NULL);
}
