/*
 * sliding_log: the exact sliding window. The state is the log of admitted
 * requests in the last PERIOD, as (time, count) entries (requests at the
 * same µs share one entry); a request is admitted when the counts in
 * (now - PERIOD, now] plus its cost fit in LIMIT. remaining, reset_after
 * and retry_after are exact.
 *
 * The log holds at most LIMIT live entries (each count >= 1 and their sum
 * is at most LIMIT), hence LIMIT <= DRL_SLIDING_LOG_LIMIT_MAX for this
 * algorithm: its state is up to 16 bytes per admitted request. A penalty
 * (drl_adjust) may take the sum to 2 x LIMIT, so a log holds up to
 * 2 x LIMIT live entries; clients built before drl_adjust read a log
 * beyond LIMIT as malformed.
 *
 * State 'S': (dead + n) entries of 16 bytes (time µs, count), times
 * strictly increasing, then a trailer of 33 bytes: dead, n, the sum of the
 * n live entries' counts, the first live entry's time, 'S' (int64 LE).
 * The `dead` entries in front have left the window and count for nothing.
 * The trailer at the end lets the Lua twin (Redis) decide from the last
 * 49 bytes (the newest entry and the trailer), the entries that leave and
 * the ones a denial must walk, and write the new entry and the trailer in
 * place (what a decision costs the server must not grow with the log:
 * docs/performance.md); it leaves the entries that left in front until
 * they outnumber the live ones by more than 32 (so dead <= LIMIT + 32).
 * This step checks every live entry and writes the log compacted (dead 0).
 * The states written before, 'M' (n, the sum, entries) and 'L' (n,
 * entries) with their header in front, are still read, and rewritten as
 * 'S' (an 'S' ends in 'S'; an 'M' or 'L' in a count's top byte, 0).
 * Clients built before cannot read 'S'.
 */
#include "internal.h"

#include <string.h>

#define TRAILER 33  /* dead, n, sum, first live time, 'S' */
#define M_HEADER 17 /* 'M', n, sum */
#define L_HEADER 9  /* 'L', n */
#define ENTRY 16
#define DEAD_SLACK 32 /* the twin's: dead <= n + DEAD_SLACK after a write */

typedef struct log_view {
	const unsigned char *p; /* first live entry */
	int64_t n;              /* live entries */
} log_view;

static int64_t ts_at(const log_view *v, int64_t i)
{
	return drl__get64(v->p + i * ENTRY);
}

static int64_t count_at(const log_view *v, int64_t i)
{
	return drl__get64(v->p + i * ENTRY + 8);
}

/* What the stored log's trailer or header says: where its live entries
 * are, their sum and the first one's time (`said` flags which). */
typedef struct log_said {
	bool sum, first;
	int64_t sum_v, first_v;
} log_said;

/* Find the live entries of the stored log: 0, or DRL_ECORRUPT. */
static int locate(const drl__limit *lim, const unsigned char *p, size_t len,
		  log_view *v, log_said *said)
{
	*said = (log_said){0};
	if (len >= TRAILER && p[len - 1] == 'S') {
		const unsigned char *t = p + len - TRAILER;
		int64_t dead = drl__get64(t), n = drl__get64(t + 8);
		if (dead < 0 || dead > 2 * lim->limit + DEAD_SLACK || n < 0 ||
		    n > 2 * lim->limit ||
		    len != TRAILER + (size_t)(dead + n) * ENTRY)
			return DRL_ECORRUPT;
		v->p = p + dead * ENTRY;
		v->n = n;
		*said = (log_said){.sum = true,
				   .first = n > 0,
				   .sum_v = drl__get64(t + 16),
				   .first_v = drl__get64(t + 24)};
		return 0;
	}
	size_t header = len >= 1 && p[0] == 'L' ? L_HEADER : M_HEADER;
	if (len < header || (p[0] != 'M' && p[0] != 'L'))
		return DRL_ECORRUPT;
	int64_t n = drl__get64(p + 1);
	if (n < 0 || n > 2 * lim->limit || len != header + (size_t)n * ENTRY)
		return DRL_ECORRUPT;
	v->p = p + header;
	v->n = n;
	said->sum = header == M_HEADER;
	said->sum_v = said->sum ? drl__get64(p + 9) : 0;
	return 0;
}

