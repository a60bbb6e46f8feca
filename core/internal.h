/*
 * Internal interfaces shared by core/, algorithms/ and backends/.
 * Cross-file internal symbols carry the drl__ prefix; none is exported.
 */
#ifndef DRL_INTERNAL_H
#define DRL_INTERNAL_H

#include "drl/sys/backend.h"
#include "drl/drl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

/* ---- URIs (core/uri.c) ------------------------------------------------ */

#define DRL__URI_OPTS_MAX 16

typedef struct drl__uri_option {
	char *key;
	char *value;
	bool used;
} drl__uri_option;

/* scheme://[user[:password]@]hosts[/path][?k=v&k=v]
 * All strings are percent-decoded, NUL-terminated, owned by the uri, and
 * NULL when absent. `hosts` is kept raw ("a:1,b:2"); `path` starts after the
 * '/' that ends the authority ("0" for redis://h/0, "/run/x.sock" for
 * redis+unix:///run/x.sock). */
struct drl_uri {
	char *scheme;
	char *user;
	char *password;
	char *hosts;
	char *path;
	size_t nopts;
	drl__uri_option opts[DRL__URI_OPTS_MAX];
	/* Set by a store's open(): over how many independent servers it
	 * spreads keys (0: one, or it does not say). */
	size_t servers;
};
/* The core's name for the public, opaque drl_uri (include/drl/sys/backend.h
 * has its accessors, for stores). */
typedef struct drl_uri drl__uri;

/* Parse; DRL_EINVAL naming the bad part. The password never appears in a
 * message. On failure *u is cleared. */
int drl__uri_parse(drl__uri *u, const char *text, drl_error *err);
void drl__uri_clear(drl__uri *u);
/* The option accessors (drl_uri_option*, drl_uri_check_all_used, ...) are
 * public: include/drl/sys/backend.h. */
/* drl_uri_redact() (public, include/drl/drl.h) shows a URI in messages. */

/* Numbers: drl_parse_int() (public, core/parse.c). */

/* ---- backends registry (backends/registry.c) -------------------------- */

/* The stores built into this library, by URI scheme: declared once, in
 * backends/registry.h. */
#include "backends/registry.h"

/* ---- limits (core/spec.c) --------------------------------------------- */

struct drl__algorithm;

/* One parsed limit: ALGORITHM:LIMIT/PERIOD[,option=value...]. */
typedef struct drl__limit {
	const struct drl__algorithm *algo;
	int64_t limit;      /* LIMIT, requests per period */
	int64_t period_us;  /* PERIOD */
	int64_t burst;      /* token_bucket, gcra: capacity (default LIMIT) */
	int64_t subwindows; /* subwindow: number of sub-windows */
	int trailing;       /* subwindow: weight the expired sub-window */
	int on_change;      /* DRL__CHANGE_*: on_change= (keep_used, 0) */
	int64_t version;    /* version= (0: none given) */
	bool lua_ok;        /* its numbers fit a Lua twin's doubles */
	char tag[96];       /* key component naming this limit uniquely */
	size_t taglen;
} drl__limit;

/* on_change= policies: how a state recorded under other parameters is
 * carried over (docs/algorithms.md, "When a limit changes"). The twins
 * get them as numbers (drl__change_word): keep the order. */
enum {
	DRL__CHANGE_KEEP_USED,
	DRL__CHANGE_KEEP_AVAILABLE,
	DRL__CHANGE_SCALE,
	DRL__CHANGE_ADDITIVE,
	DRL__CHANGE_RESET,
	DRL__CHANGE_COUNT
};
#define DRL__VERSION_MAX INT64_C(1000000000)

/* What a twin of an algorithm that keeps its parameters is told of the
 * change rules (ARGV[6]): on_change + 8 x version (< 2^53). */
static inline int64_t drl__change_word(const drl__limit *lim)
{
	return lim->on_change + 8 * lim->version;
}

/* Parse one limit spec (no ';'). DRL_EINVAL names the bad part. */
int drl__limit_parse(drl__limit *lim, const char *spec, size_t len,
		     drl_error *err);
/* A duration as PERIOD is written (a whole count and ms, s, m, h or d)
 * into *out µs: 0, DRL_EINVAL when malformed, DRL_ERANGE when above
 * max_us (a count of 0 is 0 µs: callers check their minimum). */
int drl__parse_duration(const char *s, size_t len, int64_t max_us,
			int64_t *out);

/* ---- keys (core/key.c) ----------------------------------------------- */

#define DRL__PREFIX_MAX 128
#define DRL__KEY_INLINE_MAX 128 /* longer user keys are stored hashed */
#define DRL__KEY_BUF 448        /* fits prefix + tag + key + suffix */

/* The part of a store key shared by every key of one (limit, user key):
 * prefix, limit tag and the user key, inside one Redis hash tag {...}. */
typedef struct drl__keybase {
	char buf[DRL__KEY_BUF];
	size_t len;
} drl__keybase;

/* A full store key: base + optional ":<suffix>". */
typedef struct drl__key {
	char buf[DRL__KEY_BUF + 24];
	size_t len;
} drl__key;

/* The decimal digits of v at p (up to 20, no NUL); returns how many. */
size_t drl__put_uint(char *p, uint64_t v);

void drl__keybase_make(drl__keybase *kb, const char *prefix, size_t plen,
		       const drl__limit *lim, const void *key, size_t keylen);

/* What names a user key in the store keys: its bytes when it is at most
 * DRL__KEY_INLINE_MAX bytes (bytes points into the key), its SHA-256
 * digest otherwise (bytes points at sha). Two keys with the same id share
 * every store key. */
typedef struct drl__key_id_buf {
	const unsigned char *bytes;
	size_t len;
	bool digest;
	unsigned char sha[32];
} drl__key_id_buf;
void drl__key_digest(const void *key, size_t keylen, drl__key_id_buf *id);
static inline void drl__key_id(const void *key, size_t keylen,
			       drl__key_id_buf *id)
{
	if (keylen > DRL__KEY_INLINE_MAX) {
		drl__key_digest(key, keylen, id); /* the one hash */
		return;
	}
	id->bytes = key;
	id->len = keylen;
	id->digest = false;
}
/* drl__keybase_make from a key's id (drl__key_id's bytes, len, digest). */
void drl__keybase_make_id(drl__keybase *kb, const char *prefix, size_t plen,
			  const drl__limit *lim, const void *id, size_t idlen,
			  bool digest);
/* base (no suffix) */
drl_bytes drl__key_plain(drl__key *k, const drl__keybase *kb);
/* base + ":" + decimal suffix (e.g. a window index) */
drl_bytes drl__key_indexed(drl__key *k, const drl__keybase *kb, int64_t suffix);
/* base + "#" + decimal index: counter `index` of the group named by the
 * base, for a store with DRL_CAP_COUNTER_GROUPS (backend.h, "Counter
 * groups"). */
drl_bytes drl__key_grouped(drl__key *k, const drl__keybase *kb, int64_t index);

