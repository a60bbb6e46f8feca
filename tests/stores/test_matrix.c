/*
 * The test matrix (issue 45): every store x every spec x every path,
 * generated from the three tables below, so that no combination goes
 * untested. Each cell runs two checks:
 *
 * 1. exactness on a hot key across processes: PROCS processes (fork: each
 *    opens the store from its URI, its own connections; memory:// is per
 *    process, so one there) ask for one key at one fixed instant, 2 x the
 *    limit in all, through the cell's path; exactly the limit is allowed
 *    and no call fails;
 * 2. the store down: the same spec and path on a URI whose port is closed
 *    (connect=lazy): every call fails (DRL_EUNAVAILABLE, DRL_ETIMEDOUT or
 *    DRL_ESTORE, never an allow), and with on_error=deny every call is a
 *    denial with path DRL_PATH_FAIL_CLOSED (docs/failure.md).
 *
 * A path some cells do not have (only plaintext single-node Redis has
 * channels; a policy, Cluster, memcached and tx=watch never start a call
 * without a worker) is asked of the library (drl_async_path()) and
 * printed "n/a: <its reason>" (which must name the store, or a policy's
 * "several limits"); a cell the library calls direct is run on a context
 * with no worker at all, so a request it could not start fails the cell.
 * The worker path runs on every cell: on a direct one by the test hook
 * drl__async_force_worker (core/internal.h). "started" on memory:// is
 * the decision at start (no I/O thread there), with drl_async_notify().
 *
 * The servers (redis, TLS redis, a 3-master cluster, a sentinel and a TLS
 * sentinel with quorum 1 on those two, two memcached) are started by the
 * fixtures and stopped after; under CI=true a missing one fails. Under
 * valgrind (DRL_VALGRIND) one spec per store, a different one on each
 * store so every spec runs: the paths all run.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "internal.h"

#include "cluster_fixture.h"
#include "hot_key.h"
#include "server_fixture.h"
#include "testutil.h"
#include "tls_fixture.h"

#include <drl/async.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the tables ------------------------------------------------------------ */

/* Which servers a store row needs. */
enum server {
	MEMORY,
	REDIS,
	TLS,
	CLUSTER,
	SENTINEL,
	TLS_SENTINEL,
	MC,
	MC_POOL
};

typedef struct mx_store {
	const char *name;    /* as printed */
	enum server server;  /* what its URI names */
	const char *options; /* more URI options: "" or "&..." */
	/* What the library's reason for an n/a cell of one limit names
	 * (a policy's names "several limits", but on memory://) */
	const char *says;
} mx_store;

static const mx_store stores[] = {
	{"memory", MEMORY, "", "inside the process"},
	{"redis", REDIS, "", "-"}, /* one limit: every path runs */
	{"redis tx=lua", REDIS, "&tx=lua", "-"},
	{"redis tx=watch", REDIS, "&tx=watch", "tx=watch"},
	{"rediss", TLS, "", "TLS"},
	{"redis-cluster", CLUSTER, "", "Cluster"},
	{"redis-sentinel", SENTINEL, "", "Sentinel"},
	{"rediss-sentinel", TLS_SENTINEL, "", "Sentinel"},
	{"memcached", MC, "", "memcached"},
	{"memcached pool", MC_POOL, "", "memcached"},
};
#define NSTORES (sizeof stores / sizeof stores[0])

/* Every limit allows LIMIT at one instant; the policy's first limit is
 * the one that decides. */
enum { LIMIT = 50, REQUESTS = 2 * LIMIT };
static const char *const specs[] = {
	"fixed_window:50/1m",
	"sliding_window:50/1m",
	"subwindow:50/1m,subwindows=6",
	"token_bucket:50/1h",
	"gcra:50/1h",
	"sliding_log:50/1m",
	"sliding_window:50/1h;fixed_window:1000/1d",
};
#define NSPECS (sizeof specs / sizeof specs[0])

enum path { BLOCKING, BATCH, CHANNEL, STARTED, WORKER, NEAR, NPATHS };
static const char *const path_names[NPATHS] = {"blocking", "batch",  "channel",
					       "started",  "worker", "near"};

