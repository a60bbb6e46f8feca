/*
 * Redis Sentinel (redis-sentinel://, backends/redis/sentinel.c) against
 * real processes: two masters with a replica each (a password on the
 * masters: requirepass/masterauth), watched by three redis-sentinel
 * processes that want a password of their own, with short timeouts
 * (down-after-milliseconds, failover-timeout) so a failover takes a
 * second or two.
 *
 * - A store finds the master by its name and decides exactly there.
 * - SENTINEL FAILOVER while threads decide on three stores (pooled
 *   connections with tx=watch, pipelined ones with tx=lua, and one with
 *   no periodic check, which only +switch-master can move: the old
 *   master is never demoted here): every call ends in a decision or an
 *   error (the threads are joined with a deadline), every store reaches
 *   the new master (its client list shows their calls) and decides
 *   exactly there, the same store objects.
 * - Killing a master: the store reaches the replica the sentinels
 *   promote.
 * - The master's store says, by its return code alone (DRL__UNSENT),
 *   when nothing of a failed call ran (a refused connection, a READONLY
 *   reply: the calls the sentinel store runs again on a new master), and
 *   only then (an error after the call ran, a started call, a store
 *   nobody watches: the plain code).
 * - A wrong master name, no reachable sentinel, a wrong or missing
 *   sentinel password and bad URIs each end in a clear error; on_error=
 *   answers while no sentinel answers.
 *
 * Printed (not asserted): the time from SENTINEL FAILOVER, and from the
 * kill, to the first decision on the new master (docs/performance.md).
 *
 * Built with DRL_REDIS_MODULE (test redis_module_sentinel), the masters
 * and replicas load the Redis module, every test runs again, and the
 * exactness and failover tests decide with tx=module where the plain
 * build uses tx=lua: a
 * single limit (DRL.TWIN) and a policy (DRL.POLICY) through the Sentinel
 * store, exact before and after the failover, and the commands seen on
 * the master.
 */
#include "async_check.h"
#include "backends/redis/redis.h"
#include "fake_sentinel.h"
#include "hot_key.h"
#include "server_fixture.h"
#include "testutil.h"

#include <hiredis/hiredis.h>

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define MPASS "mpw"
#define SPASS "spw"

#ifdef DRL_REDIS_MODULE
#define TX_SCRIPT "module" /* DRL.TWIN where the plain build sends EVALSHA */
#else
#define TX_SCRIPT "lua"
#endif

/* Group a (SENTINEL FAILOVER) and group b (kill): master and replica. */
static drl_server ma, ra, mb, rb, sen[3];
static int have;
static char master_args[2][12][32];
static const char *margs[2][15], *rargs[2][11];
static char conf[3][12][96];
static const char *confp[3][13];

/* ---- talking to the servers ---------------------------------------------- */

/* One command on 127.0.0.1:port after AUTH pass (NULL: none); the reply
 * (NULL when the server cannot be reached), freed by the caller. */
static redisReply *cmd(int port, const char *pass, const char *fmt, ...)
{
	struct timeval tv = {2, 0};
	redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
	if (c == NULL || c->err) {
		redisFree(c);
		return NULL;
	}
	redisSetTimeout(c, tv);
	if (pass) {
		redisReply *a = redisCommand(c, "AUTH %s", pass);
		freeReplyObject(a);
	}
	va_list ap;
	va_start(ap, fmt);
	redisReply *r = redisvCommand(c, fmt, ap);
	va_end(ap);
	redisFree(c);
	return r;
}

/* The port the sentinels name master of `name` (asking sentinel 0), or 0. */
static int sentinel_master_port(const char *name)
{
	redisReply *r = cmd(sen[0].port, SPASS,
			    "SENTINEL GET-MASTER-ADDR-BY-NAME %s", name);
	int port = 0;
	if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
		port = atoi(r->element[1]->str);
	freeReplyObject(r);
	return port;
}

/* Whether the server on port says ROLE master. */
static bool is_master(int port)
{
	redisReply *r = cmd(port, MPASS, "ROLE");
	bool m = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
		 strcmp(r->element[0]->str, "master") == 0;
	freeReplyObject(r);
	return m;
}

/* Whether a store using database db has made a call on the server on
 * port: a client there on db whose last command is one of a decision's
 * (the resolver's ROLE and a connection's setup are not). */
