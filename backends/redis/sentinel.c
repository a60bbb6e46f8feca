/*
 * The Redis Sentinel store: the Redis store of whichever server the
 * sentinels name master, moved to the new master after a failover.
 *
 * Each master address is a store of backends/redis/store.c (its own pool,
 * pipes, holds and script cache), made when a sentinel first names it;
 * each sentinel is a small store of its own (its credentials, one
 * connection). MASTERS_MAX addresses are kept at once: a new address
 * beyond them (a failover to a new pod IP) takes the place of the one
 * longest out of use, once no call is on it (the master's `users`). This file only decides which master the
 * calls go to. hiredis stays in store.c and its connection layer.
 *
 * Finding the master. The sentinels are asked in turn, the one that
 * answered last first, with SENTINEL GET-MASTER-ADDR-BY-NAME; the server
 * named is asked ROLE, and only one that answers "master" becomes the
 * current master (a sentinel cut off from the others may still name the
 * old one; a replica being promoted may not have switched yet). That is
 * a resolution: at open (unless connect=lazy), then on this store's
 * resolver thread.
 *
 * When to ask again. The master's store calls back (drl__redis_watch)
 * whenever a call meets what may mean a failover: the server cannot be
 * reached, a connection breaks or times out, a reply says READONLY (the
 * server is a replica now: Sentinel turns the old master into one, and
 * kills its clients' connections when it does). The resolver then asks,
 * at most once every RETRY_GAP_MS while the trouble lasts; and every
 * sentinel_check_ms (default 1000, 0: never) in any case. And the
 * resolver keeps a subscription to every sentinel's +switch-master
 * (backends/redis/sub.c; one connection per sentinel and store, as
 * Jedis's sentinel pool does): a graceful failover (SENTINEL FAILOVER)
 * breaks none of this client's connections and leaves the old master a
 * writable master for seconds, so without the message the store would
 * write there until the next check. The sentinel that ran the failover
 * says it first; the new master named is checked with ROLE and becomes
 * the current one at once (on_switch). A subscription that breaks is
 * opened again after 250 ms, doubling to 8 s; the periodic check stays
 * for whatever a lost message misses.
 *
 * Moving. Switching is one atomic store of the current master: every call
 * that starts after it goes to the new master's store, whose pooled and
 * pipelined connections are opened there on demand; so both move
 * together, and nothing is reconnected by hand. A call already running on
 * the old master ends there, in a decision or an error (its own
 * timeout_ms bounds it, as any call's). A blocking call that failed
 * without anything having run (the old master refused the connection, or
 * refused the write: READONLY) waits for the resolver's next answer (at
 * most timeout_ms) and, if the master moved, runs once more on the new
 * one; any other failure is returned as it is (a command that may have
 * run is never sent twice) and the limiter's on_error policy applies. A
 * started call (the async API) is never retried: its error reaches its
 * callback. A thread's WATCH hold (tx=watch) stays with the old master's
 * store: its cas() on the new master finds no hold and answers
 * DRL_ECONFLICT, so the optimistic loop loads again there.
 *
 * Writes the old master acknowledged but had not replicated when it died
 * or was demoted are lost with it (Redis replication is asynchronous):
 * docs/failure.md says what that means for the limits.
 *
 * Threading: every method from any number of threads at once. The current
 * master is an atomic pointer; a call counts itself among its master's
 * users, then checks that it is still the current one (else it lets go
 * and looks again): so the resolver, which switches first and then finds
 * a master with no users, never frees a store a call is on (every access
 * sequentially consistent). The sentinels' and masters' lists are the
 * resolver's (and open's, before the resolver starts).
 */
#include "redis.h"
#include "forward.h"
#include "sentinel.h"
#include "thread.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SENTINELS_MAX 16
#define MASTERS_MAX 16 /* master addresses a store keeps at once */
#define SENTINEL_PORT 26379
#define DEFAULT_CHECK_MS 1000
#define CHECK_MS_MAX 3600000
#define RETRY_GAP_MS 100 /* resolutions at most this often on trouble */
#define NAME_MAX_BYTES 128
#define SUB_RETRY_MIN_MS 250  /* a lost subscription: first retry after */
#define SUB_RETRY_MAX_MS 8000 /* doubling up to this */

typedef struct mnode {
	drl_backend *b; /* the master's store (store.c) */
	char host[256];
	int port;
	atomic_int users; /* calls on b now (hold()) */
	uint64_t left;    /* ss->switches when it stopped being current */
} mnode;