/* The cells' sizes: PROCS processes x THREADS threads (blocking, batch,
 * near cache) or REQUESTS / PROCS requests in flight on one context
 * (async). */
enum { PROCS = 2, THREADS = 2, BATCH_ITEMS = 5 };
#define T0 INT64_C(1700000000000000) /* every decision's instant */
#define KEY "hot"

/* ---- the servers ----------------------------------------------------------- */

static drl_tls_pki pki;
static drl_server redis, tls_redis, sentinel, tls_sentinel, mc[2];
static drl_cluster cluster;
static char cluster_hosts[256];
static const char *tls_args[9];
static char sen_conf[1][96], tls_conf[8][400];
static const char *sen_confp[2], *tls_confp[9];
static int have;         /* every server runs */
static int closed_fd[2]; /* bound, never listening: connects refused */
static int closed_port[2];
static int64_t started_ms; /* when the group's setup began */

/* Accumulate a start's result: 0 on, 1 skip (binary missing, not CI),
 * -1 failure; the worst so far. */
static int started(int *sofar, int rc)
{
	if (rc < 0 || (rc == 1 && *sofar == 0))
		*sofar = rc;
	return *sofar;
}

/* A loopback port nothing listens on for the whole run: bound, not
 * listening, so a connect to it is refused at once. */
static int closed_port_open(int *fd)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof sa;
	*fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*fd < 0 || bind(*fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
	    getsockname(*fd, (struct sockaddr *)&sa, &len) != 0)
		return -1;
	return ntohs(sa.sin_port);
}

/* The sentinels: one on the plaintext redis, one (TLS, reaching its
 * master over TLS with the client certificate it asks for) on the TLS
 * redis; quorum 1. */
static int sentinels_start(void)
{
	snprintf(sen_conf[0], sizeof sen_conf[0],
		 "sentinel monitor mx 127.0.0.1 %d 1", redis.port);
	sen_confp[0] = sen_conf[0];
	int rc = drl_fixture_redis_sentinel_start(&sentinel, sen_confp);
	if (rc)
		return rc;
	size_t n = 0;
#define LINE(...) snprintf(tls_conf[n++], sizeof tls_conf[0], __VA_ARGS__)
	LINE("tls-cert-file %s", pki.server);
	LINE("tls-key-file %s", pki.server_key);
	LINE("tls-ca-cert-file %s", pki.ca);
	LINE("tls-client-cert-file %s", pki.client);
	LINE("tls-client-key-file %s", pki.client_key);
	LINE("tls-replication yes");
	LINE("tls-auth-clients yes");
	LINE("sentinel monitor mxt 127.0.0.1 %d 1", tls_redis.port);
#undef LINE
	for (size_t i = 0; i < n; i++)
		tls_confp[i] = tls_conf[i];
	return drl_fixture_redis_sentinel_tls_start(&tls_sentinel, tls_confp);
}

/* Stop whatever setup started (a zeroed server is a no-op). */
static void servers_stop(void)
{
	drl_fixture_stop(&tls_sentinel);
	drl_fixture_stop(&sentinel);
	drl_fixture_stop(&tls_redis);
	drl_fixture_stop(&redis);
	drl_fixture_stop(&mc[0]);
	drl_fixture_stop(&mc[1]);
	drl_fixture_cluster_stop(&cluster);
	drl_tls_pki_free(&pki);
	for (int i = 0; i < 2; i++)
		if (closed_fd[i] > 0)
			close(closed_fd[i]);
	closed_fd[0] = closed_fd[1] = 0;
}

