/*
 * The embedded in-process store, "memory://".
 *
 * Layout: the key space is split into 2^k shards by the top bits of a
 * seeded 64-bit hash of the key; each shard is an open-addressing table
 * (linear probing from the slot the low bits name, deletion by backward
 * shift: no tombstones) behind its own mutex. There is no global lock: a
 * call locks the one shard its key lives in. A slot is the entry itself
 * (SLOT_SIZE bytes, two cache lines fetched together): the cached hash,
 * an expiry, a counter or a blob's version, and the key's bytes inline
 * when they fit, so a decision on a counter waits for one cache miss,
 * not for a bucket and then the entry it points to. The price is memory:
 * SLOT_SIZE bytes a slot, 3/8 to 3/4 of them full: 171-341 bytes a key
 * (and a key longer than KEY_INLINE, a blob: their allocations).
 *
 * Hash: XXH3-64 from xxHash (Debian's libxxhash-dev, used header-only
 * through XXH_INLINE_ALL so nothing is linked): among the fast
 * non-cryptographic hashes it is the one Debian packages with the best
 * speed on the short keys this store sees (a few to a few hundred bytes),
 * with good distribution in both its high bits (shard) and low bits
 * (slot). It is seeded with a random value per store so that keys chosen
 * by clients cannot be precomputed to pile into one probe run.
 *
 * Time: expiries are CLOCK_MONOTONIC microseconds (wall-clock jumps cannot
 * expire or revive keys). An expired entry is absent to every method
 * (checked on lookup, and freed then), and memory comes back without
 * anyone reading the key: every write moves the shard's sweep hand over a
 * slot (SWEEP_INSERT more when the write creates a key), freeing what has
 * expired, unless the shard's lower bound of its expiries says nothing
 * has (each lap of the hand makes the bound the lap's minimum). A key
 * creation sweeps SWEEP_INSERT slots, so the hand laps a table of S slots
 * every S / SWEEP_INSERT creations; an expired entry waits about one lap,
 * so garbage stays below about S / SWEEP_INSERT entries. Tables double
 * when they would be more than three quarters full (probe runs stay
 * short: the next slot is the next two cache lines), so with
 * SWEEP_INSERT = 8 a table stops growing once its live keys stay below
 * 5S/8: a stream of distinct short-lived keys reaches a steady size.
 * Tables shrink when they fall below a sixteenth full.
 *
 * Versions come from a per-shard counter, so a key that expires and is
 * created again never repeats a version a client may still hold (no ABA).
 *
 * Groups (group_max_keys=M): keys that share their bytes before the first
 * '{' (a limiter's prefix and limit tag: one limit, docs/security.md 2)
 * form a group, and a group may hold at most M live keys, so keys one
 * limit's clients choose cannot take the whole of max_keys from the
 * others. A group's count lives in a table of its own, split into
 * GROUP_STRIPES locked parts; it is touched only when a key is created or
 * freed, with the key's shard locked (lock order: shard, then stripe).
 */
#include "memory.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL /* header only: nothing to link */
#include <xxhash.h>    /* Debian: libxxhash-dev */

#define SHARDS_DEFAULT 64
#define SHARDS_MAX 1024
#define MAX_KEYS_MAX (INT64_C(1) << 48)
#define SLOTS_MIN 16   /* per shard; power of two */
#define SWEEP_WRITE 1  /* slots swept by every write */
#define SWEEP_INSERT 8 /* more slots swept by a write that adds a key */
#define CACHELINE 64
#define HUGE_PAGE ((size_t)2 << 20) /* x86-64's transparent huge page */

/* insert(): max_keys reached, or group_max_keys for the key's group (not
 * error codes) */
enum { FULL = 1, GROUP_FULL = 2 };

#define GROUP_STRIPES 64    /* power of two */
#define GROUP_BUCKETS_MIN 8 /* per stripe; power of two */

/* The live keys of one group; freed when the last goes. */
typedef struct group {
	struct group *next;
	uint64_t hash;
	size_t count;
	size_t len;
	unsigned char name[];
} group;

/* A part of the group table: a chained hash table behind its lock. */
typedef struct stripe {
	_Alignas(CACHELINE) pthread_mutex_t lock;
	group **buckets;
	size_t nbuckets; /* power of two */
	size_t ngroups;
} stripe;

/*
 * An entry is one slot of its shard's table: the table is an array of
 * entries, so a lookup reads the slot its hash names (two adjacent cache
 * lines, fetched together) and finds the key, its expiry and its counter
 * there, with no pointer to follow. A key of up to KEY_INLINE bytes lives
 * in the slot; a longer one in an allocation of its own (a second miss
 * for those keys only). A blob lives in an allocation of its own.
 */
#define SLOT_SIZE 128 /* two cache lines; a power of two */
#define KEY_INLINE                                                             \
	(SLOT_SIZE - 4 * sizeof(int64_t) - 3 * sizeof(void *) -                \
	 2 * sizeof(uint32_t))

typedef struct entry {
	uint64_t hash;    /* 0: an empty slot (hash_key() never returns 0) */
	int64_t expires;  /* CLOCK_MONOTONIC µs; gone when <= now */
	uint64_t version; /* 0: a counter; else a blob and its version */
	union {
		int64_t counter; /* version == 0 */
		size_t bloblen;  /* version != 0 */
	};
	group *grp; /* its group's count; NULL without group_max_keys */
	unsigned char *blob;
	unsigned char *longkey; /* keylen > KEY_INLINE: the key's bytes */
	uint32_t keylen;
	uint32_t blobcap;
	unsigned char key[KEY_INLINE]; /* keylen <= KEY_INLINE */
} entry;

