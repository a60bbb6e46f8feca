/*
 * sliding_log: the exact sliding window. The state is the log of admitted
 * requests in the last PERIOD, as (time, count) entries (requests at the
 * same µs share one entry); a request is admitted when the counts in
 * (now - PERIOD, now] plus its cost fit in LIMIT. remaining, reset_after
 * and retry_after are exact.
 *
 * The log is what was used, which means the same under any LIMIT: LIMIT
 * is not in the key (log:PERIOD), and a decision under another LIMIT L'
 * admits cost when the live count + cost <= L' (on_change=keep_used).
 * The state records the LIMIT and version= it was written under, as
 * token_bucket and gcra do: a newer stored version decides with its
 * LIMIT, an older one (or none on either side) is taken over by the
 * caller's, and on_change=reset then clears the log; the same version
 * with another LIMIT is DRL_ECORRUPT (docs/algorithms.md, "When a limit
 * changes"). keep_available, scale and additive are refused: they would
 * add or drop units that no entry's time says when to release.
 *
 * Each live entry counts >= 1, and a log's live counts sum to at most
 * 2 x the LIMIT it was used under (a penalty, drl_adjust, doubles it):
 * LIMIT <= DRL_SLIDING_LOG_LIMIT_MAX, so a log read holds at most
 * LIVE_MAX live entries whatever the caller's LIMIT (a log written under
 * a higher LIMIT is kept whole: dropping live entries would hand out
 * quota once the limit goes back up). Its state is up to 16 bytes per
 * admitted request.
 *
 * State: (dead + n) entries of 16 bytes (time µs, count), times strictly
 * increasing, then a trailer of 57 bytes: dead, n, the sum of the n live
 * entries' counts, the first live entry's time, LIMIT, PERIOD, version,
 * 'R' (int64 LE). The `dead` entries in front have left the window and
 * count for nothing. The trailer at the end lets the Lua twin (Redis)
 * decide from the last 73 bytes (the newest entry and the trailer), the
 * entries that leave and the ones a denial must walk, and write the new
 * entry and the trailer in place (what a decision costs the server must
 * not grow with the log: docs/performance.md); it leaves the entries that
 * left in front until they outnumber the live ones by more than 32 (so
 * dead <= LIVE_MAX + 32). This step checks every live entry and writes
 * the log compacted (dead 0).
 * The states written before ('S': the trailer without LIMIT, PERIOD and
 * version; 'M' and 'L' before it) lived under keys that named LIMIT
 * (log:LIMIT:PERIOD): a client of this state never looks there, they
 * expire by their TTL. One met anyway is DRL_ECORRUPT, here and in the
 * twin. Clients built before cannot read 'R' (and never look for it).
 */
#include "internal.h"

#include <string.h>

/* dead, n, sum, first live time, LIMIT, PERIOD, version, 'R' */
#define TRAILER 57
#define ENTRY 16
#define DEAD_SLACK 32 /* the twin's: dead <= n + DEAD_SLACK after a write */
/* The most live entries (and units) a log of any LIMIT holds: a
 * penalty's 2 x the largest LIMIT; the most dead ones in front of them. */
#define LIVE_MAX (2 * (int64_t)DRL_SLIDING_LOG_LIMIT_MAX)
#define DEAD_MAX (LIVE_MAX + DEAD_SLACK)

typedef struct log_view {
	const unsigned char *p; /* first live entry */
	int64_t n;              /* live entries */
	int64_t limit, version; /* what the log was written under */
} log_view;

static int64_t ts_at(const log_view *v, int64_t i)
{
	return drl__get64(v->p + i * ENTRY);
}

static int64_t count_at(const log_view *v, int64_t i)
{
	return drl__get64(v->p + i * ENTRY + 8);
}

/* Validate the stored log: its trailer, every live entry, and what the
 * trailer says of them; an absent log is empty, under lim's numbers.
 * 0, or DRL_ECORRUPT (nothing in any error). */
