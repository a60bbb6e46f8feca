/*
 * The Redis store, over hiredis 0.14 blocking contexts.
 *
 * Files. This one is the store: the pool, the holds, its commands, open
 * and destroy, and the hooks of the Redis Cluster store. Beside it:
 * backends/redis_conn.c, the connection layer (one connection: opening
 * it, a call's round trip on it, what its replies and errors mean;
 * declared in backends/redis_conn.h), backends/redis_script.c (the
 * server-side scripts of tx=lua: EVALSHA, the SHA1 cache, NOSCRIPT,
 * started script calls), backends/redis_uri.c (the URI into a store's
 * settings) and backends/redis_pipe.c (the shared connections).
 *
 * Connections. A redisContext is not thread-safe, so the store keeps a
 * small pool: a mutex, a LIFO free list, and at most `pool` connections
 * serving calls at once (callers wait up to timeout_ms for one). A
 * connection is opened on demand with the connect timeout, given the
 * command timeout, and AUTH/SELECT on every (re)connect. One that saw an
 * I/O error, a timeout or a reply we could not follow is freed, never
 * reused; the next checkout connects afresh. Every command goes through
 * redisAppendCommandArgv with explicit lengths (keys and blobs are binary)
 * and a call's commands are pipelined: one round trip per primitive.
 *
 * Shared connections. Calls that need no connection state of their own
 * (scripts, counters, GETs, TIME, DEL) go through `pipelines=N` connections
 * that all threads share (backends/redis_pipe.c), unless this thread holds
 * a connection of the store (below) or the call sends ASKING; they still
 * format their commands with drl__redis_append() and read them with
 * drl__redis_collect(), on a proxy conn (drl__redis_acquire_shared()).
 * Those two, here, are the one place that sends a call to its own
 * connection (the connection layer) or to the pipes: the connection layer
 * knows one connection and nothing above it, the pipes use it
 * (backends/redis_conn.h draws the layers).
 *
 * load -> cas. WATCH belongs to a connection, so cas() must run on the
 * connection its load() watched. load() leaves that connection "held" by
 * the calling thread (one per thread, across all stores): the thread's
 * hold records the store, the key and the version token load() returned.
 * cas() on the same thread, store, key and version takes it back and
 * sends MULTI/SET/EXEC on it (tx_call(), the store's one transaction). Any other call on that thread takes the held
 * connection too (same store) or gives it back to its pool (other store);
 * either way a connection whose WATCH may still be pending is marked
 * `watching` and its next user sends UNWATCH first, pipelined in front of
 * its own commands, so a leftover WATCH can never fail an unrelated EXEC.
 * A cas() with no matching hold cannot be checked: version 0 falls back to
 * SET NX (exactly "only if absent"), any other version is DRL_ECONFLICT
 * (the caller reloads). A thread's hold is given back when the thread
 * exits (a pthread key destructor).
 *
 * Pool size. New connections are opened only while fewer than `pool` are
 * idle or in a call; held connections do not count (a thread that never
 * calls again must not starve the others), and a connection released
 * while more than pool + held are idle or in a call is closed. So calls
 * never wait on an abandoned hold, threads cycling load/cas under load do
 * not churn connections, and a store has at most pool + 2 x (threads
 * holding one) connections, back towards `pool` as holds end.
 * Holds refer to their store by a never-reused id looked up in a registry
 * of live stores, so a hold that outlives its store (destroyed meanwhile,
 * which frees the held connection) is simply forgotten.
 *
 * Batches (tx=lua, DRL_CAP_BATCH). One Redis holds every key, so eval()
 * takes a script with any number of keys together: the core decides a
 * chunk of a batch with one EVALSHA of a twin's batch variant. (Redis
 * Cluster would need a script's keys in one hash slot; this store speaks
 * to one server.)
 *
 * Threading: every method may be called from any number of threads at
 * once; destroy() must not run concurrently with any other method.
 *
 * Errors: connect refused, error replies, WRONGTYPE, OOM: DRL_ESTORE with
 * Redis's text; a connect or command timeout: DRL_ETIMEDOUT; a counter or
 * TIME reply that is not an integer: DRL_ECORRUPT. The password is never
 * put into a message. Writes to a connection the server closed would raise
 * SIGPIPE (hiredis uses write()), so SIGPIPE is blocked in the calling
 * thread around each round trip and a SIGPIPE it caused is discarded.
 */
#include "redis.h"
#include "redis_conn.h"
#include "redis_uri.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KEY_STACK 512 /* prefixed keys up to this size need no malloc */
#define GET_STACK 16  /* get_many replies on the stack */

/* ---- types -------------------------------------------------------------- */

/* The connection a thread keeps between load() and cas(). */
typedef struct hold {
	rstore *store; /* compare only; dereference only after an id check */
	uint64_t store_id;
	conn *c; /* NULL: nothing held */
} hold;

/* ---- registry of live stores, thread holds ------------------------------ */

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static rstore *reg_head;
static uint64_t reg_last_id;

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t hold_key;
static bool hold_key_ok;

/* Unlink c from s's held list (s->mu held). */
static void held_unlink(rstore *s, conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		s->held = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->next = c->prev = NULL;
	s->nheld--;
}

/*
 * Give the connection h keeps back to its store's pool, WATCH possibly
 * still pending (its next user sends UNWATCH first). When the store is
 * gone (it freed the connection), just forget it. h is the calling
 * thread's own hold (or one of an exiting thread).
 */
