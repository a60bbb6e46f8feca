/*
 * The Redis store's counters without a transaction or a script: add_read()
 * and add_read_start() (DRL_CAP_ADD_READ; tx=auto, the default), declared
 * in backends/redis_conn.h.
 *
 * One decision of a counter algorithm is INCRBY of the current counter,
 * PEXPIRE of it, and one MGET of the other counters it reads, pipelined
 * in one round trip: what Envoy's rate limit service sends, no EVALSHA,
 * no MULTI/EXEC. Redis runs each command atomically, which is all the
 * counter algorithms need (they increment first and give back an
 * increment that went over the limit: docs/algorithms.md). On the
 * server that is about a fifth of what a script doing the same costs
 * (docs/performance.md, "What a decision costs the server").
 *
 * MGET, not a GET each, for the others: on the server one MGET of nine
 * keys costs about what five GETs cost (scripts/bench_lua_micro.sh). The price:
 * MGET reads a key of another type (a list someone wrote over an older
 * sub-window) as nil, an unused counter, where GET says WRONGTYPE. The
 * current sub-window is still checked (INCRBY says WRONGTYPE), and an
 * older one was ours when it was current: only a key overwritten by
 * someone else after we wrote it reads so, and one overwritten with a
 * "0" could not be told from ours either way. A value that is no integer
 * is still DRL_ECORRUPT.
 * PEXPIRE every time, not PEXPIRE NX (Redis 7 only): the TTL a decision
 * asks for ends at the same moment for every caller of one sub-window
 * (its end plus the window, plus the grace), so rewriting it changes
 * nothing, it costs the same on the server (measured), and servers
 * before 7 need no other command. (NX would spare replicas one
 * PEXPIREAT per decision: not done.)
 *
 * A started call travels on the store's shared connections
 * (backends/redis_pipe.c) as a started script call does.
 */
#include "redis.h"
#include "redis_conn.h"

#include <hiredis/hiredis.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_STACK 512     /* prefixed keys up to this size need no malloc */
#define ADD_READ_MAX 4096 /* keys one call may name */
#define ARGV_STACK 32     /* MGET argument vectors on the stack */

/* The replies of an add_read of n keys: INCRBY, PEXPIRE, and an MGET
 * when there are others to read. */
static size_t add_read_replies(size_t n)
{
	return n > 1 ? 3 : 2;
}

/*
 * Queue INCRBY keys[0] delta, PEXPIRE keys[0] ms and (n > 1) MGET
 * keys[1..n) on c, every key behind the store's prefix (formatted into
 * one buffer the argument vector points into). On failure c is broken
 * (what was queued must never reach the server out of step).
 */
static int append_add_read(rstore *s, conn *c, size_t n, const drl_bytes *keys,
			   int64_t delta, int64_t ttl_us, drl_error *err)
{
	char ms[24], d[24], kstack[KEY_STACK];
	const char *vstack[ARGV_STACK];
	size_t lstack[ARGV_STACK], mslen = 0, need = 0;
	int rc = drl__redis_ttl_arg(s, ttl_us, ms, &mslen, err);
	size_t dlen = (size_t)snprintf(d, sizeof d, "%" PRId64, delta);
	for (size_t j = 0; j < n; j++)
		need += s->prefixlen + keys[j].len;
	char *kb = need <= sizeof kstack ? kstack : malloc(need);
	const char **argv = n <= ARGV_STACK ? vstack : malloc(n * sizeof *argv);
	size_t *lens = n <= ARGV_STACK ? lstack : malloc(n * sizeof *lens);
	if (rc == 0 && (kb == NULL || argv == NULL || lens == NULL))
		rc = drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				   s->where);
	/* argv[j]: keys[j] behind the prefix; argv[0] becomes "MGET" once
	 * INCRBY and PEXPIRE are queued. */
	if (rc == 0)
		(void)drl__redis_prefixed_keys(s, n, keys, kb, argv, lens);
	if (rc == 0) {
		const char *incr[3] = {"INCRBY", argv[0], d};
		size_t incrl[3] = {6, lens[0], dlen};
		const char *pexp[3] = {"PEXPIRE", argv[0], ms};
		size_t pexpl[3] = {7, lens[0], mslen};
		rc = drl__redis_append(s, c, 3, incr, incrl, err);
		if (rc == 0)
			rc = drl__redis_append(s, c, 3, pexp, pexpl, err);
	}
	if (rc == 0 && n > 1) {
		argv[0] = "MGET";
		lens[0] = 4;
		rc = drl__redis_append(s, c, (int)n, argv, lens, err);
	}
	if (kb != kstack)
		free(kb);
	if (argv != vstack)
		free((void *)argv);
	if (lens != lstack)
		free(lens);
	if (rc)
		c->broken = true;
	return rc;
}