_Static_assert(sizeof(entry) == SLOT_SIZE, "an entry fills one slot");

typedef struct shard {
	_Alignas(CACHELINE) pthread_mutex_t lock;
	entry *slots;        /* linear probing; SLOT_SIZE-aligned */
	size_t nslots;       /* power of two */
	size_t count;        /* entries held, expired or not */
	size_t hand;         /* next slot the sweep looks at */
	int64_t min_expires; /* <= expires of every entry in the shard */
	int64_t lap_min;     /* <= expires of every entry the hand passed,
				written or moved in this lap of the hand */
	uint64_t vclock;     /* last version handed out */
} shard;

typedef struct store {
	drl_backend parent;
	uint64_t seed;
	unsigned shard_bits;
	size_t nshards;
	shard *shards;
	size_t max_keys;       /* 0: unlimited */
	atomic_size_t nkeys;   /* entries held; kept only with max_keys */
	size_t group_max_keys; /* 0: no group bound (stripes NULL) */
	stripe *stripes;       /* GROUP_STRIPES of them */
} store;

/* ---- helpers ---------------------------------------------------------- */

/* Now on CLOCK_MONOTONIC_COARSE, in microseconds: not the library's
 * drl_mono_us() (CLOCK_MONOTONIC). Expiry only cleans up (every TTL
 * carries a second of grace), so a clock that ticks every few
 * milliseconds is exact enough, and it costs ~5 ns instead of ~24 ns: a
 * fifth of a decision's budget (bench/bench_memory.c). */
static int64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Expiry for a TTL starting now; ttl_us > 0. Saturates. */
static int64_t deadline(int64_t now, int64_t ttl_us)
{
	return ttl_us > INT64_MAX - now ? INT64_MAX : now + ttl_us;
}

/* DRL_ESTORE for a counter method used on a blob or the reverse. */
static int wrong_kind(drl_error *err, drl_bytes key, bool want_counter)
{
	char k[DRL_KEY_SHOW_BUF];
	return drl_error_set(err, DRL_ESTORE,
			     "wrong kind of value at key \"%s\": found %s, "
			     "expected %s",
			     drl_key_show(k, sizeof k, key),
			     want_counter ? "a state blob" : "a counter",
			     want_counter ? "a counter" : "a state blob");
}

/* DRL_EINVAL unless key is a usable byte string. */
static int check_key(drl_bytes key, drl_error *err)
{
	if (key.data == NULL && key.len > 0)
		return drl_error_set(err, DRL_EINVAL, "memory store: NULL key");
	if (key.len > UINT32_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "memory store: key of %zu bytes (at most "
				     "%" PRIu32 ")",
				     key.len, UINT32_MAX);
	return 0;
}

/* The store's seeded 64-bit hash of key, never 0 (an empty slot's): top
 * bits pick the shard, low bits the slot. */
static uint64_t hash_key(const store *st, drl_bytes key)
{
	uint64_t h = XXH3_64bits_withSeed(key.data, key.len, st->seed);
	return h ? h : 1;
}

/* The shard owning hash h. */
static shard *shard_of(store *st, uint64_t h)
{
	return &st->shards[st->shard_bits ? h >> (64 - st->shard_bits) : 0];
}

/* Where a key lives, found once a call: the clock read, the key's hash and
 * its shard. */
typedef struct place {
	int64_t now;
	uint64_t h;
	shard *sh;
} place;

static place place_of(store *st, drl_bytes key)
{
	uint64_t h = hash_key(st, key);
	return (place){.now = mono_us(), .h = h, .sh = shard_of(st, h)};
}

/* A table of n empty slots (n a power of two); NULL when out of memory.
 * A table of HUGE_PAGE bytes or more asks for huge pages: a lookup in a
 * big table then waits for the slot, not for a page walk too. */
static entry *slots_new(size_t n)
{
	if (n > SIZE_MAX / 4 / SLOT_SIZE)
		return NULL;
	size_t bytes = n * SLOT_SIZE;
	entry *s = aligned_alloc(bytes >= HUGE_PAGE ? HUGE_PAGE : SLOT_SIZE,
				 bytes);
	if (s == NULL)
		return NULL;
#ifdef MADV_HUGEPAGE
	if (bytes >= HUGE_PAGE)
		madvise(s, bytes, MADV_HUGEPAGE); /* a hint: ignore failure */
#endif
	memset(s, 0, bytes);
	return s;
}

/* e's key bytes. */
static const unsigned char *entry_key(const entry *e)
{
	return e->keylen > KEY_INLINE ? e->longkey : e->key;
}

/* ---- groups ----------------------------------------------------------- */

/* The group name of key: its bytes before the first '{' (all of it when
 * it has none). */
static size_t group_len(drl_bytes key)
{
	const unsigned char *brace =
		key.len ? memchr(key.data, '{', key.len) : NULL;
	return brace ? (size_t)(brace - (const unsigned char *)key.data)
		     : key.len;
}

/* Double stripe sp's table when it holds more groups than buckets; keeps
 * the old one when memory is short (longer chains, not wrong). */
