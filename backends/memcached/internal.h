/*
 * The memcached store's parts, shared by its files: the blocking store
 * over libmemcached (backends/memcached.c) and its channels, the started
 * calls written by hand (backends/memcached/chan.c). Both map keys, TTLs
 * and counters through the functions below, so a blocking call and a
 * started one read and write the same items.
 */
#ifndef DRL_BACKENDS_MEMCACHED_INTERNAL_H
#define DRL_BACKENDS_MEMCACHED_INTERNAL_H

#include <drl/sys/backend.h>

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <libmemcached/memcached.h>
#include <libmemcached/util.h>

#define MC_KEY_MAX 250    /* memcached's key length limit */
#define MC_PREFIX_MAX 128 /* leaves room for "#" + 64 hex */
#define MC_BIAS (UINT64_C(1) << 62)
#define MC_ADD_RACE_RETRIES 16

typedef struct mc_backend {
	drl_backend parent;
	memcached_st *master; /* configuration; cloned into the pool */
	memcached_pool_st *pool;
	/* A clone of master, as the pool's handles are, never used for I/O:
	 * the channels map keys to servers with it (libmemcached 1.1.4: a
	 * clone's ketama continuum differs from its master's, and the
	 * blocking calls use clones). */
	memcached_st *hasher;
	struct timespec pool_wait; /* longest wait for a free handle */
	int64_t timeout_ms;
	bool binary;
	size_t plen;
	char prefix[MC_PREFIX_MAX + 1];
} mc_backend;

/* A store key, mapped (memcached.c's top comment), NUL-terminated. */
typedef struct mkey {
	size_t len;
	char buf[MC_KEY_MAX + 1];
} mkey;

/* Map `key` to its store key in *out. */
void drl__mc_map_key(const mc_backend *m, drl_bytes key, mkey *out);

/* The memcached expiry for ttl_us: relative seconds up to 30 days, an
 * absolute Unix time beyond. */
time_t drl__mc_expiry(int64_t ttl_us);

/* The stored (biased) text of a counter, s[0..len), as a signed value:
 * DRL_ECORRUPT when it is not a counter, DRL_ERANGE outside int64. */
int drl__mc_parse_counter(const char *s, size_t len, int64_t *value,
			  drl_error *err);

/* The value an increment by delta that left `stored` means: DRL_ERANGE
 * when memcached's decrement stopped at 0 or its increment wrapped. */
int drl__mc_incr_value(int64_t delta, uint64_t stored, int64_t *value,
		       drl_error *err);

/* The position of the server (memcached_server_instance_by_position on
 * m->hasher) that holds store key k: the blocking calls' own ketama map,
 * so both kinds of call send a key to the same server. */
uint32_t drl__mc_server_of(const mc_backend *m, const mkey *k);

/* The channel slots (chan.c; drl/sys/backend.h, DRL_CAP_CHANNEL). */
int drl__mc_chan_open(drl_backend *b, drl_channel **out, drl_error *err);
int drl__mc_chan_poll(drl_channel *ch, short *events, int64_t *deadline);
void drl__mc_chan_process(drl_channel *ch, short revents);
void drl__mc_chan_close(drl_channel *ch);
int drl__mc_add_read_start(drl_backend *b, drl_channel *ch, size_t n,
			   const drl_bytes *keys, int64_t delta, int64_t ttl_us,
			   drl_eval_done_fn done, void *arg, drl_error *err);

#endif
