/*
 * The Redis store's call layer, over hiredis 0.14 blocking contexts: where
 * a call goes (its own pooled connection, or the shared ones), the pool,
 * the threads' holds between load() and cas(), a call's start and a
 * transaction's replies, and the store's keys. The operations above it
 * (counter.c, state.c, command.c, script.c) make their calls through it;
 * backends/redis/internal.h draws the layers.
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
 * that all threads share (backends/redis/pipe.c), unless this thread holds
 * a connection of the store (below) or the call sends ASKING; they still
 * format their commands with drl__redis_append() and read them with
 * drl__redis_collect(), on a proxy conn (drl__redis_acquire_shared()).
 * Those two, here, are the one place that sends a call to its own
 * connection (the connection layer) or to the pipes: the connection layer
 * knows one connection and nothing above it, the pipes use it
 * (backends/redis/internal.h draws the layers).
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
#include "internal.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* Whether threads can hold connections (the thread-specific key is made
 * at the first store's open): false only when the process has no key
 * left. */
bool drl__redis_holds_ready(void)
{
	pthread_once(&key_once, make_hold_key);
	return hold_key_ok;
}

/* Enter s in the registry of live stores (holds find it by its id). */
void drl__redis_register(rstore *s)
{
	atomic_init(&s->next_version, 0);
	pthread_mutex_lock(&reg_mu);
	s->id = ++reg_last_id;
	s->reg_next = reg_head;
	reg_head = s;
	pthread_mutex_unlock(&reg_mu);
}

/* Take s out of the registry (a no-op for one never entered): no hold of
 * another thread can reach it after, and this thread's hold of it is
 * forgotten (its connection is on s->held, freed with s). */
void drl__redis_unregister(rstore *s)
{
	pthread_mutex_lock(&reg_mu);
	for (rstore **pp = &reg_head; *pp; pp = &(*pp)->reg_next) {
		if (*pp == s) {
			*pp = s->reg_next;
			break;
		}
	}
	pthread_mutex_unlock(&reg_mu);
	hold *h = hold_key_ok ? pthread_getspecific(hold_key) : NULL;
	if (holds_for(h, s))
		h->c = NULL;
}

/* For cas(): the connection this thread holds when it watches `key` of s
 * since a load() that returned `version` (its WATCH is the check), or
 * NULL; a hold that does not match is ended (its UNWATCH comes lazily, or
 * it goes back to its own store). */
conn *drl__redis_take_held(rstore *s, drl_bytes key, uint64_t version)
{
	hold *h = hold_key_ok ? pthread_getspecific(hold_key) : NULL;
	if (h == NULL || h->c == NULL)
		return NULL;
	conn *hc = h->c;
	if (holds_for(h, s) && hc->hold_version == version &&
	    hc->wkeylen == key.len &&
	    (key.len == 0 || memcmp(hc->wkey, key.data, key.len) == 0))
		return take_own(s, h);
	if (holds_for(h, s))
		drl__redis_release(s, take_own(s, h));
	else
		drop_hold(h);
	return NULL;
}

/* ---- Redis Cluster: ASKING ---------------------------------------------- */

/* Whether the calling thread's calls send ASKING; see redis.h.
 * Thread-local because the vtable has no room for it, and a call runs
 * on one thread. (Its last redirect is backends/redis/conn.c's.) */
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
void drl__redis_call_start(conn *c)
{
	c->nqueued = c->nread = 0;
	c->ask_bits = 0;
	c->in_multi = false;
	c->asking = asking_calls;
}

int drl__redis_begin(rstore *s, conn *c, drl_error *err)
{
	drl__redis_call_start(c);
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
 * backends/redis/conn.c) or, on a shared call, to s's pipes
 * (backends/redis/pipe.c): the one place that chooses. */
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
int drl__redis_tx_call(rstore *s, conn *c, size_t n, const tx_cmd *cmd,
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
int drl__redis_checkout(rstore *s, conn **out, const struct timespec *dl,
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
int drl__redis_acquire(rstore *s, conn **out, drl_error *err)
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
	return drl__redis_checkout(s, out, &dl, err);
}

/* After a successful load(): keep c, watching `key`, for this thread's
 * cas(). On failure c goes back to the pool and DRL_ENOMEM is returned. */
int drl__redis_hold(rstore *s, conn *c, drl_bytes key, uint64_t version,
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
		return drl__redis_acquire(s, out, err);
	if (h && h->c)
		drop_hold(h); /* as acquire(): a hold ends at another store */
	memset(proxy, 0, sizeof *proxy);
	/* Its deadline is set by drl__redis_pipe_call(). */
	proxy->shared = true;
	*out = proxy;
	return 0;
}

/* ---- keys and arguments ------------------------------------------------- */

void drl__redis_key_init(keybuf *k)
{
	k->p = "";
	k->len = 0;
	k->heap = NULL;
	k->heapcap = 0;
}

void drl__redis_key_done(keybuf *k)
{
	free(k->heap);
}

/* Point k at prefix + key (reusing k's memory). */
int drl__redis_key_make(rstore *s, keybuf *k, drl_bytes key, drl_error *err)
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

/* One command on a connection of s (a shared one when s has them), one
 * round trip; read(s, reply, arg, err) reads its reply, and what read
 * returns is returned. The reply and the connection are given back after
 * read, whatever it returns. */
int drl__redis_ask(rstore *s, int argc, const char **argv, const size_t *lens,
		   drl__redis_read_fn read, void *arg, drl_error *err)
{
	conn proxy, *c;
	int rc = drl__redis_acquire_shared(s, &proxy, &c, err);
	if (rc)
		return rc;
	redisReply *r;
	rc = drl__redis_begin(s, c, err);
	if (rc == 0)
		rc = drl__redis_append(s, c, argc, argv, lens, err);
	if (rc == 0)
		rc = drl__redis_collect(s, c, 1, &r, argv[0], err);
	if (rc == 0) {
		rc = read(s, r, arg, err);
		freeReplyObject(r);
	}
	drl__redis_release(s, c);
	return rc;
}