static void group_grow(stripe *sp)
{
	if (sp->ngroups <= sp->nbuckets ||
	    sp->nbuckets > SIZE_MAX / 4 / sizeof(group *))
		return;
	size_t n = sp->nbuckets * 2;
	group **nb = calloc(n, sizeof *nb);
	if (nb == NULL)
		return;
	for (size_t i = 0; i < sp->nbuckets; i++)
		for (group *g = sp->buckets[i], *next; g != NULL; g = next) {
			next = g->next;
			g->next = nb[(g->hash / GROUP_STRIPES) & (n - 1)];
			nb[(g->hash / GROUP_STRIPES) & (n - 1)] = g;
		}
	free(sp->buckets);
	sp->buckets = nb;
	sp->nbuckets = n;
}

/* Count one more key in key's group into *out. Returns 0, GROUP_FULL
 * when the group holds group_max_keys live keys, or DRL_ENOMEM. */
static int group_take(store *st, drl_bytes key, group **out)
{
	size_t len = group_len(key);
	uint64_t h = XXH3_64bits_withSeed(key.data, len, st->seed ^ 1);
	stripe *sp = &st->stripes[h & (GROUP_STRIPES - 1)];
	int rc = 0;

	pthread_mutex_lock(&sp->lock);
	group **pp = &sp->buckets[(h / GROUP_STRIPES) & (sp->nbuckets - 1)];
	group *g = *pp;
	while (g != NULL && (g->hash != h || g->len != len ||
			     (len && memcmp(g->name, key.data, len) != 0)))
		g = g->next;
	if (g == NULL) {
		g = len <= SIZE_MAX - sizeof *g ? malloc(sizeof *g + len)
						: NULL;
		if (g == NULL) {
			rc = DRL_ENOMEM;
			goto out;
		}
		g->hash = h;
		g->count = 0;
		g->len = len;
		if (len)
			memcpy(g->name, key.data, len);
		g->next = *pp;
		*pp = g;
		sp->ngroups++;
		group_grow(sp);
	} else if (g->count >= st->group_max_keys) {
		rc = GROUP_FULL;
		goto out;
	}
	g->count++;
	*out = g;
out:
	pthread_mutex_unlock(&sp->lock);
	return rc;
}

/* Count one key less in group g, freeing it with its last key. */
static void group_give(store *st, group *g)
{
	stripe *sp = &st->stripes[g->hash & (GROUP_STRIPES - 1)];

	pthread_mutex_lock(&sp->lock);
	if (--g->count == 0) {
		group **pp = &sp->buckets[(g->hash / GROUP_STRIPES) &
					  (sp->nbuckets - 1)];
		while (*pp != g)
			pp = &(*pp)->next;
		*pp = g->next;
		sp->ngroups--;
		free(g);
	}
	pthread_mutex_unlock(&sp->lock);
}

/* ---- table operations, all with the shard locked ---------------------- */

/* Start loading the slot hash h names (both its cache lines) and the
 * next one's hash (where a probe goes on) while the sweep runs: misses
 * waited for together, not one after the other. */
static void prefetch_slot(const shard *sh, uint64_t h)
{
#ifdef __GNUC__
	size_t i = h & (sh->nslots - 1);
	const char *s = (const char *)&sh->slots[i];
	__builtin_prefetch(s);
	__builtin_prefetch(s + CACHELINE);
	__builtin_prefetch(&sh->slots[(i + 1) & (sh->nslots - 1)]);
#else
	(void)sh;
	(void)h;
#endif
}

/* Lower e's shard's bounds to e's expiry: e was written or moved. */
static void bound(shard *sh, const entry *e)
{
	if (e->expires < sh->min_expires)
		sh->min_expires = e->expires;
	if (e->expires < sh->lap_min)
		sh->lap_min = e->expires;
}

/* Empty slot i, closing the gap (backward-shift deletion: every entry
 * stays reachable from its home slot without tombstones). An entry moved
 * may now sit behind the sweep hand: bound() keeps the lap's minimum. */
static void slot_clear(shard *sh, size_t i)
{
	size_t mask = sh->nslots - 1;
	for (size_t j = (i + 1) & mask; sh->slots[j].hash != 0;
	     j = (j + 1) & mask) {
		size_t home = sh->slots[j].hash & mask;
		/* j's entry may fill i unless its home lies in (i, j] */
		if (((j - home) & mask) < ((j - i) & mask))
			continue;
		sh->slots[i] = sh->slots[j];
		bound(sh, &sh->slots[i]);
		i = j;
	}
	memset(&sh->slots[i], 0, sizeof(entry));
}

/* Free entry e (a slot of sh) and empty its slot. Entries after it may
 * move: pointers into the table are stale after. */
static void drop(store *st, shard *sh, entry *e)
{
	if (e->grp != NULL)
		group_give(st, e->grp);
	free(e->blob);
	if (e->keylen > KEY_INLINE)
		free(e->longkey);
	slot_clear(sh, (size_t)(e - sh->slots));
	sh->count--;
	if (st->max_keys)
		atomic_fetch_sub_explicit(&st->nkeys, 1, memory_order_relaxed);
}

/* Set e's expiry and keep the shard's lower bounds. */
static void touch(shard *sh, entry *e, int64_t expires)
{
	e->expires = expires;
	bound(sh, e);
}

/* The first empty slot on h's probe sequence. */
static entry *free_slot(entry *slots, size_t n, uint64_t h)
{
	size_t i = h & (n - 1);
	while (slots[i].hash != 0)
		i = (i + 1) & (n - 1);
	return &slots[i];
}

/* Move every entry into a new table of n slots (a power of two above the
 * count). Keeps the old table when memory is short: a fuller table is
 * slower, not wrong. The sweep hand starts a new lap. */