static int read_log(const drl__limit *lim, const void *old, size_t oldlen,
		    log_view *v)
{
	*v = (log_view){NULL, 0, lim->limit, lim->version};
	if (old == NULL)
		return 0;
	const unsigned char *p = old;
	if (oldlen < TRAILER || p[oldlen - 1] != 'R')
		return DRL_ECORRUPT;
	const unsigned char *t = p + oldlen - TRAILER;
	int64_t dead = drl__get64(t), n = drl__get64(t + 8);
	v->limit = drl__get64(t + 32);
	v->version = drl__get64(t + 48);
	if (dead < 0 || dead > DEAD_MAX || n < 0 || n > LIVE_MAX ||
	    oldlen != TRAILER + (size_t)(dead + n) * ENTRY ||
	    drl__get64(t + 40) != lim->period_us || v->limit < 1 ||
	    v->limit > DRL_SLIDING_LOG_LIMIT_MAX || v->version < 0 ||
	    v->version > DRL__VERSION_MAX)
		return DRL_ECORRUPT;
	v->p = p + dead * ENTRY;
	v->n = n;
	int64_t sum = 0;
	for (int64_t i = 0; i < n; i++) {
		int64_t c = count_at(v, i);
		int64_t ts = ts_at(v, i);
		if (c < 1 || ts < 0 || ts > DRL_TIME_MAX_US ||
		    (i > 0 && ts <= ts_at(v, i - 1)))
			return DRL_ECORRUPT;
		sum += c;
		if (sum > LIVE_MAX)
			return DRL_ECORRUPT;
	}
	if (drl__get64(t + 16) != sum ||
	    (n > 0 && drl__get64(t + 24) != ts_at(v, 0)))
		return DRL_ECORRUPT;
	return 0;
}

/* Which numbers decide the log *v, into *eff (lim, or a newer stored
 * version's LIMIT): as drl__params_settle (algorithms/params.c), with no
 * level to convert: keep_used keeps the log as it is, reset empties it.
 * 1 when taken over (to be written even when nothing is used), 0, or
 * DRL_ECORRUPT (in call->err) for the same version with another LIMIT. */
static int settle(const drl__limit *lim, const drl__call *call, log_view *v,
		  drl__limit *eff)
{
	*eff = *lim;
	if (v->version > lim->version) {
		eff->limit = v->limit;
		eff->version = v->version;
		return 0;
	}
	if (v->limit == lim->limit && v->version == lim->version)
		return 0;
	if (v->version == lim->version && lim->version > 0)
		return drl_error_set(
			call->err, DRL_ECORRUPT,
			"sliding_log: version %lld of this limit is stored "
			"with other parameters (LIMIT %lld): a changed limit "
			"needs a higher version",
			(long long)lim->version, (long long)v->limit);
	if (lim->on_change == DRL__CHANGE_RESET)
		v->n = 0;
	return 1;
}

static int64_t first_live(const drl__limit *lim, const log_view *v, int64_t now)
{
	int64_t i = 0;
	while (i < v->n && ts_at(v, i) <= now - lim->period_us)
		i++;
	return i;
}

static void put_trailer(const drl__limit *lim, unsigned char *out, int64_t n,
			size_t *outlen);

/* A stored log as a decision finds it (load): the log, the numbers that
 * decide it, and its live part at the call's now: its first live entry,
 * their counts' sum, the newest one's time (-1: none). */
typedef struct loaded {
	log_view v;
	drl__limit eff;
	int64_t first, used, newest;
} loaded;

/* Read the stored log (read_log), settle which numbers decide it
 * (settle, into s->eff) and count its live part at call->now into *s:
 * settle's 1 or 0, or DRL_ECORRUPT (in call->err). */
static int load(const drl__limit *lim, const drl__call *call, const void *old,
		size_t oldlen, loaded *s)
{
	log_view *v = &s->v;
	if (read_log(lim, old, oldlen, v))
		return drl__state_corrupt(lim, call);
	int changed = settle(lim, call, v, &s->eff);
	if (changed < 0)
		return changed;
	s->first = first_live(lim, v, call->now);
	s->used = 0;
	for (int64_t i = s->first; i < v->n; i++)
		s->used += count_at(v, i);
	s->newest = v->n > s->first ? ts_at(v, v->n - 1) : -1;
	return changed;
}

/* Write entries [from, n) of v, then (stamp, add) merged or appended when
 * add > 0; entries whose count drops to 0 through `add < 0` vanish. The
 * trailer records lim's LIMIT and version. */
static void write_log(const drl__limit *lim, const log_view *v, int64_t from,
		      int64_t stamp, int64_t add, unsigned char *out,
		      size_t *outlen)
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
	put_trailer(lim, out, n, outlen);
}

/* The trailer after the n entries at out (dead 0), with lim's LIMIT,
 * PERIOD and version: the whole state's length in *outlen. */
