/*
 * The Redis Cluster store: a router over one Redis store per node.
 *
 * Each node is a store of backends/redis/store.c (its own connection pool,
 * WATCH holds, script cache), opened lazily from the URI's options; this
 * file only decides which node a call goes to. hiredis stays in store.c
 * and its connection layer, conn.c (and its scripts,
 * script.c).
 *
 * Routing. A key's slot is CRC16 of its {hash tag} (the core puts every
 * key of one limit and user key in one tag, so a decision's keys share a
 * slot and no call can meet CROSSSLOT) modulo 16384. The slot map (slot
 * -> node) is read with CLUSTER SLOTS from any node that answers: at
 * open (unless connect=lazy), and again when a node says MOVED, when a
 * node cannot be reached (it may have failed over), or when the cluster
 * is down. Reads of the map are lock-free (one relaxed atomic per slot);
 * a refresh is done by one thread at a time, at most every REFRESH_US
 * unless forced.
 *
 * Redirects. MOVED: the slot now lives elsewhere; the map learns the new
 * owner at once (a refresh follows) and the call goes there. ASK: the
 * slot is being migrated and this key is on the importing node; the call
 * is sent there once, behind ASKING (conn.c puts an ASKING before
 * each of the call's commands). TRYAGAIN (a multi-key script met keys on
 * both sides of a migration): wait a little and try again. Each is
 * bounded: REDIRECTS_MAX per call, and the call's timeout_ms overall.
 *
 * Exactness across a migration: every command a call sends is for one
 * key, or (a script) for keys of one slot, which Redis runs only where
 * all of them are. get_many's GETs are separate commands: when one of
 * them is redirected, each key is routed on its own, because the keys of
 * a slot being migrated may be on either side (reading a key from the
 * wrong side would read 0 and over-admit).
 *
 * WATCH/MULTI (tx=watch): cas() must run on the connection its load()
 * watched, i.e. on the node that served the load (with ASKING if the load
 * was asked). The calling thread remembers that node; a cas() that is
 * redirected gives DRL_ECONFLICT, so the optimistic loop loads again
 * from the right node.
 *
 * Failover: a call to a node that cannot be reached refreshes the map
 * (rate-limited) and goes to the slot's new master when there is one;
 * otherwise the error (DRL_EUNAVAILABLE, DRL_ETIMEDOUT) is returned and
 * the limiter's on_error policy applies. Writes a master acknowledged but
 * had not replicated when it died are lost with it (Redis replication is
 * asynchronous): docs/failure.md has the bound.
 *
 * Threading: as store.c, every method from any number of threads.
 */
#include "redis.h"
#include "cluster.h"
#include "forward.h"
#include "internal.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NSLOTS 16384
#define NODES_MAX 256     /* masters and replicas a store keeps track of */
#define REDIRECTS_MAX 8   /* redirects, retries and refreshes per call */
#define REFRESH_US 100000 /* unforced refreshes at most this often */
#define TRYAGAIN_US 2000  /* first wait after TRYAGAIN or CLUSTERDOWN */
#define HOST_MAX 255

typedef struct cnode {
	drl_backend *b; /* the node's store (store.c) */
	char host[HOST_MAX + 1];
	int port;
} cnode;

typedef struct cstore {
	drl_backend parent; /* first: the core sees only this */
	uint64_t id;        /* never reused: threads' load records */
	drl_backend *tmpl;  /* the URI's options, copied into each node */
	const char *prefix;
	size_t prefixlen;
	int64_t timeout_ms;

	/* Nodes are only ever added (until destroy), so an index read from
	 * the slot map stays valid. nnodes is published after the slot. */
	pthread_mutex_t nodes_mu;
	cnode *nodes[NODES_MAX];
	_Atomic size_t nnodes;

	/* slot -> node index + 1; 0: not known. */
	_Atomic uint16_t slot[NSLOTS];

	pthread_mutex_t refresh_mu;
	_Atomic int64_t refreshed_at; /* monotonic µs of the last refresh */
	_Atomic size_t refresh_from;  /* node to ask first, rotating */
} cstore;