static void resize(shard *sh, size_t n)
{
	entry *ns = slots_new(n);
	if (!ns)
		return;
	for (size_t i = 0; i < sh->nslots; i++)
		if (sh->slots[i].hash != 0)
			*free_slot(ns, n, sh->slots[i].hash) = sh->slots[i];
	free(sh->slots);
	sh->slots = ns;
	sh->nslots = n;
	sh->hand = 0;
	sh->lap_min = INT64_MAX;
}

/* Shrink a table that fell below a sixteenth full to about a quarter. */
static void maybe_shrink(shard *sh)
{
	if (sh->nslots <= SLOTS_MIN || sh->count >= sh->nslots / 16)
		return;
	size_t n = sh->nslots;
	while (n > SLOTS_MIN && sh->count < n / 8)
		n /= 2;
	resize(sh, n);
}

/*
 * Advance the sweep hand over `steps` slots, freeing what has expired;
 * nothing to free while the shard's bound says nothing has. A lap of the
 * hand makes the bound the lap's minimum. May move entries and resize
 * the table: call it before taking pointers into the table.
 */
static void sweep(store *st, shard *sh, int64_t now, size_t steps)
{
	if (sh->min_expires > now) {
		maybe_shrink(sh); /* after deletes */
		return;
	}
	size_t mask = sh->nslots - 1;
	if (steps > sh->nslots)
		steps = sh->nslots;
	for (size_t s = 0; s < steps; s++) {
		entry *e = &sh->slots[sh->hand];
		if (e->hash != 0 && e->expires <= now) {
			drop(st, sh,
			     e); /* the next may move here: look again */
			continue;
		}
		if (e->hash != 0 && e->expires < sh->lap_min)
			sh->lap_min = e->expires;
		sh->hand = (sh->hand + 1) & mask;
		if (sh->hand == 0) {
			sh->min_expires = sh->lap_min;
			sh->lap_min = INT64_MAX;
		}
	}
	maybe_shrink(sh);
}

/* Free every expired entry of sh and make the shard's bound exact. */
static void sweep_all(store *st, shard *sh, int64_t now)
{
	for (size_t i = 0; i < sh->nslots;) {
		entry *e = &sh->slots[i];
		if (e->hash != 0 && e->expires <= now)
			drop(st, sh,
			     e); /* the next may move here: look again */
		else
			i++;
	}
	/* a drop near the end may have moved an entry to the start, behind
	 * i: the bound is taken once every slot holds its last entry */
	int64_t m = INT64_MAX;
	for (size_t i = 0; i < sh->nslots; i++)
		if (sh->slots[i].hash != 0 && sh->slots[i].expires < m)
			m = sh->slots[i].expires;
	sh->min_expires = m;
	maybe_shrink(sh);
}

/* The live entry for key, or NULL when absent. An expired entry met on
 * the way is freed (and reported absent). */
static entry *lookup(store *st, shard *sh, uint64_t h, drl_bytes key,
		     int64_t now)
{
	size_t mask = sh->nslots - 1;
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		entry *e = &sh->slots[i];
		if (e->hash == 0)
			return NULL;
		if (e->hash != h || e->keylen != key.len ||
		    (key.len && memcmp(entry_key(e), key.data, key.len) != 0))
			continue;
		if (e->expires <= now) {
			drop(st, sh, e);
			return NULL;
		}
		return e;
	}
}

/*
 * Add a new entry for key (known absent) as an empty counter that never
 * expires; the caller fills it and calls touch(). Sweeps first, then may
 * grow the table (pointers into the table taken before are stale after).
 * Returns 0 with *out set, FULL when max_keys entries are held,
 * GROUP_FULL when group_max_keys of its group are, or DRL_ENOMEM.
 */
static int insert(store *st, shard *sh, uint64_t h, drl_bytes key, int64_t now,
		  entry **out)
{
	sweep(st, sh, now, SWEEP_INSERT);
	if (st->max_keys &&
	    atomic_fetch_add_explicit(&st->nkeys, 1, memory_order_relaxed) >=
		    st->max_keys) {
		atomic_fetch_sub_explicit(&st->nkeys, 1, memory_order_relaxed);
		return FULL;
	}
	group *g = NULL;
	unsigned char *longkey = NULL;
	int rc = st->group_max_keys ? group_take(st, key, &g) : 0;
	if (rc == 0 && key.len > KEY_INLINE &&
	    (longkey = malloc(key.len)) == NULL)
		rc = DRL_ENOMEM;
	if (rc == 0 && sh->count + 1 > sh->nslots / 4 * 3) {
		resize(sh, sh->nslots * 2);
		if (sh->count + 1 >= sh->nslots) /* no room at all */
			rc = DRL_ENOMEM;
	}
	if (rc != 0) {
		free(longkey);
		if (g != NULL)
			group_give(st, g);
		if (st->max_keys)
			atomic_fetch_sub_explicit(&st->nkeys, 1,
						  memory_order_relaxed);
		return rc;
	}
	entry *e = free_slot(sh->slots, sh->nslots, h);
	e->hash = h;
	e->expires = INT64_MAX;
	e->version = 0;
	e->counter = 0;
	e->grp = g;
	e->blob = NULL;
	e->blobcap = 0;
	e->keylen = (uint32_t)key.len;
	e->longkey = longkey;
	if (key.len)
		memcpy(longkey ? longkey : e->key, key.data, key.len);
	sh->count++;
	*out = e;
	return 0;
}