static bool store_on(int port, int db)
{
	redisReply *r = cmd(port, MPASS, "CLIENT LIST");
	bool on = false;
	char want[16];
	snprintf(want, sizeof want, " db=%d ", db);
	for (const char *line = r && r->type == REDIS_REPLY_STRING ? r->str
								   : NULL;
	     line && *line && !on; line = strchr(line, '\n')) {
		if (*line == '\n')
			line++;
		const char *end = strchr(line, '\n');
		size_t n = end ? (size_t)(end - line) : strlen(line);
		char l[1024];
		snprintf(l, sizeof l, "%.*s", (int)(n < 1000 ? n : 1000), line);
		const char *c = strstr(l, " cmd=");
		/* a normal client (flags=N): not the replication link
		 * (flags=M), whose db= and cmd= are the master's writes */
		on = strstr(l, want) && c && strstr(l, " flags=N ") &&
		     strncmp(c, " cmd=role", 9) && strncmp(c, " cmd=ping", 9) &&
		     strncmp(c, " cmd=auth", 9) &&
		     strncmp(c, " cmd=select", 11) &&
		     strncmp(c, " cmd=NULL", 9);
		if (end == NULL)
			break;
	}
	freeReplyObject(r);
	return on;
}

/* How many clients of the sentinel on port listen (SUBSCRIBE last). */
static int subscribers(int port)
{
	redisReply *r = cmd(port, SPASS, "CLIENT LIST");
	int n = 0;
	for (const char *p = r && r->type == REDIS_REPLY_STRING ? r->str : NULL;
	     p && (p = strstr(p, " cmd=subscribe")) != NULL; p++)
		n++;
	freeReplyObject(r);
	return n;
}

/* Whether database db of the server on port has keys matching pattern. */
static bool has_keys(int port, int db, const char *pattern)
{
	struct timeval tv = {2, 0};
	redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
	bool has = false;
	if (c && !c->err) {
		freeReplyObject(redisCommand(c, "AUTH " MPASS));
		freeReplyObject(redisCommand(c, "SELECT %d", db));
		redisReply *r = redisCommand(c, "KEYS %s", pattern);
		has = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0;
		freeReplyObject(r);
	}
	redisFree(c);
	return has;
}

#ifdef DRL_REDIS_MODULE
/* Whether the server at port has run the command `name` (lower case), by
 * its INFO commandstats. */
static bool ran_command(int port, const char *name)
{
	redisReply *r = cmd(port, MPASS, "INFO commandstats");
	char want[64];
	snprintf(want, sizeof want, "cmdstat_%s:calls=", name);
	bool ran = r && r->type == REDIS_REPLY_STRING && strstr(r->str, want);
	freeReplyObject(r);
	return ran;
}
#endif

/* Whether every sentinel knows the replica of `name` as a good one (so
 * a failover can pick it): its flags are just "slave". */
static bool replica_known(const char *name)
{
	for (int i = 0; i < 3; i++) {
		redisReply *r =
			cmd(sen[i].port, SPASS, "SENTINEL REPLICAS %s", name);
		bool ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 1;
		for (size_t j = 0; ok && j + 1 < r->element[0]->elements;
		     j += 2)
			if (strcmp(r->element[0]->element[j]->str, "flags") ==
			    0)
				ok = strcmp(r->element[0]->element[j + 1]->str,
					    "slave") == 0;
		freeReplyObject(r);
		if (!ok)
			return false;
	}
	return true;
}

/* ---- setup ---------------------------------------------------------------- */

/* Group g's master; group a's (SENTINEL FAILOVER) cannot be made a
 * replica (REPLICAOF and SLAVEOF renamed away): after the failover it
 * stays a writable master for good, as it does for seconds without the
 * renames, so a store that moved did so because a sentinel told it. */
static void server_args(int g)
{
	static const char *const renames[8] = {
		"--rename-command", "REPLICAOF", "hidden-replicaof",
		"--rename-command", "SLAVEOF",   "hidden-slaveof"};
	snprintf(master_args[g][0], 32, "--requirepass");
	snprintf(master_args[g][1], 32, MPASS);
	snprintf(master_args[g][2], 32, "--masterauth");
	snprintf(master_args[g][3], 32, MPASS);
	for (int i = 0; i < 4; i++)
		margs[g][i] = master_args[g][i];
	size_t n = 4;
	for (int i = 0; g == 0 && i < 6; i++)
		margs[g][n++] = renames[i];
#ifdef DRL_REDIS_MODULE
	margs[g][n++] = "--loadmodule";
	margs[g][n++] = DRL_REDIS_MODULE;
#endif
	margs[g][n] = NULL;
}

static void replica_args(int g, int master_port)
{
	for (int i = 0; i < 4; i++)
		rargs[g][i] = master_args[g][i];
	snprintf(master_args[g][4], 32, "--replicaof");
	snprintf(master_args[g][5], 32, "127.0.0.1");
	snprintf(master_args[g][6], 32, "%d", master_port);
	for (int i = 4; i < 7; i++)
		rargs[g][i] = master_args[g][i];
	size_t n = 7;
#ifdef DRL_REDIS_MODULE
	rargs[g][n++] = "--loadmodule";
	rargs[g][n++] = DRL_REDIS_MODULE;
#endif
	rargs[g][n] = NULL;
}