static void put_trailer(const drl__limit *lim, unsigned char *out, int64_t n,
			size_t *outlen)
{
	int64_t sum = 0;
	for (int64_t i = 0; i < n; i++)
		sum += drl__get64(out + i * ENTRY + 8);
	unsigned char *t = out + (size_t)n * ENTRY;
	drl__put64(t, 0);
	drl__put64(t + 8, n);
	drl__put64(t + 16, sum);
	drl__put64(t + 24, n ? drl__get64(out) : 0);
	drl__put64(t + 32, lim->limit);
	drl__put64(t + 40, lim->period_us);
	drl__put64(t + 48, lim->version);
	t[56] = 'R';
	*outlen = TRAILER + (size_t)n * ENTRY;
}

/* µs from now until the log written at out (*outlen bytes) no longer
 * matters (its newest entry leaves the window), plus the grace: its TTL. */
static int64_t log_ttl(const drl__limit *lim, const unsigned char *out,
		       size_t outlen, int64_t now)
{
	int64_t n = (int64_t)((outlen - TRAILER) / ENTRY);
	int64_t newest = n ? drl__get64(out + (size_t)(n - 1) * ENTRY)
			   : now - lim->period_us;
	return newest + lim->period_us - now + DRL__TTL_GRACE_US;
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
	loaded s;
	int changed = load(lim, call, old, oldlen, &s);
	if (changed < 0)
		return changed;
	int64_t now = call->now, cost = call->cost, limit = s.eff.limit;
	int64_t first = s.first, used = s.used, newest = s.newest;
	int64_t reset = newest < 0 ? 0 : newest + s.eff.period_us - now;
	int64_t retry = 0;
	if (cost <= limit && used + cost > limit) {
		/* wait until enough of the oldest entries leave */
		int64_t excess = used + cost - limit, k = first;
		for (int64_t freed = 0;; k++) {
			freed += count_at(&s.v, k);
			if (freed >= excess)
				break;
		}
		retry = ts_at(&s.v, k) + s.eff.period_us - now;
	}
	int consumed = judge(&s.eff, call, used, reset, retry, res);
	/* taken over (changed): written under eff's numbers all the same */
	if (!consumed && (!changed || call->peek))
		return 0;
	int64_t stamp = drl__max64(now, newest);
	if (consumed)
		undo->a = stamp;
	write_log(&s.eff, &s.v, first, stamp, consumed ? cost : 0, out, outlen);
	*ttl_us = log_ttl(&s.eff, out, *outlen, now);
	return 1;
}

/* The twin's answer (sliding_log.lua): {used, reset, x}, x the time it
 * wrote (an allowed write: what a policy's give-back looks for) or the
 * retry of a denial within the limit; {used, reset, x, L} when a newer
 * stored version's LIMIT L decided (0 as a 4th value: the caller's own);
 * or `used` alone (as a batch item: {used, 0, 0, 0}) for a write at
 * call->now, the caller's own time, under its own LIMIT: reset is then
 * PERIOD and the time written is known. {used, 0, 0} means nothing else
 * for a call that is allowed (a write answers x > 0). */
static int lua_answer(const drl__limit *lim, const drl__call *call,
		      const int64_t *out, size_t nret, drl_result *res,
		      drl__undo *undo, drl_error *err)
{
	drl__limit eff = *lim;
	bool theirs = nret == 4 && out[3] != 0;
	if (theirs)
		eff.limit = out[3];
	size_t k = nret == 4 ? 3 : nret;
	bool writes = call->cost > 0 && !call->peek && k >= 1 &&
		      call->cost <= eff.limit && out[0] >= 0 &&
		      out[0] <= eff.limit - call->cost;
	bool alone = k == 1 || (k == 3 && writes && out[1] == 0 && out[2] == 0);
	if ((k != 1 && k != 3) || out[0] < 0 || out[0] > LIVE_MAX ||
	    eff.limit < 1 || eff.limit > DRL_SLIDING_LOG_LIMIT_MAX ||
	    (k == 3 && (out[1] < 0 || out[1] > DRL_TIME_MAX_US || out[2] < 0 ||
			out[2] > DRL_TIME_MAX_US)) ||
	    (alone && (!writes || theirs || call->now == DRL__NOW_STORE)))
		return drl_error_set(err, DRL_ECORRUPT,
				     "sliding_log script answered something "
				     "that is not a decision");
	int64_t stamp = alone ? call->now : out[2];
	if (judge(&eff, call, out[0], alone ? 0 : out[1], stamp, res))
		undo->a = stamp;
	return 0;
}