/* The error for insert()'s failure rc. */
static int insert_error(const store *st, int rc, drl_error *err)
{
	if (rc == FULL)
		return drl_error_set(err, DRL_ESTORE,
				     "memory store full (max_keys=%zu)",
				     st->max_keys);
	if (rc == GROUP_FULL)
		return drl_error_set(err, DRL_ESTORE,
				     "memory store full for this key's group "
				     "(group_max_keys=%zu)",
				     st->group_max_keys);
	return drl_error_set(err, DRL_ENOMEM, "memory store: out of memory");
}

/*
 * Called with no lock held when a key could not be created because
 * max_keys entries (or group_max_keys of its group) are held: free every
 * expired entry in every shard
 * that may have some, so that only live keys count against the limit.
 */
static void reclaim(store *st, int64_t now)
{
	for (size_t i = 0; i < st->nshards; i++) {
		shard *sh = &st->shards[i];
		pthread_mutex_lock(&sh->lock);
		if (sh->min_expires <= now)
			sweep_all(st, sh, now);
		pthread_mutex_unlock(&sh->lock);
	}
}

/* Make e's blob a copy of blob[0..len), reusing its allocation when it
 * fits; DRL_ENOMEM leaves e unchanged. blob may point into e's own blob. */
static int set_blob(entry *e, const void *blob, size_t len)
{
	if (e->version != 0 && len <= e->blobcap) {
		if (len)
			memmove(e->blob, blob, len);
		e->bloblen = len;
		return 0;
	}
	unsigned char *nb = malloc(len ? len : 1);
	if (!nb)
		return DRL_ENOMEM;
	if (len)
		memcpy(nb, blob, len);
	free(e->blob);
	e->blob = nb;
	e->blobcap = len > UINT32_MAX ? UINT32_MAX : (uint32_t)len;
	e->bloblen = len;
	return 0;
}

/* Create key (known absent) holding a copy of blob[0..len) with a new
 * version and a TTL of ttl_us > 0. Returns 0, FULL or DRL_ENOMEM, with the
 * table unchanged on failure. */
static int insert_blob(store *st, shard *sh, uint64_t h, drl_bytes key,
		       int64_t now, const void *blob, size_t len,
		       int64_t ttl_us)
{
	unsigned char *copy = malloc(len ? len : 1);
	if (!copy)
		return DRL_ENOMEM;
	if (len)
		memcpy(copy, blob, len);
	entry *e;
	int rc = insert(st, sh, h, key, now, &e);
	if (rc) {
		free(copy);
		return rc;
	}
	e->blob = copy;
	e->blobcap = len > UINT32_MAX ? UINT32_MAX : (uint32_t)len;
	e->bloblen = len;
	e->version = ++sh->vclock;
	touch(sh, e, deadline(now, ttl_us));
	return 0;
}

/* A write's opening (incr, cas, update): lock the shard of key (at p),
 * sweep it while its slot loads, and return key's live entry, or NULL
 * when absent. The caller unlocks p->sh. */
static entry *lock_for_write(store *st, const place *p, drl_bytes key)
{
	pthread_mutex_lock(&p->sh->lock);
	prefetch_slot(p->sh, p->h);
	sweep(st, p->sh, p->now, SWEEP_WRITE);
	return lookup(st, p->sh, p->h, key, p->now);
}

/* ---- vtable ------------------------------------------------------------ */

/* Add delta to the counter at key (absent: 0), set its TTL, return the new
 * value. DRL_ERANGE on int64 overflow and DRL_ESTORE on a blob, both with
 * the store unchanged; DRL_ESTORE when creating the key would pass
 * max_keys. */
static int mem_incr(drl_backend *b, drl_bytes key, int64_t delta,
		    int64_t ttl_us, int64_t *value, drl_error *err)
{
	store *st = (store *)b;
	int rc = check_key(key, err);
	if (rc)
		return rc;
	place p = place_of(st, key);
	for (int attempt = 0;; attempt++) {
		entry *e = lock_for_write(st, &p, key);
		if (e) {
			if (e->version != 0) {
				pthread_mutex_unlock(&p.sh->lock);
				return wrong_kind(err, key, true);
			}
			if ((delta > 0 && e->counter > INT64_MAX - delta) ||
			    (delta < 0 && e->counter < INT64_MIN - delta)) {
				pthread_mutex_unlock(&p.sh->lock);
				char k[DRL_KEY_SHOW_BUF];
				return drl_error_set(
					err, DRL_ERANGE,
					"counter at key \"%s\" would overflow",
					drl_key_show(k, sizeof k, key));
			}
			e->counter += delta;
			*value = e->counter;
			if (ttl_us <= 0)
				drop(st, p.sh, e);
			else
				touch(p.sh, e, deadline(p.now, ttl_us));
			pthread_mutex_unlock(&p.sh->lock);
			return 0;
		}
		if (ttl_us <= 0) { /* created and expired at once */
			pthread_mutex_unlock(&p.sh->lock);
			*value = delta;
			return 0;
		}
		rc = insert(st, p.sh, p.h, key, p.now, &e);
		if (rc == 0) {
			e->counter = delta;
			touch(p.sh, e, deadline(p.now, ttl_us));
			pthread_mutex_unlock(&p.sh->lock);
			*value = delta;
			return 0;
		}
		pthread_mutex_unlock(&p.sh->lock);
		if ((rc != FULL && rc != GROUP_FULL) || attempt > 0)
			return insert_error(st, rc, err);
		reclaim(st, p.now);
	}
}