static void drop_hold(hold *h)
{
	conn *c = h->c;
	conn *dead = NULL;
	if (c == NULL)
		return;
	h->c = NULL;
	pthread_mutex_lock(&reg_mu);
	rstore *s = reg_head;
	while (s && s->id != h->store_id)
		s = s->reg_next;
	if (s) {
		pthread_mutex_lock(&s->mu);
		held_unlink(s, c);
		if (!c->broken && s->nconn < s->cap + s->nheld) {
			c->next = s->free;
			s->free = c;
			s->nconn++;
			pthread_cond_signal(&s->cv);
		} else {
			dead = c;
		}
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_unlock(&reg_mu);
	if (dead)
		drl__redis_conn_free(dead);
}

/* Thread exit: give back what the thread still holds. */
static void hold_destructor(void *p)
{
	hold *h = p;
	drop_hold(h);
	free(h);
}

static void make_hold_key(void)
{
	hold_key_ok = pthread_key_create(&hold_key, hold_destructor) == 0;
}

/* The calling thread's hold; created when `create` (NULL when that fails
 * or when there is none). */
static hold *thread_hold(bool create)
{
	hold *h = pthread_getspecific(hold_key);
	if (h || !create)
		return h;
	h = calloc(1, sizeof *h);
	if (h && pthread_setspecific(hold_key, h) != 0) {
		free(h);
		h = NULL;
	}
	return h;
}

/* 1 when h holds a connection of s. */
static bool holds_for(const hold *h, const rstore *s)
{
	return h && h->c && h->store == s && h->store_id == s->id;
}

/* Take the connection h holds for s into the calling call (counted in
 * the pool again; it may exceed `cap` until released), with a fresh
 * deadline. */
static conn *take_own(rstore *s, hold *h)
{
	conn *c = h->c;
	h->c = NULL;
	c->deadline = drl__redis_deadline_in(s->timeout_ms);
	pthread_mutex_lock(&s->mu);
	held_unlink(s, c);
	s->nconn++;
	pthread_mutex_unlock(&s->mu);
	return c;
}

/* ---- Redis Cluster: ASKING ---------------------------------------------- */

/* Whether the calling thread's calls send ASKING; see redis.h.
 * Thread-local because the vtable has no room for it, and a call runs
 * on one thread. (Its last redirect is backends/redis_conn.c's.) */
static _Thread_local bool asking_calls;

void drl__redis_asking(bool on)
{
	asking_calls = on;
}

/* ---- a call's start, a transaction's replies ---------------------------- */

/* Start a call on c: a connection that may still watch something gets an
 * UNWATCH in front of the call's commands. `watching` is cleared now, not
 * when the reply arrives: the call may queue a WATCH of its own after the
 * UNWATCH (load), and if the round trip fails c is dropped anyway. */
/* A call's count of queued and read commands starts over; it sends
 * ASKING when the thread says so (drl__redis_asking). */
static void call_start(conn *c)
{
	c->nqueued = c->nread = 0;
	c->ask_bits = 0;
	c->in_multi = false;
	c->asking = asking_calls;
}

int drl__redis_begin(rstore *s, conn *c, drl_error *err)
{
	call_start(c);
	c->unwatch_queued = false;
	if (c->shared)
		c->qlen = 0;
	if (!c->watching)
		return 0;
	if (redisAppendCommand(c->ctx, "UNWATCH") != REDIS_OK)
		return drl__redis_ctx_error(s, c, "UNWATCH", errno, err);
	c->unwatch_queued = true;
	c->watching = false;
	return 0;
}

/* Queue one command of a call on the shared connections: formatted (RESP)
 * at the end of c->qbuf, which drl__redis_collect() hands to a
 * pipe. */
static int append_shared(rstore *s, conn *c, int argc, const char **argv,
			 const size_t *lens, drl_error *err)
{
	if (drl__redis_resp_append(&c->qbuf, &c->qlen, &c->qcap, argc, argv,
				   lens) != 0)
		return drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				     s->where);
	c->nqueued++;
	return 0;
}

/* A call's commands go to its own connection (the connection layer,
 * backends/redis_conn.c) or, on a shared call, to s's pipes
 * (backends/redis_pipe.c): the one place that chooses. */
int drl__redis_append(rstore *s, conn *c, int argc, const char **argv,
		      const size_t *lens, drl_error *err)
{
	if (c->shared)
		return append_shared(s, c, argc, argv, lens, err);
	return drl__redis_conn_append(s, c, argc, argv, lens, err);
}

int drl__redis_collect(rstore *s, conn *c, size_t n, redisReply **r,
		       const char *what, drl_error *err)
{
	if (!c->shared)
		return drl__redis_conn_collect(s, c, n, r, what, err);
	int rc = drl__redis_pipe_call(s, c, n, r, what, err);
	c->qlen = 0;
	c->nqueued = 0;
	return rc;
}

/*
 * Check the replies of MULTI, n-2 queued commands, EXEC (r[0..n)). The
 * first error wins (a command refused at queue time, e.g. OOM, beats
 * EXECABORT). On success *exec is the EXEC array (n-2 elements) or NULL
 * when EXEC returned nil (a watched key changed). The replies stay the
 * caller's.
 */
static int exec_result(rstore *s, conn *c, redisReply **r, size_t n,
		       const char *what, bool value_err_corrupt,
		       redisReply **exec, drl_error *err)
{
	redisReply *e = r[n - 1];
	*exec = NULL;
	if (!drl__redis_is_status(r[0], "OK")) {
		c->broken = true;
		return drl__redis_reply_error(s, "MULTI", r[0], false, err);
	}
	/* A command refused when queued aborts the EXEC: nothing ran. */
	for (size_t i = 1; i + 1 < n; i++)
		if (!drl__redis_is_status(r[i], "QUEUED")) {
			if (r[i]->type != REDIS_REPLY_ERROR)
				c->broken = true;
			return drl__redis_refused(
				s, r[i],
				drl__redis_reply_error(s, what, r[i],
						       value_err_corrupt, err));
		}
	if (e->type == REDIS_REPLY_NIL) {
		c->watching = false; /* EXEC always ends the WATCH */
		return 0;
	}
	if (e->type == REDIS_REPLY_ARRAY && e->elements == n - 2) {
		c->watching = false;
		*exec = e;
		return 0;
	}
	if (e->type != REDIS_REPLY_ERROR)
		c->broken = true;
	return drl__redis_reply_error(s, "EXEC", e, false, err);
}

/* One command of a transaction: argv with explicit lengths. */
typedef struct tx_cmd {
	int argc;
	const char **argv;
	const size_t *lens;
} tx_cmd;

/*
 * The transaction MULTI; cmd[0..n); EXEC on c's call (begun by the
 * caller: drl__redis_begin(), or call_start() where c's WATCH must stay),
 * in one round trip, its replies checked by exec_result(). On success
 * r[0..n+2) hold the replies, for the caller to free, and *exec is the
 * EXEC array (n elements) or NULL (EXEC returned nil: a watched key
 * changed). On failure nothing is left in r[] and err is set; `what`
 * names the transaction's first command in messages, and
 * value_err_corrupt is as drl__redis_reply_error()'s for a command
 * refused when queued.
 */
static int tx_call(rstore *s, conn *c, size_t n, const tx_cmd *cmd,
		   redisReply **r, const char *what, bool value_err_corrupt,
		   redisReply **exec, drl_error *err)
{
	const char *multi[1] = {"MULTI"}, *exec_argv[1] = {"EXEC"};
	size_t multil[1] = {5}, execl[1] = {4};
	int rc = drl__redis_append(s, c, 1, multi, multil, err);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = drl__redis_append(s, c, cmd[i].argc, cmd[i].argv,
				       cmd[i].lens, err);
	if (rc == 0)
		rc = drl__redis_append(s, c, 1, exec_argv, execl, err);
	if (rc == 0)
		rc = drl__redis_collect(s, c, n + 2, r, what, err);
	if (rc)
		return rc;
	rc = exec_result(s, c, r, n + 2, what, value_err_corrupt, exec, err);
	if (rc)
		drl__redis_free_replies(r, n + 2);
	return rc;
}

/* ---- the pool ----------------------------------------------------------- */