/* ---- algorithms -------------------------------------------------------- */

/* Counters behind drl_store_stats; relaxed atomics (core/store.c).
 * DRL__STATS_FIELDS(X) names each: a field of both structs. */
#define DRL__STATS_FIELDS(X)                                                   \
	X(decisions)                                                           \
	X(cas_attempts)                                                        \
	X(cas_conflicts)                                                       \
	X(cas_exhausted)                                                       \
	X(scripts)                                                             \
	X(store_failures)                                                      \
	X(breaker_opens)                                                       \
	X(breaker_rejects)                                                     \
	X(fallbacks)                                                           \
	X(near_denials)                                                        \
	X(near_syncs)                                                          \
	X(shadow_denials)
typedef struct drl__stats {
#define DRL__STATS_ATOMIC(field) _Atomic uint64_t field;
	DRL__STATS_FIELDS(DRL__STATS_ATOMIC)
#undef DRL__STATS_ATOMIC
} drl__stats;

#define DRL__COUNT(stats, field)                                               \
	atomic_fetch_add_explicit(&(stats)->field, 1, memory_order_relaxed)

/* Everything one decision of one limit needs. */
/* call->now when the store's own clock decides and has not been read:
 * only ever seen by a Lua twin (which reads TIME itself) or by code that
 * reads the store's clock first (drl__call_now). */
#define DRL__NOW_STORE INT64_C(-1)

typedef struct drl__call {
	drl_backend *backend;
	/* Where started calls go (the started slots' `ch`): the async
	 * API's channel of the store (core/async_io.c), or NULL: the
	 * store's own I/O. Blocking calls ignore it. */
	drl_channel *chan;
	const drl__keybase *key;
	int64_t now;  /* µs since the epoch, >= 0, or DRL__NOW_STORE */
	int64_t cost; /* >= 0 */
	bool peek;    /* decide, but consume nothing and write nothing */
	/* drl_adjust (algorithm.adjust only; 0 for a decision): units to
	 * consume unconditionally (> 0) or give back (< 0), |delta| <=
	 * DRL_LIMIT_MAX. The call is then a peek of cost 1: what it answers
	 * is the state after the adjustment. */
	int64_t delta;
	drl_error *err;
	drl__stats *stats; /* the store's counters */
} drl__call;

/* What an allowed decision consumed, so a policy can give it back when a
 * later limit denies. Opaque to the core. */
typedef struct drl__undo {
	int64_t a, b;
} drl__undo;

/* Pure step for optimistic-state algorithms: read `old` (NULL/0 when
 * absent), decide, and (when allowed and not peeking) encode the new state
 * into out (cap bytes) and set *outlen and *ttl_us. Returns 1 to write, 0 to
 * leave the state alone, or a negative error (DRL_ECORRUPT for a blob it
 * cannot read). */
typedef int (*drl__step_fn)(const drl__limit *lim, const drl__call *call,
			    const void *old, size_t oldlen, void *out,
			    size_t cap, size_t *outlen, int64_t *ttl_us,
			    drl_result *res, drl__undo *undo);

/* How a started decision of one limit (drl__algorithm.start) ends: rc,
 * and when it is 0 the decision *res; else *err (may be NULL). res and
 * err are valid only during the call. */
typedef void (*drl__decided_fn)(void *arg, int rc, const drl_result *res,
				const drl_error *err);

typedef struct drl__algorithm {
	const char *name; /* as written in specs */
	const char *tag;  /* short name used in keys */
	/* Whether the state counts consumption alone (the counters): what
	 * was used means the same under any LIMIT, so the key tag leaves
	 * LIMIT out and a changed LIMIT keeps the count (c + cost <= L'),
	 * as envoyproxy/ratelimit's keys do. Neither this nor keeps_params:
	 * LIMIT is in the tag, and a changed limit starts afresh.
	 * docs/algorithms.md, "When a limit changes". */
	bool counts_usage;
	/* Whether the state records the parameters it was written under
	 * (LIMIT, PERIOD, burst, version; algorithms/params.c; sliding_log's
	 * log all but burst, which it has not): LIMIT and
	 * burst are then not in the tag, and a decision that finds other
	 * parameters converts the state in the same step (on_change=), or
	 * decides with them when their version is newer. */
	bool keeps_params;
	/* The on_change= policies it takes beyond keep_used, as bits
	 * 1 << DRL__CHANGE_*; the others are refused by the spec parser,
	 * with why_not as the reason. */
	unsigned changes;
	const char *why_not;
	/* Take one algorithm-specific option; DRL_EINVAL if unknown/bad. */
	int (*option)(drl__limit *lim, const char *key, const char *value,
		      drl_error *err);
	/* After parsing: fill defaults, check bounds. */
	int (*finish)(drl__limit *lim, drl_error *err);
	/* Decide call->cost at call->now; fill *res. When allowed and not a
	 * peek, record in *undo what refund() needs. */
	int (*decide)(const drl__limit *lim, const drl__call *call,
		      drl_result *res, drl__undo *undo);
	/* Give back what an allowed decide() consumed (same call). */
	int (*refund)(const drl__limit *lim, const drl__call *call,
		      const drl__undo *undo);
	/* Optimistic-state algorithms only (decide/refund are then
	 * drl__state_decide/drl__state_refund): the pure step, the step that
	 * gives call->cost back, and the largest state they write from no
	 * state: state_len bytes, or state_size(lim) when that is set (from a
	 * stored state of n bytes, at most that + n: a state written under
	 * other parameters may be larger than the caller's own);
	 * stored_size(lim), when set, the largest state read (the twin's may
	 * be larger than the step's), else the same. step_room(lim), when
	 * set, is the tighter bound core/optimistic.c gives room for: the
	 * most any step (decision, refund, adjust) writes beyond the n bytes
	 * of the state it read (from no state: all it writes). */
	drl__step_fn step;
	drl__step_fn unstep;
	size_t state_len;
	size_t (*state_size)(const drl__limit *lim);
	size_t (*stored_size)(const drl__limit *lim);
	size_t (*step_room)(const drl__limit *lim);
	/* The Lua twin run by stores with DRL_CAP_SCRIPT, or NULL, and its
	 * batch variant (many items in one call, see core/batch.c). */
	const drl_script *lua;
	const drl_script *lua_batch;
	/* The twin's answer, out[0..nret) (one integer, or an array: one item
	 * of a batch comes as lua_nout values), as a decision *res, *undo for call;
	 * DRL_ECORRUPT (in err) when it is none. NULL: the twin answers in
	 * the common form {allowed, remaining, reset_after, retry_after,
	 * undo} (drl__script_answer). Use drl__twin_answer. lua_nout: the
	 * most values such an answer has (a batch item passes that many).
	 * The answer's length says its form: a compact answer has fewer than
	 * DRL__SCRIPT_NOUT values (lua_nout < DRL__SCRIPT_NOUT), and exactly
	 * DRL__SCRIPT_NOUT is the common form, which a store that runs the
	 * step itself (Redis's module, DRL.TWIN) answers for every twin. */
	int (*lua_answer)(const drl__limit *lim, const drl__call *call,
			  const int64_t *out, size_t nret, drl_result *res,
			  drl__undo *undo, drl_error *err);
	size_t lua_nout;
	/* How many of the twin's arguments it reads: the first lua_nargs
	 * of drl__script_args (0: all DRL__SCRIPT_NARGS); only those are
	 * sent (drl__script_nargs). */
	size_t lua_nargs;
	/* For drl_reset: every store key a decision of a client whose clock
	 * reads within DRL__RESET_SKEW of `now` may read or write for the
	 * user key of kb, into keys[] (backed by kbuf[]), at most
	 * DRL__LIMIT_KEYS_MAX; returns how many. NULL: the one key
	 * drl__key_plain (every optimistic-state algorithm). */
	size_t (*keys)(const drl__limit *lim, const drl__keybase *kb,
		       int64_t now, drl__key *kbuf, drl_bytes *keys);
	/* Optional: decide() without waiting, with the store's started
	 * calls and no script. startable() says whether start() can take
	 * decisions of lim at call->now on call->backend (the cost not yet
	 * known). start() copies what it needs of call (call->err unused):
	 * 0, and done(arg, ...) runs exactly once, on a thread doing the
	 * store's I/O, never inside start(); DRL_ENOTSUP, nothing done,
	 * for a call it does not start (the caller runs the twin by
	 * eval_start instead, which startable() checked is possible);
	 * another error: nothing started. */
	bool (*startable)(const drl__limit *lim, const drl__call *call);
	int (*start)(const drl__limit *lim, const drl__call *call,
		     drl__decided_fn done, void *arg);
	/* Optional: whether lim's state on b is counters in one group
	 * (DRL_CAP_COUNTER_GROUPS): its twin is then told so (ARGV[7], the
	 * trailing flag, plus 2; drl__script_args). NULL: never. */
	bool (*grouped)(const drl__limit *lim, const drl_backend *b);
	/* drl_adjust: move the state of call->key by call->delta units
	 * atomically (the bounds are drl_adjust's, include/drl/drl.h), then
	 * fill *res as a peek of cost 1 of the state after it (call->cost
	 * is 1, call->peek true). Optimistic-state algorithms use
	 * drl__state_adjust, which runs adjust_step (a drl__step_fn that
	 * always writes, reading call->delta) or the twin with the delta
	 * as one more argument (its adjust mode). */
	int (*adjust)(const drl__limit *lim, const drl__call *call,
		      drl_result *res);
	drl__step_fn adjust_step;
	/* token_bucket, gcra: their state's encoding, read by the bucket
	 * engine they share (DRL__BUCKET_ENGINE); NULL for the others. */
	const struct drl__bucket_codec *codec;
} drl__algorithm;