/* Read n counters; absent keys read 0. DRL_ESTORE when one is a blob
 * (values before it are filled). Each key is read atomically, the set
 * is not. */
static int mem_get_many(drl_backend *b, size_t n, const drl_bytes *keys,
			int64_t *values, drl_error *err)
{
	store *st = (store *)b;
	if (n > 0 && (keys == NULL || values == NULL))
		return drl_error_set(err, DRL_EINVAL,
				     "memory store: NULL keys or values");
	int64_t now = mono_us();
	for (size_t i = 0; i < n; i++) {
		int rc = check_key(keys[i], err);
		if (rc)
			return rc;
		uint64_t h = hash_key(st, keys[i]);
		shard *sh = shard_of(st, h);
		pthread_mutex_lock(&sh->lock);
		const entry *e = lookup(st, sh, h, keys[i], now);
		if (e && e->version != 0) {
			pthread_mutex_unlock(&sh->lock);
			return wrong_kind(err, keys[i], true);
		}
		values[i] = e ? e->counter : 0;
		pthread_mutex_unlock(&sh->lock);
	}
	return 0;
}

/* Copy the blob at key into buf. Absent: version 0, len 0. DRL_ERANGE with
 * *len = the size needed when cap is too small; DRL_ESTORE on a counter. */
static int mem_load(drl_backend *b, drl_bytes key, void *buf, size_t cap,
		    size_t *len, uint64_t *version, drl_error *err)
{
	store *st = (store *)b;
	int rc = check_key(key, err);
	if (rc)
		return rc;
	place p = place_of(st, key);
	pthread_mutex_lock(&p.sh->lock);
	const entry *e = lookup(st, p.sh, p.h, key, p.now);
	if (!e) {
		pthread_mutex_unlock(&p.sh->lock);
		*len = 0;
		*version = 0;
		return 0;
	}
	if (e->version == 0) {
		pthread_mutex_unlock(&p.sh->lock);
		return wrong_kind(err, key, false);
	}
	size_t need = e->bloblen;
	if (need > cap) {
		pthread_mutex_unlock(&p.sh->lock);
		*len = need;
		return drl_error_set(err, DRL_ERANGE,
				     "memory store: state of %zu bytes does "
				     "not fit a buffer of %zu",
				     need, cap);
	}
	if (need)
		memcpy(buf, e->blob, need);
	*len = need;
	*version = e->version;
	pthread_mutex_unlock(&p.sh->lock);
	return 0;
}

/* What a locked write stores: under the key's shard lock, decide() sees
 * the blob at key (e NULL when absent; never a counter) and returns 1 with
 * the blob to store (*nb, *nlen: may point into e's own blob) and its TTL
 * (<= 0: written and expired at once), 0 to leave everything, or a
 * negative error (in err). */
typedef int (*blob_decide)(void *arg, const entry *e, const void **nb,
			   size_t *nlen, int64_t *ttl_us, drl_error *err);

/* The one locked update of a blob (cas and update): run decide on the
 * blob at key under its shard's lock and write what it returns, with a
 * new version. When storing needs a new key and max_keys is reached,
 * expired keys are reclaimed and decide runs once more on the state then
 * current. DRL_ESTORE on a counter or when the store is full. */
static int locked_write(store *st, drl_bytes key, blob_decide decide, void *arg,
			drl_error *err)
{
	place p = place_of(st, key);
	for (int attempt = 0;; attempt++) {
		entry *e = lock_for_write(st, &p, key);
		if (e && e->version == 0) {
			pthread_mutex_unlock(&p.sh->lock);
			return wrong_kind(err, key, false);
		}
		const void *nb = NULL;
		size_t nlen = 0;
		int64_t ttl_us = 0;
		int rc = decide(arg, e, &nb, &nlen, &ttl_us, err);
		if (rc <= 0) {
			pthread_mutex_unlock(&p.sh->lock);
			return rc;
		}
		if (ttl_us <= 0) { /* written and expired at once */
			if (e)
				drop(st, p.sh, e);
			pthread_mutex_unlock(&p.sh->lock);
			return 0;
		}
		if (e) {
			rc = set_blob(e, nb, nlen);
			if (rc == 0) {
				e->version = ++p.sh->vclock;
				touch(p.sh, e, deadline(p.now, ttl_us));
			}
			pthread_mutex_unlock(&p.sh->lock);
			return rc ? insert_error(st, rc, err) : 0;
		}
		rc = insert_blob(st, p.sh, p.h, key, p.now, nb, nlen, ttl_us);
		pthread_mutex_unlock(&p.sh->lock);
		if (rc == 0)
			return 0;
		if ((rc != FULL && rc != GROUP_FULL) || attempt > 0)
			return insert_error(st, rc, err);
		reclaim(st, p.now);
	}
}

/* A cas: the blob to store while the version is still the one read. */
typedef struct cas_arg {
	const void *blob;
	size_t len;
	uint64_t version;
	int64_t ttl_us;
} cas_arg;

static int cas_decide(void *arg, const entry *e, const void **nb, size_t *nlen,
		      int64_t *ttl_us, drl_error *err)
{
	const cas_arg *c = arg;
	if ((e ? e->version : 0) != c->version)
		return drl_error_set(err, DRL_ECONFLICT,
				     "memory store: version changed");
	*nb = c->blob;
	*nlen = c->len;
	*ttl_us = c->ttl_us;
	return 1;
}