/* A connection from the pool for a call that must be over by `dl`,
 * opening one when below `cap`, else waiting for one (DRL_ETIMEDOUT when
 * none frees up in time). The connection carries dl as its deadline. */
static int checkout(rstore *s, conn **out, const struct timespec *dl,
		    drl_error *err)
{
	pthread_mutex_lock(&s->mu);
	for (;;) {
		if (s->free) {
			conn *c = s->free;
			s->free = c->next;
			c->next = NULL;
			pthread_mutex_unlock(&s->mu);
			if (drl__redis_conn_stale(c)) {
				pthread_mutex_lock(&s->mu);
				s->nconn--;
				pthread_mutex_unlock(&s->mu);
				drl__redis_conn_free(c);
				pthread_mutex_lock(&s->mu);
				continue;
			}
			c->deadline = *dl;
			*out = c;
			return 0;
		}
		if (s->nconn < s->cap) {
			s->nconn++;
			pthread_mutex_unlock(&s->mu);
			int rc = drl__redis_conn_open(s, out, dl, err);
			if (rc) {
				pthread_mutex_lock(&s->mu);
				s->nconn--;
				pthread_cond_signal(&s->cv);
				pthread_mutex_unlock(&s->mu);
			}
			return drl__redis_unsent_mark(s, rc);
		}
		if (pthread_cond_timedwait(&s->cv, &s->mu, dl) == ETIMEDOUT) {
			pthread_mutex_unlock(&s->mu);
			return drl_error_set(
				err, DRL_ETIMEDOUT,
				"redis %s: no free connection within %" PRId64
				" ms (pool=%zu)",
				s->where, s->timeout_ms, s->cap);
		}
	}
}

/* Give c back to the pool, or free it when broken or surplus. A call on
 * the shared connections frees only its buffer. */
void drl__redis_release(rstore *s, conn *c)
{
	bool drop;
	if (c->shared) {
		free(c->qbuf);
		c->qbuf = NULL;
		c->qlen = c->qcap = 0;
		return;
	}
	pthread_mutex_lock(&s->mu);
	drop = c->broken || s->nconn > s->cap + s->nheld;
	if (drop) {
		s->nconn--;
	} else {
		c->idle_since = drl__redis_coarse_ms();
		c->next = s->free;
		s->free = c;
	}
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	if (drop)
		drl__redis_conn_free(c);
}

/* A connection for one call: the one this thread holds for s (its WATCH
 * is cleared by drl__redis_begin()), else one from the pool (after giving
 * back what this thread holds for another store). */
static int acquire(rstore *s, conn **out, drl_error *err)
{
	hold *h = pthread_getspecific(hold_key);
	if (h && h->c) {
		if (holds_for(h, s)) {
			*out = take_own(s, h);
			return 0;
		}
		drop_hold(h);
	}
	struct timespec dl = drl__redis_deadline_in(s->timeout_ms);
	return checkout(s, out, &dl, err);
}

/* After a successful load(): keep c, watching `key`, for this thread's
 * cas(). On failure c goes back to the pool and DRL_ENOMEM is returned. */
static int hold_conn(rstore *s, conn *c, drl_bytes key, uint64_t version,
		     drl_error *err)
{
	hold *h = thread_hold(true);
	if (h && c->wkeycap < key.len) {
		unsigned char *k = realloc(c->wkey, key.len);
		if (k) {
			c->wkey = k;
			c->wkeycap = key.len;
		} else {
			h = NULL;
		}
	}
	if (h == NULL) {
		drl__redis_release(s, c);
		return drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				     s->where);
	}
	if (key.len)
		memcpy(c->wkey, key.data, key.len);
	c->wkeylen = key.len;
	c->hold_version = version;
	pthread_mutex_lock(&s->mu);
	s->nconn--;
	s->nheld++;
	c->prev = NULL;
	c->next = s->held;
	if (s->held)
		s->held->prev = c;
	s->held = c;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	h->store = s;
	h->store_id = s->id;
	h->c = c;
	return 0;
}

/* A connection for a call that needs no connection state of its own:
 * `proxy` set up for the shared connections when the store has them, this
 * thread holds no connection of s (a held one is taken, as acquire()
 * does) and the call sends no ASKING; else acquire(). A connection this
 * thread holds for another store is given back, as acquire() does. */
int drl__redis_acquire_shared(rstore *s, conn *proxy, conn **out,
			      drl_error *err)
{
	hold *h = s->npipes ? pthread_getspecific(hold_key) : NULL;
	if (s->npipes == 0 || asking_calls || (h && holds_for(h, s)))
		return acquire(s, out, err);
	if (h && h->c)
		drop_hold(h); /* as acquire(): a hold ends at another store */
	memset(proxy, 0, sizeof *proxy);
	/* Its deadline is set by drl__redis_pipe_call(). */
	proxy->shared = true;
	*out = proxy;
	return 0;
}

/* ---- keys and arguments ------------------------------------------------- */

/* A store key: prefix + user key, on the stack when small. */
typedef struct keybuf {
	const char *p;
	size_t len;
	char *heap;
	size_t heapcap;
	char stack[KEY_STACK];
} keybuf;

static void key_init(keybuf *k)
{
	k->p = "";
	k->len = 0;
	k->heap = NULL;
	k->heapcap = 0;
}

static void key_done(keybuf *k)
{
	free(k->heap);
}

/* Point k at prefix + key (reusing k's memory). */
static int key_make(rstore *s, keybuf *k, drl_bytes key, drl_error *err)
{
	const char *data = key.len ? key.data : "";
	if (s->prefixlen == 0) {
		k->p = data;
		k->len = key.len;
		return 0;
	}
	if (key.len > SIZE_MAX - s->prefixlen)
		return drl_error_set(err, DRL_EINVAL, "redis: key too long");
	size_t need = s->prefixlen + key.len;
	char *dst = k->stack;
	if (need > sizeof k->stack) {
		if (k->heapcap < need) {
			char *n = realloc(k->heap, need);
			if (n == NULL)
				return drl_error_set(err, DRL_ENOMEM,
						     "redis %s: out of memory",
						     s->where);
			k->heap = n;
			k->heapcap = need;
		}
		dst = k->heap;
	}
	memcpy(dst, s->prefix, s->prefixlen);
	memcpy(dst + s->prefixlen, data, key.len);
	k->p = dst;
	k->len = need;
	return 0;
}

size_t drl__redis_prefixed_keys(const rstore *s, size_t n,
				const drl_bytes *keys, char *buf,
				const char **argv, size_t *lens)
{
	char *p = buf;
	for (size_t j = 0; j < n; j++) {
		const char *kd = keys[j].len ? keys[j].data : "";
		lens[j] = keys[j].len;
		if (s->prefixlen == 0) {
			argv[j] = kd;
			continue;
		}
		memcpy(p, s->prefix, s->prefixlen);
		memcpy(p + s->prefixlen, kd, keys[j].len);
		argv[j] = p;
		lens[j] += s->prefixlen;
		p += lens[j];
	}
	return (size_t)(p - buf);
}