typedef struct sstore {
	drl_backend parent; /* first: the core sees only this */
	drl_backend *tmpl;  /* the URI's options, copied into each master */
	char *name;         /* the master's name at the sentinels */
	int64_t timeout_ms;
	int64_t check_ms; /* 0: no periodic resolution */

	/* The resolver's (and open's, before the resolver starts). */
	drl_backend *sentinel[SENTINELS_MAX];
	char sentinel_where[SENTINELS_MAX][DRL_HOST_MAX + 8];
	size_t nsentinels;
	size_t ask_first;
	mnode masters[MASTERS_MAX];
	size_t nmasters;

	/* The resolver's subscriptions to +switch-master, one per sentinel:
	 * NULL while down, (re)opened at sub_at[i] (ms), the next wait
	 * after a failure sub_gap[i]. */
	drl__redis_sub *sub[SENTINELS_MAX];
	int64_t sub_at[SENTINELS_MAX], sub_gap[SENTINELS_MAX];

	/* The current master; NULL: none known yet. switches: how often it
	 * changed (the resolver's). */
	_Atomic(mnode *) cur;
	uint64_t switches;

	/* The resolver: kicked on trouble (a byte on the `wake` pipe, which
	 * its poll() watches with the subscriptions; wake_sent: one is
	 * unread), each resolution counted in `attempts` with its outcome
	 * (done_cv). Guarded by mu. */
	pthread_mutex_t mu;
	pthread_cond_t done_cv;
	int wake[2];
	bool wake_sent;
	bool kicked, running, stop, thread_on;
	uint64_t attempts;
	int64_t last_end_ms;
	drl_error last; /* the last resolution's error (code 0: none) */
	pthread_t thread;
} sstore;

/* ---- time --------------------------------------------------------------- */

/* The sentinel store counts in ms (timeout_ms, sentinel_check_ms), on
 * the library's monotonic clock; at_ms() makes the timespec its
 * condition variable (on CLOCK_MONOTONIC) waits for. */
static int64_t mono_ms(void)
{
	return drl_mono_us() / 1000;
}

static struct timespec at_ms(int64_t ms)
{
	struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
			      .tv_nsec = (long)(ms % 1000) * 1000000L};
	return ts;
}

/* ---- finding the master ------------------------------------------------- */

/* m becomes the current master (the resolver's). */
static void set_current(sstore *ss, mnode *m)
{
	mnode *was = atomic_load(&ss->cur);
	if (was == m)
		return;
	atomic_store(&ss->cur, m);
	if (was)
		was->left = ++ss->switches;
}

/* The current master, counted among its users (NULL: none known); let_go()
 * it when the call is made. */
static mnode *hold(sstore *ss)
{
	for (;;) {
		mnode *m = atomic_load(&ss->cur);
		if (m == NULL)
			return NULL;
		atomic_fetch_add(&m->users, 1);
		if (atomic_load(&ss->cur) == m)
			return m;
		atomic_fetch_sub(&m->users, 1); /* switched meanwhile */
	}
}

static void let_go(mnode *m)
{
	atomic_fetch_sub(&m->users, 1);
}

/* A place for a new master address: a free one, else the one longest
 * out of use that no call is on (its store freed: every call it had
 * started ends first, pipe.c). NULL when every one is in use. */
static mnode *free_place(sstore *ss)
{
	for (size_t i = 0; i < ss->nmasters; i++)
		if (ss->masters[i].b == NULL) /* a store that failed to open */
			return &ss->masters[i];
	if (ss->nmasters < MASTERS_MAX) {
		mnode *m = &ss->masters[ss->nmasters++];
		atomic_init(&m->users, 0);
		return m;
	}
	mnode *cur = atomic_load(&ss->cur), *best = NULL;
	for (size_t i = 0; i < ss->nmasters; i++) {
		mnode *m = &ss->masters[i];
		if (m != cur && atomic_load(&m->users) == 0 &&
		    (best == NULL || m->left < best->left))
			best = m;
	}
	if (best) {
		best->b->destroy(best->b);
		best->b = NULL;
	}
	return best;
}

/* The master at host:port, its store made (and watched) on first sight. */
static void on_trouble(void *arg);
static int master_node(sstore *ss, const char *host, int port, mnode **out,
		       drl_error *err)
{
	for (size_t i = 0; i < ss->nmasters; i++)
		if (ss->masters[i].b && ss->masters[i].port == port &&
		    strcmp(ss->masters[i].host, host) == 0) {
			*out = &ss->masters[i];
			return 0;
		}
	mnode *m = free_place(ss);
	if (m == NULL)
		return drl_error_set(err, DRL_EUNAVAILABLE,
				     "redis sentinel \"%.64s\": calls are on "
				     "all %d master addresses kept; %.64s:%d "
				     "must wait",
				     ss->name, MASTERS_MAX, host, port);
	int rc = drl__redis_node(&m->b, ss->tmpl, host, port, err);
	if (rc) {
		m->b = NULL; /* a free place, found again next time */
		return rc;
	}
	drl__redis_watch(m->b, on_trouble, ss);
	snprintf(m->host, sizeof m->host, "%s", host);
	m->port = port;
	m->left = ss->switches;
	*out = m;
	return 0;
}