/* Store blob at key if its version is still `version` (0: absent).
 * DRL_ECONFLICT when it changed, DRL_ESTORE on a counter or when creating
 * the key would pass max_keys. ttl_us <= 0 stores and expires at once. */
static int mem_cas(drl_backend *b, drl_bytes key, const void *blob, size_t len,
		   uint64_t version, int64_t ttl_us, drl_error *err)
{
	int rc = check_key(key, err);
	if (rc)
		return rc;
	if (blob == NULL && len > 0)
		return drl_error_set(err, DRL_EINVAL,
				     "memory store: NULL blob");
	cas_arg c = {blob, len, version, ttl_us};
	return locked_write((store *)b, key, cas_decide, &c, err);
}

/* An update: the caller's step. */
typedef struct update_arg {
	drl_update_fn fn;
	void *arg;
} update_arg;

static int update_decide(void *arg, const entry *e, const void **nb,
			 size_t *nlen, int64_t *ttl_us, drl_error *err)
{
	const update_arg *u = arg;
	int rc = u->fn(u->arg, e ? e->blob : NULL, e ? e->bloblen : 0, nb, nlen,
		       ttl_us);
	if (rc > 0 && (rc != 1 || (*nb == NULL && *nlen > 0)))
		return drl_error_set(err, DRL_EINTERNAL,
				     "memory store: update step returned %d "
				     "with a %s blob",
				     rc, *nb ? "non-NULL" : "NULL");
	return rc;
}

/*
 * Run fn on the blob at key under the key's shard lock: fn sees the
 * current blob (NULL, 0 when absent). fn returning 1 stores its blob with
 * its TTL and a new version; 0 leaves everything; a negative value is
 * returned as is. fn must not call this store (it would deadlock). When
 * storing needs a new key and max_keys is reached, expired keys are
 * reclaimed and fn runs once more on the state then current.
 */
static int mem_update(drl_backend *b, drl_bytes key, drl_update_fn fn,
		      void *arg, drl_error *err)
{
	int rc = check_key(key, err);
	if (rc)
		return rc;
	if (fn == NULL)
		return drl_error_set(err, DRL_EINVAL, "memory store: NULL fn");
	update_arg u = {fn, arg};
	return locked_write((store *)b, key, update_decide, &u, err);
}

/*
 * Delete the n keys in one atomic step: every shard they live in is
 * locked (in index order, so two deletes cannot deadlock) before any is
 * deleted, so a call on any of the keys sees all of them or none gone.
 */
static int mem_del(drl_backend *b, size_t n, const drl_bytes *keys,
		   drl_error *err)
{
	store *st = (store *)b;
	if (n > 0 && keys == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "memory store: NULL keys");
	for (size_t i = 0; i < n; i++) {
		int rc = check_key(keys[i], err);
		if (rc)
			return rc;
	}
	bool *locked = calloc(st->nshards, sizeof *locked);
	if (locked == NULL)
		return drl_error_set(err, DRL_ENOMEM,
				     "memory store: out of memory");
	for (size_t i = 0; i < n; i++)
		locked[shard_of(st, hash_key(st, keys[i])) - st->shards] = true;
	for (size_t j = 0; j < st->nshards; j++)
		if (locked[j])
			pthread_mutex_lock(&st->shards[j].lock);
	int64_t now = mono_us();
	for (size_t i = 0; i < n; i++) {
		uint64_t h = hash_key(st, keys[i]);
		shard *sh = shard_of(st, h);
		entry *e = lookup(st, sh, h, keys[i], now);
		if (e)
			drop(st, sh, e);
	}
	for (size_t j = st->nshards; j-- > 0;)
		if (locked[j])
			pthread_mutex_unlock(&st->shards[j].lock);
	free(locked);
	return 0;
}

/* Free every entry, table and lock, and the store itself. */
static void mem_destroy(drl_backend *b)
{
	store *st = (store *)b;
	if (!st)
		return;
	for (size_t i = 0; i < st->nshards; i++) {
		shard *sh = &st->shards[i];
		for (size_t j = 0; sh->slots && j < sh->nslots; j++) {
			entry *e = &sh->slots[j];
			if (e->hash == 0)
				continue;
			free(e->blob);
			if (e->keylen > KEY_INLINE)
				free(e->longkey);
		}
		free(sh->slots);
		pthread_mutex_destroy(&sh->lock);
	}
	free(st->shards);
	for (size_t i = 0; st->stripes && i < GROUP_STRIPES; i++) {
		/* the entries were freed above without giving their
		 * counts back: free the groups they left */
		stripe *sp = &st->stripes[i];
		for (size_t j = 0; sp->buckets && j < sp->nbuckets; j++)
			for (group *g = sp->buckets[j], *next; g; g = next) {
				next = g->next;
				free(g);
			}
		free(sp->buckets);
		pthread_mutex_destroy(&sp->lock);
	}
	free(st->stripes);
	free(st);
}

static const drl_backend memory_vtable = {
	/* version */ 9, /* the vtable version this file fills */
	/* caps */ DRL_CAP_COUNTER | DRL_CAP_CAS | DRL_CAP_UPDATE |
		DRL_CAP_INPROC,
	/* name */ "memory",
	/* destroy */ mem_destroy,
	/* incr */ mem_incr,
	/* get_many */ mem_get_many,
	/* load */ mem_load,
	/* cas */ mem_cas,
	/* update */ mem_update,
	/* eval */ NULL,
	/* now */ NULL,
	/* del */ mem_del,
	/* eval_start */ NULL,
	/* add_read */ NULL,
	/* add_read_start */ NULL,
	/* chan_open .. chan_close */ NULL,
	NULL,
	NULL,
	NULL,
	/* trim */ NULL,
	/* trim_start */ NULL,
	/* eval_policy */ NULL,
};