/* Why the counters take on_change=keep_used alone. */
#define DRL__COUNTERS_WHY_NOT                                                  \
	"its state is what was used, recorded without the LIMIT it was used "  \
	"under: only keep_used"

/* The slots the three counter algorithms share: the counter engine
 * (algorithms/subwindow.c) decides, refunds, adjusts and starts them all,
 * with one Lua twin (counter.lua). An algorithm's table names it, then
 * its own name, tag, option and finish. */
#define DRL__COUNTER_ENGINE                                                    \
	.counts_usage = true, .why_not = DRL__COUNTERS_WHY_NOT,                \
	.decide = drl__counter_decide, .refund = drl__counter_refund,          \
	.adjust = drl__counter_adjust, .lua = &drl__lua_counter,               \
	.lua_batch = &drl__lua_batch_counter, .keys = drl__counter_keys,       \
	.startable = drl__counter_startable, .start = drl__counter_start,      \
	.grouped = drl__counter_grouped

/* The slots of the algorithms whose state is one blob their step
 * rewrites (token_bucket, gcra, sliding_log): the core runs step, unstep
 * and adjust_step against the store (core/optimistic.c) or their twin,
 * whose answer lua_answer reads (lua_nout values). */
#define DRL__STATE_ENGINE                                                      \
	.decide = drl__state_decide, .refund = drl__state_refund,              \
	.adjust = drl__state_adjust, .lua_nout = 4

/* Most store keys one limit has for one user key (drl__algorithm.keys):
 * the counter engine's sub-windows and trailing one, one either side, and
 * the group holding them all (a store with DRL_CAP_COUNTER_GROUPS). */
#define DRL__LIMIT_KEYS_MAX (DRL_SUBWINDOWS_MAX + 4)

/* The counter engine's keys (algorithms/subwindow.c). */
bool drl__counter_grouped(const drl__limit *lim, const drl_backend *b);
size_t drl__counter_keys(const drl__limit *lim, const drl__keybase *kb,
			 int64_t now, drl__key *kbuf, drl_bytes *keys);

extern const drl__algorithm drl__fixed_window;
extern const drl__algorithm drl__sliding_window;
extern const drl__algorithm drl__subwindow;
extern const drl__algorithm drl__token_bucket;
extern const drl__algorithm drl__gcra;
extern const drl__algorithm drl__sliding_log;

/* Lookup by spec name; NULL if unknown. */
const drl__algorithm *drl__algorithm_find(const char *name, size_t len);

/* ---- shared helpers for algorithms (algorithms/registry.c, core/optimistic.c) */

/* Fill res for a limit whose decision is final. */
void drl__result_fill(drl_result *res, bool allowed, int64_t limit,
		      int64_t remaining, int64_t reset_after,
		      int64_t retry_after);
/* DRL_ECORRUPT (in call->err, naming lim's algorithm): the state blob an
 * optimistic-state algorithm read from the store is not one it wrote. */
int drl__state_corrupt(const drl__limit *lim, const drl__call *call);

/* decide/refund of every optimistic-state algorithm: run lim->algo->step
 * (or ->unstep) against the state at the limit's key atomically: through
 * the store's update() when it has one, otherwise load/cas in a bounded
 * retry loop with jittered backoff (DRL_ECONFLICT when the budget is
 * spent, never a silent allow). */
int drl__state_decide(const drl__limit *lim, const drl__call *call,
		      drl_result *res, drl__undo *undo);
int drl__state_refund(const drl__limit *lim, const drl__call *call,
		      const drl__undo *undo);
/* adjust of every optimistic-state algorithm: the twin in its adjust
 * mode where it runs, else lim->algo->adjust_step as decide runs step. */
int drl__state_adjust(const drl__limit *lim, const drl__call *call,
		      drl_result *res);
/* The start of every algorithm's adjust: the twin's adjust mode where
 * the twin runs (drl__script_decide with the derived keys; its answer in
 * *res, returned: 0 or an error), else 1 with *c, call at its time
 * (drl__call_now), for the algorithm to move its state itself. */
int drl__adjust_twin(const drl__limit *lim, const drl__call *call,
		     size_t nderived, const drl_bytes *derived, drl_result *res,
		     drl__call *c);