/* The node's server could not be reached: what may mean a failover. */
static bool is_unreachable(int rc)
{
	return rc == DRL_ETIMEDOUT || rc == DRL_EUNAVAILABLE;
}

static _Atomic uint64_t last_store_id;

/* Where the calling thread's last load() went, for its cas(). */
static _Thread_local struct {
	uint64_t store_id;
	size_t node;
	bool asking;
} load_at;

/* ---- slots -------------------------------------------------------------- */

static uint16_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), as Redis Cluster
 * specifies; 12 lines, so no library for it. */
static void crc_init(void)
{
	for (unsigned i = 0; i < 256; i++) {
		uint16_t c = (uint16_t)(i << 8);
		for (int b = 0; b < 8; b++)
			c = (uint16_t)(c & 0x8000 ? (c << 1) ^ 0x1021 : c << 1);
		crc_table[i] = c;
	}
}

static uint16_t crc16(uint16_t crc, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		crc = (uint16_t)((crc << 8) ^ crc_table[(crc >> 8) ^ p[i]]);
	return crc;
}

int drl__redis_cluster_slot(const char *prefix, size_t plen, const void *key,
			    size_t keylen)
{
	pthread_once(&crc_once, crc_init);
	/* The tag: from the first '{' of the whole key to the next '}',
	 * when that holds at least one byte. The prefix holds no brace
	 * (checked at open), so the tag can only be in the key. */
	const unsigned char *k = key;
	const unsigned char *open = keylen ? memchr(k, '{', keylen) : NULL;
	if (open) {
		size_t from = (size_t)(open - k) + 1;
		const unsigned char *close =
			memchr(k + from, '}', keylen - from);
		if (close && close > k + from)
			return crc16(0, k + from, (size_t)(close - k) - from) &
			       (NSLOTS - 1);
	}
	uint16_t crc = crc16(0, (const unsigned char *)prefix, plen);
	return crc16(crc, k, keylen) & (NSLOTS - 1);
}

static int key_slot(const cstore *cs, drl_bytes key)
{
	return drl__redis_cluster_slot(cs->prefix, cs->prefixlen, key.data,
				       key.len);
}

/* The end of the run of keys from keys[i] on that share its slot
 * (*slot). */
static size_t slot_run(const cstore *cs, size_t n, const drl_bytes *keys,
		       size_t i, int *slot)
{
	*slot = key_slot(cs, keys[i]);
	size_t j = i + 1;
	while (j < n && key_slot(cs, keys[j]) == *slot)
		j++;
	return j;
}

/* ---- nodes -------------------------------------------------------------- */