/* Ask sentinel i for the master and check it: 0 with *out the master's
 * store, or an error saying what sentinel i said or why it did not. */
static int ask_one(sstore *ss, size_t i, mnode **out, bool *unknown,
		   drl_error *err)
{
	char host[256], role[16];
	int port;
	bool known;
	const char *where = ss->sentinel_where[i];
	int rc = drl__redis_sentinel_master(ss->sentinel[i], ss->name, host,
					    &port, &known, err);
	if (rc)
		return rc;
	*unknown = !known;
	if (!known)
		return drl_error_set(err, DRL_ESTORE,
				     "redis sentinel %s monitors no master "
				     "named \"%.64s\"",
				     where, ss->name);
	mnode *m;
	rc = master_node(ss, host, port, &m, err);
	if (rc == 0)
		rc = drl__redis_role(m->b, role, err);
	if (rc) {
		char was[160];
		snprintf(was, sizeof was, "%.150s", err ? err->message : "");
		return drl_error_set(err, rc,
				     "redis sentinel %s names %.64s:%d master "
				     "of \"%.64s\", which fails: %s",
				     where, host, port, ss->name, was);
	}
	if (strcmp(role, "master") != 0)
		return drl_error_set(err, DRL_EUNAVAILABLE,
				     "redis sentinel %s names %.64s:%d master "
				     "of \"%.64s\", which says it is a %s "
				     "(a failover in progress?)",
				     where, host, port, ss->name, role);
	*out = m;
	return 0;
}

/*
 * One resolution: the sentinels in turn until one names a server that
 * says it is the master, which becomes the current one. When none does:
 * an unknown name wins (DRL_ESTORE: a configuration error, whatever the
 * other sentinels' state), else the last sentinel's error.
 */
static int resolve(sstore *ss, drl_error *err)
{
	drl_error e = {0}, unknown = {0};
	int rc = DRL_EUNAVAILABLE;
	for (size_t k = 0; k < ss->nsentinels; k++) {
		size_t i = (ss->ask_first + k) % ss->nsentinels;
		mnode *m = NULL;
		bool no_such = false;
		memset(&e, 0, sizeof e);
		rc = ask_one(ss, i, &m, &no_such, &e);
		if (rc == 0) {
			ss->ask_first = i;
			set_current(ss, m);
			return 0;
		}
		if (no_such)
			unknown = e;
	}
	if (unknown.code)
		e = unknown;
	if (ss->nsentinels > 1 && !unknown.code) {
		char was[sizeof e.message];
		memcpy(was, e.message, sizeof was);
		drl_error_set(&e, e.code ? e.code : DRL_EUNAVAILABLE,
			      "redis sentinel: none of %zu sentinels gave a "
			      "master for \"%.64s\"; the last: %.180s",
			      ss->nsentinels, ss->name, was);
	}
	if (err)
		*err = e;
	return e.code ? e.code : DRL_EUNAVAILABLE;
}

/* ---- the resolver thread ------------------------------------------------ */

/* Wake the resolver's poll(); mu held. */
static void wake_locked(sstore *ss)
{
	if (ss->wake_sent)
		return;
	ss->wake_sent = true;
	ssize_t w = write(ss->wake[1], "k", 1);
	(void)w; /* full: a byte is unread, the resolver wakes anyway */
}

/* The master's store met trouble: have the resolver ask soon. */
static void on_trouble(void *arg)
{
	sstore *ss = arg;
	pthread_mutex_lock(&ss->mu);
	ss->kicked = true;
	wake_locked(ss);
	pthread_mutex_unlock(&ss->mu);
}

/* A resolution's end (rc 0: the master is known) for the waiters of
 * await_resolution; a failed one asks again soon. */
static void resolution_done(sstore *ss, int rc, const drl_error *e)
{
	pthread_mutex_lock(&ss->mu);
	ss->running = false;
	ss->attempts++;
	ss->last = *e;
	if (rc == 0)
		ss->last.code = 0;
	else if (ss->last.code == 0)
		ss->last.code = rc;
	ss->last_end_ms = mono_ms();
	pthread_cond_broadcast(&ss->done_cv);
	pthread_mutex_unlock(&ss->mu);
}