/* ---- opening ----------------------------------------------------------- */

/* A seed no client can predict (falls back to clock and address bits). */
static uint64_t random_seed(const void *salt)
{
	uint64_t s = 0;
	if (getentropy(&s, sizeof s) != 0 || s == 0) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		s = ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^
		    (uint64_t)(uintptr_t)salt;
	}
	return s;
}

/* Make st's group table (GROUP_STRIPES empty stripes). Returns 0, or -1
 * when out of memory (what was made is freed by mem_destroy()). */
static int stripes_init(store *st)
{
	st->stripes = aligned_alloc(CACHELINE, GROUP_STRIPES * sizeof(stripe));
	if (st->stripes == NULL)
		return -1;
	memset(st->stripes, 0, GROUP_STRIPES * sizeof(stripe));
	for (size_t i = 0; i < GROUP_STRIPES; i++)
		pthread_mutex_init(&st->stripes[i].lock, NULL);
	for (size_t i = 0; i < GROUP_STRIPES; i++) {
		stripe *sp = &st->stripes[i];
		sp->buckets = calloc(GROUP_BUCKETS_MIN, sizeof *sp->buckets);
		sp->nbuckets = GROUP_BUCKETS_MIN;
		if (sp->buckets == NULL)
			return -1;
	}
	return 0;
}

/* Open a memory store from a parsed memory:// URI; see memory.h. */
int drl__memory_open(drl_backend **out, drl_uri *uri, drl_error *err)
{
	if (out == NULL || uri == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl__memory_open: NULL argument");
	*out = NULL;
	if (drl_uri_user(uri) || drl_uri_password(uri))
		return drl_error_set(err, DRL_EINVAL,
				     "memory:// takes no user or password");
	if (drl_uri_hosts(uri))
		return drl_error_set(err, DRL_EINVAL,
				     "memory:// takes no host (got \"%.64s\"); "
				     "write memory:// or memory://?shards=16",
				     drl_uri_hosts(uri));
	if (drl_uri_path(uri))
		return drl_error_set(err, DRL_EINVAL,
				     "memory:// takes no path (got \"%.64s\"); "
				     "write memory:// or memory://?shards=16",
				     drl_uri_path(uri));
	int64_t shards, max_keys, group_max_keys;
	int rc = drl_uri_option_int(uri, "shards", 1, SHARDS_MAX,
				    SHARDS_DEFAULT, &shards, err);
	if (rc)
		return rc;
	if ((shards & (shards - 1)) != 0)
		return drl_error_set(err, DRL_EINVAL,
				     "URI option shards=%" PRId64 ": must be "
				     "a power of two in [1, %d]",
				     shards, SHARDS_MAX);
	rc = drl_uri_option_int(uri, "max_keys", 0, MAX_KEYS_MAX, 0, &max_keys,
				err);
	if (rc)
		return rc;
	rc = drl_uri_option_int(uri, "group_max_keys", 0, MAX_KEYS_MAX, 0,
				&group_max_keys, err);
	if (rc)
		return rc;
	rc = drl_uri_check_all_used(uri, err);
	if (rc)
		return rc;

	store *st = calloc(1, sizeof *st);
	if (!st)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	st->parent = memory_vtable;
	st->seed = random_seed(st);
	st->nshards = (size_t)shards;
	while ((1u << st->shard_bits) < st->nshards)
		st->shard_bits++;
	st->max_keys = (size_t)max_keys;
	atomic_init(&st->nkeys, 0);
	size_t bytes = st->nshards * sizeof(shard);
	st->shards = aligned_alloc(CACHELINE, bytes);
	if (!st->shards) {
		free(st);
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	}
	memset(st->shards, 0, bytes);
	/* Critical sections are tens of nanoseconds: spin a little before
	 * sleeping (glibc's adaptive mutex) where available. */
	pthread_mutexattr_t attr;
	pthread_mutexattr_init(&attr);
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
	for (size_t i = 0; i < st->nshards; i++) {
		shard *sh = &st->shards[i];
		sh->slots = slots_new(SLOTS_MIN);
		if (!sh->slots || pthread_mutex_init(&sh->lock, &attr) != 0) {
			free(sh->slots);
			sh->slots = NULL;
			st->nshards = i; /* destroy only what was set up */
			pthread_mutexattr_destroy(&attr);
			mem_destroy(&st->parent);
			return drl_error_set(err, DRL_ENOMEM, "out of memory");
		}
		sh->nslots = SLOTS_MIN;
		sh->min_expires = INT64_MAX;
		sh->lap_min = INT64_MAX;
	}
	pthread_mutexattr_destroy(&attr);
	if (group_max_keys > 0 && stripes_init(st) != 0) {
		mem_destroy(&st->parent);
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	}
	st->group_max_keys = (size_t)group_max_keys;
	*out = &st->parent;
	return 0;
}

/* Test hook; see memory.h. */
size_t drl__memory_count(drl_backend *b)
{
	store *st = (store *)b;
	size_t n = 0;
	for (size_t i = 0; i < st->nshards; i++) {
		pthread_mutex_lock(&st->shards[i].lock);
		n += st->shards[i].count;
		pthread_mutex_unlock(&st->shards[i].lock);
	}
	return n;
}
