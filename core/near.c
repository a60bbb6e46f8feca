/*
 * The near cache: the store's denials remembered in this process, so that
 * a key the store has said no to is denied here, with no network, until
 * the store could say yes again (policy options block_on_exceed= and
 * near_cache=; docs/accuracy.md, "Near cache and block_on_exceed").
 *
 * Admissions are never decided here. Every request the cache does not deny
 * goes to the store, whose atomic decision is the shared write; so the
 * cache cannot admit one request too many, whatever the number of
 * processes. What it saves is the round trip of the denials: after the
 * store denies cost c at time t with retry_after R, the key is blocked for
 * costs >= c until t + min(R, cap), with t read *before* the store was
 * asked (the store decided later, so its own "allowed again" time is no
 * earlier than that). Blocks are what the store said; they are wrong only
 * when the store gives quota back early (a refund of a concurrent
 * request, a flush, a restart), and then for at most `cap`.
 *
 * With near_cache=1 a thread per limiter also reads the shared state in
 * the background, every near_cache_sync: it peeks (decides without
 * consuming) (a) the blocked keys whose block ends within two rounds (a
 * whole round of slack: a round of many peeks, or a thread scheduled late,
 * must not let blocks lapse), so a block the store still stands by is
 * extended before it lapses, and
 * (b) the keys asked for recently and not blocked whose last answer is
 * older than half a round and left at most half the quota, so a key
 * another process exhausted is blocked here before this process pays a
 * round trip to learn it. Both only for keys requested within the last
 * RECENT rounds; at most SYNC_BUDGET peeks a round, (a) first. A peek is
 * a round trip of its own: (b) skips keys far from their limit (the
 * legitimate traffic, which would otherwise be peeked a few times after
 * each use for nothing). The thread never holds a table lock while it
 * calls the store.
 *
 * The table: a fixed number of entries (near_cache_keys, rounded up to a
 * power of two), in buckets of WAYS entries, a key's bucket chosen by a
 * keyed hash (SipHash-2-4: libsodium's crypto_shorthash, a random key per
 * limiter): the callers choose the keys, and with a plain hash an attacker
 * could send keys that all land in one bucket and evict every block there. A key is
 * compared whole (its bytes, or for a key longer than
 * DRL__KEY_INLINE_MAX its SHA-256, exactly what names it in the store), so
 * a hash collision never denies another key. When a bucket is full the
 * entry replaced is one of the other time base, else the least recently
 * used unblocked one, else the least recently used. Buckets are split
 * over up to SHARDS_MAX mutexes, so threads asking for different keys
 * rarely wait for each other.
 *
 * Time: drl_allow() (the real clock) measures blocks on CLOCK_MONOTONIC, so
 * neither the store's clock (clock=server) nor a step of the wall clock
 * moves them; drl_allow_at() measures them on the times it is given. An
 * entry made on one base is ignored on the other (and replaced). The
 * thread only looks at entries of the monotonic base: a simulation's
 * times say nothing about when to sync.
 */
#include "internal.h"

#include <pthread.h>
#include <sodium.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WAYS 8
#define SHARDS_MAX 64
#define INLINE 24 /* key ids up to this many bytes live in the entry */

#define MS INT64_C(1000)
#define BLOCK_MAX_US (INT64_C(86400) * 1000 * MS) /* block_on_exceed: 1d */
/* near_cache=1 without block_on_exceed: the longest block. The thread
 * extends a block the store still stands by before it lapses (at the cost
 * of one peek per key and second), so blocks can be short: a flushed or
 * restarted store is believed again within a second. */
#define NEAR_CAP_US (1000 * MS)
#define SYNC_DEFAULT_US (100 * MS)
#define SYNC_MAX_US (60000 * MS)
#define KEYS_DEFAULT 65536
#define KEYS_MAX (1 << 20)
#define SYNC_BUDGET 1024 /* peeks per round, at most */
#define RECENT 4         /* rounds: a key asked for since is synced */

enum { OPT_BLOCK = 1, OPT_NEAR = 2, OPT_SYNC = 4, OPT_KEYS = 8 };