static int setup(void **state)
{
	(void)state;
	started_ms = tu_mono_ms();
	int rc = 0;
	for (int i = 0; i < 2; i++)
		if ((closed_port[i] = closed_port_open(&closed_fd[i])) < 0)
			rc = -1;
	if (rc || started(&rc, drl_tls_pki_make(&pki))) {
		servers_stop();
		return rc < 0 ? -1 : 0;
	}
	drl_tls_pki_redis_args(&pki, pki.server, pki.server_key, "yes",
			       tls_args);
	int have_cluster = 0;
	if (started(&rc, drl_fixture_redis_start(&redis, NULL)) ||
	    started(&rc, drl_fixture_redis_tls_start(&tls_redis, tls_args)) ||
	    started(&rc, sentinels_start()) ||
	    started(&rc, drl_fixture_memcached_start(&mc[0], NULL)) ||
	    started(&rc, drl_fixture_memcached_start(&mc[1], NULL)) ||
	    started(&rc, drl_fixture_cluster_setup(
				 &cluster, 3, 0, cluster_hosts,
				 sizeof cluster_hosts, &have_cluster))) {
		servers_stop(); /* none runs without the others */
		return rc < 0 ? -1 : 0;
	}
	have = have_cluster;
	return 0;
}

/* ---- URIs ------------------------------------------------------------------ */

/* The URI of store row s: on its servers, or (down) on the closed
 * ports, opened without connecting. NULL for memory:// down. */
static const char *uri_of(char *buf, size_t cap, const mx_store *s, bool down)
{
	static const struct {
		const char *scheme, *master;
		bool tls;
	} how[] = {
		[MEMORY] = {"memory", "", false},
		[REDIS] = {"redis", "", false},
		[TLS] = {"rediss", "", true},
		[CLUSTER] = {"redis-cluster", "", false},
		[SENTINEL] = {"redis-sentinel", "/mx", false},
		[TLS_SENTINEL] = {"rediss-sentinel", "/mxt", true},
		[MC] = {"memcached", "", false},
		[MC_POOL] = {"memcached", "", false},
	};
	const drl_server *const up[] = {
		[REDIS] = &redis,       [TLS] = &tls_redis,
		[SENTINEL] = &sentinel, [TLS_SENTINEL] = &tls_sentinel,
		[MC] = &mc[0],          [MC_POOL] = &mc[0]};
	if (s->server == MEMORY) {
		snprintf(buf, cap, "memory://");
		return down ? NULL : buf;
	}
	char hosts[300], tls[1100] = "", more[64];
	bool pool = s->server == MC_POOL;
	if (s->server == CLUSTER && !down)
		snprintf(hosts, sizeof hosts, "%s", cluster_hosts);
	else
		snprintf(hosts, sizeof hosts, "127.0.0.1:%d%s%.0d",
			 down ? closed_port[0] : up[s->server]->port,
			 pool ? ",127.0.0.1:" : "",
			 pool ? (down ? closed_port[1] : mc[1].port) : 0);
	if (how[s->server].tls)
		snprintf(tls, sizeof tls, "&tls_ca=%s&tls_cert=%s&tls_key=%s",
			 pki.ca, pki.client, pki.client_key);
	/* Up: a timeout no slow machine reaches (this is about admissions,
	 * not deadlines); down: short, though a refused connect needs none. */
	snprintf(more, sizeof more, "timeout_ms=%lld%s",
		 (long long)tu_bound_ms(down ? 100 : 5000),
		 down ? "&connect=lazy" : "");
	snprintf(buf, cap, "%s://%s%s?%s%s%s", how[s->server].scheme, hosts,
		 how[s->server].master, more, s->options, tls);
	return buf;
}

/* ---- running a path -------------------------------------------------------- */

/* What calls on a path came to. */
typedef struct tally {
	int allowed, errors, near;
	int closed; /* denials by on_error=deny (DRL_PATH_FAIL_CLOSED) */
	int odd;    /* errors other than a store's being away */
	char last[DRL_ERROR_MESSAGE_MAX + 64]; /* the last error, named */
} tally;

static void tally_one(tally *t, int rc, const drl_result *r, const char *msg)
{
	if (rc) {
		t->errors++;
		t->odd += rc != DRL_EUNAVAILABLE && rc != DRL_ETIMEDOUT &&
			  rc != DRL_ESTORE;
		snprintf(t->last, sizeof t->last, "%s: %s", drl_err_name(rc),
			 msg);
		if (r->allowed)
			t->odd++; /* an error never admits */
	} else if (r->allowed) {
		t->allowed++;
	} else {
		t->near += r->path == DRL_PATH_NEAR;
		t->closed += r->path == DRL_PATH_FAIL_CLOSED;
	}
}