/* Sentinel i's config: a password, and both groups watched with short
 * timeouts (quorum 2 of 3). */
static int sentinel_conf(int i)
{
	size_t n = 0;
	snprintf(conf[i][n++], 96, "requirepass " SPASS);
	snprintf(conf[i][n++], 96, "sentinel sentinel-pass " SPASS);
	for (int g = 0; g < 2; g++) {
		const char *name = g ? "gb" : "ga";
		snprintf(conf[i][n++], 96, "sentinel monitor %s 127.0.0.1 %d 2",
			 name, g ? mb.port : ma.port);
		snprintf(conf[i][n++], 96, "sentinel auth-pass %s " MPASS,
			 name);
		snprintf(conf[i][n++], 96,
			 "sentinel down-after-milliseconds %s 1000", name);
		snprintf(conf[i][n++], 96, "sentinel failover-timeout %s 3000",
			 name);
	}
	for (size_t j = 0; j < n; j++)
		confp[i][j] = conf[i][j];
	confp[i][n] = NULL;
	return drl_fixture_redis_sentinel_start(&sen[i], confp[i]);
}

static int setup(void **state)
{
	(void)state;
	server_args(0);
	server_args(1);
#ifdef DRL_REDIS_MODULE
	int ready =
		drl_fixture_module_begin(DRL_REDIS_MODULE, DRL_MODULE_PRELOAD);
	if (ready)
		return ready < 0 ? -1 : 0;
#endif
	int rc = drl_fixture_redis_start(&ma, margs[0]);
	if (rc == 0 && drl_fixture_redis_start(&mb, margs[1]) != 0)
		rc = -1;
	if (rc == 0) {
		replica_args(0, ma.port);
		replica_args(1, mb.port);
		if (drl_fixture_redis_start(&ra, rargs[0]) ||
		    drl_fixture_redis_start(&rb, rargs[1]))
			rc = -1;
	}
#ifdef DRL_REDIS_MODULE
	drl_fixture_module_end();
#endif
	if (rc == 1)
		return 0;
	if (rc)
		return -1;
	for (int i = 0; i < 3; i++) {
		rc = sentinel_conf(i);
		if (rc == 1)
			return 0; /* no redis-sentinel, not under CI: skip */
		if (rc)
			return -1;
	}
	have = 1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (int i = 0; i < 3; i++)
		drl_fixture_stop(&sen[i]);
	drl_fixture_stop(&ra);
	drl_fixture_stop(&rb);
	drl_fixture_stop(&ma);
	drl_fixture_stop(&mb);
	return 0;
}

/* The store URI of group `name` through all three sentinels. */
static const char *uri_of(char *buf, size_t cap, const char *name,
			  const char *extra)
{
	snprintf(buf, cap,
		 "redis-sentinel://:" MPASS "@127.0.0.1:%d,127.0.0.1:%d,"
		 "127.0.0.1:%d/%s?sentinel_password=" SPASS
		 "&timeout_ms=%lld%s",
		 sen[0].port, sen[1].port, sen[2].port, name,
		 (long long)tu_bound_ms(500), extra);
	return buf;
}

/* ---- exactness in one process, on a store that lives on ------------------ */

typedef struct burst {
	drl_limiter *l;
	const char *key;
	int64_t at;
	atomic_int allowed, errors;
} burst;

static void *burst_thread(void *arg)
{
	burst *b = arg;
	for (int i = 0; i < 30; i++) {
		drl_result r;
		drl_error err = {0};
		if (drl_allow_at(b->l, b->key, strlen(b->key), 1, b->at, &r,
				 &err) != 0)
			atomic_fetch_add(&b->errors, 1);
		else if (r.allowed)
			atomic_fetch_add(&b->allowed, 1);
	}
	return NULL;
}

/* 4 threads x 30 calls at one instant on s: exactly 50 allowed. */
static void exact_on(drl_store *s, const char *spec, const char *key)
{
	burst b = {.l = tu_limiter(s, spec, "exact:"), .key = key};
	b.at = 1700000000 * SEC + (int64_t)(key[0]) * SEC;
	atomic_init(&b.allowed, 0);
	atomic_init(&b.errors, 0);
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, burst_thread, &b),
				 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(atomic_load(&b.errors), 0);
	assert_int_equal(atomic_load(&b.allowed), 50);
	drl_limiter_free(b.l);
}

static void test_finds_master_exact(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have);
	char uri[600];
	drl_store *s = tu_store(uri_of(uri, sizeof uri, "ga", ""));
	exact_on(s, "gcra:50/1h", "a1");
	/* a policy (tx=auto: one DRL.POLICY where the module is loaded,
	 * limit by limit where it is not), the tightest limit exactly */
	exact_on(s, "gcra:50/1h;fixed_window:80/1h", "a4");
	drl_store_free(s);
