/* The cross-process hot-key test (hot_key.h). */
/* POSIX clocks, nanosleep, fork and threads, for a build with -std=c11
 * (-pedantic too) and nothing else defined: docs/stores.md. */
#if !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include "hot_key.h"
#include "testutil.h"

#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* hot_key_set_openers(): what children open the store with. */
static const drl_store_opener *openers;
static size_t nopeners;

void hot_key_set_openers(const drl_store_opener *o, size_t n)
{
	openers = n ? o : NULL;
	nopeners = o ? n : 0;
}

/* 1 when uri's scheme is one of the registered openers'. */
static int registered_scheme(const char *uri)
{
	const char *end = strstr(uri, "://");
	for (size_t i = 0; end && i < nopeners; i++)
		if (openers[i].scheme &&
		    strlen(openers[i].scheme) == (size_t)(end - uri) &&
		    strncmp(openers[i].scheme, uri, (size_t)(end - uri)) == 0)
			return 1;
	return 0;
}

typedef struct job {
	drl_limiter *lim;
	int64_t now; /* -1: the real-time clock (drl_allow) */
	int allowed, errors, near;
	char last_error[DRL_ERROR_MESSAGE_MAX];
} job;

static void *worker(void *arg)
{
	job *j = arg;
	for (int i = 0; i < HOT_CALLS; i++) {
		drl_result r;
		drl_error err = {0};
		int rc = j->now < 0
				 ? drl_allow(j->lim, "hot key", 7, 1, &r, &err)
				 : drl_allow_at(j->lim, "hot key", 7, 1, j->now,
						&r, &err);
		if (rc) {
			j->errors++;
			memcpy(j->last_error, err.message, sizeof err.message);
		} else if (r.allowed) {
			j->allowed++;
		} else if (r.path == DRL_PATH_NEAR) {
			j->near++;
		}
	}
	return NULL;
}

/* What one child process does. */
typedef struct hot_run {
	const char *uri, *spec, *prefix;
	int64_t now;
} hot_run;

/* One child process: its own store, HOT_THREADS threads; counts its
 * allowed decisions, errors and local (near cache) denials. */
static void child(void *arg, int i, hot_key_counts *out)
{
	const hot_run *h = arg;
	drl_store *s;
	drl_limiter *l;
	drl_error err = {0};
	(void)i;
	int rc = nopeners ? drl_store_open_with(&s, h->uri, openers, nopeners,
						&err)
			  : drl_store_open(&s, h->uri, &err);
	if (rc || drl_limiter_new(&l, s, h->spec, h->prefix, &err)) {
		fprintf(stderr, "child: %s\n", err.message);
		out->errors = HOT_CALLS * HOT_THREADS;
		return;
	}
	pthread_t th[HOT_THREADS];
	job jobs[HOT_THREADS];
	for (int t = 0; t < HOT_THREADS; t++) {
		jobs[t] = (job){.lim = l, .now = h->now};
		pthread_create(&th[t], NULL, worker, &jobs[t]);
	}
	for (int t = 0; t < HOT_THREADS; t++) {
		pthread_join(th[t], NULL);
		out->allowed += jobs[t].allowed;
		out->errors += jobs[t].errors;
		out->near += jobs[t].near;
		if (jobs[t].errors)
			fprintf(stderr, "child: %d errors, last: %s\n",
				jobs[t].errors, jobs[t].last_error);
	}
	drl_limiter_free(l);
	drl_store_free(s);
}

hot_key_counts hot_key_fork(int procs,
			    void (*body)(void *arg, int i, hot_key_counts *out),
			    void *arg)
{
	enum { PROCS_MAX = 16 };
	int fds[2];
	assert_true(procs >= 1 && procs <= PROCS_MAX);
	assert_int_equal(pipe(fds), 0);
	fflush(NULL);
	pid_t kids[PROCS_MAX];
	for (int p = 0; p < procs; p++) {
		pid_t pid = kids[p] = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			hot_key_counts c = {0};
			close(fds[0]);
			body(arg, p, &c);
			fflush(NULL);
			_exit(write(fds[1], &c, sizeof c) == (ssize_t)sizeof c
				      ? 0
				      : 1);
		}
	}
	close(fds[1]);
	hot_key_counts sum = {0}, in;
	int reports = 0;
	/* Each report is one write below PIPE_BUF: never torn. */
	while (read(fds[0], &in, sizeof in) == (ssize_t)sizeof in) {
		reports++; /* in.lost, .signal, .status: 0 */
		sum.allowed += in.allowed;
		sum.errors += in.errors;
		sum.near += in.near;
	}
	close(fds[0]);
	for (int p = 0; p < procs; p++) { /* not wait(): servers are kids */
		int st = 0;
		if (waitpid(kids[p], &st, 0) != kids[p] || WIFSIGNALED(st))
			sum.signal = WIFSIGNALED(st) ? WTERMSIG(st) : -1;
		else if (WEXITSTATUS(st) != 0)
			sum.status = WEXITSTATUS(st);
	}
	sum.lost = procs - reports;
	return sum;
}