static void tally_add(tally *sum, const tally *t)
{
	sum->allowed += t->allowed;
	sum->errors += t->errors;
	sum->near += t->near;
	sum->closed += t->closed;
	sum->odd += t->odd;
	if (t->last[0])
		memcpy(sum->last, t->last, sizeof sum->last);
}

/* How a cell's path runs on a limiter. */
typedef struct plan {
	enum path path;
	bool force_worker; /* the worker path on a direct limiter */
	int threads;       /* blocking, batch, near: threads of a process */
} plan;

typedef struct job {
	drl_limiter *lim;
	const plan *p;
	int calls;
	tally t;
} job;

/* One thread's calls, blocking (drl_allow_at, or drl_allow_batch_at in
 * batches of BATCH_ITEMS), all at T0. */
static void *thread_calls(void *arg)
{
	job *j = arg;
	for (int done = 0; done < j->calls;) {
		drl_batch_item it[BATCH_ITEMS];
		drl_error err = {0};
		int n = 1;
		if (j->p->path != BATCH) {
			drl_result r;
			int rc = drl_allow_at(j->lim, KEY, strlen(KEY), 1, T0,
					      &r, &err);
			tally_one(&j->t, rc, &r, err.message);
		} else {
			n = j->calls - done < BATCH_ITEMS ? j->calls - done
							  : BATCH_ITEMS;
			for (int i = 0; i < n; i++)
				it[i] = (drl_batch_item){.key = KEY,
							 .keylen = strlen(KEY),
							 .cost = 1};
			int rc = drl_allow_batch_at(j->lim, it, (size_t)n, T0,
						    &err);
			for (int i = 0; i < n; i++)
				tally_one(&j->t, rc ? rc : it[i].rc,
					  &it[i].result, err.message);
		}
		done += n;
	}
	return NULL;
}

static void run_threads(drl_limiter *l, const plan *p, int calls, tally *t)
{
	pthread_t th[THREADS];
	job jobs[THREADS];
	int n = p->threads;
	for (int i = 0; i < n; i++) {
		jobs[i] = (job){.lim = l, .p = p, .calls = calls / n};
		if (i < calls % n)
			jobs[i].calls++;
		if (pthread_create(&th[i], NULL, thread_calls, &jobs[i]))
			n = i; /* counted short: the cell fails */
	}
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		tally_add(t, &jobs[i].t);
	}
}

/* An async context's requests and their callbacks. */
typedef struct loop {
	int done; /* callbacks run (and starts refused) */
	tally t;
	int wake[2]; /* started path: notify writes a byte */
} loop;

static void decided(drl_async *a, int rc, const drl_result *r,
		    const drl_error *err, void *arg)
{
	(void)a;
	loop *m = arg;
	m->done++;
	tally_one(&m->t, rc, r, err->message);
}

static void wake(void *arg)
{
	loop *m = arg;
	(void)!write(m->wake[1], "", 1);
}

/* Threads of this process now (/proc/self/task). */
static int threads_now(void)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	for (struct dirent *e; d && (e = readdir(d)) != NULL;)
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

/* `calls` requests in flight at once on one context: in fd mode
 * (channel, worker), or with drl_async_notify() (started). A direct path
 * runs on a context without workers: a request it cannot start is
 * refused. On the channel no thread may start. */