#ifdef DRL_REDIS_MODULE
	/* tx=module: one limit (DRL.TWIN) and a policy whose tightest is
	 * the limit (DRL.POLICY), both run on the master */
	s = tu_store(uri_of(uri, sizeof uri, "ga", "&tx=module&db=3"));
	exact_on(s, "token_bucket:50/1h", "a2");
	exact_on(s, "gcra:50/1h;fixed_window:80/1h", "a3");
	drl_store_free(s);
	int master = sentinel_master_port("ga");
	assert_true(master > 0);
	assert_true(ran_command(master, "drl.twin"));
	assert_true(ran_command(master, "drl.policy"));
	assert_true(has_keys(master, 3, "exact:*"));
#endif
	if (getenv("DRL_VALGRIND") == NULL)
		hot_key_run(uri_of(uri, sizeof uri, "ga", "&tx=" TX_SCRIPT),
			    "sliding_window:200/1m", 1);
}

/* attack: a started decision of every algorithm on a Sentinel store, the
 * default tx=auto (the counters on plain commands) and tx=lua: no crash,
 * exactly the limit on a hot key, the blocking calls' answers. The
 * counters' first write to a group trims it (trim_start); a trim_start
 * copied from the Redis template once ran a Redis store's function on
 * the Sentinel struct: SIGSEGV on the first fixed_window check. */
static void test_attack_started_counters(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have);
	static const char *const specs[] = {
		"fixed_window:100/1h",
		"sliding_window:100/1h",
		"subwindow:100/1h,subwindows=6",
		"token_bucket:100/1h",
		"gcra:100/1h",
		"sliding_log:100/1h",
		"fixed_window:100/1h;sliding_window:1000/1d",
	};
	static const char *const tx[] = {"", "&tx=lua"};
	drl_async *a = NULL;
	drl_error err = {0};
	assert_int_equal(drl_async_new(&a, NULL, &err), 0);
	int n = 0;
	for (size_t t = 0; t < 2; t++) {
		char uri[600], what[128], prefix[48];
		drl_store *s = tu_store(uri_of(uri, sizeof uri, "ga", tx[t]));
		for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
			snprintf(what, sizeof what, "sentinel%s %s", tx[t],
				 specs[i]);
			snprintf(prefix, sizeof prefix,
				 "sst:%d:%d:", (int)getpid(), n++);
			drl_limiter *l = tu_limiter(s, specs[i], prefix);
			async_check_hot(a, l, what, false);
			drl_limiter_free(l);
			async_check_equal(a, s, specs[i], what, 9000 + n);
		}
		drl_store_free(s);
	}
	drl_async_free(a);
}

/* A Sentinel store whose only Sentinel address (127.0.0.1:1) never
 * answers: connect=lazy, so it opens, and knows no master. */
static drl_store *no_master_store(void)
{
	char uri[300];
	snprintf(uri, sizeof uri,
		 "redis-sentinel://127.0.0.1:1/ga?connect=lazy&timeout_ms=%lld"
		 "&breaker_failures=0",
		 (long long)tu_bound_ms(200));
	return tu_store(uri);
}

/* attack: a started decision on a Sentinel store that knows no master
 * yet fails with the store's own word for it, not a bare "could not
 * start a decision" (the counters' started call and the scripts' alike). */
static void test_attack_no_master_message(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have);
	drl_store *s = no_master_store();
	drl_async *a = NULL;
	drl_error err = {0};
	drl_async_opts o = {.threads = DRL_ASYNC_THREADS_NONE};
	assert_int_equal(drl_async_new(&a, &o, &err), 0);
	static const char *const specs[] = {"fixed_window:10/1h", "gcra:10/1h"};
	for (size_t i = 0; i < 2; i++) {
		drl_limiter *l = tu_limiter(s, specs[i], "nomaster:");
		async_one one = {0};
		assert_int_equal(drl_async_allow_at(a, l, "k", 1, 1, ASYNC_T0,
						    async_one_cb, &one, NULL),
				 0);
		async_process_until(a, &one.count, 1);
		assert_int_equal(one.rc, DRL_EUNAVAILABLE);
		if (strstr(one.err.message, "no master known") == NULL)
			fail_msg("%s: \"%s\"", specs[i], one.err.message);
		drl_limiter_free(l);
	}
	drl_async_free(a);
	drl_store_free(s);
}

/* Whether the server on port holds a key that starts with prefix. */
static bool has_prefix_key(int port, const char *prefix)
{
	redisReply *r = cmd(port, NULL, "KEYS %s*", prefix);
	bool any = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0;
	freeReplyObject(r);
	return any;
}

/* One decision under a prefix of its own; true once its key is on the
 * server at port (the store decides there). */