/* The most a penalty leaves used: twice the capacity (LIMIT, or burst). */
static inline int64_t drl__adjust_cap(const drl__limit *lim)
{
	return 2 * (lim->burst ? lim->burst : lim->limit);
}

/* How long a key outlives the last moment an algorithm may read it: room
 * for client clocks that lag by up to this much. */
#define DRL__TTL_GRACE_US INT64_C(1000000)

/* The counter engine (algorithms/subwindow.c) that fixed_window (one
 * sub-window) and sliding_window (one sub-window plus the weighted previous
 * one) are parameterizations of. */
int drl__counter_decide(const drl__limit *lim, const drl__call *call,
			drl_result *res, drl__undo *undo);
int drl__counter_refund(const drl__limit *lim, const drl__call *call,
			const drl__undo *undo);
int drl__counter_adjust(const drl__limit *lim, const drl__call *call,
			drl_result *res);
bool drl__counter_startable(const drl__limit *lim, const drl__call *call);
int drl__counter_start(const drl__limit *lim, const drl__call *call,
		       drl__decided_fn done, void *arg);

/* burst=N for token_bucket and gcra (algorithms/burst.c); default LIMIT. */
int drl__burst_option(drl__limit *lim, const char *key, const char *value,
		      drl_error *err);
int drl__burst_finish(drl__limit *lim, drl_error *err);

/* 128-bit intermediates for products of bounded int64s (LIMIT, burst <=
 * 1e9, PERIOD <= 366d in µs, times <= INT64_MAX): exact, no floating
 * point. GCC and clang provide __int128 on every 64-bit target. */
__extension__ typedef __int128 drl__i128;

/* floor(a / b) and ceil(a / b) for any a and b > 0 (rounding like the Lua
 * twins' fdiv/cdiv, also for negative a), clamped to the int64 range. */
static inline int64_t drl__i128_clamp(drl__i128 q)
{
	return q > INT64_MAX   ? INT64_MAX
	       : q < INT64_MIN ? INT64_MIN
			       : (int64_t)q;
}
static inline int64_t drl__i128_floor_div(drl__i128 a, drl__i128 b)
{
	drl__i128 q = a / b;
	return drl__i128_clamp(q - (a % b != 0 && a < 0));
}
static inline int64_t drl__i128_ceil_div(drl__i128 a, drl__i128 b)
{
	drl__i128 q = a / b;
	return drl__i128_clamp(q + (a % b != 0 && a > 0));
}

/* The parameters a state of an algorithm that keeps them records
 * (algorithms/params.c): 32 bytes after its own fields, LIMIT, PERIOD,
 * burst and version, int64 little-endian. */
#define DRL__PARAMS_LEN 32
/* The on_change= policies such an algorithm takes (all of them). */
#define DRL__PARAMS_CHANGES                                                    \
	((1u << DRL__CHANGE_KEEP_AVAILABLE) | (1u << DRL__CHANGE_SCALE) |      \
	 (1u << DRL__CHANGE_ADDITIVE) | (1u << DRL__CHANGE_RESET))
void drl__params_put(const drl__limit *lim, unsigned char *p);

/* The parameters recorded at p, read for lim's key: 0, or DRL_ECORRUPT
 * (in err) for a PERIOD other than lim's or numbers out of their
 * bounds. */
typedef struct drl__params_at {
	int64_t limit, burst, version;
} drl__params_at;
int drl__params_read(const drl__limit *lim, const unsigned char *p,
		     drl__params_at *at, drl_error *err);
/* Which parameters decide a state recorded under *at, into *eff (a copy
 * of lim on entry, made by the caller; on return lim with the numbers
 * that decide), and *level (units of 1/PERIOD
 * token available, within +-burst x PERIOD of at's burst, refilled by
 * the caller to now at at's LIMIT) moved into them:
 * - a newer stored version decides: *eff takes its numbers, the level
 *   stays;
 * - the same parameters: nothing moves;
 * - an older stored version (or none on either side): lim's numbers
 *   decide and the level is converted by lim->on_change, exactly (floor
 *   for scale);
 * - the same version (> 0) with other parameters: DRL_ECORRUPT (in err).
 * Returns 1 when the state was converted (to be written even when the
 * decision consumes nothing), 0 when not, or DRL_ECORRUPT. */
int drl__params_settle(const drl__limit *lim, const drl__params_at *at,
		       drl__limit *eff, drl__i128 *level, drl_error *err);
/* The level (units of 1/PERIOD token available) carried from a bucket of
 * old_burst to one of lim->burst by lim->on_change. */
drl__i128 drl__params_convert(const drl__limit *lim, int64_t old_burst,
			      drl__i128 level);

/* The bucket engine (algorithms/bucket.c): token_bucket and gcra are one
 * bucket of burst tokens refilled at LIMIT per PERIOD, stored in
 * DRL__BUCKET_STATE_LEN bytes: a tag byte, 24 bytes of their own, the
 * parameters (DRL__PARAMS_LEN). The bucket: its level in units of 1/PERIOD
 * token (within +-burst x PERIOD) at time `last` (µs). */
#define DRL__BUCKET_STATE_LEN 57
typedef struct drl__bucket {
	drl__i128 level;
	int64_t last;
} drl__bucket;
/* An algorithm's encoding of the bucket: decode reads the 24 bytes at p,
 * recorded under the parameters *at, into *bk (level in at's burst; 0, or
 * nonzero for bytes it never writes: the engine checks the level's and
 * `last`'s bounds); encode writes bk, under lim's numbers, to p. */
typedef struct drl__bucket_codec {
	unsigned char tag;
	int (*decode)(const drl__limit *lim, const drl__params_at *at,
		      const unsigned char *p, drl__bucket *bk);
	void (*encode)(const drl__limit *lim, const drl__bucket *bk,
		       unsigned char *p);
} drl__bucket_codec;
int drl__bucket_step(const drl__limit *lim, const drl__call *call,
		     const void *old, size_t oldlen, void *out, size_t cap,
		     size_t *outlen, int64_t *ttl_us, drl_result *res,
		     drl__undo *undo);
int drl__bucket_refund(const drl__limit *lim, const drl__call *call,
		       const void *old, size_t oldlen, void *out, size_t cap,
		       size_t *outlen, int64_t *ttl_us, drl_result *res,
		       drl__undo *undo);
int drl__bucket_adjust(const drl__limit *lim, const drl__call *call,
		       const void *old, size_t oldlen, void *out, size_t cap,
		       size_t *outlen, int64_t *ttl_us, drl_result *res,
		       drl__undo *undo);
int drl__bucket_answer(const drl__limit *lim, const drl__call *call,
		       const int64_t *out, size_t nret, drl_result *res,
		       drl__undo *undo, drl_error *err);
/* The slots of an algorithm on the bucket engine, codec its encoding;
 * its table names it, then its own name, tag and twins (which answer
 * what drl__bucket_answer reads and take the change rules: 6 arguments). */
