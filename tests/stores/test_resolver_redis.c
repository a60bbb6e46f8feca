/*
 * The resolver's Redis source (drl_resolver_redis_new): specs read from a
 * Redis hash, and a changed row (HSET, then PUBLISH drl:resolver:HASH
 * KEY) obeyed by two processes within a second, though their answers
 * would otherwise be kept for an hour. Waits are for the event, with a
 * deadline that scales with the build (tu_bound_ms).
 */
#include <drl/resolver.h>

#include "server_fixture.h"
#include "testutil.h"

#include <hiredis/hiredis.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static drl_server srv;
static int have_srv;
static char uri[64];

#define NEED_SERVER() DRL_FIXTURE_NEED(have_srv)

#define HOUR (INT64_C(3600) * SEC)
#define DEFAULT "fixed_window:1/1m"

static redisContext *admin(void)
{
	redisContext *c = redisConnect("127.0.0.1", srv.port);
	if (c == NULL || c->err)
		fail_msg("redis: cannot connect");
	return c;
}

static void cmd(redisContext *c, const char *fmt, const char *a, const char *b,
		const char *d)
{
	redisReply *r = redisCommand(c, fmt, a, b, d);
	if (r == NULL || r->type == REDIS_REPLY_ERROR)
		fail_msg("redis: %s failed", fmt);
	freeReplyObject(r);
}

static drl_resolver *open_resolver(const char *hash, const char *def)
{
	drl_resolver_options o = {
		.default_spec = def, .max_keys = 64, .ttl_us = HOUR};
	drl_resolver *r = NULL;
	drl_error err = {0};
	if (drl_resolver_redis_new(&r, uri, hash, &o, &err) != 0)
		return NULL;
	return r;
}

/* Whether key's spec is `want` now. */
static bool is(drl_resolver *r, const char *key, const char *want)
{
	char spec[DRL_RESOLVER_SPEC_MAX + 1];
	return drl_resolver_get(r, key, strlen(key), spec, sizeof spec, NULL,
				NULL) == 0 &&
	       strcmp(spec, want) == 0;
}

/* A child: resolve t1 (2/1m), say ready, wait for the go (the time the
 * row was changed), then wait for t1's new spec; exit 0 when it came
 * within the deadline, writing how long it took (µs) on `out`. */
static void child(int ready, int go, int out)
{
	drl_resolver *r = open_resolver("plans", DEFAULT);
	char c = 'R';
	if (r == NULL || !is(r, "t1", "fixed_window:2/1m"))
		_exit(2);
	if (write(ready, &c, 1) != 1)
		_exit(3);
	int64_t changed;
	if (read(go, &changed, sizeof changed) != sizeof changed)
		_exit(4);
	bool seen = TU_WAIT_FOR(is(r, "t1", "fixed_window:5/1m"),
				tu_bound_ms(1000));
	int64_t took = drl_mono_us() - changed;
	drl_resolver_free(r);
	if (write(out, &took, sizeof took) != sizeof took)
		_exit(5);
	_exit(seen ? 0 : 1);
}

static void two_processes(void **state)
{
	(void)state;
	NEED_SERVER();
	redisContext *c = admin();
	cmd(c, "DEL %s", "plans", NULL, NULL);
	cmd(c, "HSET %s %s %s", "plans", "t1", "fixed_window:2/1m");

	int ready[2], go[2], out[2];
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(out), 0);
	pid_t pid[2];
	for (int i = 0; i < 2; i++) {
		pid[i] = fork();
		assert_true(pid[i] >= 0);
		if (pid[i] == 0) {
			redisFree(c);
			child(ready[1], go[0], out[1]);
		}
	}
	/* both have read the old row and are subscribed */
	char b;
	for (int i = 0; i < 2; i++)
		assert_int_equal(read(ready[0], &b, 1), 1);
	cmd(c, "HSET %s %s %s", "plans", "t1", "fixed_window:5/1m");
	cmd(c, "PUBLISH %s %s", "drl:resolver:plans", "t1", NULL);
	int64_t changed = drl_mono_us();
	for (int i = 0; i < 2; i++)
		assert_int_equal(write(go[1], &changed, sizeof changed),
				 (ssize_t)sizeof changed);
	for (int i = 0; i < 2; i++) {
		int st;
		assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	}
	for (int i = 0; i < 2; i++) {
		int64_t took;
		assert_int_equal(read(out[0], &took, sizeof took),
				 (ssize_t)sizeof took);
		printf("# process %d obeyed the changed row after %lld us\n",
		       i + 1, (long long)took);
	}
	for (int i = 0; i < 2; i++)
		close(ready[i]), close(go[i]), close(out[i]);
	redisFree(c);
}