static bool decides_on(drl_store *s, int port, const char *prefix)
{
	drl_limiter *l = tu_limiter(s, "fixed_window:100/1h", prefix);
	drl_result r;
	drl_error err = {0};
	bool there = drl_allow(l, "k", 1, 1, &r, &err) == 0 &&
		     has_prefix_key(port, prefix);
	drl_limiter_free(l);
	return there;
}

/* attack: a store followed at most 16 master addresses (MASTERS_MAX): a
 * failover to a 17th (a new pod IP) was never followed, and the store
 * decided on the old master for good. A fake sentinel names 40 addresses
 * in turn (two real servers, each address a new spelling of 127.0.0.1:
 * "127.0.0.01", "127.0.0.001", ...); the store must decide on each. */
static void test_attack_many_master_addresses(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have);
	drl_server srv[2];
	assert_int_equal(drl_fixture_redis_start(&srv[0], NULL), 0);
	assert_int_equal(drl_fixture_redis_start(&srv[1], NULL), 0);
	fake_sentinel *fs = NULL;
	assert_int_equal(fake_sentinel_start(&fs), 0);
	char host[64] = "127.0.0.";
	size_t base = strlen(host);
	host[base] = '1';
	fake_sentinel_set(fs, host, srv[0].port);
	char uri[300];
	snprintf(uri, sizeof uri,
		 "redis-sentinel://127.0.0.1:%d/fm?sentinel_check_ms=20"
		 "&timeout_ms=%lld",
		 fake_sentinel_port(fs), (long long)tu_bound_ms(1000));
	drl_store *s = tu_store(uri);
	for (int k = 0; k < 40; k++) {
		int port = srv[k % 2].port;
		char prefix[32];
		/* k + 1 zeros before the 1: octal, still 127.0.0.1 */
		memset(host + base, '0', (size_t)k + 1);
		host[base + (size_t)k + 1] = '1';
		host[base + (size_t)k + 2] = '\0';
		fake_sentinel_set(fs, host, port);
		snprintf(prefix, sizeof prefix, "mm%d:", k);
		if (!TU_WAIT_FOR(decides_on(s, port, prefix),
				 tu_bound_ms(10000)))
			fail_msg("master address %d of %d (%s:%d) is never "
				 "followed",
				 k + 2, 41, host, port);
	}
	drl_store_free(s);
	fake_sentinel_stop(fs);
	drl_fixture_stop(&srv[0]);
	drl_fixture_stop(&srv[1]);
}

/* ---- a failover while threads decide -------------------------------------- */

typedef struct runner {
	drl_limiter *l;
	char key[16];
	atomic_bool stop;
	atomic_long ok, errors;
	pthread_t t;
	atomic_bool done;
} runner;

static void *run_thread(void *arg)
{
	runner *r = arg;
	while (!atomic_load(&r->stop)) {
		drl_result res;
		drl_error err = {0};
		if (drl_allow(r->l, r->key, 1, 1, &res, &err) == 0)
			atomic_fetch_add(&r->ok, 1);
		else
			atomic_fetch_add(&r->errors, 1);
	}
	atomic_store(&r->done, true);
	return NULL;
}

/* n runners, runner i on store s[i % ns]. */
static void runners_start(runner *r, size_t n, drl_store **s, size_t ns)
{
	for (size_t i = 0; i < n; i++) {
		r[i].l = tu_limiter(s[i % ns], "gcra:1000000000/1h", "fo:");
		snprintf(r[i].key, sizeof r[i].key, "k%zu", i);
		atomic_init(&r[i].stop, false);
		atomic_init(&r[i].done, false);
		atomic_init(&r[i].ok, 0);
		atomic_init(&r[i].errors, 0);
		assert_int_equal(
			pthread_create(&r[i].t, NULL, run_thread, &r[i]), 0);
	}
}

/* Stop the runners; each must end (a call in flight ends in a decision
 * or an error, never hangs) well within a few timeouts. */
static void runners_stop(runner *r, size_t n, const char *what)
{
	long ok = 0, errors = 0;
	for (size_t i = 0; i < n; i++)
		atomic_store(&r[i].stop, true);
	for (size_t i = 0; i < n; i++) {
		if (!TU_WAIT_FOR(atomic_load(&r[i].done), tu_bound_ms(5000)))
			fail_msg("%s: a call hangs after the failover", what);
		pthread_join(r[i].t, NULL);
		ok += atomic_load(&r[i].ok);
		errors += atomic_load(&r[i].errors);
		drl_limiter_free(r[i].l);
	}
	printf("# %s: %ld decisions, %ld errors meanwhile\n", what, ok, errors);
	assert_true(ok > 0);
}

/* Wait until a store on database db calls the server on port: the ms
 * it took from t0, or -1. */