static void run_async(drl_limiter *l, const plan *p, int calls, tally *t)
{
	drl_async *a = NULL;
	drl_async_opts o = {
		.threads = p->path == WORKER ? 2 : DRL_ASYNC_THREADS_NONE};
	drl_error err = {0};
	loop m = {.wake = {-1, -1}};
	if (drl_async_new(&a, &o, &err) != 0 ||
	    (p->path == STARTED &&
	     (pipe2(m.wake, O_CLOEXEC | O_NONBLOCK) != 0 ||
	      drl_async_notify(a, wake, &m) != 0))) {
		t->errors += calls;
		snprintf(t->last, sizeof t->last, "no context: %s",
			 err.message);
		drl_async_free(a);
		return;
	}
	drl__async_force_worker = p->force_worker;
	int before = threads_now();
	for (int k = 0; k < calls; k++) {
		drl_result none = {0};
		int rc = drl_async_allow_at(a, l, KEY, strlen(KEY), 1, T0,
					    decided, &m, &err);
		if (rc) { /* no callback follows */
			m.done++;
			tally_one(&m.t, rc, &none, err.message);
			m.t.odd++; /* a start refused is never right here */
		}
	}
	int fd = p->path == STARTED ? m.wake[0] : drl_async_fd(a);
	int64_t end = tu_mono_ms() + tu_bound_ms(10000);
	while (m.done < calls && tu_mono_ms() < end) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, (int)(end - tu_mono_ms())) > 0 &&
		    p->path == STARTED) {
			char b[64];
			while (read(fd, b, sizeof b) > 0)
				;
		}
		drl_async_process(a);
	}
	if (m.done < calls)
		snprintf(m.t.last, sizeof m.t.last,
			 "%d of %d callbacks after %lld ms", m.done, calls,
			 (long long)tu_bound_ms(10000));
	if (p->path == CHANNEL && threads_now() != before) {
		m.t.odd++;
		snprintf(m.t.last, sizeof m.t.last,
			 "%d threads after, %d before: the channel started one",
			 threads_now(), before);
	}
	int missing = calls - m.done;
	drl_async_free(a); /* runs what is left */
	drl__async_force_worker = false;
	m.t.errors += missing;
	tally_add(t, &m.t);
	if (m.wake[0] >= 0) {
		close(m.wake[0]);
		close(m.wake[1]);
	}
}

static void run_path(drl_limiter *l, const plan *p, int calls, tally *t)
{
	if (p->path == CHANNEL || p->path == STARTED || p->path == WORKER)
		run_async(l, p, calls, t);
	else
		run_threads(l, p, calls, t);
}

/* ---- a cell ---------------------------------------------------------------- */

/* What a cell's processes share. */
typedef struct cell {
	const char *uri;
	char spec[256]; /* the spec with the path's options */
	char prefix[64];
	plan p;
	int procs;
} cell;

/* The cell's spec: near_cache=1 on the near path, on_error=deny when
 * asked. */
static void cell_spec(cell *c, int spec, bool deny)
{
	snprintf(c->spec, sizeof c->spec, "%s%s%s", specs[spec],
		 c->p.path == NEAR ? ";near_cache=1" : "",
		 deny ? ";on_error=deny" : "");
}

/* One process of check 1: its store, limiter and share of the calls. */
static void cell_child(void *arg, int i, hot_key_counts *out)
{
	const cell *c = arg;
	drl_store *s = NULL;
	drl_limiter *l = NULL;
	drl_error err = {0};
	tally t = {0};
	int calls = REQUESTS / c->procs + (i < REQUESTS % c->procs);
	if (drl_store_open(&s, c->uri, &err) ||
	    drl_limiter_new(&l, s, c->spec, c->prefix, &err)) {
		t.errors = calls;
		snprintf(t.last, sizeof t.last, "open: %s", err.message);
	} else {
		run_path(l, &c->p, calls, &t);
	}
	if (t.errors || t.odd)
		fprintf(stderr, "  process %d: %d errors, last: %s\n", i,
			t.errors, t.last);
	drl_limiter_free(l);
	drl_store_free(s);
	*out = (hot_key_counts){.allowed = t.allowed,
				.errors = t.errors + t.odd,
				.near = t.near};
}

/* The matrix's record, for the summary. */
enum { NA_MAX = NSTORES * NSPECS * NPATHS };
static struct {
	int run, na, failed;
	int down_na; /* memory://: a store in the process is never away */
	int forced;  /* worker cells run by drl__async_force_worker */
	const char *why[NA_MAX]; /* each n/a cell's reason */
	const char *where[NA_MAX][3];
} rec;

/* How path `p` runs on limiter l, as the library says: true with *out
 * filled, or false (n/a) with *why. */