/* One remembered key, 80 bytes. Times are on the entry's base. */
typedef struct entry {
	int64_t until;    /* the block ends; <= now: no block */
	int64_t retry_at; /* the store said: not allowed before this */
	int64_t reset_at; /* the denying limit is back to full quota */
	int64_t asked;    /* when the call whose answer this is began */
	int64_t used;     /* the last request for the key */
	int64_t cost;     /* the block covers costs >= this */
	uint32_t limit;   /* result.limit of the answer (LIMIT <= 1e9) */
	uint8_t len;      /* id bytes, <= DRL__KEY_INLINE_MAX */
	uint8_t base;     /* DRL__NEAR_MONO or DRL__NEAR_EXPLICIT */
	uint8_t flags;    /* F_DIGEST, F_NEVER, F_LOW */
	uint8_t index;    /* result.limit_index of the answer */
	union {
		unsigned char in[INLINE]; /* len <= INLINE */
		unsigned char *heap;      /* len > INLINE: malloc'd */
	} id;
} entry;

_Static_assert(sizeof(entry) == 80, "the memory bound in the docs");

/* F_LOW: the last answer left at most half the quota. */
enum { F_DIGEST = 1, F_NEVER = 2, F_LOW = 4 };

/* tag[w] is the hash of entry w's key (never 0), 0 for a free slot: a
 * lookup that misses reads one cache line. */
typedef struct bucket {
	uint64_t tag[WAYS];
	entry e[WAYS];
} bucket;

typedef struct shard {
	_Alignas(64) pthread_mutex_t mu; /* one cache line each */
} shard;

/* A key the thread peeks: copied out of the table under the lock. */
typedef struct cand {
	unsigned char id[DRL__KEY_INLINE_MAX];
	size_t len;
	bool digest;
	uint64_t hash;
	int64_t cost;
} cand;

struct drl__near {
	/* crypto_shorthash key, random per limiter */
	unsigned char hash_key[crypto_shorthash_KEYBYTES];
	size_t mask; /* buckets - 1 */
	size_t shard_mask;
	bucket *buckets; /* 64-byte aligned inside bucket_mem */
	void *bucket_mem;
	shard *shards;
	int64_t cap_us; /* the longest block */
	bool track;     /* near_cache=1: keep keys the store allowed too */
	/* near_cache=1: the sync thread, and how it asks l's store. */
	drl_limiter *l;
	drl__near_peek_fn peek;
	int64_t sync_us;
	cand *cands;
	size_t next_shard; /* where the thread's next scan starts */
	bool started;
	pthread_t thread;
	pthread_mutex_t mu; /* held by a round, and by the thread's wait */
	pthread_cond_t cv;
	_Atomic bool stop;
	bool manual; /* under mu: rounds only by drl__near_sync_round_at */
};

/* ---- options ------------------------------------------------------------ */

/* The value quoted in messages: at most 32 bytes of it. */
static int vshow(size_t vlen)
{
	return (int)(vlen < 32 ? vlen : 32);
}

/* A duration option `name` = v in [1ms, max_us] into *out; `range` says
 * which in the message. */
static int duration(const char *name, const char *range, int64_t max_us,
		    const char *v, size_t vlen, int64_t *out, drl_error *err)
{
	int64_t us;
	if (drl__parse_duration(v, vlen, max_us, &us) || us < MS)
		return drl_error_set(err, DRL_EINVAL,
				     "%s=\"%.*s\": expected a duration from %s",
				     name, vshow(vlen), v, range);
	*out = us;
	return 0;
}

static int parse_block(drl__near_opts *o, const char *v, size_t vlen,
		       drl_error *err)
{
	return duration("block_on_exceed",
			"1ms to 1d (a count and ms, s, m, h or d, e.g. 500ms "
			"or 10s)",
			BLOCK_MAX_US, v, vlen, &o->block_us, err);
}