static int64_t until_store_on(int port, int db, int64_t t0)
{
	if (!TU_WAIT_FOR(store_on(port, db), tu_bound_ms(10000)))
		return -1;
	return tu_mono_ms() - t0;
}

static void test_sentinel_failover(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have);
	char u1[600], u2[600], u3[600];
	/* Pipelined, pooled, and one that only the sentinels' +switch-master
	 * can move (no periodic check; the old master is never demoted, so
	 * no connection of it breaks and no write is refused). */
	drl_store *s[3] = {
		tu_store(uri_of(u1, sizeof u1, "ga", "&tx=" TX_SCRIPT "&db=1")),
		tu_store(uri_of(u2, sizeof u2, "ga",
				"&tx=watch&pipelines=0&db=2")),
		tu_store(uri_of(u3, sizeof u3, "ga",
				"&tx=" TX_SCRIPT "&db=4&sentinel_check_ms=0"))};
	int old = sentinel_master_port("ga");
	int neu = old == ma.port ? ra.port : ma.port;
	assert_true(TU_WAIT_FOR(replica_known("ga"), tu_bound_ms(10000)));
	runner r[6];
	runners_start(r, 6, s, 3);
	assert_true(TU_WAIT_FOR(atomic_load(&r[0].ok) > 10 &&
					atomic_load(&r[1].ok) > 10 &&
					atomic_load(&r[2].ok) > 10,
				tu_bound_ms(5000)));
	assert_false(store_on(neu, 1) || store_on(neu, 2) || store_on(neu, 4));
	/* The three stores listen to the sentinel that will fail over. */
	assert_true(
		TU_WAIT_FOR(subscribers(sen[0].port) >= 3, tu_bound_ms(10000)));
	int64_t t0 = tu_mono_ms();
	redisReply *f = cmd(sen[0].port, SPASS, "SENTINEL FAILOVER ga");
	assert_non_null(f);
	if (f->type == REDIS_REPLY_ERROR)
		fail_msg("SENTINEL FAILOVER: %s", f->str);
	freeReplyObject(f);
	assert_true(TU_WAIT_FOR(sentinel_master_port("ga") == neu,
				tu_bound_ms(10000)));
	int64_t switched = tu_mono_ms() - t0;
	/* Both stores, pipelined (tx=lua) and pooled (tx=watch), move. */
	int64_t lua = until_store_on(neu, 1, t0);
	int64_t watch = until_store_on(neu, 2, t0);
	int64_t heard = until_store_on(neu, 4, t0);
	assert_true(lua >= 0 && watch >= 0);
	if (heard < 0)
		fail_msg("a store with sentinel_check_ms=0 stays on the old "
			 "master: +switch-master not heard");
	assert_true(is_master(neu));
	assert_true(is_master(old)); /* nothing but the message moved it */
	printf("# SENTINEL FAILOVER: the sentinels name the new master after "
	       "%lld ms; first decision there after %lld ms (tx=lua, "
	       "pipelined), %lld ms (tx=watch, pooled), %lld ms "
	       "(sentinel_check_ms=0)\n",
	       (long long)switched, (long long)lua, (long long)watch,
	       (long long)heard);
	runners_stop(r, 6, "SENTINEL FAILOVER");
	/* The same store objects decide exactly there (the old master is
	 * still a master until the sentinels turn it into a replica: its
	 * keys would not be the new master's). */
	exact_on(s[0], "gcra:50/1h", "b1");
	exact_on(s[1], "token_bucket:50/1h", "b2");
	exact_on(s[2], "sliding_window:50/1h", "b3");
	assert_true(has_keys(neu, 1, "exact:*"));
	assert_true(has_keys(neu, 2, "exact:*"));
	assert_true(has_keys(neu, 4, "exact:*"));
	assert_false(has_keys(old, 4, "exact:*"));
	for (int i = 0; i < 3; i++)
		drl_store_free(s[i]);
	/* A store opened now goes to the new master and is exact there. */
	if (getenv("DRL_VALGRIND") == NULL)
		hot_key_run(u1, "fixed_window:200/1m", 2);
}

static void test_master_killed(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have);
	char u[600];
	drl_store *s[2] = {tu_store(uri_of(u, sizeof u, "gb", "&tx=lua&db=3")),
			   NULL};
	s[1] = s[0];
	int old = sentinel_master_port("gb");
	if (old != mb.port)
		fail_msg("gb: the sentinels name %d, not %d (replica %d)", old,
			 mb.port, rb.port);
	assert_true(TU_WAIT_FOR(replica_known("gb"), tu_bound_ms(10000)));
	runner r[2];
	runners_start(r, 2, s, 2);
	assert_true(TU_WAIT_FOR(atomic_load(&r[0].ok) > 10, tu_bound_ms(5000)));
	assert_false(store_on(rb.port, 3));
	int64_t t0 = tu_mono_ms();
	drl_fixture_kill(&mb);
	int64_t first = until_store_on(rb.port, 3, t0);
	assert_true(first >= 0);
	/* The store follows whichever sentinel told it first; the one asked
	 * here may learn of the promotion a hello period later. */
	assert_true(TU_WAIT_FOR(sentinel_master_port("gb") == rb.port,
				tu_bound_ms(10000)));
	printf("# master killed: first decision on the promoted replica "
	       "after %lld ms (down-after-milliseconds 1000)\n",
	       (long long)first);
	runners_stop(r, 2, "master killed");
	exact_on(s[0], "sliding_log:50/1h", "c1");
	assert_true(has_keys(rb.port, 3, "exact:*"));
	drl_store_free(s[0]);
}