/*
 * A sentinel said +switch-master "<name> <old ip> <old port> <new ip>
 * <new port>" for our name: the new master, once ROLE says it is one,
 * becomes the current one at once (the sentinel that ran the failover
 * says it first; the others learn it from its hello messages, up to
 * seconds later, and until then name the old master, which stays a
 * writable master a while); sentinel i is asked first from now on. When
 * the check fails, a resolution follows.
 */
static void on_switch(sstore *ss, size_t i, const char *host, int port)
{
	mnode *m = NULL;
	drl_error e = {0};
	char role[16];
	int rc = master_node(ss, host, port, &m, &e);
	if (rc == 0 && m == atomic_load(&ss->cur))
		return; /* there already (another sentinel said it first) */
	pthread_mutex_lock(&ss->mu);
	ss->running = true;
	pthread_mutex_unlock(&ss->mu);
	if (rc == 0)
		rc = drl__redis_role(m->b, role, &e);
	if (rc == 0 && strcmp(role, "master") != 0)
		rc = drl_error_set(&e, DRL_EUNAVAILABLE,
				   "redis sentinel %s: +switch-master to "
				   "%.64s:%d, which says it is a %s",
				   ss->sentinel_where[i], host, port, role);
	if (rc == 0) {
		ss->ask_first = i;
		set_current(ss, m);
	}
	resolution_done(ss, rc, &e);
	if (rc)
		on_trouble(ss);
}

/* What one sentinel's subscription read: the last +switch-master for
 * our name, if any. */
typedef struct heard {
	sstore *ss;
	bool any;
	char host[256];
	int port;
} heard;

static void on_message(void *arg, const char *msg, size_t len)
{
	heard *h = arg;
	char name[NAME_MAX_BYTES + 1], host[256];
	int port;
	(void)len;
	if (sscanf(msg, "%128s %*s %*d %255s %d", name, host, &port) != 3 ||
	    strcmp(name, h->ss->name) != 0 || port < 1 || port > 65535)
		return;
	memcpy(h->host, host, sizeof host);
	h->port = port;
	h->any = true;
}

/* Subscription i is lost (or could not be had): try again later. */
static void sub_lost(sstore *ss, size_t i, int64_t now)
{
	drl__redis_sub_close(ss->sub[i]);
	ss->sub[i] = NULL;
	ss->sub_gap[i] = ss->sub_gap[i] ? ss->sub_gap[i] * 2 : SUB_RETRY_MIN_MS;
	if (ss->sub_gap[i] > SUB_RETRY_MAX_MS)
		ss->sub_gap[i] = SUB_RETRY_MAX_MS;
	ss->sub_at[i] = now + ss->sub_gap[i];
}

/* Open the first subscription whose time has come (one at a time: an
 * unreachable sentinel costs timeout_ms, and a kick must not wait for
 * all of them). The time the next one is due (-1: none). */
static int64_t subs_open(sstore *ss, int64_t now)
{
	int64_t next = -1;
	bool opened = false;
	for (size_t i = 0; i < ss->nsentinels; i++) {
		if (ss->sub[i])
			continue;
		if (!opened && ss->sub_at[i] <= now) {
			opened = true;
			drl_error e = {0};
			if (drl__redis_sub_open(&ss->sub[i], ss->sentinel[i],
						"+switch-master", &e) == 0)
				ss->sub_gap[i] = 0;
			else
				sub_lost(ss, i, mono_ms());
			if (ss->sub[i])
				continue;
		}
		if (next < 0 || ss->sub_at[i] < next)
			next = ss->sub_at[i];
	}
	return opened ? mono_ms() : next;
}

/* Wait in poll() until `until` (ms; -1: no end) for the wake pipe or a
 * subscription's message, and act on what came. */