static void sleep_us(int64_t us)
{
	struct timespec ts = {(time_t)(us / 1000000),
			      (long)(us % 1000000) * 1000};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* The index of the node at host:port, added (not connected) when new. */
static int node_index(cstore *cs, const char *host, int port, size_t *idx,
		      drl_error *err)
{
	if (strlen(host) > HOST_MAX)
		return drl_error_set(err, DRL_ESTORE,
				     "redis cluster: node host name of %zu "
				     "bytes",
				     strlen(host));
	pthread_mutex_lock(&cs->nodes_mu);
	size_t n = atomic_load_explicit(&cs->nnodes, memory_order_relaxed);
	for (size_t i = 0; i < n; i++) {
		if (cs->nodes[i]->port == port &&
		    strcmp(cs->nodes[i]->host, host) == 0) {
			pthread_mutex_unlock(&cs->nodes_mu);
			*idx = i;
			return 0;
		}
	}
	int rc = 0;
	cnode *nd = NULL;
	if (n == NODES_MAX)
		rc = drl_error_set(err, DRL_ESTORE,
				   "redis cluster: more than %d nodes",
				   NODES_MAX);
	else if ((nd = calloc(1, sizeof *nd)) == NULL)
		rc = drl_error_set(err, DRL_ENOMEM, "out of memory");
	else
		rc = drl__redis_node(&nd->b, cs->tmpl, host, port, err);
	if (rc == 0) {
		memcpy(nd->host, host, strlen(host) + 1);
		nd->port = port;
		cs->nodes[n] = nd;
		atomic_store_explicit(&cs->nnodes, n + 1, memory_order_release);
		*idx = n;
	} else {
		free(nd);
	}
	pthread_mutex_unlock(&cs->nodes_mu);
	return rc;
}

static cnode *node_at(cstore *cs, size_t i)
{
	(void)atomic_load_explicit(&cs->nnodes, memory_order_acquire);
	return cs->nodes[i];
}

/* The node serving `slot` (index), or -1 when the map does not say. */
static long slot_owner(cstore *cs, int slot)
{
	unsigned v =
		atomic_load_explicit(&cs->slot[slot], memory_order_acquire);
	return v ? (long)v - 1 : -1;
}

static void set_owner(cstore *cs, int slot, size_t idx)
{
	atomic_store_explicit(&cs->slot[slot], (uint16_t)(idx + 1),
			      memory_order_release);
}

/* ---- the slot map ------------------------------------------------------- */

typedef struct map_build {
	cstore *cs;
	uint16_t map[NSLOTS];
	size_t covered;
	drl_error *err;
} map_build;

static int on_range(void *arg, int first, int last, const char *host, int port,
		    bool master)
{
	map_build *m = arg;
	size_t idx;
	/* Replicas are added too: after their master dies they are where
	 * the next map comes from. */
	int rc = node_index(m->cs, host, port, &idx, m->err);
	if (rc || !master)
		return rc;
	for (int s = first; s <= last; s++) {
		if (m->map[s] == 0)
			m->covered++;
		m->map[s] = (uint16_t)(idx + 1);
	}
	return 0;
}

/*
 * Read the slot map from the first node that answers, starting from a
 * rotating one, trying nodes for at most timeout_ms (each attempt is
 * bounded by it too, so a refresh takes at most about twice that). Unless
 * `force`, nothing happens when another thread is refreshing or the last
 * refresh is younger than REFRESH_US. Slots the answer leaves out keep
 * their old owner.
 */
static int refresh(cstore *cs, bool force, drl_error *err)
{
	if (!force) {
		int64_t last = atomic_load(&cs->refreshed_at);
		if (last && drl_mono_us() - last < REFRESH_US)
			return 0;
		if (pthread_mutex_trylock(&cs->refresh_mu) != 0)
			return 0;
	} else {
		pthread_mutex_lock(&cs->refresh_mu);
	}
	map_build *m = calloc(1, sizeof *m);
	if (m == NULL) {
		pthread_mutex_unlock(&cs->refresh_mu);
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	}
	m->cs = cs;
	int rc = DRL_EUNAVAILABLE;
	drl_error last_err = {0};
	size_t n = atomic_load_explicit(&cs->nnodes, memory_order_acquire);
	size_t first = atomic_fetch_add(&cs->refresh_from, 1);
	int64_t give_up = drl_mono_us() + cs->timeout_ms * 1000;
	for (size_t k = 0; k < n && (k == 0 || drl_mono_us() < give_up); k++) {
		cnode *nd = node_at(cs, (first + k) % n);
		memset(m->map, 0, sizeof m->map);
		m->covered = 0;
		m->err = &last_err;
		rc = drl__redis_cluster_slots(nd->b, on_range, m, &last_err);
		if (rc == 0 && m->covered > 0)
			break;
		if (rc == 0)
			rc = drl_error_set(&last_err, DRL_EUNAVAILABLE,
					   "redis cluster: node %s:%d serves "
					   "no slot",
					   nd->host, nd->port);
		if (rc == DRL_ENOMEM)
			break;
	}
	if (rc == 0) {
		for (int s = 0; s < NSLOTS; s++)
			if (m->map[s])
				set_owner(cs, s, (size_t)m->map[s] - 1);
	} else {
		drl_error_set(err, rc == DRL__EREDIRECT ? DRL_EUNAVAILABLE : rc,
			      "redis cluster: no node gave the slot map (%s)",
			      last_err.message);
		rc = rc == DRL__EREDIRECT ? DRL_EUNAVAILABLE : rc;
	}
	atomic_store(&cs->refreshed_at, drl_mono_us());
	free(m);
	pthread_mutex_unlock(&cs->refresh_mu);
	return rc;
}

/* ---- routing ------------------------------------------------------------ */

/* One call on one node's store. */

/*
 * Run fn on the node serving `slot`, following MOVED, ASK, TRYAGAIN and
 * CLUSTERDOWN and a failed-over master, within REDIRECTS_MAX steps and
 * timeout_ms. With split_ok (scripts), TRYAGAIN returns
 * DRL_BACKEND_ESPLIT at once. *served (may be NULL) gets the node that answered and
 * *asked whether it was asked (ASKING). A redirect left over at the end
 * becomes DRL_ESTORE (MOVED, ASK) or DRL_EUNAVAILABLE (the cluster is
 * down), with Redis's text.
 */
static int route(cstore *cs, int slot, drl__redis_fwd_fn fn, void *arg,
		 bool split_ok, size_t *served, bool *asked, drl_error *err)
{
	int64_t deadline = drl_mono_us() + cs->timeout_ms * 1000;
	int64_t wait = TRYAGAIN_US;
	bool asking = false;
	size_t target = 0;
	int rc = 0;
	for (int step = 0;; step++) {
		long idx = asking ? (long)target : slot_owner(cs, slot);
		if (idx < 0) {
			rc = refresh(cs, true, err);
			if (rc)
				return rc;
			idx = slot_owner(cs, slot);
			if (idx < 0)
				return drl_error_set(err, DRL_EUNAVAILABLE,
						     "redis cluster: no node "
						     "serves slot %d",
						     slot);
		}
		drl__redis_asking(asking);
		rc = fn(node_at(cs, (size_t)idx)->b, arg, err);
		drl__redis_asking(false);
		if (served)
			*served = (size_t)idx;
		if (asked)
			*asked = asking;
		asking = false;
		bool last =
			step + 1 >= REDIRECTS_MAX || drl_mono_us() >= deadline;
		if (rc == DRL__EREDIRECT) {
			const drl__redis_redirect *r =
				drl__redis_last_redirect();
			int kind = r->kind;
			if (last) {
				/* err has Redis's text; the code says what
				 * is left: the cluster down is unreachable,
				 * a redirect loop an error. */
				rc = kind == DRL__REDIS_CLUSTERDOWN
					     ? DRL_EUNAVAILABLE
					     : DRL_ESTORE;
				if (err)
					err->code = rc;
				return rc;
			}
			if (kind == DRL__REDIS_MOVED ||
			    kind == DRL__REDIS_ASK) {
				size_t to;
				int irc = node_index(cs, r->host, r->port, &to,
						     err);
				if (irc)
					return irc;
				if (kind == DRL__REDIS_ASK) {
					asking = true;
					target = to;
				} else {
					set_owner(cs, r->slot, to);
					(void)refresh(cs, false, NULL);
				}
				continue;
			}
			/* A script's keys are split by a migration: the
			 * core does without it (DRL_BACKEND_ESPLIT). */
			if (kind == DRL__REDIS_TRYAGAIN && split_ok)
				return DRL_BACKEND_ESPLIT;
			/* TRYAGAIN, CLUSTERDOWN: wait, look again. */
			if (kind == DRL__REDIS_CLUSTERDOWN)
				(void)refresh(cs, false, NULL);
			sleep_us(wait);
			wait *= 2;
			continue;
		}
		if (!is_unreachable(rc) || last)
			return rc;
		/* The node may have failed over: does the map say so? */
		if (refresh(cs, false, NULL) != 0 ||
		    slot_owner(cs, slot) == idx)
			return rc;
	}
}

/* ---- the vtable --------------------------------------------------------- */

static int c_incr(drl_backend *b, drl_bytes key, int64_t delta, int64_t ttl_us,
		  int64_t *value, drl_error *err)
{
	cstore *cs = (cstore *)b;
	drl__redis_fwd a = {
		.key = key, .delta = delta, .ttl_us = ttl_us, .values = value};
	return route(cs, key_slot(cs, key), drl__redis_fwd_incr, &a, false,
		     NULL, NULL, err);
}

/* Keys of one slot together (one round trip); when that is redirected,
 * key by key (see the top of the file: the keys of a slot in migration
 * may be on either side). Keys of different slots: run by run. */
static int c_get_many(drl_backend *b, size_t n, const drl_bytes *keys,
		      int64_t *values, drl_error *err)
{
	cstore *cs = (cstore *)b;
	size_t i = 0;
	while (i < n) {
		int slot;
		size_t j = slot_run(cs, n, keys, i, &slot);
		drl__redis_fwd a = {
			.n = j - i, .keys = keys + i, .values = values + i};
		long owner = slot_owner(cs, slot);
		drl_error e1 = {0};
		int rc = DRL__EREDIRECT;
		if (owner >= 0)
			rc = drl__redis_fwd_get_many(
				node_at(cs, (size_t)owner)->b, &a, &e1);
		if (rc == DRL__EREDIRECT || is_unreachable(rc)) {
			/* The long way, with every redirect followed. */
			rc = 0;
			for (size_t k = i; k < j && rc == 0; k++) {
				drl__redis_fwd one = {.n = 1,
						      .keys = keys + k,
						      .values = values + k};
				rc = route(cs, slot, drl__redis_fwd_get_many,
					   &one, false, NULL, NULL, err);
			}
		} else if (rc && err) {
			*err = e1;
		}
		if (rc)
			return rc;
		i = j;
	}
	return 0;
}

static int c_load(drl_backend *b, drl_bytes key, void *buf, size_t cap,
		  size_t *len, uint64_t *version, drl_error *err)
{
	cstore *cs = (cstore *)b;
	drl__redis_fwd a =
		drl__redis_fwd_load_args(key, buf, cap, len, version);
	size_t node = 0;
	bool asked = false;
	load_at.store_id = 0;
	int rc = route(cs, key_slot(cs, key), drl__redis_fwd_load, &a, false,
		       &node, &asked, err);
	if (rc == 0) {
		load_at.store_id = cs->id;
		load_at.node = node;
		load_at.asking = asked;
	}
	return rc;
}

/* On the node that served this thread's load() (its WATCH is there); a
 * redirect means the slot moved since: DRL_ECONFLICT, load again. */
static int c_cas(drl_backend *b, drl_bytes key, const void *blob, size_t len,
		 uint64_t version, int64_t ttl_us, drl_error *err)
{
	cstore *cs = (cstore *)b;
	long idx;
	bool asking = false;
	if (load_at.store_id == cs->id) {
		idx = (long)load_at.node;
		asking = load_at.asking;
	} else {
		idx = slot_owner(cs, key_slot(cs, key));
	}
	load_at.store_id = 0;
	if (idx < 0)
		return drl_error_set(err, DRL_ECONFLICT,
				     "redis cluster: cas without a load");
	drl_backend *node = node_at(cs, (size_t)idx)->b;
	drl__redis_asking(asking);
	int rc = node->cas(node, key, blob, len, version, ttl_us, err);
	drl__redis_asking(false);
	if (rc != DRL__EREDIRECT)
		return rc;
	const drl__redis_redirect *r = drl__redis_last_redirect();
	if (r->kind == DRL__REDIS_MOVED) {
		size_t to;
		if (node_index(cs, r->host, r->port, &to, NULL) == 0)
			set_owner(cs, r->slot, to);
	}
	return drl_error_set(err, DRL_ECONFLICT,
			     "redis cluster: the key's slot moved between "
			     "load and cas");
}

/* A script's keys must share a slot (Redis would answer CROSSSLOT): the
 * core's do, since they share a hash tag; anything else is refused
 * before it is sent. */
static int c_eval(drl_backend *b, const drl_script *script, size_t nkeys,
		  const drl_bytes *keys, size_t nargs, const int64_t *args,
		  int64_t *out, size_t nout, size_t *nret, drl_error *err)
{
	cstore *cs = (cstore *)b;
	if (nkeys == 0)
		return drl_error_set(err, DRL_EINVAL,
				     "redis cluster: a script without keys "
				     "has no slot");
	int slot = key_slot(cs, keys[0]);
	for (size_t i = 1; i < nkeys; i++)
		if (key_slot(cs, keys[i]) != slot)
			return drl_error_set(err, DRL_EINVAL,
					     "redis cluster: a script's keys "
					     "span hash slots");
	drl__redis_fwd a = drl__redis_fwd_eval_args(script, nkeys, keys, nargs,
						    args, out, nout, nret);
	return route(cs, slot, drl__redis_fwd_eval, &a, true, NULL, NULL, err);
}

/* A policy's calls, one key each, all in one slot (the core's keys of
 * one user key share its hash tag, and prefixes with braces are
 * refused): DRL_ENOTSUP otherwise, nothing sent, and the core decides
 * limit by limit. */
static int c_eval_policy(drl_backend *b, drl_channel *ch, size_t n,
			 const drl_script_call *calls, int64_t *out,
			 size_t nout, size_t *nret, drl_eval_done_fn done,
			 void *arg, drl_error *err)
{
	cstore *cs = (cstore *)b;
	(void)ch, (void)arg;
	if (done != NULL || n == 0 || calls[0].nkeys == 0)
		return DRL_ENOTSUP; /* blocking only (no DRL_CAP_POLICY_START) */
	int slot = key_slot(cs, calls[0].keys[0]);
	for (size_t i = 1; i < n; i++)
		if (calls[i].nkeys == 0 ||
		    key_slot(cs, calls[i].keys[0]) != slot)
			return DRL_ENOTSUP;
	drl__redis_fwd a = {
		.n = n, .calls = calls, .out = out, .nout = nout, .nret = nret};
	return route(cs, slot, drl__redis_fwd_policy, &a, true, NULL, NULL,
		     err);
}

/* One group's counters: one key (the group's hash), one slot. */
static int c_trim(drl_backend *b, size_t n, const drl_bytes *keys,
		  int64_t ttl_us, drl_error *err)
{
	cstore *cs = (cstore *)b;
	if (n == 0 || keys == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "redis cluster: trim of no keys");
	drl__redis_fwd a = {.n = n, .keys = keys, .ttl_us = ttl_us};
	return route(cs, key_slot(cs, keys[0]), drl__redis_fwd_trim, &a, false,
		     NULL, NULL, err);
}

/* The keys of one slot in one DEL, atomic (the core's keys of one reset
 * share a hash tag, so they are one DEL); keys of different slots: run by
 * run, each atomic on its own. When a migration splits a slot's keys
 * (TRYAGAIN), key by key, each routed on its own: a decision may then see
 * some of the keys gone before the others. */
static int c_del(drl_backend *b, size_t n, const drl_bytes *keys,
		 drl_error *err)
{
	cstore *cs = (cstore *)b;
	size_t i = 0;
	while (i < n) {
		int slot;
		size_t j = slot_run(cs, n, keys, i, &slot);
		drl__redis_fwd a = {.n = j - i, .keys = keys + i};
		int rc = route(cs, slot, drl__redis_fwd_del, &a, true, NULL,
			       NULL, err);
		if (rc == DRL_BACKEND_ESPLIT) {
			rc = 0;
			for (size_t k = i; k < j && rc == 0; k++) {
				drl__redis_fwd one = {.n = 1, .keys = keys + k};
				rc = route(cs, slot, drl__redis_fwd_del, &one,
					   false, NULL, NULL, err);
			}
		}
		if (rc)
			return rc;
		i = j;
	}
	return 0;
}

/* clock=server: the clock of slot 0's master, so every client reads one
 * clock (until that master fails over). */
static int c_now(drl_backend *b, int64_t *now_us, drl_error *err)
{
	drl__redis_fwd a = {.values = now_us};
	return route((cstore *)b, 0, drl__redis_fwd_now, &a, false, NULL, NULL,
		     err);
}

static void c_destroy(drl_backend *b)
{
	cstore *cs = (cstore *)b;
	if (cs == NULL)
		return;
	size_t n = atomic_load(&cs->nnodes);
	for (size_t i = 0; i < n; i++) {
		cs->nodes[i]->b->destroy(cs->nodes[i]->b);
		free(cs->nodes[i]);
	}
	if (cs->tmpl)
		cs->tmpl->destroy(cs->tmpl);
	pthread_mutex_destroy(&cs->nodes_mu);
	pthread_mutex_destroy(&cs->refresh_mu);
	free(cs);
}

/* ---- open --------------------------------------------------------------- */

/* The seeds "host:port[,host:port...]" ("[v6]:port" too) as nodes. */
static int add_seeds(cstore *cs, const char *hosts, drl_error *err)
{
	if (hosts == NULL || hosts[0] == '\0')
		return drl_error_set(err, DRL_EINVAL,
				     "redis-cluster URI has no host (expected "
				     "redis-cluster://host:port[,host:port])");
	/* Not drl_hostport_list(): a seed named twice is harmless here
	 * (node_index() keeps one node), unlike a server twice in a pool. */
	const char *p = hosts;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		drl_hostport hp;
		int rc = drl_hostport_parse(p, n, 6379, "redis-cluster URI",
					    &hp, err);
		if (rc)
			return rc;
		size_t idx;
		rc = node_index(cs, hp.host, hp.port, &idx, err);
		if (rc)
			return rc;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

static const drl_backend c_methods = {
	.destroy = c_destroy,
	.incr = c_incr,
	.get_many = c_get_many,
	.load = c_load,
	.cas = c_cas,
	.eval = c_eval,
	.now = c_now,
	.del = c_del,
	.trim = c_trim,
	.eval_policy = c_eval_policy,
};

int drl__redis_cluster_open(drl_backend **out, drl_uri *uri, drl_error *err)
{
	*out = NULL;
	cstore *cs = calloc(1, sizeof *cs);
	if (cs == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	pthread_once(&crc_once, crc_init);
	pthread_mutex_init(&cs->nodes_mu, NULL);
	pthread_mutex_init(&cs->refresh_mu, NULL);
	int rc = drl__redis_template(&cs->tmpl, uri, err);
	if (rc == 0) {
		cs->prefix = drl__redis_prefix(cs->tmpl, &cs->prefixlen);
		cs->timeout_ms = drl__redis_timeout_ms(cs->tmpl);
		cs->id = atomic_fetch_add(&last_store_id, 1) + 1;
		cs->parent = *cs->tmpl; /* caps and name; slots below */
		/* No DRL_CAP_BATCH: a script's keys must share a slot. A
		 * script's keys all declared: a node routes by them, and
		 * in a migration answers ASK or TRYAGAIN by them (a key a
		 * script derived would be created on the wrong side). */
		cs->parent.caps &= ~(unsigned)DRL_CAP_BATCH;
		cs->parent.caps |= DRL_CAP_DECLARED_KEYS;
		/* no started calls: c_methods has none */
		drl__redis_fwd_methods(&cs->parent, cs->tmpl, &c_methods);
		rc = add_seeds(cs, drl_uri_hosts(uri), err);
	}
	if (rc == 0 && !drl__redis_template_lazy(cs->tmpl))
		rc = refresh(cs, true, err);
	if (rc) {
		c_destroy(&cs->parent);
		return rc;
	}
	/* Keys are spread over the masters: a store-wide breaker would shut
	 * every slot out for one dead master (docs/failure.md). */
	drl_uri_set_servers(uri, NSLOTS);
	*out = &cs->parent;
	return 0;
}