/* ---- the "nothing ran" signal of the master's store ---------------------- */

static void count_trouble(void *arg)
{
	atomic_fetch_add((atomic_int *)arg, 1);
}

/* A store of the server on port, as the sentinel store makes one for a
 * master (backends/redis/sentinel.c: drl__redis_node), with options opts; watched
 * (counting its trouble in *seen) or not. */
static drl_backend *node_of(int port, const char *opts, atomic_int *seen)
{
	char text[300];
	snprintf(text, sizeof text,
		 "redis-sentinel://:" MPASS "@127.0.0.1:1/gb?timeout_ms=%lld%s",
		 (long long)tu_bound_ms(500), opts);
	drl_uri *u = NULL;
	drl_backend *t = NULL, *b = NULL;
	drl_error err = {0};
	assert_int_equal(drl_uri_parse(&u, text, &err), 0);
	if (drl__redis_template(&t, u, &err) != 0 ||
	    drl__redis_node(&b, t, "127.0.0.1", port, &err) != 0)
		fail_msg("%s: %s", text, err.message);
	t->destroy(t);
	drl_uri_free(u);
	if (seen)
		drl__redis_watch(b, count_trouble, seen);
	return b;
}

/* rc is DRL__UNSENT(code) (watched) or code, err has code and `says`. */
static void says(int rc, const drl_error *err, bool watched, int code,
		 const char *what)
{
	if (rc != (watched ? DRL__UNSENT(code) : code) || err->code != code ||
	    strstr(err->message, what) == NULL)
		fail_msg("rc %d, err %d (%s); expected %s%d, \"%s\"", rc,
			 err->code, err->message, watched ? "unsent " : "",
			 code, what);
}

static const drl_script incr_script = {
	"incr", "return redis.call('INCRBY', KEYS[1], ARGV[1])"};

/* Every write path on the replica: READONLY, nothing ran. */
static void writes_refused(int replica, bool watched)
{
	atomic_int seen;
	atomic_init(&seen, 0);
	atomic_int *w = watched ? &seen : NULL;
	drl_bytes key = {(const unsigned char *)"u:k", 3};
	int64_t v[2], out[1], arg = 1;
	size_t nret;
	drl_error err = {0};
	drl_backend *b = node_of(replica, "&tx=lua", w);
	says(b->eval(b, &incr_script, 1, &key, 1, &arg, out, 1, &nret, &err),
	     &err, watched, DRL_ESTORE, "READONLY");
	says(b->del(b, 1, &key, &err), &err, watched, DRL_ESTORE, "READONLY");
	assert_int_equal(b->get_many(b, 1, &key, v, &err), 0); /* a read */
	b->destroy(b);
	b = node_of(replica, "&tx=watch&pipelines=0", w);
	says(b->incr(b, key, 1, SEC, v, &err), &err, watched, DRL_ESTORE,
	     "READONLY");
	says(b->cas(b, key, "x", 1, 0, SEC, &err), &err, watched, DRL_ESTORE,
	     "READONLY");
	b->destroy(b);
	b = node_of(replica, "&tx=auto", w);
	says(b->add_read(b, 1, &key, 1, SEC, v, &err), &err, watched,
	     DRL_ESTORE, "READONLY");
	b->destroy(b);
	assert_true(watched ? atomic_load(&seen) >= 5 : true);
}

