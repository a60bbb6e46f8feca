/* The cross-process hot-key test (hot_key.h). */
#include "hot_key.h"
#include "testutil.h"

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct job {
	drl_limiter *lim;
	int64_t now;
	int allowed, errors;
	char last_error[DRL_ERROR_MESSAGE_MAX];
} job;

static void *worker(void *arg)
{
	job *j = arg;
	for (int i = 0; i < HOT_CALLS; i++) {
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

/* One child process: its own store, HOT_THREADS threads; writes allowed and
 * errors to fd. */
static void child(int fd, const char *uri, const char *spec, const char *prefix,
		  int64_t now)
{
	drl_store *s;
	drl_limiter *l;
	drl_error err = {0};
	int out[2] = {0, HOT_CALLS * HOT_THREADS};
	if (drl_store_open(&s, uri, &err) ||
	    drl_limiter_new(&l, s, spec, prefix, &err)) {
		fprintf(stderr, "child: %s\n", err.message);
		(void)!write(fd, out, sizeof out);
		_exit(1);
	}
	pthread_t th[HOT_THREADS];
	job jobs[HOT_THREADS];
	for (int i = 0; i < HOT_THREADS; i++) {
		jobs[i] = (job){.lim = l, .now = now};
		pthread_create(&th[i], NULL, worker, &jobs[i]);
	}
	out[1] = 0;
	for (int i = 0; i < HOT_THREADS; i++) {
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

void hot_key_run(const char *uri, const char *spec, int n)
{
	static int
		run; /* a fresh prefix per run: no state shared between runs */
	char prefix[64];
	snprintf(prefix, sizeof prefix, "xp%d:%d:", run++, (int)getpid());
	int64_t now = INT64_C(1700000000000000) + n * 7919;
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	fflush(NULL);
	pid_t kids[HOT_PROCS];
	for (int p = 0; p < HOT_PROCS; p++) {
		pid_t pid = kids[p] = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			close(fds[0]);
			child(fds[1], uri, spec, prefix, now);
		}
	}
	close(fds[1]);
	int allowed = 0, errors = 0;
	for (int p = 0; p < HOT_PROCS; p++) {
		int in[2];
		assert_int_equal(read(fds[0], in, sizeof in), (int)sizeof in);
		allowed += in[0];
		errors += in[1];
	}
	close(fds[0]);
	for (int p = 0; p < HOT_PROCS;
	     p++) /* not wait(): servers are kids too */
		waitpid(kids[p], NULL, 0);
	printf("  %-40s %-60s allowed %d of %d, errors %d\n", spec, uri,
	       allowed, HOT_PROCS * HOT_THREADS * HOT_CALLS, errors);
	if (allowed != HOT_LIMIT)
		fail_msg("%s on %s: %d allowed, limit %d (%d errors)", spec,
			 uri, allowed, HOT_LIMIT, errors);
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

void hot_key_all_specs(const char *uri)
{
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
		hot_key_run(uri, specs[i], (int)i);
}