/* PX argument: ttl_us rounded up to whole milliseconds (>= 1). */
int drl__redis_ttl_arg(rstore *s, int64_t ttl_us, char ms[24], size_t *len,
		       drl_error *err)
{
	if (ttl_us <= 0)
		return drl_error_set(err, DRL_EINVAL,
				     "redis %s: ttl %" PRId64
				     " us is not positive",
				     s->where, ttl_us);
	int64_t v = ttl_us / 1000 + (ttl_us % 1000 != 0);
	*len = drl__redis_i64(ms, v);
	return 0;
}

/* ---- counters ----------------------------------------------------------- */

/* A grouped counter's key (DRL_CAP_COUNTER_GROUPS): true, and key cut to
 * its group, *field to its index. */
static bool grouped_key(const rstore *s, drl_bytes *key, drl_bytes *field)
{
	size_t glen;
	if (!(s->parent.caps & DRL_CAP_COUNTER_GROUPS) ||
	    !drl__redis_group_split(*key, &glen))
		return false;
	*field = (drl_bytes){(const char *)key->data + glen + 1,
			     key->len - glen - 1};
	key->len = glen;
	return true;
}

/* MULTI; INCRBY k delta; PEXPIRE k ttl; EXEC — one round trip (a grouped
 * counter: HINCRBY group field delta; PEXPIRE group ttl). */
static int r_incr(drl_backend *b, drl_bytes key, int64_t delta, int64_t ttl_us,
		  int64_t *value, drl_error *err)
{
	rstore *s = (rstore *)b;
	char ms[24], d[24];
	size_t mslen = 0, dlen;
	keybuf k;
	conn proxy, *c;
	int rc = drl__redis_ttl_arg(s, ttl_us, ms, &mslen, err);
	if (rc)
		return rc;
	dlen = drl__redis_i64(d, delta);
	drl_bytes f = {NULL, 0};
	bool g = grouped_key(s, &key, &f);
	key_init(&k);
	rc = key_make(s, &k, key, err);
	if (rc == 0)
		rc = drl__redis_acquire_shared(s, &proxy, &c, err);
	if (rc) {
		key_done(&k);
		return rc;
	}

	const char *incr[4] = {g ? "HINCRBY" : "INCRBY", k.p, g ? f.data : d,
			       d};
	size_t incrl[4] = {g ? 7 : 6, k.len, g ? f.len : dlen, dlen};
	const char *pexp[3] = {"PEXPIRE", k.p, ms};
	size_t pexpl[3] = {7, k.len, mslen};
	const tx_cmd cmd[2] = {{g ? 4 : 3, incr, incrl}, {3, pexp, pexpl}};
	redisReply *r[4], *e;
	rc = drl__redis_begin(s, c, err);
	if (rc == 0)
		rc = tx_call(s, c, 2, cmd, r, "INCRBY", true, &e, err);
	key_done(&k);
	if (rc) {
		drl__redis_release(s, c);
		return rc;
	}
	if (e == NULL)
		rc = drl_error_set(err, DRL_ESTORE,
				   "redis %s: INCRBY: transaction aborted",
				   s->where);
	if (rc == 0) {
		redisReply *v = e->element[0], *x = e->element[1];
		if (v->type != REDIS_REPLY_INTEGER)
			rc = drl__redis_reply_error(s, "INCRBY", v, true, err);
		else if (x->type != REDIS_REPLY_INTEGER)
			rc = drl__redis_reply_error(s, "PEXPIRE", x, false,
						    err);
		else
			*value = v->integer;
	}
	drl__redis_free_replies(r, 4);
	drl__redis_release(s, c);
	return rc;
}

/* Parse a counter reply into *v: nil 0, a decimal string, an integer. */
int drl__redis_counter_value(rstore *s, const redisReply *r, int64_t *v,
			     drl_error *err)
{
	switch (r->type) {
	case REDIS_REPLY_NIL:
		*v = 0;
		return 0;
	case REDIS_REPLY_INTEGER:
		*v = r->integer;
		return 0;
	case REDIS_REPLY_STRING:
		if (r->str &&
		    drl_parse_int(r->str, r->len, INT64_MIN, INT64_MAX, v) == 0)
			return 0;
		return drl_error_set(err, DRL_ECORRUPT,
				     "redis %s: a counter holds a %zu-byte "
				     "value that is not an integer",
				     s->where, r->len);
	}
	return drl__redis_reply_error(s, "GET", r, false, err);
}

/*
 * n pipelined GETs, one round trip. Not MGET: MGET reads a key of another
 * type (a list, a hash) as nil, i.e. as a zero counter; GET reports it
 * (WRONGTYPE), so a damaged key can never look like an unused one.
 * Grouped counters of one group: one HMGET (WRONGTYPE too).
 */
static int r_get_many(drl_backend *b, size_t n, const drl_bytes *keys,
		      int64_t *values, drl_error *err)
{
	rstore *s = (rstore *)b;
	redisReply *stack[GET_STACK];
	redisReply **r = stack;
	keybuf k;
	conn proxy, *c;
	int rc;
	if (n == 0)
		return 0;
	if (drl__redis_get_group(s, n, keys, values, &rc, err))
		return rc;
	if (n > SIZE_MAX / sizeof *r)
		return drl_error_set(err, DRL_EINVAL, "redis: too many keys");
	if (n > GET_STACK) {
		r = malloc(n * sizeof *r);
		if (r == NULL)
			return drl_error_set(err, DRL_ENOMEM,
					     "redis %s: out of memory",
					     s->where);
	}
	rc = drl__redis_acquire_shared(s, &proxy, &c, err);
	if (rc) {
		if (r != stack)
			free(r);
		return rc;
	}
	key_init(&k);
	rc = drl__redis_begin(s, c, err);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		drl_bytes key = keys[i], f = {NULL, 0};
		bool g = grouped_key(s, &key, &f); /* HGET group field */
		rc = key_make(s, &k, key, err);
		if (rc == 0) {
			const char *argv[3] = {g ? "HGET" : "GET", k.p, f.data};
			size_t lens[3] = {g ? 4 : 3, k.len, f.len};
			rc = drl__redis_append(s, c, g ? 3 : 2, argv, lens,
					       err);
		}
	}
	key_done(&k);
	if (rc) {
		/* Queued but unsent commands would desync the next call. */
		c->broken = true;
	} else {
		rc = drl__redis_collect(s, c, n, r, "GET", err);
		if (rc == 0) {
			for (size_t i = 0; i < n && rc == 0; i++)
				rc = drl__redis_counter_value(s, r[i],
							      &values[i], err);
			drl__redis_free_replies(r, n);
		}
	}
	drl__redis_release(s, c);
	if (r != stack)
		free(r);
	return rc;
}

