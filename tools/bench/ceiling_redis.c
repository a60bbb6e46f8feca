/*
 * The Redis ceiling: redis-benchmark at the cell's concurrency (and with
 * -P 16) sending EVALSHA of the Lua twin the library runs for the spec,
 * with the key and arguments the library itself sends for one decision
 * (drl__twin_call_make, core/twin_call.h), now = -1 (the server's clock).
 * Sized after a short calibration run to last about the cell's duration;
 * the measured run's cost to the server too (bench/server_cost.c).
 */
#include "shared.h"
#include "redis_target.h"
#include "common/clock.h"
#include "drl_config.h"
#include "twin_call.h"

#include <drl/sys/backend.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if DRL_HAVE_REDIS
#include <hiredis/hiredis.h>

/* SCRIPT LOAD the source on the target; the SHA1 into sha (41 bytes). */
static bool redis_script_load(const redis_target *t, const char *source,
			      char sha[41], char *why, size_t whycap)
{
	redisContext *c = bench_redis_connect(t, 5000, why, whycap);
	redisReply *r = NULL;
	bool ok = false;

	if (c == NULL)
		return false;
	r = redisCommand(c, "SCRIPT LOAD %b", source, strlen(source));
	if (r == NULL || r->type != REDIS_REPLY_STRING || r->len != 40) {
		snprintf(why, whycap, "SCRIPT LOAD failed: %s",
			 r && r->type == REDIS_REPLY_ERROR ? r->str
			 : c->err                          ? c->errstr
				  : "unexpected reply");
		goto out;
	}
	memcpy(sha, r->str, 40);
	sha[40] = '\0';
	ok = true;
out:
	if (r)
		freeReplyObject(r);
	redisFree(c);
	return ok;
}

/* Run argv (redis-benchmark), capturing stdout and stderr into out (cap
 * bytes, NUL-terminated); killed after timeout_ns. Returns its exit status
 * or -1. */
static int run_capture(char *const argv[], char *out, size_t cap,
		       int64_t timeout_ns)
{
	int fd[2];
	size_t len = 0;
	int ws = 0;

	out[0] = '\0';
	if (pipe(fd) != 0)
		return -1;
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		close(fd[0]);
		close(fd[1]);
		return -1;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, 0);
		dup2(fd[1], 1);
		dup2(fd[1], 2);
		close(fd[0]);
		close(fd[1]);
		execvp(argv[0], argv);
		fprintf(stderr, "cannot run %s: %s\n", argv[0],
			strerror(errno));
		_exit(127);
	}
	close(fd[1]);
	int64_t kill_at = tl_mono_ns() + timeout_ns;
	bool killed = false;
	for (;;) {
		struct pollfd pfd = {fd[0], POLLIN, 0};
		int pr = poll(&pfd, 1, 100);
		if (pr > 0) {
			char buf[4096];
			ssize_t n = read(fd[0], buf, sizeof buf);
			if (n == 0)
				break;
			if (n < 0 && errno != EINTR)
				break;
			if (n > 0 && len + 1 < cap) {
				size_t take = (size_t)n < cap - 1 - len
						      ? (size_t)n
						      : cap - 1 - len;
				memcpy(out + len, buf, take);
				len += take;
				out[len] = '\0';
			}
		}
		if (!killed && tl_mono_ns() > kill_at) {
			kill(pid, SIGKILL);
			killed = true;
		}
	}
	close(fd[0]);
	while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
	if (killed || !WIFEXITED(ws))
		return -1;
	return WEXITSTATUS(ws);
}

/* From redis-benchmark --csv output: the data row's rps, p50 and p99.
 * A row is "test","rps","avg","min","p50","p95","p99","max" (milliseconds);
 * the test name is our command, which holds no '"'. */
static bool parse_benchmark_csv(const char *out, double *rps, double *p50_ms,
				double *p99_ms)
{
	for (const char *line = out; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		double f[8];
		int nf = 0;
		const char *p = line, *stop = line + len;

		while (strncmp(line, "\"EVALSHA", 8) == 0 && p < stop &&
		       *p == '"' && nf < 8) {
			const char *q =
				memchr(p + 1, '"', (size_t)(stop - p - 1));
			char num[64], *e;
			size_t fl;
			if (q == NULL)
				break;
			fl = (size_t)(q - p - 1);
			if (nf > 0) {
				if (fl == 0 || fl >= sizeof num)
					break;
				memcpy(num, p + 1, fl);
				num[fl] = '\0';
				f[nf] = strtod(num, &e);
				if (*e != '\0')
					break;
			}
			nf++;
			p = q + 1;
			if (p < stop && *p == ',')
				p++;
		}
		if (nf == 8 && p == stop) {
			*rps = f[1];
			*p50_ms = f[4];
			*p99_ms = f[6];
			return *rps > 0;
		}
		line = end ? end + 1 : NULL;
	}
	return false;
}

/* Build the redis-benchmark argv for n requests into argv/bufs. */
typedef struct bench_argv {
	char *argv[48];
	int argc;
	char bufs[24][64];
	int nbufs;
} bench_argv;

static void ba_add(bench_argv *b, const char *s)
{
	b->argv[b->argc++] = (char *)s;
	b->argv[b->argc] = NULL;
}