#define DRL__BUCKET_ENGINE(codec_)                                             \
	DRL__STATE_ENGINE,                                                     \
		.keeps_params = true, .changes = DRL__PARAMS_CHANGES,          \
		.option = drl__burst_option, .finish = drl__burst_finish,      \
		.step = drl__bucket_step, .unstep = drl__bucket_refund,        \
		.adjust_step = drl__bucket_adjust,                             \
		.state_len = DRL__BUCKET_STATE_LEN,                            \
		.lua_answer = drl__bucket_answer, .lua_nargs = 6,              \
		.codec = (codec_)

/* Largest counter value a counter algorithm accepts from a store: legit
 * counts stay near LIMIT (<= 1e9); anything beyond this is not ours, and
 * below it every sum and product stays exact, in C and in Lua. */
#define DRL__COUNT_MAX (INT64_C(1) << 52)

/* Saturating and checked integer helpers. */
static inline int64_t drl__min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}
static inline int64_t drl__max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

/* Little-endian fixed-width encoding for state blobs. */
static inline void drl__put64(unsigned char *p, int64_t v)
{
	uint64_t u = (uint64_t)v;
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(u >> (8 * i));
}
static inline int64_t drl__get64(const unsigned char *p)
{
	uint64_t u = 0;
	for (int i = 0; i < 8; i++)
		u |= (uint64_t)p[i] << (8 * i);
	return (int64_t)u;
}

/* ---- server-side twins (core/script.c) ---------------------------------- */

extern const drl_script drl__lua_counter;
extern const drl_script drl__lua_token_bucket;
extern const drl_script drl__lua_gcra;
extern const drl_script drl__lua_sliding_log;
/* Their batch variants (algorithms/lua_batch.lua): KEYS[i] is item i's key,
 * ARGV the twin's m = drl__script_nargs integers (the cost replaced per
 * item) then item i's cost at ARGV[m + i] (a peek: cost 0); DRL__SCRIPT_NOUT integers back per item, the twin's answer or, when
 * it failed for that item, a negative DRL__BATCH_* kind and four zeros. */
extern const drl_script drl__lua_batch_counter;
extern const drl_script drl__lua_batch_token_bucket;
extern const drl_script drl__lua_batch_gcra;
extern const drl_script drl__lua_batch_sliding_log;
enum {
	DRL__BATCH_FAILED = -1,    /* another error reply or raised error */
	DRL__BATCH_CORRUPT = -2,   /* ECORRUPT: malformed state */
	DRL__BATCH_WRONGTYPE = -3, /* WRONGTYPE: a key of another type */
	DRL__BATCH_OOM = -4,       /* OOM: the server is out of memory */
	DRL__BATCH_ANSWER = -5     /* the twin answered no decision */
};

/* Largest magnitude a Lua twin may compute with: products stay below 2^53
 * with a factor of 2 to spare. */
#define DRL__LUA_EXACT_MAX (INT64_C(1) << 52)

/* Whether this decision runs as the algorithm's Lua twin: the store runs
 * scripts, the algorithm has a twin, the limit's numbers fit and so does
 * the time. */
bool drl__script_usable(const drl__limit *lim, const drl__call *call);
/* Run the twin: one round trip, atomic on the server. KEYS[1] is the
 * key base; derived[0..nderived) are the keys the twin derives from it
 * (a counter's sub-windows), declared as KEYS[2..] when the store wants
 * every key named (DRL_CAP_DECLARED_KEYS; the twin uses them then). */
int drl__script_decide(const drl__limit *lim, const drl__call *call,
		       size_t nderived, const drl_bytes *derived,
		       drl_result *res, drl__undo *undo);

/* What a twin is sent and answers (algorithms/lua_prelude.lua): the
 * integers of ARGV (the first drl__script_nargs of drl__script_args), and
 * {allowed, remaining, reset_after, retry_after, undo}. drl__script_decide and batches (core/batch.c) both go through
 * these two, so the twin is always spoken to the same way. */
#define DRL__SCRIPT_NARGS 7
#define DRL__SCRIPT_NOUT 5
/* The twin's arguments for deciding `call` on `lim`. */
void drl__script_args(const drl__limit *lim, const drl__call *call,
		      int64_t args[DRL__SCRIPT_NARGS]);
/* How many of them lim's twin is sent: its algorithm's lua_nargs, or all;
 * one fewer when they end in change rules of 0 (a twin that keeps its
 * parameters reads them missing as 0). */
size_t drl__script_nargs(const drl__limit *lim);
/* The twin's answer (nret integers at out) as a decision: *res, *undo.
 * DRL_ECORRUPT (in err) when it is not one. */
int drl__script_answer(const drl__limit *lim, const int64_t *out, size_t nret,
		       drl_result *res, drl__undo *undo, drl_error *err);
/* The twin's answer for call as a decision: drl__script_answer for
 * DRL__SCRIPT_NOUT values (the common form, from any twin), the
 * algorithm's lua_answer for fewer. */
int drl__twin_answer(const drl__limit *lim, const drl__call *call,
		     const int64_t *out, size_t nret, drl_result *res,
		     drl__undo *undo, drl_error *err);
/* A compact twin answer of the form x, or {x, ahead} (gcra, token_bucket):
 * 0 with *x in [0, max] and *ahead in [0, DRL_TIME_MAX_US] (0 when not
 * sent); DRL_ECORRUPT (in err, naming lim's twin) otherwise. *rel is call
 * with a now of 0: the answer's numbers are relative to the call's time. */
int drl__twin_pair(const drl__limit *lim, const drl__call *call,
		   const int64_t *out, size_t nret, int64_t max, int64_t *x,
		   int64_t *ahead, drl__call *rel, drl_error *err);
/* drl__twin_pair for the twin of an algorithm that keeps its parameters
 * (algorithms/params.c), which answers x and ahead, then, when a newer
 * stored version decided, its LIMIT and burst (0 and 0 from a batch's
 * padding: lim's own): *eff is lim with the numbers that decided, x at
 * most 2 x burst x PERIOD of them. */
int drl__params_answer(const drl__limit *lim, const drl__call *call,
		       const int64_t *out, size_t nret, drl__limit *eff,
		       int64_t *x, int64_t *ahead, drl__call *rel,
		       drl_error *err);
/* Whether b's eval() takes many keys of any slot at once: written for
 * version >= 2 (which knows DRL_CAP_BATCH), DRL_CAP_BATCH, scripts. */
static inline bool drl__has_batch(const drl_backend *b)
{
	return b->version >= 2 && (b->caps & DRL_CAP_BATCH) &&
	       (b->caps & DRL_CAP_SCRIPT) && b->eval != NULL;
}

/* Whether b sends a counter's increment and its neighbours' reads
 * together (DRL_CAP_ADD_READ, version >= 6): the counter algorithms then
 * prefer it to their twin whenever the time is known before the call. */
static inline bool drl__has_add_read(const drl_backend *b)
{
	return b->version >= 6 && (b->caps & DRL_CAP_ADD_READ) &&
	       b->add_read != NULL;
}