/* ---- optimistic state: WATCH/GET, MULTI/SET/EXEC ------------------------ */

/* A nonzero version token. */
static uint64_t new_version(rstore *s)
{
	uint64_t v;
	do
		v = atomic_fetch_add(&s->next_version, 1) + 1;
	while (v == 0);
	return v;
}

/*
 * WATCH k; GET k, one round trip, and keep the connection for this
 * thread's cas(). The version is a token for "what this thread watched":
 * the WATCH itself is the check.
 */
static int r_load(drl_backend *b, drl_bytes key, void *buf, size_t cap,
		  size_t *len, uint64_t *version, drl_error *err)
{
	rstore *s = (rstore *)b;
	keybuf k;
	conn *c;
	key_init(&k);
	int rc = key_make(s, &k, key, err);
	if (rc == 0)
		rc = acquire(s, &c, err);
	if (rc) {
		key_done(&k);
		return rc;
	}
	const char *watch[2] = {"WATCH", k.p}, *get[2] = {"GET", k.p};
	size_t watchl[2] = {5, k.len}, getl[2] = {3, k.len};
	redisReply *r[2];
	rc = drl__redis_begin(s, c, err);
	if (rc == 0)
		rc = drl__redis_append(s, c, 2, watch, watchl, err);
	if (rc == 0) {
		c->watching = true;
		rc = drl__redis_append(s, c, 2, get, getl, err);
	}
	if (rc == 0)
		rc = drl__redis_collect(s, c, 2, r, "WATCH/GET", err);
	key_done(&k);
	if (rc) {
		drl__redis_release(s, c);
		return rc;
	}

	uint64_t v = 0;
	bool keep = false;
	if (!drl__redis_is_status(r[0], "OK")) {
		if (r[0]->type != REDIS_REPLY_ERROR)
			c->broken = true;
		rc = drl__redis_reply_error(s, "WATCH", r[0], false, err);
	} else if (r[1]->type == REDIS_REPLY_NIL) {
		*len = 0;
		keep = true;
	} else if (r[1]->type == REDIS_REPLY_STRING) {
		if (r[1]->len > cap) {
			*len = r[1]->len;
			rc = drl_error_set(err, DRL_ERANGE,
					   "redis %s: state of %zu bytes does "
					   "not fit %zu",
					   s->where, r[1]->len, cap);
		} else {
			if (r[1]->len)
				memcpy(buf, r[1]->str, r[1]->len);
			*len = r[1]->len;
			v = new_version(s);
			keep = true;
		}
	} else {
		if (r[1]->type != REDIS_REPLY_ERROR)
			c->broken = true;
		rc = drl__redis_reply_error(s, "GET", r[1], false, err);
	}
	drl__redis_free_replies(r, 2);
	if (!keep) {
		drl__redis_release(s, c);
		return rc;
	}
	*version = v;
	return hold_conn(s, c, key, v, err);
}

/*
 * Store blob at key if it is unchanged since this thread's load() of it
 * (MULTI; SET k blob PX ttl; EXEC on the watching connection; nil EXEC:
 * DRL_ECONFLICT). Without that load: version 0 is SET NX, anything else
 * DRL_ECONFLICT.
 */
static int r_cas(drl_backend *b, drl_bytes key, const void *blob, size_t len,
		 uint64_t version, int64_t ttl_us, drl_error *err)
{
	rstore *s = (rstore *)b;
	char ms[24];
	size_t mslen = 0;
	conn *c = NULL;
	keybuf k;
	int rc = drl__redis_ttl_arg(s, ttl_us, ms, &mslen, err);
	if (rc)
		return rc;
	hold *h = pthread_getspecific(hold_key);
	bool checked = false; /* c watches key since the matching load */
	if (h && h->c) {
		conn *hc = h->c;
		if (holds_for(h, s) && hc->hold_version == version &&
		    hc->wkeylen == key.len &&
		    (key.len == 0 ||
		     memcmp(hc->wkey, key.data, key.len) == 0)) {
			c = take_own(s, h);
			checked = true;
		} else if (holds_for(h, s)) {
			/* UNWATCH comes lazily */
			drl__redis_release(s, take_own(s, h));
		} else {
			drop_hold(h);
		}
	}
	if (c == NULL && version != 0)
		return drl_error_set(err, DRL_ECONFLICT,
				     "redis %s: cas without a matching load "
				     "on this thread",
				     s->where);
	key_init(&k);
	rc = key_make(s, &k, key, err);
	if (rc == 0 && c == NULL)
		rc = acquire(s, &c, err);
	if (rc) {
		if (c)
			drl__redis_release(s, c);
		key_done(&k);
		return rc;
	}

	const char *data = len ? blob : "";
	const char *set[6] = {"SET", k.p, data, "PX", ms, "NX"};
	size_t setl[6] = {3, k.len, len, 2, mslen, 2};
	redisReply *r[3];
	if (checked) {
		/* The held connection: its WATCH is the check. */
		const tx_cmd cmd[1] = {{5, set, setl}};
		redisReply *e;
		call_start(c);
		rc = tx_call(s, c, 1, cmd, r, "SET", false, &e, err);
		key_done(&k);
		if (rc) {
			drl__redis_release(s, c);
			return rc;
		}
		if (e == NULL)
			rc = drl_error_set(err, DRL_ECONFLICT,
					   "redis %s: the state changed "
					   "since it was loaded",
					   s->where);
		else if (!drl__redis_is_status(e->element[0], "OK"))
			rc = drl__redis_reply_error(s, "SET", e->element[0],
						    false, err);
		drl__redis_free_replies(r, 3);
		drl__redis_release(s, c);
		return rc;
	}

	/* No load to check against, version 0: only if absent. */
	rc = drl__redis_begin(s, c, err);
	if (rc == 0)
		rc = drl__redis_append(s, c, 6, set, setl, err);
	if (rc == 0)
		rc = drl__redis_collect(s, c, 1, r, "SET NX", err);
	key_done(&k);
	if (rc) {
		drl__redis_release(s, c);
		return rc;
	}
	if (r[0]->type == REDIS_REPLY_NIL)
		rc = drl_error_set(err, DRL_ECONFLICT,
				   "redis %s: the state appeared since it was "
				   "loaded",
				   s->where);
	else if (!drl__redis_is_status(r[0], "OK"))
		rc = drl__redis_refused(
			s, r[0],
			drl__redis_reply_error(s, "SET", r[0], false, err));
	drl__redis_free_replies(r, 1);
	drl__redis_release(s, c);
	return rc;
}

/* ---- single commands: DEL (drl_reset), TIME (clock=server) -------------- */