static int parse_near(drl__near_opts *o, const char *v, size_t vlen,
		      drl_error *err)
{
	if (vlen != 1 || (v[0] != '0' && v[0] != '1'))
		return drl_error_set(err, DRL_EINVAL,
				     "near_cache=\"%.*s\": expected 0 or 1",
				     vshow(vlen), v);
	o->sync = v[0] == '1';
	return 0;
}

static int parse_sync(drl__near_opts *o, const char *v, size_t vlen,
		      drl_error *err)
{
	return duration("near_cache_sync", "1ms to 1m (e.g. 100ms)",
			SYNC_MAX_US, v, vlen, &o->sync_us, err);
}

static int parse_keys(drl__near_opts *o, const char *v, size_t vlen,
		      drl_error *err)
{
	if (drl_parse_int(v, vlen, 1, KEYS_MAX, &o->keys))
		return drl_error_set(err, DRL_EINVAL,
				     "near_cache_keys=\"%.*s\": expected an "
				     "integer from 1 to %d",
				     vshow(vlen), v, KEYS_MAX);
	return 0;
}

int drl__near_option(drl__near_opts *o, const char *name, size_t nlen,
		     const char *value, size_t vlen, drl_error *err)
{
	static const struct {
		const char *name;
		unsigned bit;
		int (*parse)(drl__near_opts *o, const char *v, size_t vlen,
			     drl_error *err);
	} opts[] = {
		{"block_on_exceed", OPT_BLOCK, parse_block},
		{"near_cache", OPT_NEAR, parse_near},
		{"near_cache_sync", OPT_SYNC, parse_sync},
		{"near_cache_keys", OPT_KEYS, parse_keys},
	};
	for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
		if (strlen(opts[i].name) != nlen ||
		    memcmp(opts[i].name, name, nlen) != 0)
			continue;
		if (o->seen & opts[i].bit)
			return drl_error_set(err, DRL_EINVAL,
					     "option \"%s\" given twice",
					     opts[i].name);
		o->seen |= opts[i].bit;
		return opts[i].parse(o, value, vlen, err);
	}
	return 1;
}

int drl__near_finish(drl__near_opts *o, drl_error *err)
{
	if ((o->seen & OPT_SYNC) && !o->sync)
		return drl_error_set(err, DRL_EINVAL,
				     "near_cache_sync needs near_cache=1");
	if ((o->seen & OPT_KEYS) && !o->sync && o->block_us == 0)
		return drl_error_set(err, DRL_EINVAL,
				     "near_cache_keys needs near_cache=1 or "
				     "block_on_exceed=");
	if (!(o->seen & OPT_SYNC))
		o->sync_us = SYNC_DEFAULT_US;
	if (!(o->seen & OPT_KEYS))
		o->keys = KEYS_DEFAULT;
	return 0;
}

/* ---- keys --------------------------------------------------------------- */

/* The keyed hash of a key id: libsodium's crypto_shorthash (SipHash-2-4)
 * under the limiter's random key, built for exactly this (hash tables
 * whose keys an attacker chooses), with no allocation per call. */
static uint64_t key_hash(const drl__near *n, const unsigned char *p, size_t len)
{
	unsigned char out[crypto_shorthash_BYTES];
	uint64_t h;

	crypto_shorthash(out, p, len, n->hash_key);
	memcpy(&h, out, sizeof h);
	return h;
}

void drl__near_now(int64_t now_us, int *base, int64_t *t)
{
	if (now_us == DRL__NOW_READ) {
		*base = DRL__NEAR_MONO;
		*t = drl_mono_us();
	} else {
		*base = DRL__NEAR_EXPLICIT;
		*t = now_us;
	}
}

void drl__near_req_make(const drl__near *n, drl__near_req *q, const void *key,
			size_t keylen, int base, int64_t t)
{
	drl__key_id(key, keylen, &q->id);
	q->hash = key_hash(n, q->id.bytes, q->id.len);
	q->base = base;
	q->t = t;
}

/* ---- the table ---------------------------------------------------------- */

static bucket *bucket_of(const drl__near *n, uint64_t hash, shard **sh)
{
	size_t i = (size_t)(hash >> 40) & n->mask;
	*sh = &n->shards[i & n->shard_mask];
	return &n->buckets[i];
}

