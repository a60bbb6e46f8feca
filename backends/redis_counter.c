/*
 * The Redis store's counters without a transaction or a script: add_read()
 * and add_read_start() (DRL_CAP_ADD_READ; tx=auto, the default), declared
 * in backends/redis_conn.h.
 *
 * One decision of a counter algorithm is INCRBY of the current counter,
 * PEXPIRE of it, and a GET of each other counter it reads, pipelined in
 * one round trip: what Envoy's rate limit service sends, no EVALSHA, no
 * MULTI/EXEC. Redis runs each command atomically, which is all the
 * counter algorithms need (they increment first and give back an
 * increment that went over the limit: docs/algorithms.md). On the
 * server that is about a fifth of what a script doing the same costs
 * (docs/performance.md, "What a decision costs the server").
 *
 * GET, not MGET, for the others: MGET reads a key of another type (a
 * list) as nil, i.e. as an unused counter; GET reports it (WRONGTYPE).
 * PEXPIRE every time, not PEXPIRE NX (Redis 7 only): the TTL a decision
 * asks for ends at the same moment for every caller of one sub-window
 * (its end plus the window, plus the grace), so rewriting it changes
 * nothing, and servers before 7 need no other command.
 *
 * A started call travels on the store's shared connections
 * (backends/redis_pipe.c) as a started script call does.
 */
#include "redis_conn.h"

#include <hiredis/hiredis.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_STACK 512     /* prefixed keys up to this size need no malloc */
#define ADD_READ_MAX 4096 /* keys one call may name */

/*
 * Queue INCRBY keys[0] delta, PEXPIRE keys[0] ms, GET keys[1..n) on c,
 * each key behind the store's prefix: n + 1 replies. On failure c is
 * broken (what was queued must never reach the server out of step).
 */
static int append_add_read(rstore *s, conn *c, size_t n, const drl_bytes *keys,
			   int64_t delta, int64_t ttl_us, drl_error *err)
{
	char ms[24], d[24], stack[KEY_STACK];
	size_t mslen = 0;
	char *kb = stack, *heap = NULL;
	size_t cap = sizeof stack;
	int rc = drl__redis_ttl_arg(s, ttl_us, ms, &mslen, err);
	size_t dlen = (size_t)snprintf(d, sizeof d, "%" PRId64, delta);

	for (size_t j = 0; rc == 0 && j < n; j++) {
		size_t klen = s->prefixlen + keys[j].len;
		if (klen > cap) {
			char *m = realloc(heap, klen);
			if (m == NULL) {
				rc = drl_error_set(err, DRL_ENOMEM,
						   "redis %s: out of memory",
						   s->where);
				break;
			}
			kb = heap = m;
			cap = klen;
		}
		if (s->prefixlen)
			memcpy(kb, s->prefix, s->prefixlen);
		if (keys[j].len)
			memcpy(kb + s->prefixlen, keys[j].data, keys[j].len);
		if (j > 0) {
			const char *get[2] = {"GET", kb};
			size_t getl[2] = {3, klen};
			rc = drl__redis_append(s, c, 2, get, getl, err);
			continue;
		}
		const char *incr[3] = {"INCRBY", kb, d};
		size_t incrl[3] = {6, klen, dlen};
		const char *pexp[3] = {"PEXPIRE", kb, ms};
		size_t pexpl[3] = {7, klen, mslen};
		rc = drl__redis_append(s, c, 3, incr, incrl, err);
		if (rc == 0)
			rc = drl__redis_append(s, c, 3, pexp, pexpl, err);
	}
	free(heap);
	if (rc)
		c->broken = true;
	return rc;
}

/* The n + 1 replies of append_add_read() into values[0..n). */
static int add_read_result(rstore *s, redisReply **r, size_t n, int64_t *values,
			   drl_error *err)
{
	if (r[0]->type != REDIS_REPLY_INTEGER)
		return drl__redis_reply_error(s, "INCRBY", r[0], true, err);
	if (r[1]->type != REDIS_REPLY_INTEGER)
		return drl__redis_reply_error(s, "PEXPIRE", r[1], false, err);
	values[0] = r[0]->integer;
	for (size_t j = 1; j < n; j++) {
		int rc = drl__redis_counter_value(s, r[j + 1], &values[j], err);
		if (rc)
			return rc;
	}
	return 0;
}

static int check_args(rstore *s, size_t n, const drl_bytes *keys,
		      drl_error *err)
{
	if (n == 0 || n > ADD_READ_MAX || keys == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "redis %s: add_read of %zu keys", s->where,
				     n);
	return 0;
}

int drl__redis_add_read(drl_backend *b, size_t n, const drl_bytes *keys,
			int64_t delta, int64_t ttl_us, int64_t *values,
			drl_error *err)
{
	rstore *s = (rstore *)b;
	redisReply *stack[16], **r = stack;
	conn proxy, *c;
	int rc = check_args(s, n, keys, err);
	if (rc)
		return rc;
	if (n + 1 > sizeof stack / sizeof stack[0]) {
		r = malloc((n + 1) * sizeof *r);
		if (r == NULL)
			return drl_error_set(err, DRL_ENOMEM,
					     "redis %s: out of memory",
					     s->where);
	}
	rc = drl__redis_acquire_shared(s, &proxy, &c, err);
	if (rc == 0) {
		rc = drl__redis_begin(s, c, err);
		if (rc == 0)
			rc = append_add_read(s, c, n, keys, delta, ttl_us, err);
		if (rc == 0)
			rc = drl__redis_collect(s, c, n + 1, r, "INCRBY", err);
		if (rc == 0) {
			rc = add_read_result(s, r, n, values, err);
			drl__redis_free_replies(r, n + 1);
		}
		drl__redis_release(s, c);
	}
	if (r != stack)
		free(r);
	return rc;
}

/* A started add_read: its commands, its replies, and its owner. */
typedef struct add_call {
	rreq q; /* first: the pipe hands back &q */
	char *cmd;
	size_t n;
	drl_eval_done_fn done;
	void *arg;
	int64_t *values; /* n, in the allocation */
	redisReply *r[]; /* n + 1 */
} add_call;

static void add_call_free(add_call *a, bool replies)
{
	if (replies)
		drl__redis_free_replies(a->r, a->n + 1);
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
	a->done(a->arg, rc, a->values, a->n, rc ? &err : NULL);
	add_call_free(a, q->rc == 0);
}

int drl__redis_add_read_start(drl_backend *b, size_t n, const drl_bytes *keys,
			      int64_t delta, int64_t ttl_us,
			      drl_eval_done_fn done, void *arg, drl_error *err)
{
	rstore *s = (rstore *)b;
	int rc = check_args(s, n, keys, err);
	if (rc)
		return rc;
	if (done == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "redis: add_read_start: no callback");
	add_call *a = calloc(1, sizeof *a + (n + 1) * sizeof(redisReply *) +
					n * sizeof(int64_t));
	if (a == NULL)
		return drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				     s->where);
	a->values = (int64_t *)(a->r + n + 1);
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
	a->q.n = n + 1;
	a->q.r = a->r;
	a->q.what = "INCRBY";
	a->q.complete = add_complete;
	a->q.deadline = drl__redis_deadline_in(s->timeout_ms);
	rc = drl__redis_pipe_start(s, &a->q, err);
	if (rc)
		add_call_free(a, false);
	return rc;
}