/* The replies of append_add_read() into values[0..n). */
static int add_read_result(rstore *s, redisReply **r, size_t n, int64_t *values,
			   drl_error *err)
{
	if (r[0]->type != REDIS_REPLY_INTEGER) /* INCRBY refused: none ran */
		return drl__redis_refused(
			s, r[0],
			drl__redis_reply_error(s, "INCRBY", r[0], true, err));
	if (r[1]->type != REDIS_REPLY_INTEGER)
		return drl__redis_reply_error(s, "PEXPIRE", r[1], false, err);
	values[0] = r[0]->integer;
	if (n == 1)
		return 0;
	const redisReply *m = r[2];
	if (m->type != REDIS_REPLY_ARRAY)
		return drl__redis_reply_error(s, "MGET", m, false, err);
	if (m->elements != n - 1)
		return drl_error_set(err, DRL_ESTORE,
				     "redis %s: MGET of %zu keys answered %zu "
				     "values",
				     s->where, n - 1, (size_t)m->elements);
	for (size_t j = 1; j < n; j++) {
		int rc = drl__redis_counter_value(s, m->element[j - 1],
						  &values[j], err);
		if (rc)
			return rc;
	}
	return 0;
}

/* Bad arguments refused before a connection is taken (a call that
 * fails to format breaks its connection). */
static int check_args(rstore *s, size_t n, const drl_bytes *keys,
		      int64_t ttl_us, drl_error *err)
{
	char ms[24];
	size_t mslen;
	if (n == 0 || n > ADD_READ_MAX || keys == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "redis %s: add_read of %zu keys", s->where,
				     n);
	return drl__redis_ttl_arg(s, ttl_us, ms, &mslen, err);
}

int drl__redis_add_read(drl_backend *b, size_t n, const drl_bytes *keys,
			int64_t delta, int64_t ttl_us, int64_t *values,
			drl_error *err)
{
	rstore *s = (rstore *)b;
	redisReply *r[3];
	size_t nr = add_read_replies(n);
	conn proxy, *c;
	int rc = check_args(s, n, keys, ttl_us, err);
	if (rc)
		return rc;
	rc = drl__redis_acquire_shared(s, &proxy, &c, err);
	if (rc == 0) {
		rc = drl__redis_begin(s, c, err);
		if (rc == 0)
			rc = append_add_read(s, c, n, keys, delta, ttl_us, err);
		if (rc == 0)
			rc = drl__redis_collect(s, c, nr, r, "INCRBY", err);
		if (rc == 0) {
			rc = add_read_result(s, r, n, values, err);
			drl__redis_free_replies(r, nr);
		}
		drl__redis_release(s, c);
	}
	return rc;
}

/* A started add_read: its commands, its replies, and its owner. */
typedef struct add_call {
	rreq q; /* first: the pipe hands back &q */
	char *cmd;
	size_t n;
	drl_eval_done_fn done;
	void *arg;
	int64_t *values;  /* n, in the allocation */
	redisReply *r[3]; /* add_read_replies(n) */
} add_call;

static void add_call_free(add_call *a, bool replies)
{
	if (replies)
		drl__redis_free_replies(a->r, add_read_replies(a->n));
	free(a->cmd);
	free(a);
}

/* Its replies are in (or it failed): hand the outcome to the owner, as
 * drl__redis_add_read() would have returned it. */
static void add_complete(rstore *s, rreq *q)
{
	add_call *a = (add_call *)q;
	drl_error err = q->err;
	int rc = q->rc; /* on failure the pipe freed what it had read */
	if (rc == 0)
		rc = add_read_result(s, a->r, a->n, a->values, &err);
	/* A started call is never run again: the plain code. */
	a->done(a->arg, drl__redis_code(rc), a->values, a->n, rc ? &err : NULL);
	add_call_free(a, q->rc == 0);
}

int drl__redis_add_read_start(drl_backend *b, size_t n, const drl_bytes *keys,
			      int64_t delta, int64_t ttl_us,
			      drl_eval_done_fn done, void *arg, drl_error *err)
{
	return drl__redis_add_read_start_on((rstore *)b, NULL, n, keys, delta,
					    ttl_us, done, arg, err);
}

int drl__redis_add_read_start_on(rstore *s, drl_channel *ch, size_t n,
				 const drl_bytes *keys, int64_t delta,
				 int64_t ttl_us, drl_eval_done_fn done,
				 void *arg, drl_error *err)
{
	int rc = check_args(s, n, keys, ttl_us, err);
	if (rc)
		return rc;
	if (done == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "redis: add_read_start: no callback");
	add_call *a = calloc(1, sizeof *a + n * sizeof(int64_t));
	if (a == NULL)
		return drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				     s->where);
	a->values = (int64_t *)(a + 1);
	a->n = n;
	a->done = done;
	a->arg = arg;

	conn pc = {.shared = true};
	rc = drl__redis_begin(s, &pc, err);
	if (rc == 0)
		rc = append_add_read(s, &pc, n, keys, delta, ttl_us, err);
	if (rc) {
		free(pc.qbuf);
		free(a);
		return rc;
	}
	a->cmd = pc.qbuf;
	a->q.buf = a->cmd;
	a->q.len = pc.qlen;
	a->q.n = add_read_replies(n);
	a->q.r = a->r;
	a->q.what = "INCRBY";
	a->q.complete = add_complete;
	a->q.chan = ch;
	a->q.deadline = drl__redis_deadline_in(s->timeout_ms);
	rc = drl__redis_req_queue(s, &a->q, err);
	if (rc)
		add_call_free(a, false);
	return rc;
}