/* Give back call->cost at the time the decision wrote (undo->a), under
 * the numbers the log records (a refund converts nothing). */
static int unstep(const drl__limit *lim, const drl__call *call, const void *old,
		  size_t oldlen, void *out, size_t cap, size_t *outlen,
		  int64_t *ttl_us, drl_result *res, drl__undo *undo)
{
	(void)cap, (void)res;
	log_view v;
	if (read_log(lim, old, oldlen, &v))
		return drl__state_corrupt(lim, call);
	drl__limit rec = *lim;
	rec.limit = v.limit;
	rec.version = v.version;
	int64_t first = first_live(lim, &v, call->now);
	write_log(&rec, &v, first, undo->a, -call->cost, out, outlen);
	*ttl_us = log_ttl(lim, out, *outlen, call->now);
	return 1;
}

/* drl_adjust: a penalty appends call->delta units at max(now, newest)
 * (merged into the newest entry when it has that time), but never beyond
 * 2 x LIMIT in the log (nor any when it is there already); a reward drops
 * -call->delta units from the newest entries back (never below an empty
 * log). LIMIT is the one that decides (settle: a changed one is taken
 * over first). The log is written compacted; then the peek of call (cost
 * 1). */
static int adjust_step(const drl__limit *lim, const drl__call *call,
		       const void *old, size_t oldlen, void *out, size_t cap,
		       size_t *outlen, int64_t *ttl_us, drl_result *res,
		       drl__undo *undo)
{
	(void)cap;
	loaded s;
	int rc = load(lim, call, old, oldlen, &s);
	if (rc < 0)
		return rc;
	int64_t now = call->now, first = s.first, used = s.used;
	int64_t newest = s.newest;
	unsigned char *o = out;
	if (call->delta > 0) {
		int64_t add = drl__min64(call->delta,
					 drl__max64(0, 2 * s.eff.limit - used));
		write_log(&s.eff, &s.v, first, drl__max64(now, newest), add, o,
			  outlen);
	} else {
		write_log(&s.eff, &s.v, first, 0, 0, o, outlen);
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
		put_trailer(&s.eff, o, n, outlen);
	}
	*ttl_us = log_ttl(lim, o, *outlen, now);
	/* the peek, on the log as written (it writes nothing) */
	size_t ignored_len;
	int64_t ignored_ttl;
	rc = step(lim, call, o, *outlen, NULL, 0, &ignored_len, &ignored_ttl,
		  res, undo);
	return rc < 0 ? rc : 1;
}

/* The largest state a decision writes from no state (an allowed write
 * finds at most LIMIT - cost units live, so at most LIMIT entries). From
 * a stored log it writes at most that log's live entries and one more
 * (core/optimistic.c gives room for the state read beyond this). The
 * largest state read: the twin's, with up to DEAD_MAX dead entries in
 * front of up to LIVE_MAX live ones, under any LIMIT. */
static size_t state_size(const drl__limit *lim)
{
	return TRAILER + (size_t)lim->limit * ENTRY;
}

/* A step writes the live entries of the log it read and at most one
 * more (write_log: a new time's entry), so beyond the state read it
 * needs at most one entry and a trailer: a decision on a long log
 * allocates the log read, not its LIMIT's worth. */
static size_t step_room(const drl__limit *lim)
{
	(void)lim;
	return TRAILER + ENTRY;
}

static size_t stored_size(const drl__limit *lim)
{
	(void)lim;
	return TRAILER + (size_t)(DEAD_MAX + LIVE_MAX) * ENTRY;
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
	.keeps_params = true,
	.changes = 1u << DRL__CHANGE_RESET,
	/* units added to a log or dropped from it have no time to leave at */
	.why_not = "a log holds the times its units leave: only keep_used "
		   "and reset",
	.option = NULL, /* no options */
	.finish = finish,
	DRL__STATE_ENGINE,
	.step = step,
	.unstep = unstep,
	.adjust_step = adjust_step,
	.state_size = state_size,
	.step_room = step_room,
	.stored_size = stored_size,
	.lua = &drl__lua_sliding_log,
	.lua_batch = &drl__lua_batch_sliding_log,
	.lua_answer = lua_answer,
	.lua_nargs = 6, /* to the change rules (sliding_log.lua) */
};