static uint64_t tag_of(uint64_t hash)
{
	return hash | 1;
}

static const unsigned char *id_of(const entry *e)
{
	return e->len <= INLINE ? e->id.in : e->id.heap;
}

/* q's entry in b, or NULL. */
static entry *find(bucket *b, const drl__near_req *q)
{
	uint64_t tag = tag_of(q->hash);
	uint8_t digest = q->id.digest ? F_DIGEST : 0;
	for (int w = 0; w < WAYS; w++) {
		entry *e = &b->e[w];
		if (b->tag[w] == tag && e->len == q->id.len &&
		    (e->flags & F_DIGEST) == digest &&
		    memcmp(id_of(e), q->id.bytes, q->id.len) == 0)
			return e;
	}
	return NULL;
}

/* Which entry of a full bucket gives way to a new key at q's time: one of
 * the other base, else the least recently used unblocked one, else the
 * least recently used. */
static int victim(const bucket *b, const drl__near_req *q)
{
	int best = 0, best_rank = 3;
	int64_t best_used = INT64_MAX;
	for (int w = 0; w < WAYS; w++) {
		const entry *e = &b->e[w];
		if (b->tag[w] == 0)
			return w;
		int rank = e->base != q->base ? 0 : e->until > q->t ? 2 : 1;
		if (rank < best_rank ||
		    (rank == best_rank && e->used < best_used)) {
			best = w;
			best_rank = rank;
			best_used = e->used;
		}
	}
	return best;
}

/* An entry of b for q (no block, nothing asked yet), replacing another
 * key when the bucket is full; NULL when out of memory for its id. */
static entry *claim(bucket *b, const drl__near_req *q)
{
	int w = victim(b, q);
	entry *e = &b->e[w];
	if (b->tag[w] != 0 && e->len > INLINE)
		free(e->id.heap);
	b->tag[w] = 0;
	memset(e, 0, sizeof *e);
	if (q->id.len > INLINE) {
		e->id.heap = malloc(q->id.len);
		if (e->id.heap == NULL)
			return NULL;
		memcpy(e->id.heap, q->id.bytes, q->id.len);
	} else {
		memcpy(e->id.in, q->id.bytes, q->id.len);
	}
	e->len = (uint8_t)q->id.len;
	e->flags = q->id.digest ? F_DIGEST : 0;
	b->tag[w] = tag_of(q->hash);
	return e;
}

/* Forget what e says and start it on q's base. */
static void restart(entry *e, const drl__near_req *q)
{
	e->base = (uint8_t)q->base;
	e->until = 0;
	e->asked = INT64_MIN;
	e->used = INT64_MIN;
	e->cost = INT64_MAX;
	e->flags &= F_DIGEST;
}

/* The local denial from e at time t: the store's answer, aged. The block
 * may end before the store's retry time (block_on_exceed's cap): the
 * caller is still told the store's, the earliest it can succeed. */
static void fill(drl_result *r, const entry *e, int64_t t)
{
	bool never = e->flags & F_NEVER;
	int64_t retry = drl__max64(e->retry_at, e->until) - t;
	memset(r, 0, sizeof *r);
	r->limit = e->limit;
	r->retry_after_us = never ? DRL_NEVER : retry;
	r->reset_after_us = drl__max64(e->reset_at - t, never ? 0 : retry);
	r->limit_index = e->index;
	r->path = DRL_PATH_NEAR;
}

bool drl__near_check(drl__near *n, const drl__near_req *q, int64_t cost,
		     drl_result *result)
{
	shard *sh;
	bucket *b = bucket_of(n, q->hash, &sh);
	bool blocked = false;
	pthread_mutex_lock(&sh->mu);
	entry *e = find(b, q);
	if (e != NULL && e->base == q->base) {
		if (q->t > e->used)
			e->used = q->t;
		if (q->t < e->until && cost >= e->cost) {
			fill(result, e, q->t);
			blocked = true;
		}
	}
	pthread_mutex_unlock(&sh->mu);
	return blocked;
}