static void await_events(sstore *ss, int64_t until)
{
	struct pollfd p[SENTINELS_MAX + 1];
	size_t who[SENTINELS_MAX + 1], n = 0;
	p[n++] = (struct pollfd){.fd = ss->wake[0], .events = POLLIN};
	for (size_t i = 0; i < ss->nsentinels; i++)
		if (ss->sub[i]) {
			who[n] = i;
			p[n++] = (struct pollfd){
				.fd = drl__redis_sub_fd(ss->sub[i]),
				.events = POLLIN};
		}
	int64_t left = until < 0 ? -1 : until - mono_ms();
	if (until >= 0 && left < 0)
		left = 0;
	if (poll(p, (nfds_t)n, left > INT32_MAX ? INT32_MAX : (int)left) <= 0)
		return;
	if (p[0].revents) {
		char buf[64];
		while (read(ss->wake[0], buf, sizeof buf) > 0)
			;
		pthread_mutex_lock(&ss->mu);
		ss->wake_sent = false;
		pthread_mutex_unlock(&ss->mu);
	}
	for (size_t k = 1; k < n; k++) {
		if (p[k].revents == 0)
			continue;
		size_t i = who[k];
		heard h = {.ss = ss};
		drl_error e = {0};
		if (drl__redis_sub_read(ss->sub[i], on_message, &h, &e) != 0)
			sub_lost(ss, i, mono_ms());
		if (h.any)
			on_switch(ss, i, h.host, h.port);
	}
}

/*
 * Resolve when kicked (at most every RETRY_GAP_MS) or every check_ms;
 * meanwhile keep a subscription to every sentinel's +switch-master and
 * move at once when one is heard. Until stopped.
 */
static void *resolver(void *arg)
{
	sstore *ss = arg;
	pthread_mutex_lock(&ss->mu);
	while (!ss->stop) {
		int64_t due = ss->kicked     ? ss->last_end_ms + RETRY_GAP_MS
			      : ss->check_ms ? ss->last_end_ms + ss->check_ms
					     : -1;
		int64_t now = mono_ms();
		if (due >= 0 && now >= due) {
			ss->kicked = false;
			ss->running = true;
			pthread_mutex_unlock(&ss->mu);
			drl_error e = {0};
			int rc = resolve(ss, &e);
			resolution_done(ss, rc, &e);
			pthread_mutex_lock(&ss->mu);
			continue;
		}
		pthread_mutex_unlock(&ss->mu);
		int64_t sub_due = subs_open(ss, now);
		if (sub_due >= 0 && (due < 0 || sub_due < due))
			due = sub_due;
		await_events(ss, due);
		pthread_mutex_lock(&ss->mu);
	}
	pthread_mutex_unlock(&ss->mu);
	return NULL;
}

/* Kick the resolver and wait (until dl_ms, CLOCK_MONOTONIC) for a
 * resolution that starts after now. */
static void await_resolution(sstore *ss, int64_t dl_ms)
{
	struct timespec dl = at_ms(dl_ms);
	pthread_mutex_lock(&ss->mu);
	uint64_t target = ss->attempts + (ss->running ? 2 : 1);
	ss->kicked = true;
	wake_locked(ss);
	while (!ss->stop && ss->attempts < target)
		if (pthread_cond_timedwait(&ss->done_cv, &ss->mu, &dl) ==
		    ETIMEDOUT)
			break;
	pthread_mutex_unlock(&ss->mu);
}

/* The current master for a blocking call, held (let_go() it); when none
 * is known yet (open was lazy, or no resolution has succeeded), one
 * resolution is awaited, then its error returned. */
static mnode *master(sstore *ss, drl_error *err)
{
	mnode *m = hold(ss);
	if (m)
		return m;
	await_resolution(ss, mono_ms() + ss->timeout_ms);
	m = hold(ss);
	if (m)
		return m;
	pthread_mutex_lock(&ss->mu);
	drl_error e = ss->last;
	pthread_mutex_unlock(&ss->mu);
	if (e.code == 0)
		drl_error_set(&e, DRL_EUNAVAILABLE,
			      "redis sentinel \"%.64s\": no master known yet "
			      "(asking the sentinels)",
			      ss->name);
	if (err)
		*err = e;
	return NULL;
}

/* ---- calls -------------------------------------------------------------- */

/* Whether a call that failed with rc may run on a new master: nothing of
 * it ran (the master's store says so: DRL__UNSENT, redis.h) and it did
 * not fail for want of time (its timeout_ms is spent) or memory. */
static bool may_rerun(int rc)
{
	int code = drl__redis_code(rc);
	return drl__redis_unsent(rc) && code != DRL_ETIMEDOUT &&
	       code != DRL_ENOMEM;
}

/* Run op on the current master; once more on a new master when nothing
 * of it ran and the resolver moved the master meanwhile. */
static int run(sstore *ss, drl__redis_fwd_fn op, void *arg, drl_error *err)
{
	drl_error e = {0};
	mnode *m = master(ss, &e);
	int rc = m ? op(m->b, arg, &e) : e.code;
	if (rc && m && may_rerun(rc)) {
		/* m stays held: its place is not taken while n is compared */
		await_resolution(ss, mono_ms() + ss->timeout_ms);
		mnode *n = hold(ss);
		if (n && n != m) {
			memset(&e, 0, sizeof e);
			rc = op(n->b, arg, &e);
		}
		if (n)
			let_go(n);
	}
	if (m)
		let_go(m);
	rc = drl__redis_code(rc);
	if (rc && err)
		*err = e;
	return rc;
}