static bool plan_of(drl_limiter *l, enum path p, plan *out, const char **why)
{
	const drl_backend *b = l->store->backend;
	int direct = drl_async_path(l, why);
	bool chan = b->version >= 7 && (b->caps & DRL_CAP_CHANNEL) &&
		    !drl__is_inproc(b);
	*out = (plan){.path = p, .threads = THREADS};
	if (p == CHANNEL && !(direct && chan))
		return false; /* why: the library's */
	if (p == STARTED && !direct)
		return false;
	if (p == STARTED && drl__chan_only(b)) {
		*why = "the store starts calls only on channels (memcached): "
		       "with drl_async_notify() a worker decides";
		return false;
	}
	out->force_worker = p == WORKER && direct;
	return true;
}

/* A limiter on uri for a path query, or NULL (message in *err). */
static drl_store *open_for(const char *uri, const char *spec, drl_limiter **l,
			   drl_error *err)
{
	drl_store *s = NULL;
	*l = NULL;
	if (drl_store_open(&s, uri, err) == 0 &&
	    drl_limiter_new(l, s, spec, "mxq:", err) == 0)
		return s;
	drl_store_free(s);
	return NULL;
}

/* Check 2: the cell on its store's down URI, once without a policy and
 * once with on_error=deny, a few calls each on this process. Returns 0,
 * or a failure described in msg. */
static int check_down(const mx_store *st, int spec, const plan *up, char *msg,
		      size_t cap)
{
	char uri[1600];
	uri_of(uri, sizeof uri, st, true);
	for (int deny = 0; deny < 2; deny++) {
		cell c = {.p = *up};
		cell_spec(&c, spec, deny);
		drl_limiter *l;
		drl_error err = {0};
		drl_store *s = open_for(uri, c.spec, &l, &err);
		if (s == NULL) {
			snprintf(msg, cap, "down: cannot open: %s",
				 err.message);
			return -1;
		}
		plan p;
		const char *why;
		bool runs = plan_of(l, up->path, &p, &why);
		tally t = {0};
		enum { CALLS = 4 };
		if (runs && p.force_worker == up->force_worker) {
			p.threads = 1;
			run_path(l, &p, CALLS, &t);
		}
		drl_limiter_free(l);
		drl_store_free(s);
		if (!runs || p.force_worker != up->force_worker) {
			snprintf(msg, cap, "down: another path (%s)", why);
			return -1;
		}
		if (!deny && (t.errors != CALLS || t.odd)) {
			snprintf(msg, cap,
				 "down: %d of %d calls failed, %d allowed, "
				 "%d odd; last: %s",
				 t.errors, CALLS, t.allowed, t.odd, t.last);
			return -1;
		}
		if (deny && (t.closed != CALLS || t.errors || t.odd)) {
			snprintf(msg, cap,
				 "down, on_error=deny: %d of %d denied "
				 "fail-closed, %d allowed, %d errors; last: %s",
				 t.closed, CALLS, t.allowed, t.errors, t.last);
			return -1;
		}
	}
	return 0;
}

/* Check 1: the cell from its processes. 0, or the failure in msg. */
static int check_exact(const mx_store *st, int spec, const plan *p,
		       const char *uri, char *msg, size_t cap)
{
	static int cells; /* a fresh prefix per cell: nothing shared */
	cell c = {
		.uri = uri, .p = *p, .procs = st->server == MEMORY ? 1 : PROCS};
	cell_spec(&c, spec, false);
	snprintf(c.prefix, sizeof c.prefix, "mx%d:", cells++);
	hot_key_counts n = hot_key_fork(c.procs, cell_child, &c);
	if (n.lost || n.status) {
		snprintf(msg, cap,
			 "%d of %d processes reported nothing (signal %d), "
			 "exit status %d",
			 n.lost, c.procs, n.signal, n.status);
		return -1;
	}
	if (n.allowed == LIMIT && n.errors == 0)
		return 0;
	snprintf(msg, cap, "%d allowed of %d, limit %d, %d errors", n.allowed,
		 REQUESTS, LIMIT, n.errors);
	return -1;
}