/* One command on a connection of s (a shared one when s has them, set up
 * in *proxy), one round trip: on success *r is its reply and *c the
 * connection, both for the caller to give back (drl__redis_free_replies,
 * drl__redis_release). */
static int one_command(rstore *s, int argc, const char **argv,
		       const size_t *lens, conn *proxy, conn **c,
		       redisReply **r, drl_error *err)
{
	int rc = drl__redis_acquire_shared(s, proxy, c, err);
	if (rc)
		return rc;
	rc = drl__redis_begin(s, *c, err);
	if (rc == 0)
		rc = drl__redis_append(s, *c, argc, argv, lens, err);
	if (rc == 0)
		rc = drl__redis_collect(s, *c, 1, r, argv[0], err);
	if (rc)
		drl__redis_release(s, *c);
	return rc;
}

/* One DEL of every key: atomic on the server (a script or a transaction
 * sees all of them or none gone). On a cluster node the keys must share a
 * slot (backends/redis_cluster.c groups them). */
static int r_del(drl_backend *b, size_t n, const drl_bytes *keys,
		 drl_error *err)
{
	rstore *s = (rstore *)b;
	if (n == 0)
		return 0;
	if (keys == NULL || n > ARGS_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "redis %s: DEL of %zu keys", s->where, n);
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += s->prefixlen + keys[i].len;
	const char **argv = malloc((n + 1) * sizeof *argv);
	size_t *lens = malloc((n + 1) * sizeof *lens);
	char *buf = malloc(total ? total : 1);
	conn proxy, *c = NULL;
	int rc = 0;
	if (argv == NULL || lens == NULL || buf == NULL)
		rc = drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				   s->where);
	if (rc == 0) {
		char *p = buf;
		argv[0] = "DEL";
		lens[0] = 3;
		for (size_t i = 0; i < n; i++) {
			if (s->prefixlen)
				memcpy(p, s->prefix, s->prefixlen);
			if (keys[i].len)
				memcpy(p + s->prefixlen, keys[i].data,
				       keys[i].len);
			argv[i + 1] = p;
			lens[i + 1] = s->prefixlen + keys[i].len;
			p += lens[i + 1];
		}
		redisReply *r;
		rc = one_command(s, (int)(n + 1), argv, lens, &proxy, &c, &r,
				 err);
		if (rc == 0) {
			if (r->type != REDIS_REPLY_INTEGER)
				rc = drl__redis_refused(
					s, r,
					drl__redis_reply_error(s, "DEL", r,
							       false, err));
			freeReplyObject(r);
			drl__redis_release(s, c);
		}
	}
	free(argv);
	free(lens);
	free(buf);
	return rc;
}

/* Redis TIME, in microseconds since the epoch. */
static int r_now(drl_backend *b, int64_t *now_us, drl_error *err)
{
	rstore *s = (rstore *)b;
	const char *argv[1] = {"TIME"};
	size_t lens[1] = {4};
	redisReply *r[1];
	conn proxy, *c;
	int rc = one_command(s, 1, argv, lens, &proxy, &c, r, err);
	if (rc)
		return rc;
	int64_t sec, usec;
	const redisReply *t = r[0];
	if (t->type == REDIS_REPLY_ARRAY && t->elements == 2 &&
	    t->element[0]->type == REDIS_REPLY_STRING &&
	    t->element[1]->type == REDIS_REPLY_STRING &&
	    drl_parse_int(t->element[0]->str, t->element[0]->len, 0,
			  INT64_C(9000000000), &sec) == 0 &&
	    drl_parse_int(t->element[1]->str, t->element[1]->len, 0, 999999,
			  &usec) == 0)
		*now_us = sec * 1000000 + usec;
	else if (t->type == REDIS_REPLY_ERROR)
		rc = drl__redis_reply_error(s, "TIME", t, false, err);
	else
		rc = drl_error_set(err, DRL_ECORRUPT,
				   "redis %s: TIME: malformed reply", s->where);
	drl__redis_free_replies(r, 1);
	drl__redis_release(s, c);
	return rc;
}

/* ---- open, destroy ------------------------------------------------------ */

/* Zero and free a secret. */
static void free_secret(char *p)
{
	if (p == NULL)
		return;
	volatile char *v = p;
	while (*v)
		*v++ = '\0';
	free(p);
}

/* Free everything; safe on a half-opened store (registered or not). */
static void r_destroy(drl_backend *b)
{
	rstore *s = (rstore *)b;
	if (s == NULL)
		return;
	pthread_mutex_lock(&reg_mu);
	for (rstore **pp = &reg_head; *pp; pp = &(*pp)->reg_next) {
		if (*pp == s) {
			*pp = s->reg_next;
			break;
		}
	}
	pthread_mutex_unlock(&reg_mu);
	/* No hold can reach s now: free what they held too. */
	hold *h = hold_key_ok ? pthread_getspecific(hold_key) : NULL;
	if (holds_for(h, s))
		h->c = NULL;
	while (s->free) {
		conn *c = s->free;
		s->free = c->next;
		drl__redis_conn_free(c);
	}
	while (s->held) {
		conn *c = s->held;
		s->held = c->next;
		drl__redis_conn_free(c);
	}
	drl__redis_pipes_free(s);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->script_mu);
	drl__tls_unref(s->tls);
	free(s->host);
	free(s->user);
	free_secret(s->password);
	free(s->prefix);
	free(s);
}

/* What the URI says (drl__redis_parse_uri), and the methods that go with
 * it: everything checked before any connection is made. */
static int parse_uri(rstore *s, drl_uri *u, drl_error *err)
{
	bool server_clock;
	int rc = drl__redis_parse_uri(s, u, &server_clock, err);
	if (rc)
		return rc;
	s->parent.version = 8; /* the vtable version this file fills */
	/* Every strategy keeps counters in groups (one hash per limit and
	 * user key), so processes of any tx count the same counters. */
	s->parent.caps = DRL_CAP_COUNTER | DRL_CAP_CAS | DRL_CAP_COUNTER_GROUPS;
	s->parent.trim = drl__redis_trim;
	s->parent.name = s->cluster ? "redis-cluster" : "redis";
	s->parent.destroy = r_destroy;
	s->parent.incr = r_incr;
	s->parent.get_many = r_get_many;
	s->parent.load = r_load;
	s->parent.cas = r_cas;
	s->parent.update = NULL; /* no in-process atomic step */
	s->parent.del = r_del;
	if (!s->watch_tx) {
		s->parent.caps |= DRL_CAP_SCRIPT | DRL_CAP_BATCH;
		s->parent.eval = drl__redis_eval;
	}
	/* A started script needs a shared connection to travel on; a
	 * Cluster node's calls may need ASKING, which the pipes never send. */
	if (!s->watch_tx && !s->cluster && s->npipes > 0) {
		s->parent.caps |= DRL_CAP_EVAL_START;
		s->parent.eval_start = drl__redis_eval_start;
	}
	/* Channels a loop drives: plaintext single-node stores (TLS and a
	 * Sentinel's master keep the pipes' I/O thread, docs/threading.md). */
	if (!s->watch_tx && !s->cluster && s->npipes > 0 && !s->tls &&
	    !s->sentinel)
		drl__redis_chan_methods(s);
	/* tx=auto: the counters by plain commands (a Redis Cluster store
	 * routes every command itself and offers none of this). */
	if (s->plain_counters && !s->cluster) {
		s->parent.caps |= DRL_CAP_ADD_READ;
		s->parent.add_read = drl__redis_add_read;
		if (s->npipes > 0) {
			s->parent.add_read_start = drl__redis_add_read_start;
			s->parent.trim_start = drl__redis_trim_start;
		}
	}
	if (server_clock) {
		s->parent.caps |= DRL_CAP_CLOCK;
		s->parent.now = r_now;
	}
	return 0;
}