void hot_key_run(const char *uri, const char *spec, int n)
{
	hot_key_run_opts(uri, spec, n, NULL);
}

int hot_key_run_opts(const char *uri_, const char *spec_, int n,
		     const hot_key_opts *o)
{
	static int
		run; /* a fresh prefix per run: no state shared between runs */
	static const hot_key_opts none = {0};
	char prefix[64], spec[256];
	if (o == NULL)
		o = &none;
	snprintf(prefix, sizeof prefix, "xp%d:%d:", run++, (int)getpid());
	/* A store timeout that a slow machine (valgrind, a busy core) does
	 * not reach: an error would make the count fall short, and this
	 * test is about admissions, not deadlines. */
	char uri[512];
	if (strncmp(uri_, "memory:", 7) == 0 || strstr(uri_, "timeout_ms=") ||
	    registered_scheme(uri_))
		snprintf(uri, sizeof uri, "%s", uri_);
	else
		snprintf(uri, sizeof uri, "%s%stimeout_ms=%lld", uri_,
			 strchr(uri_, '?') ? "&" : "?",
			 (long long)tu_bound_ms(1000));
	snprintf(spec, sizeof spec, "%s%s%s", spec_, o->options ? ";" : "",
		 o->options ? o->options : "");
	int64_t now = INT64_C(1700000000000000) + n * 7919;
	int64_t edge = HOT_DAY_EDGE_US, t0 = drl_now_us();
	if (o->real_clock)
		now = -1;
	hot_run h = {.uri = uri, .spec = spec, .prefix = prefix, .now = now};
	hot_key_counts c = hot_key_fork(HOT_PROCS, child, &h);
	if (c.lost || c.status)
		fail_msg("%s on %s: %d of %d processes reported nothing "
			 "(signal %d), exit status %d",
			 spec, uri, c.lost, HOT_PROCS, c.signal, c.status);
	int allowed = c.allowed, errors = c.errors, near = c.near;
	int calls = HOT_PROCS * HOT_THREADS * HOT_CALLS;
	if (o->real_clock && t0 / edge != drl_now_us() / edge)
		return 1;
	printf("  %-40s %-60s allowed %d of %d, errors %d", spec, uri, allowed,
	       calls, errors);
	if (o->options)
		printf(", local %d%s", near,
		       o->real_clock ? " (real clock)" : "");
	printf("\n");
	if (allowed != HOT_LIMIT)
		fail_msg("%s on %s: %d allowed, limit %d (%d errors)", spec,
			 uri, allowed, HOT_LIMIT, errors);
	if (near * 100 < o->min_near_pct * calls)
		fail_msg("%s on %s: %d of %d decisions local, expected %d%%",
			 spec, uri, near, calls, o->min_near_pct);
	return 0;
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

/* The same for the real-time clock: windows that do not roll (except at
 * a sub-window edge, HOT_DAY_EDGE_US apart) and buckets that refill one
 * token every 7 minutes. */
const char *const hot_key_day_specs[HOT_SPECS] = {
	"fixed_window:200/1d",
	"sliding_window:200/1d",
	"subwindow:200/1d,subwindows=6",
	"subwindow:200/1d,subwindows=6,trailing=1",
	"token_bucket:200/1d",
	"gcra:200/1d",
	"sliding_log:200/1d",
	"token_bucket:1000/1d;sliding_window:200/1d",
};

_Static_assert(sizeof specs / sizeof specs[0] == HOT_SPECS, "one each");

void hot_key_all_specs(const char *uri)
{
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
		hot_key_run(uri, specs[i], (int)i);
}

void hot_key_all_specs_opts(const char *uri, const hot_key_opts *o)
{
	const char *const *table = o->real_clock ? hot_key_day_specs : specs;
	for (size_t i = 0; i < HOT_SPECS; i++)
		if (hot_key_run_opts(uri, table[i], (int)i, o))
			hot_key_run_opts(uri, table[i], (int)i, o);
}

void hot_key_near_cache(const char *uri)
{
	static const hot_key_opts opts[] = {
		{"near_cache=1;block_on_exceed=10s", 1, 50},
		{"near_cache=1;near_cache_sync=20ms", 1, 50},
		{"block_on_exceed=10s", 0, 50},
		{"block_on_exceed=10s", 1, 50},
		{"near_cache=1;block_on_exceed=100ms;near_cache_sync=10ms", 1,
		 50},
	};
	/* Under valgrind (20-50x slower, for memory errors, not timing):
	 * the first only, whose blocks outlast the run. */
	size_t n = getenv("DRL_VALGRIND") ? 1 : sizeof opts / sizeof opts[0];
	for (size_t i = 0; i < n; i++)
		hot_key_all_specs_opts(uri, &opts[i]);
}