static int s_incr(drl_backend *b, drl_bytes key, int64_t delta, int64_t ttl_us,
		  int64_t *value, drl_error *err)
{
	drl__redis_fwd a = {
		.key = key, .delta = delta, .ttl_us = ttl_us, .values = value};
	return run((sstore *)b, drl__redis_fwd_incr, &a, err);
}

static int s_get_many(drl_backend *b, size_t n, const drl_bytes *keys,
		      int64_t *values, drl_error *err)
{
	drl__redis_fwd a = {.n = n, .keys = keys, .values = values};
	return run((sstore *)b, drl__redis_fwd_get_many, &a, err);
}

static int s_load(drl_backend *b, drl_bytes key, void *buf, size_t cap,
		  size_t *len, uint64_t *version, drl_error *err)
{
	drl__redis_fwd a =
		drl__redis_fwd_load_args(key, buf, cap, len, version);
	return run((sstore *)b, drl__redis_fwd_load, &a, err);
}

static int s_cas(drl_backend *b, drl_bytes key, const void *blob, size_t len,
		 uint64_t version, int64_t ttl_us, drl_error *err)
{
	drl__redis_fwd a = {.key = key,
			    .blob = blob,
			    .len = len,
			    .version = version,
			    .ttl_us = ttl_us};
	return run((sstore *)b, drl__redis_fwd_cas, &a, err);
}

static int s_eval(drl_backend *b, const drl_script *script, size_t nkeys,
		  const drl_bytes *keys, size_t nargs, const int64_t *iargs,
		  int64_t *out, size_t nout, size_t *nret, drl_error *err)
{
	drl__redis_fwd a = drl__redis_fwd_eval_args(script, nkeys, keys, nargs,
						    iargs, out, nout, nret);
	return run((sstore *)b, drl__redis_fwd_eval, &a, err);
}

/* A policy on the master, as eval; blocking only: forwarded policies
 * are (forward.c offers no DRL_CAP_POLICY_START). */
static int s_eval_policy(drl_backend *b, drl_channel *ch, size_t n,
			 const drl_script_call *calls, int64_t *out,
			 size_t nout, size_t *nret, drl_eval_done_fn done,
			 void *arg, drl_error *err)
{
	(void)ch, (void)arg;
	if (done != NULL)
		return DRL_ENOTSUP;
	drl__redis_fwd a = {
		.n = n, .calls = calls, .out = out, .nout = nout, .nret = nret};
	return run((sstore *)b, drl__redis_fwd_policy, &a, err);
}

static int s_now(drl_backend *b, int64_t *now_us, drl_error *err)
{
	drl__redis_fwd a = {.values = now_us};
	return run((sstore *)b, drl__redis_fwd_now, &a, err);
}

static int s_del(drl_backend *b, size_t n, const drl_bytes *keys,
		 drl_error *err)
{
	drl__redis_fwd a = {.n = n, .keys = keys};
	return run((sstore *)b, drl__redis_fwd_del, &a, err);
}

static int s_add_read(drl_backend *b, size_t n, const drl_bytes *keys,
		      int64_t delta, int64_t ttl_us, int64_t *values,
		      drl_error *err)
{
	drl__redis_fwd a = {.n = n,
			    .keys = keys,
			    .delta = delta,
			    .ttl_us = ttl_us,
			    .values = values};
	return run((sstore *)b, drl__redis_fwd_add_read, &a, err);
}

static int s_trim(drl_backend *b, size_t n, const drl_bytes *keys,
		  int64_t ttl_us, drl_error *err)
{
	drl__redis_fwd a = {.n = n, .keys = keys, .ttl_us = ttl_us};
	return run((sstore *)b, drl__redis_fwd_trim, &a, err);
}

/* A started call goes to the current master as it is, held while it
 * starts (let_go() it after: the master's store ends what it started
 * even when it is freed); none known yet: DRL_EUNAVAILABLE at once (an
 * event loop must not wait for the sentinels), the resolver kicked. */
static mnode *master_now(sstore *ss, drl_error *err)
{
	mnode *m = hold(ss);
	if (m == NULL) {
		on_trouble(ss);
		drl_error_set(err, DRL_EUNAVAILABLE,
			      "redis sentinel \"%.64s\": no master known yet "
			      "(asking the sentinels)",
			      ss->name);
	}
	return m;
}