/* Validate the stored log ('S', or the older 'M' and 'L'): every live
 * entry, and what the trailer or header says of them; an absent log is
 * empty. */
static int read_log(const drl__limit *lim, const void *old, size_t oldlen,
		    log_view *v)
{
	v->p = NULL;
	v->n = 0;
	if (old == NULL)
		return 0;
	log_said said;
	if (locate(lim, old, oldlen, v, &said))
		return DRL_ECORRUPT;
	int64_t sum = 0;
	for (int64_t i = 0; i < v->n; i++) {
		int64_t c = count_at(v, i);
		int64_t t = ts_at(v, i);
		if (c < 1 || t < 0 || t > DRL_TIME_MAX_US ||
		    (i > 0 && t <= ts_at(v, i - 1)))
			return DRL_ECORRUPT;
		sum += c;
		if (sum > 2 * lim->limit)
			return DRL_ECORRUPT;
	}
	if ((said.sum && said.sum_v != sum) ||
	    (said.first && said.first_v != ts_at(v, 0)))
		return DRL_ECORRUPT;
	return 0;
}

static int64_t first_live(const drl__limit *lim, const log_view *v, int64_t now)
{
	int64_t i = 0;
	while (i < v->n && ts_at(v, i) <= now - lim->period_us)
		i++;
	return i;
}

static void put_trailer(unsigned char *out, int64_t n, size_t *outlen);

/* Write entries [from, n) of v, then (stamp, add) merged or appended when
 * add > 0; entries whose count drops to 0 through `add < 0` vanish. */
static void write_log(const log_view *v, int64_t from, int64_t stamp,
		      int64_t add, unsigned char *out, size_t *outlen)
{
	unsigned char *q = out;
	int64_t n = 0;
	bool merged = add == 0;
	for (int64_t i = from; i < v->n; i++) {
		int64_t t = ts_at(v, i), c = count_at(v, i);
		if (t == stamp) {
			c += add;
			merged = true;
		}
		if (c <= 0)
			continue;
		drl__put64(q, t);
		drl__put64(q + 8, c);
		q += ENTRY;
		n++;
	}
	if (!merged && add > 0) {
		drl__put64(q, stamp);
		drl__put64(q + 8, add);
		n++;
	}
	put_trailer(out, n, outlen);
}

/* The trailer after the n entries at out (dead 0): the whole state's
 * length in *outlen. */
static void put_trailer(unsigned char *out, int64_t n, size_t *outlen)
{
	int64_t sum = 0;
	for (int64_t i = 0; i < n; i++)
		sum += drl__get64(out + i * ENTRY + 8);
	unsigned char *t = out + (size_t)n * ENTRY;
	drl__put64(t, 0);
	drl__put64(t + 8, n);
	drl__put64(t + 16, sum);
	drl__put64(t + 24, n ? drl__get64(out) : 0);
	t[32] = 'S';
	*outlen = TRAILER + (size_t)n * ENTRY;
}

/* The decision of call once the log is known as `used` (the live
 * entries' count), `reset` (µs until the newest of them leaves; 0: none)
 * and, for a denial within the limit, `retry`: 1 when allowed and to be
 * written (then the entry goes at max(now, newest), `reset` later by at
 * least PERIOD). Shared by the C step and the twin's answer. */
static int judge(const drl__limit *lim, const drl__call *call, int64_t used,
		 int64_t reset, int64_t retry, drl_result *res)
{
	int64_t cost = call->cost, limit = lim->limit;
	if (cost > limit || used + cost > limit) {
		drl__result_fill(res, false, limit, limit - used, reset,
				 cost > limit ? DRL_NEVER : retry);
		return 0;
	}
	int write = !call->peek && cost > 0;
	if (write) {
		used += cost;
		reset = drl__max64(reset, lim->period_us);
	}
	drl__result_fill(res, true, limit, limit - used, reset, 0);
	return write;
}