/* Whether b hands a policy's limits to a server that decides them as one
 * atomic step (DRL_CAP_POLICY, version >= 9: eval_policy). */
static inline bool drl__has_policy(const drl_backend *b)
{
	return b->version >= 9 && (b->caps & DRL_CAP_POLICY) &&
	       b->eval_policy != NULL;
}

/* Whether b's eval_policy also starts calls (DRL_CAP_POLICY_START, with
 * DRL_CAP_EVAL_START): the async API then decides a policy without a
 * worker. */
static inline bool drl__starts_policy(const drl_backend *b)
{
	return drl__has_policy(b) && (b->caps & DRL_CAP_POLICY_START) &&
	       (b->caps & DRL_CAP_EVAL_START);
}

/* What eval_policy answers: the twins' common form, then the index of
 * the limit the decision reports (drl_result.limit_index). */
#define DRL__POLICY_NOUT (DRL__SCRIPT_NOUT + 1)

/* The limits of one request (core/policy.c): n of them; limit(arg, i, kb)
 * is limit i, its key base built into *kb. */
typedef struct drl__policy {
	size_t n;
	const drl__limit *(*limit)(void *arg, size_t i, drl__keybase *kb);
	void *arg;
} drl__policy;

/* The policy's step: call->cost on every limit of p at call->now (a peek
 * when call->peek; quiet: not counted in decisions, the near cache's
 * sync). *result: the allowing limit with the least left, or the first
 * that denies, widened (drl__policy_widen) by the peeks of the limits
 * after it; the limits before it refunded. Through the store's
 * eval_policy when it has one that takes the call. call->key is
 * clobbered. */
int drl__policy_step(const drl__policy *p, drl__call *call, bool quiet,
		     drl_result *result);
/* A denial *res, and another limit's decision r of the same request:
 * *res becomes r when r denies for longer (DRL_NEVER is the longest). */
void drl__policy_widen(drl_result *res, const drl_result *r);

/* A policy's script calls for eval_policy (blocking or started): one per
 * limit, all DRL__SCRIPT_NARGS integers, pointing into the struct. */
typedef struct drl__policy_calls {
	size_t n;
	drl__keybase kb[DRL_POLICY_LIMITS_MAX];
	drl__key k[DRL_POLICY_LIMITS_MAX];
	drl_bytes keys[DRL_POLICY_LIMITS_MAX];
	int64_t args[DRL_POLICY_LIMITS_MAX][DRL__SCRIPT_NARGS];
	drl_script_call calls[DRL_POLICY_LIMITS_MAX];
} drl__policy_calls;
/* Fill *pc for p decided as call says: false when a server cannot
 * decide it (one limit, the store's clock, an adjustment, a limit whose
 * twin does not run: drl__script_usable). call->key is clobbered. */
bool drl__policy_calls_make(drl__policy_calls *pc, const drl__policy *p,
			    drl__call *call);
/* eval_policy's answer out[0..nret) for p as a decision *res
 * (limit_index set): 0, or DRL_ECORRUPT (in err) when it is none. */
int drl__policy_answer(const drl__policy *p, const int64_t *out, size_t nret,
		       drl_result *res, drl_error *err);

/* Whether b keeps counters in groups (DRL_CAP_COUNTER_GROUPS, version
 * >= 7): the counter engine may then send it grouped keys. */
static inline bool drl__has_groups(const drl_backend *b)
{
	return b->version >= 7 && (b->caps & DRL_CAP_COUNTER_GROUPS) &&
	       b->trim != NULL;
}

/* Whether b starts calls only on a channel (version >= 8,
 * DRL_CAP_CHANNEL without DRL_CAP_EVAL_START: memcached): its started
 * counter calls (add_read_start) need the async API's channel, and it
 * has no script for what they do not take. */
static inline bool drl__chan_only(const drl_backend *b)
{
	return b->version >= 8 && (b->caps & DRL_CAP_CHANNEL) &&
	       !(b->caps & DRL_CAP_EVAL_START) && b->add_read_start != NULL;
}

/* Whether b answers without waiting for I/O (DRL_CAP_INPROC, version
 * >= 6): the async API then decides at start. */
static inline bool drl__is_inproc(const drl_backend *b)
{
	return b->version >= 6 && (b->caps & DRL_CAP_INPROC);
}

/* Batches (core/batch.c): at most DRL__BATCH_CHUNK items per script call,
 * and about DRL__BATCH_WORK µs of server time (estimated per item, see
 * item_work there): a script blocks the whole server while it runs. */
#define DRL__BATCH_CHUNK 256
#define DRL__BATCH_WORK 1500
/* How many of lim's items one batch script call decides. */
size_t drl__batch_chunk(const drl__limit *lim);

/* call->now, reading the store's clock when it is DRL__NOW_STORE. */
int drl__call_now(const drl__call *call, int64_t *now);

/* ---- failures (core/breaker.c, core/failure.c) -------------------------- */

/* The store could not make the decision: its server failed to answer
 * (DRL_ETIMEDOUT, DRL_EUNAVAILABLE) or answered with an error
 * (DRL_ESTORE). These are what a limiter's on_error policy handles; every
 * other error (bad input, malformed state, contention budget spent, no
 * memory) is returned whatever the policy. */
static inline bool drl__is_store_failure(int rc)
{
	return rc == DRL_ESTORE || rc == DRL_ETIMEDOUT ||
	       rc == DRL_EUNAVAILABLE;
}
/* The server could not be reached at all: what opens the breaker. */
static inline bool drl__is_unreachable(int rc)
{
	return rc == DRL_ETIMEDOUT || rc == DRL_EUNAVAILABLE;
}

/* Name the calling thread, what `top -H`, perf and gdb show (at most 15
 * characters; glibc's pthread_setname_np, the build defines _GNU_SOURCE).
 * Best effort: a failure changes nothing else. */
static inline void drl__thread_name(const char *name)
{
	(void)pthread_setname_np(pthread_self(), name);
}

/* A store's circuit breaker (core/breaker.c has the state machine). */
typedef struct drl__breaker {
	int64_t failures_max; /* unreachable calls in a row that open it; 0 off */
	int64_t open_us;      /* first open period */
	int64_t max_us;       /* the doubling stops here */
	_Atomic int64_t failures;   /* unreachable calls in a row */
	_Atomic int64_t open_until; /* monotonic µs; 0 closed */
	_Atomic int64_t period_us;  /* the current open period */
} drl__breaker;

struct drl_store;
void drl__breaker_init(drl__breaker *b, int64_t failures, int64_t open_us,
		       int64_t max_us);
/* The defaults: 5 failures, 100 ms doubling up to 2 s. */
void drl__breaker_default(drl__breaker *b);
/* From the store URI's breaker_failures, breaker_open_ms, breaker_max_ms
 * (marked used; the defaults when absent). DRL_EINVAL naming a bad one. */
int drl__breaker_options(drl__breaker *b, drl__uri *u, drl_error *err);
/* Before a call to the store: 0 to go ahead (*probe: this call is the
 * half-open probe), or DRL_EUNAVAILABLE in err when the breaker is open:
 * do not call the store. Every 0 must be followed by drl__breaker_leave. */