/* The store's answer *res for cost at q's time. `request`: from a request
 * (which counts as a use of the key), not from the thread. Answers older
 * than the one an entry holds are dropped: the newest wins. */
static void record(drl__near *n, const drl__near_req *q, int64_t cost,
		   const drl_result *res, bool request)
{
	bool denied = !res->allowed;
	int64_t block = 0;
	if (denied) {
		block = res->retry_after_us == DRL_NEVER
				? n->cap_us
				: drl__min64(res->retry_after_us, n->cap_us);
		if (block <= 0)
			return; /* not a denial one can wait out */
	}
	shard *sh;
	bucket *b = bucket_of(n, q->hash, &sh);
	pthread_mutex_lock(&sh->mu);
	entry *e = find(b, q);
	if (e == NULL) {
		/* A new key: for a block, or (near_cache) for the thread. */
		if (!denied &&
		    !(request && n->track && q->base == DRL__NEAR_MONO))
			goto out;
		e = claim(b, q);
		if (e == NULL)
			goto out;
		restart(e, q);
	} else if (e->base != q->base) {
		restart(e, q);
	}
	if (request && q->t > e->used)
		e->used = q->t;
	if (q->t < e->asked)
		goto out;
	e->asked = q->t;
	e->flags = (uint8_t)((e->flags & ~F_LOW) |
			     (res->remaining * 2 <= res->limit ? F_LOW : 0));
	if (denied) {
		e->until = q->t + block;
		e->retry_at = res->retry_after_us == DRL_NEVER
				      ? e->until
				      : q->t + res->retry_after_us;
		e->cost = cost;
		e->reset_at = q->t + drl__max64(res->reset_after_us, 0);
		e->limit = (uint32_t)drl__min64(drl__max64(res->limit, 0),
						UINT32_MAX);
		e->index = (uint8_t)res->limit_index;
		e->flags = (uint8_t)((e->flags & ~F_NEVER) |
				     (res->retry_after_us == DRL_NEVER ? F_NEVER
								       : 0));
	} else if (e->until > q->t && cost >= e->cost) {
		e->until = 0; /* the store allows what the block denies */
	}
out:
	pthread_mutex_unlock(&sh->mu);
}

void drl__near_record(drl__near *n, const drl__near_req *q, int64_t cost,
		      const drl_result *result)
{
	record(n, q, cost, result, true);
}

void drl__near_forget(drl__near *n, const drl__near_req *q)
{
	shard *sh;
	bucket *b = bucket_of(n, q->hash, &sh);
	pthread_mutex_lock(&sh->mu);
	entry *e = find(b, q);
	if (e != NULL) {
		e->until = 0;
		e->flags &= ~(uint8_t)F_LOW;
		if (e->base == q->base && q->t > e->asked)
			e->asked = q->t;
	}
	pthread_mutex_unlock(&sh->mu);
}

/* ---- the sync thread ---------------------------------------------------- */

static void take(cand *c, const entry *e, uint64_t tag, int64_t cost)
{
	memcpy(c->id, id_of(e), e->len);
	c->len = e->len;
	c->digest = e->flags & F_DIGEST;
	c->hash = tag;
	c->cost = cost;
}

/* Pick this round's peeks into n->cands: (a) from the front, (b) from
 * the back, (a) displacing (b) when the budget is spent. Sets *na and *nb:
 * the picks are cands[0, na) and cands[nb, SYNC_BUDGET). */