/* The started calls go to the master on its own I/O: a Sentinel store
 * has no channels (ch is NULL). */
static int s_eval_start(drl_backend *b, drl_channel *ch,
			const drl_script *script, size_t nkeys,
			const drl_bytes *keys, size_t nargs,
			const int64_t *iargs, size_t nout,
			drl_eval_done_fn done, void *arg, drl_error *err)
{
	mnode *m = master_now((sstore *)b, err);
	if (m == NULL)
		return DRL_EUNAVAILABLE;
	int rc = m->b->eval_start(m->b, ch, script, nkeys, keys, nargs, iargs,
				  nout, done, arg, err);
	let_go(m);
	return rc;
}

static int s_add_read_start(drl_backend *b, drl_channel *ch, size_t n,
			    const drl_bytes *keys, int64_t delta,
			    int64_t ttl_us, drl_eval_done_fn done, void *arg,
			    drl_error *err)
{
	mnode *m = master_now((sstore *)b, err);
	if (m == NULL)
		return DRL_EUNAVAILABLE;
	int rc = m->b->add_read_start(m->b, ch, n, keys, delta, ttl_us, done,
				      arg, err);
	let_go(m);
	return rc;
}

static int s_trim_start(drl_backend *b, drl_channel *ch, size_t n,
			const drl_bytes *keys, int64_t ttl_us,
			drl_eval_done_fn done, void *arg, drl_error *err)
{
	mnode *m = master_now((sstore *)b, err);
	if (m == NULL)
		return DRL_EUNAVAILABLE;
	int rc = m->b->trim_start(m->b, ch, n, keys, ttl_us, done, arg, err);
	let_go(m);
	return rc;
}

/* ---- open, destroy ------------------------------------------------------ */

static void s_destroy(drl_backend *b)
{
	sstore *ss = (sstore *)b;
	if (ss == NULL)
		return;
	if (ss->thread_on) {
		pthread_mutex_lock(&ss->mu);
		ss->stop = true;
		wake_locked(ss);
		pthread_cond_broadcast(&ss->done_cv);
		pthread_mutex_unlock(&ss->mu);
		pthread_join(ss->thread, NULL);
	}
	for (size_t i = 0; i < ss->nsentinels; i++)
		drl__redis_sub_close(ss->sub[i]);
	for (size_t i = 0; i < ss->nmasters; i++)
		if (ss->masters[i].b)
			ss->masters[i].b->destroy(ss->masters[i].b);
	for (size_t i = 0; i < ss->nsentinels; i++)
		ss->sentinel[i]->destroy(ss->sentinel[i]);
	if (ss->tmpl)
		ss->tmpl->destroy(ss->tmpl);
	pthread_cond_destroy(&ss->done_cv);
	pthread_mutex_destroy(&ss->mu);
	close(ss->wake[0]);
	close(ss->wake[1]);
	free(ss->name);
	free(ss);
}

/* The master's name from the URI's path: 1 to NAME_MAX_BYTES printable
 * bytes, no space (Sentinel's names are single words). */
static int take_name(sstore *ss, const char *path, drl_error *err)
{
	size_t n = path ? strlen(path) : 0;
	if (n == 0)
		return drl_error_set(err, DRL_EINVAL,
				     "redis-sentinel URI names no master "
				     "(expected redis-sentinel://host:port"
				     "[,host:port]/master-name)");
	if (n > NAME_MAX_BYTES)
		return drl_error_set(err, DRL_EINVAL,
				     "redis-sentinel URI: master name of %zu "
				     "bytes; at most %d",
				     n, NAME_MAX_BYTES);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)path[i] <= ' ' ||
		    (unsigned char)path[i] == 0x7f)
			return drl_error_set(err, DRL_EINVAL,
					     "redis-sentinel URI: the master "
					     "name holds a space or control "
					     "byte at %zu",
					     i);
	ss->name = strdup(path);
	if (ss->name == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	return 0;
}

/* What the URI says: the sentinel options (read before the template,
 * which checks that every option was used), the name, the sentinels. */