static void test_unsent_signal(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have);
	assert_true(is_master(mb.port) && !is_master(rb.port));
	writes_refused(rb.port, true);
	writes_refused(rb.port, false);

	/* Nothing listens on port 1: no connection, nothing sent, pooled
	 * and pipelined. */
	atomic_int seen;
	atomic_init(&seen, 0);
	drl_bytes key = {(const unsigned char *)"u:k", 3};
	int64_t v[2];
	drl_error err = {0};
	drl_backend *b = node_of(1, "&tx=watch&pipelines=0", &seen);
	says(b->incr(b, key, 1, SEC, v, &err), &err, true, DRL_EUNAVAILABLE,
	     "127.0.0.1:1");
	b->destroy(b);
	b = node_of(1, "&tx=auto", &seen);
	says(b->add_read(b, 1, &key, 1, SEC, v, &err), &err, true,
	     DRL_EUNAVAILABLE, "127.0.0.1:1");
	/* A started call is never run again: its callback gets the plain
	 * code. */
	tu_started st;
	tu_started_init(&st);
	assert_int_equal(b->add_read_start(b, NULL, 1, &key, 1, SEC,
					   tu_started_done, &st, &err),
			 0);
	assert_int_equal(tu_started_wait(&st), DRL_EUNAVAILABLE);
	tu_started_fini(&st);
	b->destroy(b);
	b = node_of(1, "&tx=auto", NULL);
	says(b->add_read(b, 1, &key, 1, SEC, v, &err), &err, false,
	     DRL_EUNAVAILABLE, "127.0.0.1:1");
	b->destroy(b);

	/* A call that ran and failed on the master: the plain code. */
	freeReplyObject(cmd(mb.port, MPASS, "SET u:bad notanumber"));
	drl_bytes bad = {(const unsigned char *)"u:bad", 5};
	b = node_of(mb.port, "&tx=auto", &seen);
	int rc = b->add_read(b, 1, &bad, 1, SEC, v, &err);
	assert_int_equal(rc, DRL_ECORRUPT);
	assert_int_equal(b->add_read(b, 1, &key, 1, SEC, v, &err), 0);
	b->destroy(b);
}

/* ---- errors ---------------------------------------------------------------- */

static void open_fails(const char *uri, int code, const char *says)
{
	drl_store *s = NULL;
	drl_error err = {0};
	int rc = drl_store_open(&s, uri, &err);
	if (rc != code || (says && strstr(err.message, says) == NULL))
		fail_msg("%s: %d (%s), expected %d saying \"%s\"", uri, rc,
			 err.message, code, says ? says : "");
	assert_null(s);
	assert_null(strstr(err.message, SPASS));
	assert_null(strstr(err.message, MPASS));
}

static void test_errors(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have);
	char uri[600];
	open_fails(uri_of(uri, sizeof uri, "nosuch", ""), DRL_ESTORE,
		   "monitors no master named \"nosuch\"");
	snprintf(uri, sizeof uri,
		 "redis-sentinel://127.0.0.1:1,127.0.0.1:2/ga?timeout_ms=%lld",
		 (long long)tu_bound_ms(500));
	open_fails(uri, DRL_EUNAVAILABLE, "none of 2 sentinels");
	snprintf(uri, sizeof uri,
		 "redis-sentinel://:" MPASS "@127.0.0.1:%d/ga?sentinel_"
		 "password=wrong",
		 sen[0].port);
	open_fails(uri, DRL_ESTORE, "AUTH refused");
	snprintf(uri, sizeof uri, "redis-sentinel://:" MPASS "@127.0.0.1:%d/ga",
		 sen[0].port);
	open_fails(uri, DRL_ESTORE, "NOAUTH");
	/* The master's password is the URI's, not the sentinels'. */
	snprintf(uri, sizeof uri,
		 "redis-sentinel://127.0.0.1:%d/ga?sentinel_password=" SPASS,
		 sen[0].port);
	open_fails(uri, DRL_ESTORE, "NOAUTH");
	/* Bad URIs fail before any connection. */
	open_fails("redis-sentinel://127.0.0.1:1", DRL_EINVAL,
		   "names no master");
	open_fails("redis-sentinel:///ga", DRL_EINVAL, "names no sentinel");
	open_fails("redis-sentinel://127.0.0.1:1/g%20a", DRL_EINVAL,
		   "space or control");
	open_fails("redis-sentinel://127.0.0.1:1/ga?sentinel_user=u",
		   DRL_EINVAL, "sentinel_password");
	open_fails("redis-sentinel://127.0.0.1:1/ga?tls_verify=no", DRL_EINVAL,
		   "rediss-sentinel://");
	open_fails("redis-sentinel://127.0.0.1:1/ga?sentinel_check_ms=-1",
		   DRL_EINVAL, "sentinel_check_ms");
	open_fails("redis-sentinel://127.0.0.1:1/ga?bogus=1", DRL_EINVAL,
		   "bogus");
}

static void test_on_error_applies(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have);
	tu_on_error_paths(no_master_store(), DRL_EUNAVAILABLE, "127.0.0.1:1");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_on_error_applies),
		cmocka_unit_test(test_finds_master_exact),
		cmocka_unit_test(test_attack_started_counters),
		cmocka_unit_test(test_attack_no_master_message),
		cmocka_unit_test(test_attack_many_master_addresses),
		cmocka_unit_test(test_sentinel_failover),
		cmocka_unit_test(test_unsent_signal),
		cmocka_unit_test(test_master_killed),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