/* One process: a change not published is not seen (the answer is kept
 * for the TTL); "*" drops every answer; a row deleted and published
 * gives the default; a missing row without a default is DRL_EINVAL. */
static void protocol(void **state)
{
	(void)state;
	NEED_SERVER();
	redisContext *c = admin();
	cmd(c, "DEL %s", "proto", NULL, NULL);
	cmd(c, "HSET %s %s %s", "proto", "a", "sliding_window:10/1m");
	cmd(c, "HSET %s %s %s", "proto", "b", "fixed_window:3/1h");
	drl_resolver *r = open_resolver("proto", DEFAULT);
	assert_non_null(r);
	assert_true(is(r, "a", "sliding_window:10/1m"));
	assert_true(is(r, "b", "fixed_window:3/1h"));
	assert_true(is(r, "nobody", DEFAULT));
	cmd(c, "HSET %s %s %s", "proto", "a", "sliding_window:20/1m");
	cmd(c, "HSET %s %s %s", "proto", "b", "fixed_window:4/1h");
	/* not published: the kept answers stand */
	assert_true(is(r, "a", "sliding_window:10/1m"));
	cmd(c, "PUBLISH %s %s", "drl:resolver:proto", "*", NULL);
	assert_true(TU_WAIT_FOR(is(r, "a", "sliding_window:20/1m"),
				tu_bound_ms(1000)));
	assert_true(is(r, "b", "fixed_window:4/1h"));
	cmd(c, "HDEL %s %s", "proto", "b", NULL);
	cmd(c, "PUBLISH %s %s", "drl:resolver:proto", "b", NULL);
	assert_true(TU_WAIT_FOR(is(r, "b", DEFAULT), tu_bound_ms(1000)));
	int d = 0;
	char spec[64];
	assert_int_equal(
		drl_resolver_get(r, "b", 1, spec, sizeof spec, &d, NULL), 0);
	assert_int_equal(d, 1);
	drl_resolver_free(r);

	r = open_resolver("proto", NULL);
	assert_non_null(r);
	drl_error err = {0};
	assert_int_equal(
		drl_resolver_get(r, "b", 1, spec, sizeof spec, NULL, &err),
		DRL_EINVAL);
	assert_non_null(strstr(err.message, "no spec"));
	assert_true(is(r, "a", "sliding_window:20/1m"));
	drl_resolver_free(r);
	redisFree(c);
}

static void bad_input(void **state)
{
	(void)state;
	NEED_SERVER();
	drl_resolver_options o = {.max_keys = 4, .ttl_us = SEC};
	drl_resolver *r = NULL;
	drl_error err = {0};
	char other[96];

	assert_int_equal(drl_resolver_redis_new(&r, "memory://", "h", &o, &err),
			 DRL_EINVAL);
	assert_int_equal(drl_resolver_redis_new(&r, uri, "", &o, &err),
			 DRL_EINVAL);
	char longhash[64];
	memset(longhash, 'h', sizeof longhash - 1);
	longhash[sizeof longhash - 1] = '\0';
	assert_int_equal(drl_resolver_redis_new(&r, uri, longhash, &o, &err),
			 DRL_EINVAL);
	snprintf(other, sizeof other, "%s?bogus=1", uri);
	assert_int_equal(drl_resolver_redis_new(&r, other, "h", &o, &err),
			 DRL_EINVAL);
	assert_int_equal(drl_resolver_redis_new(&r, uri, NULL, &o, &err),
			 DRL_EINVAL);
	o.ttl_us = 0; /* the cache's own checks */
	assert_int_equal(drl_resolver_redis_new(&r, uri, "h", &o, &err),
			 DRL_EINVAL);
	assert_null(r);
}

static int setup(void **state)
{
	(void)state;
	signal(SIGPIPE, SIG_IGN);
	int rc = drl_fixture_start_redis(&srv, &have_srv);
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d", srv.port);
	return rc;
}

static int teardown(void **state)
{
	(void)state;
	drl_fixture_stop_redis(&srv, have_srv);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(two_processes),
		cmocka_unit_test(protocol),
		cmocka_unit_test(bad_input),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