/* Mutexes and the condition variable (on CLOCK_MONOTONIC). */
static int init_sync(rstore *s)
{
	pthread_condattr_t ca;
	if (pthread_condattr_init(&ca) != 0)
		return -1;
	int rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (rc == 0)
		rc = pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (rc != 0)
		return -1;
	if (pthread_mutex_init(&s->mu, NULL) != 0) {
		pthread_cond_destroy(&s->cv);
		return -1;
	}
	if (pthread_mutex_init(&s->script_mu, NULL) != 0) {
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->cv);
		return -1;
	}
	return 0;
}

/* Enter s in the registry of live stores (holds find it by its id). */
static void register_store(rstore *s)
{
	atomic_init(&s->next_version, 0);
	pthread_mutex_lock(&reg_mu);
	s->id = ++reg_last_id;
	s->reg_next = reg_head;
	reg_head = s;
	pthread_mutex_unlock(&reg_mu);
}

/* Free the strings of a store that never made it to the registry. */
static void free_unregistered(rstore *s)
{
	drl__redis_pipes_free(s);
	drl__tls_unref(s->tls);
	free(s->host);
	free(s->user);
	free_secret(s->password);
	free(s->prefix);
	free(s);
}

int drl__redis_open(drl_backend **out, drl_uri *uri, drl_error *err)
{
	if (out == NULL || uri == NULL || drl_uri_scheme(uri) == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl__redis_open: NULL argument");
	*out = NULL;
	pthread_once(&key_once, make_hold_key);
	if (!hold_key_ok)
		return drl_error_set(err, DRL_ENOMEM,
				     "redis: no thread-specific key left");
	rstore *s = calloc(1, sizeof *s);
	if (s == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	int rc = parse_uri(s, uri, err);
	if (rc == 0 && init_sync(s) != 0)
		rc = drl_error_set(err, DRL_ENOMEM,
				   "redis: cannot make a mutex");
	else if (rc == 0 && drl__redis_pipes_init(s) != 0)
		rc = drl_error_set(err, DRL_ENOMEM,
				   "redis: out of memory for pipelines");
	if (rc == 0 && s->cluster)
		rc = drl_error_set(err, DRL_EINVAL,
				   "drl__redis_open: a redis-cluster URI");
	if (rc) {
		free_unregistered(s);
		return rc;
	}
	register_store(s);

	/* Connect now, so a wrong address or password fails at open
	 * (unless connect=lazy). */
	if (s->lazy) {
		*out = &s->parent;
		return 0;
	}
	conn *c;
	struct timespec dl = drl__redis_deadline_in(s->timeout_ms);
	rc = checkout(s, &c, &dl, err);
	if (rc) {
		r_destroy(&s->parent);
		return rc;
	}
	drl__redis_release(s, c);
	*out = &s->parent;
	return 0;
}

/* ---- Redis Cluster nodes (backends/redis_cluster.c) --------------------- */

int drl__redis_template(drl_backend **out, drl_uri *uri, drl_error *err)
{
	*out = NULL;
	pthread_once(&key_once, make_hold_key);
	if (!hold_key_ok)
		return drl_error_set(err, DRL_ENOMEM,
				     "redis: no thread-specific key left");
	rstore *s = calloc(1, sizeof *s);
	if (s == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	int rc = parse_uri(s, uri, err);
	if (rc == 0 && !s->cluster && !s->sentinel)
		rc = drl_error_set(err, DRL_EINVAL,
				   "drl__redis_template: not a redis-cluster "
				   "or redis-sentinel URI");
	if (rc == 0 && init_sync(s) != 0)
		rc = drl_error_set(err, DRL_ENOMEM,
				   "redis: cannot make a mutex");
	if (rc) {
		free_unregistered(s);
		return rc;
	}
	register_store(s);
	*out = &s->parent;
	return 0;
}

bool drl__redis_template_lazy(const drl_backend *tmpl)
{
	return ((const rstore *)tmpl)->lazy;
}

int64_t drl__redis_timeout_ms(const drl_backend *tmpl)
{
	return ((const rstore *)tmpl)->timeout_ms;
}

const char *drl__redis_prefix(const drl_backend *tmpl, size_t *len)
{
	const rstore *t = (const rstore *)tmpl;
	*len = t->prefixlen;
	return t->prefix ? t->prefix : "";
}

/* A store for host:port with tmpl's options and the credentials user,
 * password (copied; NULL password: no AUTH), not connected yet. */
static int make_node(drl_backend **out, const rstore *t, const char *host,
		     int port, const char *user, const char *password,
		     drl_error *err)
{
	*out = NULL;
	rstore *s = calloc(1, sizeof *s);
	if (s == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	s->parent = t->parent;
	s->cluster = t->cluster;
	s->tls = drl__tls_ref(t->tls); /* redirections stay on TLS */
	s->host = drl__redis_dup_n(host, strlen(host));
	s->port = port;
	s->user = user ? drl__redis_dup_n(user, strlen(user)) : NULL;
	s->password =
		password ? drl__redis_dup_n(password, strlen(password)) : NULL;
	s->prefix =
		t->prefix ? drl__redis_dup_n(t->prefix, t->prefixlen) : NULL;
	s->prefixlen = t->prefixlen;
	s->db = t->db;
	s->timeout_ms = t->timeout_ms;
	s->timeout = t->timeout;
	s->watch_tx = t->watch_tx;
	s->plain_counters = t->plain_counters;
	s->lazy = true;
	s->cap = t->cap;
	s->npipes = t->npipes;
	snprintf(s->where, sizeof s->where, "%s%.96s%s:%d",
		 strchr(host, ':') ? "[" : "", host,
		 strchr(host, ':') ? "]" : "", port);
	if (s->host == NULL || (user && s->user == NULL) ||
	    (password && s->password == NULL) ||
	    (t->prefix && s->prefix == NULL) || init_sync(s) != 0) {
		free_unregistered(s);
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	}
	if (drl__redis_pipes_init(s) != 0) {
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->cv);
		pthread_mutex_destroy(&s->script_mu);
		free_unregistered(s);
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	}
	register_store(s);
	*out = &s->parent;
	return 0;
}

int drl__redis_node(drl_backend **out, const drl_backend *tmpl,
		    const char *host, int port, drl_error *err)
{
	const rstore *t = (const rstore *)tmpl;
	return make_node(out, t, host, port, t->user, t->password, err);
}

int drl__redis_sentinel_node(drl_backend **out, const drl_backend *tmpl,
			     const char *host, int port, const char *user,
			     const char *password, drl_error *err)
{
	/* A sentinel has no database, no keys and no scripts: one pooled
	 * connection, no pipes, the template's TLS and timeout. */
	rstore t = *(const rstore *)tmpl;
	t.db = 0;
	t.cap = 1;
	t.npipes = 0;
	t.prefix = NULL;
	t.prefixlen = 0;
	t.cluster = false;
	return make_node(out, &t, host, port, user, password, err);
}

void drl__redis_watch(drl_backend *node, void (*trouble)(void *arg), void *arg)
{
	rstore *s = (rstore *)node;
	s->trouble_arg = arg;
	s->trouble = trouble;
	s->mark_unsent = true;
}

/* SENTINEL GET-MASTER-ADDR-BY-NAME name: ["host", "port"], or nil. */
int drl__redis_sentinel_master(drl_backend *sentinel, const char *name,
			       char host[256], int *port, bool *known,
			       drl_error *err)
{
	rstore *s = (rstore *)sentinel;
	const char *argv[3] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", name};
	size_t lens[3] = {8, 23, strlen(name)};
	redisReply *r[1];
	conn proxy, *c;
	*known = false;
	int rc = one_command(s, 3, argv, lens, &proxy, &c, r, err);
	if (rc)
		return rc;
	const redisReply *t = r[0];
	int64_t p;
	if (t->type == REDIS_REPLY_NIL) {
		rc = 0;
	} else if (t->type == REDIS_REPLY_ARRAY && t->elements == 2 &&
		   t->element[0]->type == REDIS_REPLY_STRING &&
		   t->element[1]->type == REDIS_REPLY_STRING &&
		   t->element[0]->len > 0 && t->element[0]->len < 256 &&
		   strlen(t->element[0]->str) == t->element[0]->len &&
		   drl_parse_int(t->element[1]->str, t->element[1]->len, 1,
				 65535, &p) == 0) {
		memcpy(host, t->element[0]->str, t->element[0]->len + 1);
		*port = (int)p;
		*known = true;
	} else if (t->type == REDIS_REPLY_ERROR) {
		rc = drl__redis_reply_error(
			s, "SENTINEL GET-MASTER-ADDR-BY-NAME", t, false, err);
	} else {
		rc = drl_error_set(
			err, DRL_ESTORE,
			"redis %s: SENTINEL GET-MASTER-ADDR-BY-NAME: "
			"malformed reply (is this a sentinel?)",
			s->where);
	}
	drl__redis_free_replies(r, 1);
	drl__redis_release(s, c);
	return rc;
}

/* ROLE: its first element, "master", "slave" or "sentinel". */
int drl__redis_role(drl_backend *node, char role[16], drl_error *err)
{
	rstore *s = (rstore *)node;
	const char *argv[1] = {"ROLE"};
	size_t lens[1] = {4};
	redisReply *r[1];
	conn proxy, *c;
	int rc = one_command(s, 1, argv, lens, &proxy, &c, r, err);
	if (rc)
		return drl__redis_code(rc); /* never run again */
	const redisReply *t = r[0];
	if (t->type == REDIS_REPLY_ARRAY && t->elements > 0 &&
	    t->element[0]->type == REDIS_REPLY_STRING &&
	    t->element[0]->len < 16) {
		memcpy(role, t->element[0]->str, t->element[0]->len);
		role[t->element[0]->len] = '\0';
	} else {
		rc = drl__redis_reply_error(s, "ROLE", t, false, err);
	}
	drl__redis_free_replies(r, 1);
	drl__redis_release(s, c);
	return rc;
}

/* One "host, port, id..." entry of a CLUSTER SLOTS range. */
static bool slots_endpoint(const redisReply *e, const char *asked,
			   const char **host, int *port)
{
	if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 ||
	    e->element[0]->type != REDIS_REPLY_STRING ||
	    e->element[1]->type != REDIS_REPLY_INTEGER ||
	    e->element[1]->integer < 1 || e->element[1]->integer > 65535)
		return false;
	/* An empty or "?" endpoint: the node we asked. */
	const char *h = e->element[0]->str;
	*host = (h[0] == '\0' || strcmp(h, "?") == 0) ? asked : h;
	*port = (int)e->element[1]->integer;
	return strlen(*host) < 256;
}

int drl__redis_cluster_slots(drl_backend *node, drl__redis_slots_fn fn,
			     void *arg, drl_error *err)
{
	rstore *s = (rstore *)node;
	const char *argv[2] = {"CLUSTER", "SLOTS"};
	size_t lens[2] = {7, 5};
	redisReply *r[1];
	conn proxy, *c;
	int rc = one_command(s, 2, argv, lens, &proxy, &c, r, err);
	if (rc)
		return rc;
	const redisReply *t = r[0];
	if (t->type != REDIS_REPLY_ARRAY)
		rc = drl__redis_reply_error(s, "CLUSTER SLOTS", t, false, err);
	for (size_t i = 0; rc == 0 && i < t->elements; i++) {
		const redisReply *e = t->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
		    e->element[0]->type != REDIS_REPLY_INTEGER ||
		    e->element[1]->type != REDIS_REPLY_INTEGER ||
		    e->element[0]->integer < 0 ||
		    e->element[1]->integer > 16383 ||
		    e->element[0]->integer > e->element[1]->integer) {
			rc = drl_error_set(err, DRL_ESTORE,
					   "redis %s: CLUSTER SLOTS: malformed "
					   "range %zu",
					   s->where, i);
			break;
		}
		for (size_t j = 2; rc == 0 && j < e->elements; j++) {
			const char *host;
			int port;
			if (!slots_endpoint(e->element[j], s->host, &host,
					    &port)) {
				rc = drl_error_set(err, DRL_ESTORE,
						   "redis %s: CLUSTER SLOTS: "
						   "malformed node in range "
						   "%zu",
						   s->where, i);
				break;
			}
			rc = fn(arg, (int)e->element[0]->integer,
				(int)e->element[1]->integer, host, port,
				j == 2);
		}
	}
	drl__redis_free_replies(r, 1);
	drl__redis_release(s, c);
	return rc;
}