static void pick(drl__near *n, int64_t now, size_t *na, size_t *nb)
{
	int64_t horizon = now + 2 * n->sync_us;
	int64_t recent = now - RECENT * n->sync_us;
	int64_t stale = now - n->sync_us / 2;
	size_t a = 0, z = SYNC_BUDGET, nshards = n->shard_mask + 1;
	for (size_t k = 0; k < nshards; k++) {
		size_t s = (n->next_shard + k) & n->shard_mask;
		pthread_mutex_lock(&n->shards[s].mu);
		for (size_t i = s; i <= n->mask; i += nshards) {
			bucket *b = &n->buckets[i];
			for (int w = 0; w < WAYS; w++) {
				entry *e = &b->e[w];
				if (b->tag[w] == 0 ||
				    e->base != DRL__NEAR_MONO ||
				    e->used < recent)
					continue;
				if (e->until > now) {
					if (e->until > horizon ||
					    a == SYNC_BUDGET)
						continue;
					if (a == z)
						z++;
					take(&n->cands[a++], e, b->tag[w],
					     e->cost);
				} else if (e->asked < stale &&
					   (e->flags & F_LOW) && z > a) {
					take(&n->cands[--z], e, b->tag[w], 1);
				}
			}
		}
		pthread_mutex_unlock(&n->shards[s].mu);
	}
	n->next_shard = (n->next_shard + 1) & n->shard_mask;
	*na = a;
	*nb = z;
}

/* Peek one key and remember the answer. false when the store cannot be
 * asked now (breaker open): the round stops there. */
static bool sync_one(drl__near *n, const cand *c)
{
	drl_limiter *l = n->l;
	drl_error err = {0};
	drl__near_req q = {
		.id = {.bytes = c->id, .len = c->len, .digest = c->digest},
		.hash = c->hash,
		.base = DRL__NEAR_MONO,
		.t = drl_mono_us(),
	};
	int rc;
	drl_result r;
	if (!n->peek(l, &q.id, c->cost, &rc, &r, &err))
		return false;
	DRL__COUNT(&l->store->stats, near_syncs);
	if (rc == 0)
		record(n, &q, c->cost, &r, false);
	return true;
}

/* One round as if the monotonic clock read `now` when it began; the
 * caller holds n->mu (rounds share n->cands). Returns the peeks made. */
static size_t sync_round(drl__near *n, int64_t now)
{
	size_t na, nb, peeks = 0;
	pick(n, now, &na, &nb);
	for (size_t i = 0; i < SYNC_BUDGET; i++) {
		if (i == na)
			i = nb;
		if (i == SYNC_BUDGET ||
		    atomic_load_explicit(&n->stop, memory_order_relaxed) ||
		    !sync_one(n, &n->cands[i]))
			break;
		peeks++;
	}
	return peeks;
}

static struct timespec mono_ts(int64_t us)
{
	return (struct timespec){.tv_sec = us / 1000000,
				 .tv_nsec = (long)(us % 1000000) * 1000};
}

/* A round every sync_us (on a fixed grid; a round that overran starts the
 * next one a whole interval later), until drl__near_free. The round runs
 * under n->mu, which only drl__near_free and the test hooks take: they
 * wait for it (drl__near_free sets stop first, which ends a round at its
 * next peek). */
static void *sync_main(void *arg)
{
	drl__thread_name("drl-near-sync");
	drl__near *n = arg;
	int64_t next = drl_mono_us() + n->sync_us;
	pthread_mutex_lock(&n->mu);
	while (!atomic_load(&n->stop)) {
		struct timespec ts = mono_ts(next);
		pthread_cond_timedwait(&n->cv, &n->mu, &ts);
		if (atomic_load(&n->stop) || drl_mono_us() < next)
			continue;
		if (!n->manual)
			sync_round(n, drl_mono_us());
		int64_t now = drl_mono_us();
		next += n->sync_us;
		if (next <= now)
			next = now + n->sync_us;
	}
	pthread_mutex_unlock(&n->mu);
	return NULL;
}

/* Start the thread with every signal blocked: the application's handlers
 * never run on it. */
static int start_thread(drl__near *n, drl_error *err)
{
	pthread_condattr_t ca;
	if (pthread_condattr_init(&ca) ||
	    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) ||
	    pthread_cond_init(&n->cv, &ca)) {
		pthread_condattr_destroy(&ca);
		return drl_error_set(err, DRL_EINTERNAL,
				     "near_cache: cannot make a condition "
				     "variable");
	}
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&n->mu, NULL);
	n->cands = malloc(SYNC_BUDGET * sizeof *n->cands);
	if (n->cands == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&n->thread, NULL, sync_main, n);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return drl_error_set(err, DRL_ENOMEM,
				     "near_cache: cannot start its thread (%s)",
				     strerror(rc));
	n->started = true;
	return 0;
}