static void ba_num(bench_argv *b, int64_t v)
{
	char *p = b->bufs[b->nbufs++];
	snprintf(p, 64, "%" PRId64, v);
	ba_add(b, p);
}

/* A command line for the docs: argv joined by spaces, the password
 * masked. */
static void ba_show(const bench_argv *b, char *out, size_t cap)
{
	size_t o = 0;
	out[0] = '\0';
	for (int i = 0; i < b->argc && o + 1 < cap; i++) {
		const char *a = b->argv[i];
		if (i > 0 && strcmp(b->argv[i - 1], "-a") == 0)
			a = "***";
		int n = snprintf(out + o, cap - o, "%s%s", i ? " " : "", a);
		if (n < 0)
			break;
		o += (size_t)n;
		if (o >= cap)
			o = cap - 1;
	}
}

/* One round of the Redis ceiling: redis-benchmark sized (after a short
 * calibration run, the first time) to last about duration_ns. */
bool bench_ceiling_redis(ceiling *cl, const char *uri, const char *spec,
			 int64_t keys, int conc, int pipeline,
			 int64_t duration_ns, const char *prefix,
			 double *rps_out, double *p50_out, double *p99_out)
{
	redis_target t;
	drl__twin_call tc;
	drl_error err = {0};
	char sha[41];
	static char out[65536];

	if (!bench_redis_target_parse(uri, &t, cl->note, sizeof cl->note))
		return false;
	/* What the library sends to decide one request for the key "hot" or,
	 * on many keys, "__rand_int__" (which redis-benchmark -r rewrites to
	 * 12 digits: the same key encoding, a random key). now = -1: the
	 * script reads Redis TIME, so its state moves with time as the
	 * library's does (a fixed now would turn every request after the
	 * first LIMIT into a cheap denial). */
	const char *user_key = keys == 1 ? "hot" : "__rand_int__";
	if (drl__twin_call_make(&tc, spec, prefix, user_key, strlen(user_key),
				-1, 1, &err) != 0) {
		bench_copy_msg(cl->note, sizeof cl->note, err.message);
		return false;
	}
	if (!redis_script_load(&t, tc.source, sha, cl->note, sizeof cl->note))
		return false;
	if (pipeline > 1)
		snprintf(cl->tool, sizeof cl->tool,
			 "redis-benchmark -P %d EVALSHA %s", pipeline, tc.name);
	else
		snprintf(cl->tool, sizeof cl->tool,
			 "redis-benchmark EVALSHA %s", tc.name);

	int64_t n = cl->n;
	if (n == 0)
		n = conc * INT64_C(100) > 2000 ? conc * INT64_C(100) : 2000;
	for (int run = cl->n ? 1 : 0; run < 2; run++) {
		bench_argv b = {.argc = 0};
		ba_add(&b, "redis-benchmark");
		if (t.sock[0]) {
			ba_add(&b, "-s");
			ba_add(&b, t.sock);
		} else {
			ba_add(&b, "-h");
			ba_add(&b, t.host);
			ba_add(&b, "-p");
			ba_num(&b, t.port);
		}
		if (t.user[0]) {
			ba_add(&b, "--user");
			ba_add(&b, t.user);
		}
		if (t.pass[0]) {
			ba_add(&b, "-a");
			ba_add(&b, t.pass);
		}
		if (t.db) {
			ba_add(&b, "--dbnum");
			ba_num(&b, t.db);
		}
		ba_add(&b, "-c");
		ba_num(&b, conc);
		ba_add(&b, "-n");
		ba_num(&b, n);
		if (pipeline > 1) {
			ba_add(&b, "-P");
			ba_num(&b, pipeline);
		}
		if (keys > 1) {
			ba_add(&b, "-r");
			ba_num(&b, keys);
		}
		ba_add(&b, "--csv");
		ba_add(&b, "EVALSHA");
		ba_add(&b, sha);
		ba_num(&b, (int64_t)tc.nkeys);
		ba_add(&b, tc.key);
		for (size_t i = 0; i < tc.nargs; i++)
			ba_num(&b, tc.args[i]);
		/* the measured run: what its requests cost the server too */
		srv_probe srv;
		if (run == 1)
			bench_srv_begin(&srv, uri);
		int st = run_capture(b.argv, out, sizeof out,
				     3 * duration_ns + INT64_C(10000000000));
		if (run == 1)
			bench_srv_end(&srv);
		double rps, p50, p99;
		if (st != 0 || !parse_benchmark_csv(out, &rps, &p50, &p99)) {
			char *nl = strchr(out, '\n');
			if (nl)
				*nl = '\0';
			snprintf(cl->note, sizeof cl->note,
				 "redis-benchmark failed (exit %d): %.120s", st,
				 out);
			return false;
		}
		if (run == 1) {
			*rps_out = rps;
			*p50_out = p50 * 1000;
			*p99_out = p99 * 1000;
			ba_show(&b, cl->command, sizeof cl->command);
			bench_srv_count(&srv.out, (uint64_t)n);
			bench_srv_merge(&cl->srv, &srv.out);
			return true;
		}
		n = (int64_t)(rps * (double)duration_ns / 1e9);
		if (n < conc * INT64_C(10))
			n = conc * INT64_C(10);
		if (n > INT64_C(100000000))
			n = INT64_C(100000000);
		cl->n = n;
	}
	return false;
}
#endif /* DRL_HAVE_REDIS */