static int parse(sstore *ss, drl_uri *uri, drl_error *err)
{
	const char *suser = drl_uri_option(uri, "sentinel_user");
	const char *spass = drl_uri_option(uri, "sentinel_password");
	if (suser && spass == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "URI option sentinel_user needs "
				     "sentinel_password");
	int rc = drl_uri_option_int(uri, "sentinel_check_ms", 0, CHECK_MS_MAX,
				    DEFAULT_CHECK_MS, &ss->check_ms, err);
	if (rc == 0)
		rc = take_name(ss, drl_uri_path(uri), err);
	drl_hostport hp[SENTINELS_MAX];
	size_t n = 0;
	if (rc == 0 &&
	    (drl_uri_hosts(uri) == NULL || drl_uri_hosts(uri)[0] == '\0'))
		rc = drl_error_set(err, DRL_EINVAL,
				   "redis-sentinel URI names no sentinel "
				   "(expected redis-sentinel://host:port"
				   "[,host:port]/master-name)");
	if (rc == 0)
		rc = drl_hostport_list(drl_uri_hosts(uri), SENTINEL_PORT,
				       "redis-sentinel URI", hp, SENTINELS_MAX,
				       &n, err);
	if (rc == 0)
		rc = drl__redis_template(&ss->tmpl, uri, err);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		rc = drl__redis_sentinel_node(&ss->sentinel[i], ss->tmpl,
					      hp[i].host, hp[i].port, suser,
					      spass, err);
		if (rc == 0) {
			snprintf(ss->sentinel_where[i],
				 sizeof ss->sentinel_where[i], "%s%.255s%s:%d",
				 hp[i].ipv6 ? "[" : "", hp[i].host,
				 hp[i].ipv6 ? "]" : "", hp[i].port);
			ss->nsentinels++;
		}
	}
	return rc;
}

/* Mutex, condition variable (on CLOCK_MONOTONIC), wake pipe; -1 on
 * failure. */
static int init_sync(sstore *ss)
{
	pthread_condattr_t ca;
	if (pipe2(ss->wake, O_CLOEXEC | O_NONBLOCK) != 0)
		return -1;
	if (pthread_condattr_init(&ca) != 0)
		goto no_cv;
	int rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (rc == 0 && pthread_cond_init(&ss->done_cv, &ca) != 0)
		rc = -1;
	pthread_condattr_destroy(&ca);
	if (rc != 0)
		goto no_cv;
	if (pthread_mutex_init(&ss->mu, NULL) == 0)
		return 0;
	pthread_cond_destroy(&ss->done_cv);
no_cv:
	close(ss->wake[0]);
	close(ss->wake[1]);
	return -1;
}

/* The resolver thread, every signal blocked (it inherits the mask). */
static int start_resolver(sstore *ss)
{
	if (drl__redis_thread_start(&ss->thread, resolver, ss) != 0)
		return -1;
	ss->thread_on = true;
	return 0;
}

static const drl_backend s_methods = {
	.destroy = s_destroy,
	.incr = s_incr,
	.get_many = s_get_many,
	.load = s_load,
	.cas = s_cas,
	.eval = s_eval,
	.now = s_now,
	.del = s_del,
	.add_read = s_add_read,
	.eval_start = s_eval_start,
	.add_read_start = s_add_read_start,
	.trim = s_trim,
	.trim_start = s_trim_start,
	.eval_policy = s_eval_policy,
};

int drl__redis_sentinel_open(drl_backend **out, drl_uri *uri, drl_error *err)
{
	*out = NULL;
	sstore *ss = calloc(1, sizeof *ss);
	if (ss == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	if (init_sync(ss) != 0) {
		free(ss);
		return drl_error_set(err, DRL_ENOMEM,
				     "redis sentinel: cannot make a mutex");
	}
	atomic_init(&ss->cur, NULL);
	int rc = parse(ss, uri, err);
	if (rc == 0) {
		ss->timeout_ms = drl__redis_timeout_ms(ss->tmpl);
		/* The template's version and caps, and every method of our
		 * own: a slot copied from the template would call a Redis
		 * store's function on this struct (a trim_start copied so was
		 * a SIGSEGV on the first started counter decision). A slot
		 * the template fills and this list forgets stays NULL, which
		 * the core reads as "not offered". */
		ss->parent = (drl_backend){.version = ss->tmpl->version,
					   .caps = ss->tmpl->caps};
		ss->parent.name = "redis-sentinel";
		drl__redis_fwd_methods(&ss->parent, ss->tmpl, &s_methods);
		if (!drl__redis_template_lazy(ss->tmpl))
			rc = resolve(ss, err);
	}
	if (rc == 0) {
		/* Lazy: the first resolution at once. */
		ss->kicked = atomic_load(&ss->cur) == NULL;
		ss->last_end_ms = mono_ms() - RETRY_GAP_MS;
		if (start_resolver(ss) != 0)
			rc = drl_error_set(err, DRL_ENOMEM,
					   "redis sentinel: cannot start the "
					   "resolver thread");
	}
	if (rc) {
		s_destroy(&ss->parent);
		return rc;
	}
	*out = &ss->parent;
	return 0;
}