static int step(const drl__limit *lim, const drl__call *call, const void *old,
		size_t oldlen, void *out, size_t cap, size_t *outlen,
		int64_t *ttl_us, drl_result *res, drl__undo *undo)
{
	(void)cap;
	log_view v;
	if (read_log(lim, old, oldlen, &v))
		return drl__state_corrupt(lim, call);
	int64_t now = call->now, cost = call->cost, limit = lim->limit;
	int64_t first = first_live(lim, &v, now), used = 0;
	for (int64_t i = first; i < v.n; i++)
		used += count_at(&v, i);
	int64_t newest = v.n > first ? ts_at(&v, v.n - 1) : -1;
	int64_t reset = newest < 0 ? 0 : newest + lim->period_us - now;
	int64_t retry = 0;
	if (cost <= limit && used + cost > limit) {
		/* wait until enough of the oldest entries leave */
		int64_t excess = used + cost - limit, k = first;
		for (int64_t freed = 0;; k++) {
			freed += count_at(&v, k);
			if (freed >= excess)
				break;
		}
		retry = ts_at(&v, k) + lim->period_us - now;
	}
	int write = judge(lim, call, used, reset, retry, res);
	if (write) {
		int64_t stamp = drl__max64(now, newest);
		write_log(&v, first, stamp, cost, out, outlen);
		undo->a = stamp;
		*ttl_us = stamp + lim->period_us - now + DRL__TTL_GRACE_US;
	}
	return write;
}

/* The twin's answer (sliding_log.lua): {used, reset, x}, x the time it
 * wrote (an allowed write: what a policy's give-back looks for) or the
 * retry of a denial within the limit; or `used` alone (as a batch item:
 * {used, 0, 0}) for a write at call->now, the caller's own time: reset is
 * then PERIOD and the time written is known. {used, 0, 0} means nothing
 * else for a call that is allowed (a write answers x > 0). */
static int lua_answer(const drl__limit *lim, const drl__call *call,
		      const int64_t *out, size_t nret, drl_result *res,
		      drl__undo *undo, drl_error *err)
{
	bool writes = call->cost > 0 && !call->peek && nret >= 1 &&
		      call->cost <= lim->limit && out[0] >= 0 &&
		      out[0] <= lim->limit - call->cost;
	bool alone = nret == 1 ||
		     (nret == 3 && writes && out[1] == 0 && out[2] == 0);
	if ((nret != 1 && nret != 3) || out[0] < 0 || out[0] > 2 * lim->limit ||
	    (nret == 3 && (out[1] < 0 || out[1] > DRL_TIME_MAX_US ||
			   out[2] < 0 || out[2] > DRL_TIME_MAX_US)) ||
	    (alone && (!writes || call->now == DRL__NOW_STORE)))
		return drl_error_set(err, DRL_ECORRUPT,
				     "sliding_log script answered something "
				     "that is not a decision");
	int64_t stamp = alone ? call->now : out[2];
	if (judge(lim, call, out[0], alone ? 0 : out[1], stamp, res))
		undo->a = stamp;
	return 0;
}

static int unstep(const drl__limit *lim, const drl__call *call, const void *old,
		  size_t oldlen, void *out, size_t cap, size_t *outlen,
		  int64_t *ttl_us, drl_result *res, drl__undo *undo)
{
	(void)cap, (void)res;
	log_view v;
	if (read_log(lim, old, oldlen, &v))
		return drl__state_corrupt(lim, call);
	int64_t first = first_live(lim, &v, call->now);
	write_log(&v, first, undo->a, -call->cost, out, outlen);
	int64_t n = (int64_t)((*outlen - TRAILER) / ENTRY);
	int64_t newest =
		n ? drl__get64((unsigned char *)out + (size_t)(n - 1) * ENTRY)
		  : call->now - lim->period_us;
	*ttl_us = newest + lim->period_us - call->now + DRL__TTL_GRACE_US;
	return 1;
}