int drl__breaker_enter(struct drl_store *s, bool *probe, drl_error *err);
/* After the call, with its result. */
void drl__breaker_leave(struct drl_store *s, bool probe, int rc);
/* How long until the store is tried again (a denial's retry_after). */
int64_t drl__breaker_retry_us(struct drl_store *s);

/* 0 when spec is a policy drl_limiter_new() takes (its limits and
 * options), else DRL_EINVAL with the parser's message: the store is not
 * asked and nothing is made (core/limiter.c). */
int drl__policy_check(const char *spec, drl_error *err);

/* A limiter's on_error policy (spec segment "on_error=..."). */
typedef enum drl__on_error {
	DRL__ON_ERROR_RETURN = 0, /* default: the call returns the error */
	DRL__ON_ERROR_DENY,
	DRL__ON_ERROR_ALLOW,
	DRL__ON_ERROR_LOCAL
} drl__on_error;

/* ---- store object (core/store.c) --------------------------------------- */

struct drl_store {
	drl_backend *backend;
	drl__stats stats;
	drl__breaker breaker;
	/* The async contexts' channels of this store (core/async_io.c),
	 * closed by drl_store_free(); guarded by that file's registry lock. */
	struct drl__aio_chan *chans;
};
/* Close every async context's channel of s (core/async_io.c): before its
 * backend is destroyed. */
void drl__aio_store_gone(drl_store *s);

/* ---- limiter object (core/limiter.c, core/batch.c) --------------------- */

struct drl_limiter {
	drl_store *store;
	size_t nlimits;
	drl__limit limits[DRL_POLICY_LIMITS_MAX];
	size_t prefixlen;
	char prefix[DRL__PREFIX_MAX + 1];
	drl__on_error on_error;
	/* on_error=local: the same limits on a memory store of its own. */
	drl_store *local_store;
	struct drl_limiter *local;
	/* block_on_exceed, near_cache: denials remembered (core/near.c);
	 * NULL when neither is on. */
	struct drl__near *near;
	/* shadow=1: every decision answered allowed (drl__shadow_answer). */
	bool shadow;
};

/* drl_allow_at's now_us meaning "read the clock" (the decision's enter
 * step reads it: core/decision.c). */
#define DRL__NOW_READ INT64_C(-2)

/* DRL_EINVAL naming the problem when now_us is not an explicit time
 * drl_allow_at() accepts. */
int drl__time_check(int64_t now_us, drl_error *err);
/* DRL_EINVAL naming the bad part of a user key (NULL, length) for the
 * public function fn. */
int drl__key_check(const char *fn, const void *key, size_t keylen,
		   drl_error *err);
/* DRL_EINVAL naming the bad part of one request (key, keylen, cost). */
int drl__request_check(const void *key, size_t keylen, int64_t cost,
		       drl_error *err);
/* DRL_EINVAL naming the bad part of an adjustment (key, keylen, delta
 * beyond +-DRL_LIMIT_MAX) for the public function fn. */
int drl__adjust_check(const char *fn, const void *key, size_t keylen,
		      int64_t delta, drl_error *err);
/* The result every failed call leaves: a denial by the store path. */
void drl__result_deny(drl_result *r);
/* Parse "on_error=..." (value len bytes); DRL_EINVAL when unknown. */
int drl__on_error_parse(drl__on_error *out, const char *value, size_t len,
			drl_error *err);

/* ---- near cache (core/near.c) ------------------------------------------ */

typedef struct drl__near drl__near;

/* The policy options block_on_exceed=, near_cache=, near_cache_sync=,
 * near_cache_keys= as parsed (each at most once). */
typedef struct drl__near_opts {
	unsigned seen;    /* which were given: one bit each */
	int64_t block_us; /* block_on_exceed: the longest block; 0 none */
	bool sync;        /* near_cache=1: the sync thread too */
	int64_t sync_us;  /* near_cache_sync */
	int64_t keys;     /* near_cache_keys */
} drl__near_opts;

/* Take policy option name=value when it is one of the near cache's: 0,
 * DRL_EINVAL (bad value, given twice), or 1 when the name is not one. */
int drl__near_option(drl__near_opts *o, const char *name, size_t nlen,
		     const char *value, size_t vlen, drl_error *err);
/* After the whole policy: defaults, and DRL_EINVAL for options that need
 * another (near_cache_sync without near_cache=1, ...). */
int drl__near_finish(drl__near_opts *o, drl_error *err);
/* How the sync thread asks l's store about a key (drl__req_peek). */
typedef bool (*drl__near_peek_fn)(drl_limiter *l, const drl__key_id_buf *id,
				  int64_t cost, int *rc, drl_result *result,
				  drl_error *err);
/* l's near cache (and with near_cache=1 its sync thread, which reads l
 * and asks through peek), or *out NULL when the options turn none on. */
int drl__near_new(struct drl__near **out, drl_limiter *l,
		  const drl__near_opts *o, drl__near_peek_fn peek,
		  drl_error *err);
/* Stop and join the thread, free everything. NULL is a no-op. */
void drl__near_free(struct drl__near *n);

/* One request as the near cache sees it: the key's id and keyed hash,
 * and its time: `base` says which clock t is on (an entry made on one
 * base is not used on the other). */
typedef struct drl__near_req {
	drl__key_id_buf id;
	uint64_t hash;
	int base;  /* DRL__NEAR_MONO or DRL__NEAR_EXPLICIT */
	int64_t t; /* µs on that base, read before the store is asked */
} drl__near_req;
enum { DRL__NEAR_MONO = 1, DRL__NEAR_EXPLICIT = 2 };

/* The near cache's time for a request at now_us: DRL__NOW_READ
 * (drl_allow: the monotonic clock, read now) or an explicit time
 * (drl_allow_at). */
void drl__near_now(int64_t now_us, int *base, int64_t *t);
/* Prepare a request for key at time t on base (drl__near_now). */
void drl__near_req_make(const struct drl__near *n, drl__near_req *q,
			const void *key, size_t keylen, int base, int64_t t);
/* Whether the key is blocked for `cost` (> 0): then *result is the local
 * denial (path DRL_PATH_NEAR) and the store must not be asked. */
bool drl__near_check(struct drl__near *n, const drl__near_req *q, int64_t cost,
		     drl_result *result);
/* The store decided q (rc 0, path DRL_PATH_STORE, cost > 0): a denial
 * blocks the key, an allow of a blocked cost lifts the block. */
void drl__near_record(struct drl__near *n, const drl__near_req *q, int64_t cost,
		      const drl_result *result);
/* Forget what the cache holds for q's key (drl_reset): its block is
 * dropped, and an answer of the store to a call that began before q->t
 * (on q's base) is not recorded. */