/* ---- test hooks ---------------------------------------------------------- */

void drl__near_manual(drl__near *n)
{
	pthread_mutex_lock(&n->mu);
	n->manual = true;
	pthread_mutex_unlock(&n->mu);
}

size_t drl__near_sync_round_at(drl__near *n, int64_t now)
{
	pthread_mutex_lock(&n->mu);
	size_t peeks = sync_round(n, now);
	pthread_mutex_unlock(&n->mu);
	return peeks;
}

/* ---- lifetime ----------------------------------------------------------- */

/* A random hash key from libsodium's CSPRNG (getrandom underneath).
 * sodium_init() is thread-safe and idempotent; it fails only when the
 * system has no randomness to give. */
static int random_key(drl__near *n, drl_error *err)
{
	if (sodium_init() < 0)
		return drl_error_set(err, DRL_EINTERNAL,
				     "near cache: libsodium cannot start "
				     "(no randomness)");
	randombytes_buf(n->hash_key, sizeof n->hash_key);
	return 0;
}

/* The table for `keys` entries (rounded up to a power of two, at least one
 * bucket). calloc: pages are touched only as keys come. */
static int make_table(drl__near *n, int64_t keys, drl_error *err)
{
	size_t nb = 1;
	while (nb * WAYS < (size_t)keys)
		nb *= 2;
	size_t ns = nb < SHARDS_MAX ? nb : SHARDS_MAX;
	n->bucket_mem = calloc(1, nb * sizeof(bucket) + 64);
	n->shards = aligned_alloc(64, ns * sizeof(shard));
	if (n->bucket_mem == NULL || n->shards == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	uintptr_t p = ((uintptr_t)n->bucket_mem + 63) & ~(uintptr_t)63;
	n->buckets = (bucket *)p;
	n->mask = nb - 1;
	n->shard_mask = ns - 1;
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
	/* Spin a little before sleeping: critical sections are ~50 ns. */
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
	for (size_t i = 0; i < ns; i++)
		pthread_mutex_init(&n->shards[i].mu, &ma);
	pthread_mutexattr_destroy(&ma);
	return 0;
}

int drl__near_new(drl__near **out, drl_limiter *l, const drl__near_opts *o,
		  drl__near_peek_fn peek, drl_error *err)
{
	*out = NULL;
	if (!o->sync && o->block_us == 0)
		return 0;
	drl__near *n = calloc(1, sizeof *n);
	if (n == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	n->cap_us = o->block_us ? o->block_us : NEAR_CAP_US;
	n->track = o->sync;
	n->l = l;
	n->peek = peek;
	n->sync_us = o->sync_us;
	atomic_init(&n->stop, false);
	int rc = random_key(n, err);
	if (rc == 0)
		rc = make_table(n, o->keys, err);
	if (rc == 0 && o->sync)
		rc = start_thread(n, err);
	if (rc) {
		drl__near_free(n);
		return rc;
	}
	*out = n;
	return 0;
}

void drl__near_free(drl__near *n)
{
	if (n == NULL)
		return;
	if (n->started) {
		atomic_store(&n->stop, true); /* ends a round in progress */
		pthread_mutex_lock(&n->mu);
		pthread_cond_signal(&n->cv);
		pthread_mutex_unlock(&n->mu);
		pthread_join(n->thread, NULL);
		pthread_cond_destroy(&n->cv);
		pthread_mutex_destroy(&n->mu);
	}
	if (n->shards != NULL && n->bucket_mem != NULL) {
		for (size_t i = 0; i <= n->mask; i++) {
			bucket *b = &n->buckets[i];
			for (int w = 0; w < WAYS; w++)
				if (b->tag[w] != 0 && b->e[w].len > INLINE)
					free(b->e[w].id.heap);
		}
		for (size_t i = 0; i <= n->shard_mask; i++)
			pthread_mutex_destroy(&n->shards[i].mu);
	}
	free(n->shards);
	free(n->bucket_mem);
	free(n->cands);
	free(n);
}
