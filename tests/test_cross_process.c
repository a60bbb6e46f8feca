/*
 * Cross-process exactness on one hot key: several processes, each with
 * several threads and its own store connections, ask at one fixed instant;
 * the total allowed must equal the limit exactly — for every algorithm on
 * Redis (tx=lua and tx=watch) and on memcached. Real servers, started here.
 */
#include "server_fixture.h"
#include "testutil.h"

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

enum { PROCS = 3, THREADS = 4, CALLS = 60, LIMIT = 200 };

static drl_server redis_srv, mc_srv;
static int have_redis, have_mc;

typedef struct job {
	drl_limiter *lim;
	int64_t now;
	int allowed, errors;
	char last_error[DRL_ERROR_MESSAGE_MAX];
} job;

static void *worker(void *arg)
{
	job *j = arg;
	for (int i = 0; i < CALLS; i++) {
		drl_result r;
		drl_error err = {0};
		if (drl_allow_at(j->lim, "hot key", 7, 1, j->now, &r, &err)) {
			j->errors++;
			memcpy(j->last_error, err.message, sizeof err.message);
		} else if (r.allowed) {
			j->allowed++;
		}
	}
	return NULL;
}

/* One child process: its own store, THREADS threads; writes allowed and
 * errors to fd. */
static void child(int fd, const char *uri, const char *spec, const char *prefix,
		  int64_t now)
{
	drl_store *s;
	drl_limiter *l;
	drl_error err = {0};
	int out[2] = {0, CALLS * THREADS};
	if (drl_store_open(&s, uri, &err) ||
	    drl_limiter_new(&l, s, spec, prefix, &err)) {
		fprintf(stderr, "child: %s\n", err.message);
		(void)!write(fd, out, sizeof out);
		_exit(1);
	}
	pthread_t th[THREADS];
	job jobs[THREADS];
	for (int i = 0; i < THREADS; i++) {
		jobs[i] = (job){.lim = l, .now = now};
		pthread_create(&th[i], NULL, worker, &jobs[i]);
	}
	out[1] = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		out[0] += jobs[i].allowed;
		out[1] += jobs[i].errors;
		if (jobs[i].errors)
			fprintf(stderr, "child: %d errors, last: %s\n",
				jobs[i].errors, jobs[i].last_error);
	}
	(void)!write(fd, out, sizeof out);
	drl_limiter_free(l);
	drl_store_free(s);
	_exit(0);
}

static void hammer(const char *uri, const char *spec, int n)
{
	static int
		run; /* a fresh prefix per run: no state shared between runs */
	char prefix[64];
	snprintf(prefix, sizeof prefix, "xp%d:%d:", run++, (int)getpid());
	int64_t now = INT64_C(1700000000000000) + n * 7919;
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	fflush(NULL);
	pid_t kids[PROCS];
	for (int p = 0; p < PROCS; p++) {
		pid_t pid = kids[p] = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			close(fds[0]);
			child(fds[1], uri, spec, prefix, now);
		}
	}
	close(fds[1]);
	int allowed = 0, errors = 0;
	for (int p = 0; p < PROCS; p++) {
		int in[2];
		assert_int_equal(read(fds[0], in, sizeof in), (int)sizeof in);
		allowed += in[0];
		errors += in[1];
	}
	close(fds[0]);
	for (int p = 0; p < PROCS; p++) /* not wait(): servers are kids too */
		waitpid(kids[p], NULL, 0);
	printf("  %-40s %-60s allowed %d of %d, errors %d\n", spec, uri,
	       allowed, PROCS * THREADS * CALLS, errors);
	if (allowed != LIMIT)
		fail_msg("%s on %s: %d allowed, limit %d (%d errors)", spec,
			 uri, allowed, LIMIT, errors);
}

static const char *const specs[] = {
	"fixed_window:200/1m",
	"sliding_window:200/1m",
	"subwindow:200/1m,subwindows=6",
	"subwindow:200/1m,subwindows=6,trailing=1",
	"token_bucket:200/1h",
	"gcra:200/1h",
	"sliding_log:200/1m",
	"token_bucket:1000/1h;sliding_window:200/1m",
};

static void all_specs(const char *uri)
{
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
		hammer(uri, specs[i], (int)i);
}

static void test_redis_lua(void **state)
{
	(void)state;
	if (!have_redis)
		skip();
	char uri[128];
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d?tx=lua",
		 redis_srv.port);
	all_specs(uri);
}

static void test_redis_watch(void **state)
{
	(void)state;
	if (!have_redis)
		skip();
	char uri[128];
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d?tx=watch",
		 redis_srv.port);
	all_specs(uri);
}

static void test_memcached(void **state)
{
	(void)state;
	if (!have_mc)
		skip();
	char uri[128];
	snprintf(uri, sizeof uri, "memcached://127.0.0.1:%d", mc_srv.port);
	all_specs(uri);
}

static int setup(void **state)
{
	(void)state;
	int rc = drl_fixture_redis_start(&redis_srv, NULL);
	if (rc < 0)
		return -1;
	have_redis = rc == 0;
	rc = drl_fixture_memcached_start(&mc_srv, NULL);
	if (rc < 0)
		return -1;
	have_mc = rc == 0;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (have_redis)
		drl_fixture_stop(&redis_srv);
	if (have_mc)
		drl_fixture_stop(&mc_srv);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_redis_lua),
		cmocka_unit_test(test_redis_watch),
		cmocka_unit_test(test_memcached),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