void drl__near_forget(struct drl__near *n, const drl__near_req *q);
/* Test hooks (near_cache=1 only): after drl__near_manual the thread runs
 * no round of its own; drl__near_sync_round_at runs one now, on the
 * calling thread, as if CLOCK_MONOTONIC read `now` (µs) when it began,
 * and returns the peeks it made. */
void drl__near_manual(struct drl__near *n);
size_t drl__near_sync_round_at(struct drl__near *n, int64_t now);

/* ---- a decision (core/decision.c) --------------------------------------- */

/* What a request asks of a limiter. */
typedef enum drl__req_kind {
	DRL__REQ_ONE,   /* decide items[0]; its error detail is *err itself */
	DRL__REQ_BATCH, /* decide items[0..n); *err names the first failed */
	DRL__REQ_RESET, /* forget items[0].key on every limit (drl_reset) */
	DRL__REQ_ADJUST /* items[0].cost units on every limit (drl_adjust) */
} drl__req_kind;

/* One request carried through a decision's steps (core/decision.c has
 * them all): begin (checks, near cache denials), then run (enter: the
 * breaker and the time; step: the limits; end) on this thread or a
 * worker, or start (enter, then a store call sent without waiting; end
 * on the store's I/O thread). drl__req_init fills the first block
 * (finished and arg may be set after it); the
 * request, items, keys and *err stay valid until end is done (for a
 * started one: `finished` runs). Items' rc and result are the outcome. */
typedef struct drl__req {
	drl__req_kind kind;
	drl_limiter *l;
	drl_batch_item *items;
	size_t n;
	int64_t now_us; /* explicit (checked), or DRL__NOW_READ */
	drl_error *err;
	void (*finished)(void *arg); /* started: after end, exactly once */
	void *arg;
	/* the steps' own */
	size_t left;       /* items begin left for the store */
	int64_t now;       /* the time the store decides at (enter) */
	bool entered;      /* the breaker was entered ... */
	bool probe;        /* ... as its half-open probe */
	int rc;            /* no store decision at all (breaker, clock) */
	drl_error e;       /* a batch's: rc's detail */
	size_t first;      /* a batch's: its lowest failed item */
	drl__near_req one; /* ONE, RESET: the key's id (near: its hash) */
	drl__near_req *nq; /* BATCH: each item's id (near: its hash) */
	bool *skip;        /* BATCH: what the near cache denied, or NULL */
	void *mem;         /* nq and skip */
	void *chunk;       /* a started batch's call (core/batch.c) */
	/* The channel started calls go out on (the async API's,
	 * core/async_io.c); NULL: the store's own I/O. */
	drl_channel *chan;
	/* Set by a caller that will have no channel for the store (the
	 * async API with drl_async_notify()): a store whose calls start
	 * only on channels (drl__chan_only) is then decided on a worker. */
	bool no_chan;
} drl__req;

/* A request of `kind` on l for items[0..n) at now_us (explicit, checked,
 * or DRL__NOW_READ), errors to *err: everything the steps read first
 * set, and nothing else written (a request is made per decision: the
 * steps fill the rest). */
static inline void drl__req_init(drl__req *q, drl__req_kind kind,
				 drl_limiter *l, drl_batch_item *items,
				 size_t n, int64_t now_us, drl_error *err)
{
	q->kind = kind;
	q->l = l;
	q->items = items;
	q->n = n;
	q->now_us = now_us;
	q->err = err;
	q->finished = NULL;
	q->arg = NULL;
	q->entered = false;
	q->probe = false;
	q->rc = 0;
	q->nq = NULL;
	q->skip = NULL;
	q->mem = NULL;
	q->chunk = NULL;
	q->chan = NULL;
	q->no_chan = false;
}

/* The id of item i's user key (made at begin). */
static inline const drl__key_id_buf *drl__req_id(const drl__req *q, size_t i)
{
	return q->kind == DRL__REQ_BATCH ? &q->nq[i].id : &q->one.id;
}

/* Begin q: checked items denied by the near cache (path DRL_PATH_NEAR),
 * each user key's id made (a long key hashed here, once). Returns how
 * many items are left for the store (q->left): 0, call drl__req_end. */
size_t drl__req_begin(drl__req *q);
/* The rest on this thread, blocking: enter, step, end. */
void drl__req_run(drl__req *q);
/* begin, then run or end: a blocking call's whole decision. */
void drl__req_decide(drl__req *q);
/* Whether q (begun) can be started: one limit whose algorithm starts
 * its own call, or whose twin a store that starts calls runs, at a time
 * known without a store call (set in q->now); why: a static sentence,
 * either way (may be NULL). */
bool drl__req_startable(drl__req *q, const char **why);
/* Start q (startable): 0, and q->finished(q->arg) runs exactly once,
 * possibly before this returns; DRL_ENOMEM: nothing done (run it). */
int drl__req_start(drl__req *q);
/* The end of q: breaker leave, on_error fallback, near cache record,
 * shadow answer; then q->finished, when set. */
void drl__req_end(drl__req *q);
/* Release what begin took for a request that will not run. */
void drl__req_drop(drl__req *q);
/* Item i of q failed with rc (detail d, NULL or *q->err for ONE): its
 * result a denial, and for a batch q->err names the lowest failed item
 * (core/failure.c). */
void drl__req_fail(drl__req *q, size_t i, int rc, const drl_error *d);
/* The near cache's peek (core/near.c's thread): cost on every limit of
 * l for the user key id, consuming nothing (not counted in decisions),
 * behind the store's breaker, at the time drl_allow() decides at: false
 * when the breaker refused it (nothing asked), else true with *rc and
 * (rc 0) *result as drl_allow_at() fills it. */
bool drl__req_peek(drl_limiter *l, const drl__key_id_buf *id, int64_t cost,
		   int *rc, drl_result *result, drl_error *err);

/* ---- the async API (core/async.c) -------------------------------------- */

/* Test hook (tests/stores/test_matrix.c): while true, every async request that
 * the near cache leaves to the store goes to a worker thread, as those of
 * a limiter drl_async_path() calls not direct do (never decided at start
 * on an in-process store, never started on a channel or a pipe), so a
 * test can run the worker path on every limiter. Set it with no request
 * in flight and no thread starting any; false (the default) everywhere
 * but in that test. */
extern bool drl__async_force_worker;

/* Batches' script calls (core/batch.c), for the steps. */
/* Whether q's items (one limit) go to the store's batch script at now. */
bool drl__batch_scripted(const drl_limiter *l, int64_t now);
/* Decide q's items not skipped (q->skip) with the batch script, chunk by
 * chunk; DRL_ENOMEM, no item touched, when there is no memory for it. */
int drl__batch_step(drl__req *q);
/* Room for one started call of q's items in q->chunk: DRL_ENOMEM, or 0. */
int drl__batch_start_alloc(drl__req *q);
/* Send q's items as one started call of the batch script (q->chunk
 * allocated); done(q) runs exactly once when every item is final,
 * possibly before this returns. q->chunk is freed then. */
void drl__batch_start(drl__req *q, void (*done)(drl__req *q));

#endif /* DRL_INTERNAL_H */