/* drl_adjust: a penalty appends call->delta units at max(now, newest)
 * (merged into the newest entry when it has that time), but never beyond
 * 2 x LIMIT in the log (nor any when it is there already); a reward drops
 * -call->delta units from the newest entries back (never below an empty
 * log). The log is written compacted; then the peek of call (cost 1). */
static int adjust_step(const drl__limit *lim, const drl__call *call,
		       const void *old, size_t oldlen, void *out, size_t cap,
		       size_t *outlen, int64_t *ttl_us, drl_result *res,
		       drl__undo *undo)
{
	(void)cap;
	log_view v;
	if (read_log(lim, old, oldlen, &v))
		return drl__state_corrupt(lim, call);
	int64_t now = call->now, first = first_live(lim, &v, now), used = 0;
	for (int64_t i = first; i < v.n; i++)
		used += count_at(&v, i);
	int64_t newest = v.n > first ? ts_at(&v, v.n - 1) : -1;
	unsigned char *o = out;
	if (call->delta > 0) {
		int64_t add = drl__min64(call->delta,
					 drl__max64(0, 2 * lim->limit - used));
		write_log(&v, first, drl__max64(now, newest), add, o, outlen);
	} else {
		write_log(&v, first, 0, 0, o, outlen);
		int64_t n = (int64_t)((*outlen - TRAILER) / ENTRY);
		for (int64_t r = -call->delta; r > 0 && n > 0;) {
			unsigned char *e = o + (size_t)(n - 1) * ENTRY;
			int64_t c = drl__get64(e + 8);
			if (c > r) {
				drl__put64(e + 8, c - r);
				break;
			}
			r -= c;
			n--;
		}
		put_trailer(o, n, outlen);
	}
	int64_t n = (int64_t)((*outlen - TRAILER) / ENTRY);
	int64_t last = n ? drl__get64(o + (size_t)(n - 1) * ENTRY)
			 : now - lim->period_us;
	*ttl_us = last + lim->period_us - now + DRL__TTL_GRACE_US;
	/* the peek, on the log as written (it writes nothing) */
	size_t ignored_len;
	int64_t ignored_ttl;
	int rc = step(lim, call, o, *outlen, NULL, 0, &ignored_len,
		      &ignored_ttl, res, undo);
	return rc < 0 ? rc : 1;
}

/* The largest state the step writes (compacted: an allowed write finds
 * at most LIMIT - cost units live, so at most LIMIT entries; adjust_step
 * writes up to 2 x LIMIT, into room for the largest state read) and the
 * largest one read: the twin's, with up to 2 x LIMIT + DEAD_SLACK dead
 * entries in front of up to 2 x LIMIT live ones (a penalty's). */
static size_t state_size(const drl__limit *lim)
{
	return TRAILER + (size_t)lim->limit * ENTRY;
}

static size_t stored_size(const drl__limit *lim)
{
	return TRAILER + (size_t)(4 * lim->limit + DEAD_SLACK) * ENTRY;
}

static int finish(drl__limit *lim, drl_error *err)
{
	if (lim->limit > DRL_SLIDING_LOG_LIMIT_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "sliding_log keeps one entry per request: "
				     "LIMIT must be at most %d",
				     DRL_SLIDING_LOG_LIMIT_MAX);
	return 0;
}

const drl__algorithm drl__sliding_log = {
	.name = "sliding_log",
	.tag = "log",
	/* its LIMIT is in the tag: a changed limit starts afresh */
	.why_not = "its LIMIT is in its key, a changed limit starts afresh: "
		   "only keep_used",
	.option = NULL, /* no options */
	.finish = finish,
	.decide = drl__state_decide,
	.refund = drl__state_refund,
	.step = step,
	.unstep = unstep,
	.adjust = drl__state_adjust,
	.adjust_step = adjust_step,
	.state_size = state_size,
	.stored_size = stored_size,
	.lua = &drl__lua_sliding_log,
	.lua_batch = &drl__lua_batch_sliding_log,
	.lua_answer = lua_answer,
	.lua_nout = 3,
	.lua_nargs = 4, /* to the period (sliding_log.lua) */
};