/* One row: every spec (under valgrind one), every path. */
static void test_row(void **state)
{
	const mx_store *st = *state;
	DRL_FIXTURE_NEED(have);
	size_t row = (size_t)(st - stores);
	bool one = getenv("DRL_VALGRIND") != NULL;
	char uri[1600];
	uri_of(uri, sizeof uri, st, false);
	printf("  %s: %s\n", st->name, uri);
	int failed = 0;
	for (size_t sp = 0; sp < NSPECS; sp++) {
		if (one && sp != row % NSPECS)
			continue;
		printf("  %-16s %-42s", st->name, specs[sp]);
		for (int p = 0; p < NPATHS; p++) {
			cell c = {.p.path = (enum path)p};
			cell_spec(&c, (int)sp, false);
			drl_limiter *l;
			drl_error err = {0};
			drl_store *s = open_for(uri, c.spec, &l, &err);
			if (s == NULL)
				fail_msg("%s: %s", uri, err.message);
			plan pl;
			const char *why;
			bool runs = plan_of(l, (enum path)p, &pl, &why);
			/* Freed before the fork: no thread of the store's
			 * may run then. */
			drl_limiter_free(l);
			drl_store_free(s);
			const char *says =
				strchr(specs[sp], ';') && st->server != MEMORY
					? "several limits"
					: st->says;
			if (!runs && !strstr(why, says)) {
				failed++;
				printf("\n    FAIL %s / %s / %s: n/a, but the "
				       "reason does not name \"%s\": %s\n%-60s",
				       st->name, specs[sp], path_names[p], says,
				       why, "");
			}
			if (!runs) {
				printf(" %s:n/a", path_names[p]);
				rec.why[rec.na] = why;
				rec.where[rec.na][0] = st->name;
				rec.where[rec.na][1] = specs[sp];
				rec.where[rec.na++][2] = path_names[p];
				continue;
			}
			char msg[600] = "";
			int rc = check_exact(st, (int)sp, &pl, uri, msg,
					     sizeof msg);
			if (rc == 0 && st->server == MEMORY)
				rec.down_na++;
			else if (rc == 0)
				rc = check_down(st, (int)sp, &pl, msg,
						sizeof msg);
			rec.run++;
			rec.forced += pl.force_worker;
			printf(" %s%s:%s", path_names[p],
			       pl.force_worker ? "(forced)" : "",
			       rc ? "FAIL" : "ok");
			if (rc) {
				failed++;
				printf("\n    FAIL %s / %s / %s: %s\n%-60s",
				       st->name, specs[sp], path_names[p], msg,
				       "");
			}
		}
		printf("\n");
		fflush(stdout);
	}
	rec.failed += failed;
	if (failed)
		fail_msg("%s: %d cells failed", st->name, failed);
}

static int teardown(void **state)
{
	(void)state;
	servers_stop();
	/* The summary: n/a cells grouped by the library's reason. */
	printf("matrix: %d cells run (%d failed; %d of them on a worker "
	       "forced by the test hook), %d n/a, %lld s\n",
	       rec.run, rec.failed, rec.forced, rec.na,
	       (long long)((tu_mono_ms() - started_ms + 500) / 1000));
	printf("  store down n/a (%d cells): in process (memory://)\n",
	       rec.down_na);
	for (int i = 0; i < rec.na; i++) {
		int first = 1, n = 0;
		for (int k = 0; k < i && first; k++)
			first = strcmp(rec.why[k], rec.why[i]) != 0;
		if (!first)
			continue;
		for (int k = i; k < rec.na; k++)
			n += strcmp(rec.why[k], rec.why[i]) == 0;
		printf("  n/a (%d cells): %s\n", n, rec.why[i]);
		for (int k = i; k < rec.na; k++)
			if (strcmp(rec.why[k], rec.why[i]) == 0)
				printf("      %s / %s / %s\n", rec.where[k][0],
				       rec.where[k][1], rec.where[k][2]);
	}
	return 0;
}

int main(void)
{
	struct CMUnitTest tests[NSTORES];
	for (size_t i = 0; i < NSTORES; i++)
		tests[i] = (struct CMUnitTest){.name = stores[i].name,
					       .test_func = test_row,
					       .initial_state =
						       (void *)&stores[i]};
	return cmocka_run_group_tests(tests, setup, teardown);
}
