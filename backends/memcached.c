/*
 * The memcached store, over libmemcached (1.1.x).
 *
 * URI, options and threading: see memcached.h. What this file decides:
 *
 * Connections. One master memcached_st holds the configuration; calls
 * borrow a clone from a libmemcachedutil pool (`pool` handles at most), as
 * a memcached_st is not thread-safe. A call that finds every handle busy
 * waits for one, up to 10 x timeout_ms (at least 1 s), then fails with
 * DRL_ETIMEDOUT. After a transport error the borrowed handle's connections
 * are closed (memcached_quit) before it goes back, so a late reply to a
 * timed-out request can never be read as the answer to the next one.
 *
 * Pools. Several servers use ketama consistent hashing. Failed servers are
 * never ejected and their keys never rehashed to the others: moving keys
 * silently would restart every limit that lives on them, and a client that
 * ejected a server would disagree with one that had not. Calls for a dead
 * server's keys fail within the timeout (at once when the connection is
 * refused); other keys carry on. The order servers are listed in does not
 * matter (ketama hashes "host:port").
 *
 * Keys. memcached keys are at most 250 bytes with no space or control
 * bytes. The store key is `prefix` + K, where K is the key handed in when
 * it is 1..(250 - prefix) bytes long, holds no byte <= 0x20 or == 0x7f,
 * and does not start with '#'; otherwise K is "#" + the lowercase hex
 * SHA-256 of the key. Every byte string thus maps to a valid key, and two
 * different keys never share state: a raw K never starts with '#', a
 * hashed one always does (and SHA-256 does not collide). The mapping does
 * not depend on the protocol, so binary and ASCII clients share state.
 *
 * Counters. memcached counters are unsigned 64-bit, decrement stops at 0
 * and increment wraps; the vtable's counters are signed (absent is 0, a
 * refund may take one below 0). So a counter holds value + 2^62 (BIAS):
 * values in (-2^62, 2^63) are exact, anything outside is DRL_ERANGE, never
 * a wrong number. With the binary protocol an increment is one round trip
 * (increment/decrement_with_initial; a missing key is created holding the
 * initial value as is, so initial = BIAS + delta; a client that loses the
 * race to create it gets NOT_STORED and sends it again). With binary=0:
 * incr or decr; on NOT_FOUND add BIAS + delta; when add loses a race, incr
 * again (bounded). memcached sets a counter's expiry when it creates it; later
 * increments keep that expiry (windows are named in keys, so the TTL given
 * at creation covers the window; the TTL only cleans up).
 *
 * add_read() is incr() then get_many() (two round trips: libmemcached
 * sends nothing without waiting for it). Its started form lives on the
 * channels (memcached/chan.c, channels=1): the async API's counter
 * decisions go out there from the caller's loop, in the text protocol
 * written by hand, on the same items. A channel-less start (ch NULL)
 * is refused: there is no I/O thread of the store's.
 *
 * Optimistic state. load() is a `gets` (the memcached CAS id is the
 * version, never 0 for a stored item), cas() with version 0 is `add`
 * (NOT_STORED: DRL_ECONFLICT), otherwise `cas` (EXISTS or NOT_FOUND:
 * DRL_ECONFLICT).
 *
 * TTLs. memcached expiries are whole seconds, and a value above 30 days
 * (2592000 s) is read as an absolute Unix time. A TTL becomes ceil(seconds)
 * + 1: the extra second covers memcached's clock, which ticks once a second,
 * so an item given N seconds may vanish up to 1 s early. Above 30 days the
 * expiry is sent as time(NULL) + seconds, on the client's clock: a client
 * whose clock is X behind the server's makes such a key expire X early,
 * which resets its limit (a full bucket) when X is a large part of the TTL.
 * Only states with TTLs over 30 days are affected (e.g. token_bucket with a
 * long refill); keep client clocks in sync (NTP) for those.
 *
 * Evictions and restarts. A server that evicts a key or restarts forgets
 * the limits stored there: those limits start over (a fresh window or a
 * full bucket), decisions carry on, no error is reported.
 *
 * Failures. A call that fails with DRL_ETIMEDOUT (or a connection lost
 * after sending) may still have been applied by the server: an increment
 * then counts although the caller saw an error, which only ever errs on the
 * side of limiting. Host names are resolved when a connection is made; that
 * lookup is not bounded by timeout_ms (use addresses where it matters).
 */
#include "memcached.h"
#include "memcached/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/sha.h>

#define DEFAULT_PORT 11211
#define SERVERS_MAX 64
#define KEY_MAX MC_KEY_MAX
#define PREFIX_MAX MC_PREFIX_MAX
#define BIAS MC_BIAS
#define RELATIVE_TTL_MAX INT64_C(2592000) /* 30 days */
#define ADD_RACE_RETRIES MC_ADD_RACE_RETRIES
#define INLINE_KEYS 16 /* get_many: no allocation up to this many keys */

/* One call: the borrowed handle and whether it must be reset. */
typedef struct call {
	mc_backend *m;
	memcached_st *mc;
	bool broken;
} call;

/* ---- keys ---------------------------------------------------------------- */

/* 1 when byte c may appear in a memcached key as is. */
static bool key_byte_ok(unsigned char c)
{
	return c > 0x20 && c != 0x7f;
}

/* Map `key` to its store key in *out (see the top of the file). */
void drl__mc_map_key(const mc_backend *m, drl_bytes key, mkey *out)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = key.data;
	bool raw = key.len >= 1 && key.len <= KEY_MAX - m->plen && p[0] != '#';

	for (size_t i = 0; raw && i < key.len; i++)
		raw = key_byte_ok(p[i]);
	memcpy(out->buf, m->prefix, m->plen);
	if (raw) {
		memcpy(out->buf + m->plen, p, key.len);
		out->len = m->plen + key.len;
	} else {
		unsigned char md[SHA256_DIGEST_LENGTH];
		char *o = out->buf + m->plen;
		SHA256(key.len ? p : (const unsigned char *)"", key.len, md);
		*o++ = '#';
		for (size_t i = 0; i < sizeof md; i++) {
			*o++ = hex[md[i] >> 4];
			*o++ = hex[md[i] & 15];
		}
		out->len = m->plen + 1 + 2 * sizeof md;
	}
	out->buf[out->len] = '\0';
}

/* ---- TTLs and counters --------------------------------------------------- */

/* The memcached expiry for ttl_us (see the top of the file): relative
 * seconds up to 30 days, an absolute Unix time beyond. */
time_t drl__mc_expiry(int64_t ttl_us)
{
	int64_t s =
		ttl_us <= 0 ? 1 : ttl_us / 1000000 + (ttl_us % 1000000 != 0);
	int64_t abs_time;

	if (s > INT64_C(1) << 40)
		s = INT64_C(1) << 40;
	s += 1; /* memcached's clock ticks once a second */
	if (s <= RELATIVE_TTL_MAX)
		return (time_t)s;
	abs_time = (int64_t)time(NULL) + s;
	/* The binary protocol carries 32 bits; 0xffffffff means "do not
	 * create" to an increment. */
	if (abs_time > (int64_t)UINT32_MAX - 1)
		abs_time = (int64_t)UINT32_MAX - 1;
	return (time_t)abs_time;
}

/* The signed value of a stored (biased) counter. DRL_ERANGE when it is
 * outside what an int64 holds. */
static int unbias(uint64_t stored, int64_t *value, drl_error *err)
{
	if (stored >= BIAS) {
		uint64_t d = stored - BIAS;
		if (d > (uint64_t)INT64_MAX)
			return drl_error_set(err, DRL_ERANGE,
					     "memcached counter above 2^63-1");
		*value = (int64_t)d;
	} else {
		*value = -(int64_t)(BIAS - stored);
	}
	return 0;
}

int drl__mc_incr_value(int64_t delta, uint64_t stored, int64_t *value,
		       drl_error *err)
{
	/* decrement stops at 0, increment wraps: both mean out of range. */
	if ((delta < 0 && stored == 0) ||
	    (delta > 0 && stored < (uint64_t)delta))
		return drl_error_set(err, DRL_ERANGE,
				     "memcached incr: counter out of the "
				     "range (-2^62, 2^63)");
	return unbias(stored, value, err);
}

uint32_t drl__mc_server_of(const mc_backend *m, const mkey *k)
{
	return memcached_generate_hash(m->hasher, k->buf, k->len);
}

/* Parse a counter as memcached stores it: decimal digits, maybe followed
 * by padding. DRL_ECORRUPT when it is anything else. */
int drl__mc_parse_counter(const char *s, size_t len, int64_t *value,
			  drl_error *err)
{
	uint64_t v = 0;
	size_t i = 0;

	while (i < len && s[i] >= '0' && s[i] <= '9') {
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			break;
		v = v * 10 + d;
		i++;
	}
	if (i == 0)
		goto bad;
	/* memcached pads in place with spaces; before 1.4.17 a binary
	 * create padded with NULs */
	for (size_t j = i; j < len; j++)
		if (s[j] != ' ' && s[j] != '\0' && s[j] != '\r' && s[j] != '\n')
			goto bad;
	return unbias(v, value, err);
bad:
	return drl_error_set(
		err, DRL_ECORRUPT,
		"memcached: a counter key holds %zu bytes that are "
		"not a counter",
		len);
}

/* ---- handles and errors -------------------------------------------------- */

/* Borrow a handle for one call. DRL_ETIMEDOUT when none frees up in time. */
static int borrow(mc_backend *m, call *c, drl_error *err)
{
	memcached_return_t rc = MEMCACHED_SUCCESS;
	struct timespec wait = m->pool_wait;

	c->m = m;
	c->broken = false;
	c->mc = memcached_pool_fetch(m->pool, &wait, &rc);
	if (c->mc != NULL)
		return 0;
	if (rc == MEMCACHED_TIMEOUT)
		return drl_error_set(err, DRL_ETIMEDOUT,
				     "memcached: no free connection within "
				     "%lld s (all pool handles busy)",
				     (long long)m->pool_wait.tv_sec);
	return drl_error_set(err, DRL_ENOMEM,
			     "memcached: cannot get a connection handle (%s)",
			     memcached_strerror(NULL, rc));
}

/* Give the handle back; close its connections first if a transport error
 * left them in an unknown state. */
static void give_back(call *c)
{
	if (c->mc == NULL)
		return;
	if (c->broken)
		memcached_quit(c->mc);
	memcached_pool_release(c->m->pool, c->mc);
	c->mc = NULL;
}

/* 1 when rc (just returned on c) means a timeout. */
static bool is_timeout(const call *c, memcached_return_t rc)
{
	return rc == MEMCACHED_TIMEOUT ||
	       (rc == MEMCACHED_ERRNO &&
		memcached_last_error_errno(c->mc) == ETIMEDOUT);
}

/* 1 when rc means the server could not be talked to at all: refused,
 * reset, closed, unreadable, or not tried (marked dead). The server's own
 * error replies (SERVER_ERROR, out of memory...) are not this. */
static bool is_unreachable(memcached_return_t rc)
{
	switch (rc) {
	case MEMCACHED_CONNECTION_FAILURE:
	case MEMCACHED_CONNECTION_SOCKET_CREATE_FAILURE:
	case MEMCACHED_HOST_LOOKUP_FAILURE:
	case MEMCACHED_WRITE_FAILURE:
	case MEMCACHED_READ_FAILURE:
	case MEMCACHED_UNKNOWN_READ_FAILURE:
	case MEMCACHED_PROTOCOL_ERROR:
	case MEMCACHED_ERRNO:
	case MEMCACHED_SERVER_MARKED_DEAD:
	case MEMCACHED_SERVER_TEMPORARILY_DISABLED:
	case MEMCACHED_NO_SERVERS:
	case MEMCACHED_PARTIAL_READ:
	case MEMCACHED_SOME_ERRORS: /* mget: a server of the keys failed */
		return true;
	default:
		return false;
	}
}

/* Turn a failed libmemcached call into DRL_ETIMEDOUT, DRL_ENOMEM,
 * DRL_EUNAVAILABLE (is_unreachable) or DRL_ESTORE with libmemcached's own
 * words, and mark the handle for a reset. `op` names the operation. */
static int store_error(call *c, memcached_return_t rc, const char *op,
		       drl_error *err)
{
	const char *text = memcached_strerror(c->mc, rc);
	const char *detail = memcached_last_error_message(c->mc);
	const char *where;
	size_t dlen;
	int code = DRL_ESTORE;

	/* The handle's last error may not be this one (libmemcached does not
	 * record every failure): then say what rc is. */
	if (detail == NULL || memcached_last_error(c->mc) != rc)
		detail = text;
	/* libmemcached writes "(0x<handle>) TEXT, host: H:P -> file.cc:N":
	 * keep "TEXT, host: H:P". */
	if (strncmp(detail, "(0x", 3) == 0 && strstr(detail, ") ") != NULL)
		detail = strstr(detail, ") ") + 2;
	where = strstr(detail, " -> ");
	dlen = where != NULL ? (size_t)(where - detail) : strlen(detail);
	if (dlen > 200)
		dlen = 200;
	if (rc == MEMCACHED_MEMORY_ALLOCATION_FAILURE)
		code = DRL_ENOMEM;
	else if (is_timeout(c, rc))
		code = DRL_ETIMEDOUT;
	else if (is_unreachable(rc))
		code = DRL_EUNAVAILABLE;
	c->broken = true;
	return drl_error_set(err, code, "memcached %s: %.*s", op, (int)dlen,
			     detail);
}

/* 0 when the last query on c left no error behind (libmemcached's mget
 * skips a server it cannot reach without saying so in its return code in
 * ASCII mode: its keys would read as absent). */
static int check_quiet(call *c, const char *op, drl_error *err)
{
	memcached_return_t last = memcached_last_error(c->mc);

	if (last == MEMCACHED_SUCCESS || last == MEMCACHED_END ||
	    last == MEMCACHED_NOTFOUND)
		return 0;
	return store_error(c, last, op, err);
}

/* ---- counters ------------------------------------------------------------ */

/* A binary increment failed with UNKNOWN_READ_FAILURE, which is how
 * libmemcached 1.1 reports both a garbled reply and memcached's "non-numeric
 * value" status. Reset the connections, then look at the key to tell the
 * two apart: DRL_ECORRUPT when it holds something that is not a counter,
 * otherwise DRL_EUNAVAILABLE, as store_error() says for any reply it cannot
 * read. (Error path only: one more round trip.) */
static int incr_binary_failed(call *c, const mkey *k, drl_error *err)
{
	memcached_return_t rc;
	size_t len = 0;
	uint32_t flags = 0;
	char *value;
	int64_t ignored;
	drl_error scratch;

	memcached_quit(c->mc);
	value = memcached_get(c->mc, k->buf, k->len, &len, &flags, &rc);
	if (value != NULL) {
		int bad = drl__mc_parse_counter(value, len, &ignored,
						&scratch) == DRL_ECORRUPT;
		free(value);
		if (bad)
			return drl_error_set(
				err, DRL_ECORRUPT,
				"memcached incr: the key holds %zu "
				"bytes that are not a counter",
				len);
	}
	c->broken = true;
	return drl_error_set(err, DRL_EUNAVAILABLE,
			     "memcached incr: unreadable reply from the "
			     "server");
}

/* Binary protocol: one round trip, creating a missing key at BIAS + delta.
 * The stored value goes to *stored. When two clients create the same key
 * at once, memcached answers the loser NOT_STORED (its create is an `add`):
 * the key exists by then, so the increment is simply sent again. */
static int incr_binary(call *c, const mkey *k, int64_t delta, time_t exp,
		       uint64_t *stored, drl_error *err)
{
	uint64_t mag =
		delta >= 0 ? (uint64_t)delta : (uint64_t)0 - (uint64_t)delta;
	memcached_return_t rc = MEMCACHED_NOTSTORED;

	for (int attempt = 0; attempt < ADD_RACE_RETRIES; attempt++) {
		if (delta >= 0)
			rc = memcached_increment_with_initial(
				c->mc, k->buf, k->len, mag, BIAS + mag, exp,
				stored);
		else
			rc = memcached_decrement_with_initial(
				c->mc, k->buf, k->len, mag, BIAS - mag, exp,
				stored);
		if (rc == MEMCACHED_SUCCESS)
			return 0;
		if (rc != MEMCACHED_NOTSTORED)
			break;
	}
	if (rc == MEMCACHED_NOTSTORED)
		return drl_error_set(err, DRL_ECONFLICT,
				     "memcached incr: the key kept appearing "
				     "and vanishing (%d attempts)",
				     ADD_RACE_RETRIES);
	if (rc == MEMCACHED_UNKNOWN_READ_FAILURE)
		return incr_binary_failed(c, k, err);
	return store_error(c, rc, "incr", err);
}

/* ASCII protocol: incr/decr; when the key is missing, add it at
 * BIAS + delta; when that add loses a race, incr again. */
static int incr_ascii(call *c, const mkey *k, int64_t delta, time_t exp,
		      uint64_t *stored, drl_error *err)
{
	uint64_t mag =
		delta >= 0 ? (uint64_t)delta : (uint64_t)0 - (uint64_t)delta;
	uint64_t initial = delta >= 0 ? BIAS + mag : BIAS - mag;
	char text[24];
	int n = snprintf(text, sizeof text, "%" PRIu64, initial);

	if (mag > UINT32_MAX)
		return drl_error_set(err, DRL_ERANGE,
				     "memcached incr: with binary=0 a delta "
				     "must be within +-4294967295");
	for (int attempt = 0; attempt < ADD_RACE_RETRIES; attempt++) {
		memcached_return_t rc;
		if (delta >= 0)
			rc = memcached_increment(c->mc, k->buf, k->len,
						 (uint32_t)mag, stored);
		else
			rc = memcached_decrement(c->mc, k->buf, k->len,
						 (uint32_t)mag, stored);
		if (rc == MEMCACHED_SUCCESS)
			return 0;
		if (rc == MEMCACHED_CLIENT_ERROR)
			return drl_error_set(err, DRL_ECORRUPT,
					     "memcached incr: the key holds "
					     "something that is not a counter");
		if (rc != MEMCACHED_NOTFOUND)
			return store_error(c, rc, "incr", err);
		rc = memcached_add(c->mc, k->buf, k->len, text, (size_t)n, exp,
				   0);
		if (rc == MEMCACHED_SUCCESS) {
			*stored = initial;
			return 0;
		}
		if (rc != MEMCACHED_NOTSTORED && rc != MEMCACHED_DATA_EXISTS)
			return store_error(c, rc, "add", err);
	}
	return drl_error_set(err, DRL_ECONFLICT,
			     "memcached incr: the key kept appearing and "
			     "vanishing (%d attempts)",
			     ADD_RACE_RETRIES);
}

/* vtable incr: add delta to the counter at key (absent: 0); see the top of
 * the file for the bias and the expiry. */
static int mc_incr(drl_backend *b, drl_bytes key, int64_t delta, int64_t ttl_us,
		   int64_t *value, drl_error *err)
{
	mc_backend *m = (mc_backend *)b;
	uint64_t stored = 0;
	call c;
	mkey k;
	int rc;

	if (delta <= -(int64_t)BIAS)
		return drl_error_set(err, DRL_ERANGE,
				     "memcached incr: delta below -2^62");
	drl__mc_map_key(m, key, &k);
	rc = borrow(m, &c, err);
	if (rc)
		return rc;
	if (m->binary)
		rc = incr_binary(&c, &k, delta, drl__mc_expiry(ttl_us), &stored,
				 err);
	else
		rc = incr_ascii(&c, &k, delta, drl__mc_expiry(ttl_us), &stored,
				err);
	give_back(&c);
	if (rc)
		return rc;
	return drl__mc_incr_value(delta, stored, value, err);
}

/* Fill values[i] for every requested key equal to the fetched result. */
static int take_result(const memcached_result_st *r, size_t n,
		       const char *const *kp, const size_t *kl, int64_t *values,
		       drl_error *err)
{
	const char *rk = memcached_result_key_value(r);
	size_t rkl = memcached_result_key_length(r);

	for (size_t i = 0; i < n; i++) {
		if (kl[i] != rkl || memcmp(kp[i], rk, rkl) != 0)
			continue;
		int rc = drl__mc_parse_counter(memcached_result_value(r),
					       memcached_result_length(r),
					       &values[i], err);
		if (rc)
			return rc;
	}
	return 0;
}

/* Fetch every result of an mget of n counter keys into values (absent
 * keys stay 0). */
static int fetch_counters(call *c, size_t n, const char *const *kp,
			  const size_t *kl, int64_t *values, drl_error *err)
{
	memcached_result_st res;
	memcached_return_t rc = MEMCACHED_SUCCESS;
	int out = 0;

	if (memcached_result_create(c->mc, &res) == NULL)
		return drl_error_set(err, DRL_ENOMEM,
				     "memcached get: no memory");
	/* Each requested key answers at most once. */
	for (size_t i = 0; i <= n; i++) {
		if (memcached_fetch_result(c->mc, &res, &rc) == NULL)
			break;
		if (out == 0)
			out = take_result(&res, n, kp, kl, values, err);
		rc = MEMCACHED_SUCCESS;
	}
	memcached_result_free(&res);
	if (out) {
		c->broken = true; /* replies may be left unread */
		return out;
	}
	if (rc != MEMCACHED_END && rc != MEMCACHED_NOTFOUND)
		return store_error(
			c, rc == MEMCACHED_SUCCESS ? MEMCACHED_FAILURE : rc,
			"get", err);
	return check_quiet(c, "get", err);
}

/* vtable get_many: read n counters in one multi-get; absent keys read 0. */
static int mc_get_many(drl_backend *b, size_t n, const drl_bytes *keys,
		       int64_t *values, drl_error *err)
{
	mc_backend *m = (mc_backend *)b;
	mkey inline_keys[INLINE_KEYS];
	const char *inline_kp[INLINE_KEYS];
	size_t inline_kl[INLINE_KEYS];
	mkey *mk = inline_keys;
	const char **kp = inline_kp;
	size_t *kl = inline_kl;
	memcached_return_t mrc;
	call c;
	int rc;

	if (n == 0)
		return 0;
	if (n > INLINE_KEYS) {
		mk = malloc(n * sizeof *mk);
		kp = malloc(n * sizeof *kp);
		kl = malloc(n * sizeof *kl);
		if (mk == NULL || kp == NULL || kl == NULL) {
			rc = drl_error_set(err, DRL_ENOMEM,
					   "memcached get: no memory for %zu "
					   "keys",
					   n);
			goto done;
		}
	}
	for (size_t i = 0; i < n; i++) {
		drl__mc_map_key(m, keys[i], &mk[i]);
		kp[i] = mk[i].buf;
		kl[i] = mk[i].len;
		values[i] = 0;
	}
	rc = borrow(m, &c, err);
	if (rc)
		goto done;
	mrc = memcached_mget(c.mc, kp, kl, n);
	if (mrc != MEMCACHED_SUCCESS)
		rc = store_error(&c, mrc, "get", err);
	else
		rc = fetch_counters(&c, n, kp, kl, values, err);
	give_back(&c);
done:
	if (mk != inline_keys) {
		free(mk);
		free(kp);
		free(kl);
	}
	return rc;
}

/* vtable add_read: incr() of keys[0], then get_many() of the others (two
 * round trips; the channels send both at once). */
static int mc_add_read(drl_backend *b, size_t n, const drl_bytes *keys,
		       int64_t delta, int64_t ttl_us, int64_t *values,
		       drl_error *err)
{
	int rc = mc_incr(b, keys[0], delta, ttl_us, &values[0], err);
	if (rc == 0 && n > 1)
		rc = mc_get_many(b, n - 1, keys + 1, values + 1, err);
	return rc;
}

/* ---- optimistic state ---------------------------------------------------- */

/* vtable load: `gets` the blob at key into buf; version = its CAS id. */
static int mc_load(drl_backend *b, drl_bytes key, void *buf, size_t cap,
		   size_t *len, uint64_t *version, drl_error *err)
{
	mc_backend *m = (mc_backend *)b;
	memcached_result_st res;
	memcached_return_t mrc = MEMCACHED_SUCCESS;
	const char *kp;
	size_t kl;
	call c;
	mkey k;
	int rc;

	drl__mc_map_key(m, key, &k);
	kp = k.buf;
	kl = k.len;
	rc = borrow(m, &c, err);
	if (rc)
		return rc;
	mrc = memcached_mget(c.mc, &kp, &kl, 1);
	if (mrc != MEMCACHED_SUCCESS) {
		rc = store_error(&c, mrc, "gets", err);
		goto out;
	}
	if (memcached_result_create(c.mc, &res) == NULL) {
		c.broken = true;
		rc = drl_error_set(err, DRL_ENOMEM,
				   "memcached gets: no memory");
		goto out;
	}
	if (memcached_fetch_result(c.mc, &res, &mrc) == NULL) {
		if (mrc == MEMCACHED_END || mrc == MEMCACHED_NOTFOUND) {
			rc = check_quiet(&c, "gets", err);
			if (rc == 0) {
				*len = 0;
				*version = 0;
			}
		} else {
			rc = store_error(&c, mrc, "gets", err);
		}
		memcached_result_free(&res);
		goto out;
	}
	size_t need = memcached_result_length(&res);
	uint64_t cas = memcached_result_cas(&res);
	if (cas == 0) {
		/* The server answered, but not as gets must (memcached -C, or
		 * not memcached): a store error, not a bug of ours. */
		c.broken = true;
		rc = drl_error_set(err, DRL_ESTORE,
				   "memcached gets: the server sent no CAS id "
				   "(CAS disabled with -C?)");
	} else if (need > cap) {
		*len = need;
		rc = drl_error_set(
			err, DRL_ERANGE,
			"memcached gets: state of %zu bytes does not "
			"fit in %zu",
			need, cap);
	} else {
		if (need > 0)
			memcpy(buf, memcached_result_value(&res), need);
		*len = need;
		*version = cas;
	}
	/* Read up to the end marker so the handle is clean; anything but
	 * the marker (another value, a timeout) leaves it unusable. */
	if (!c.broken) {
		memcached_result_st *x =
			memcached_fetch_result(c.mc, &res, &mrc);
		if (x != NULL ||
		    (mrc != MEMCACHED_END && mrc != MEMCACHED_NOTFOUND))
			c.broken = true;
	}
	memcached_result_free(&res);
out:
	give_back(&c);
	return rc;
}

/* vtable cas: store blob only if the key still has `version` (0: only if
 * absent, by `add`). */
static int mc_cas(drl_backend *b, drl_bytes key, const void *blob, size_t len,
		  uint64_t version, int64_t ttl_us, drl_error *err)
{
	mc_backend *m = (mc_backend *)b;
	const char *v = len > 0 ? blob : "";
	memcached_return_t mrc;
	call c;
	mkey k;
	int rc;

	drl__mc_map_key(m, key, &k);
	rc = borrow(m, &c, err);
	if (rc)
		return rc;
	if (version == 0)
		mrc = memcached_add(c.mc, k.buf, k.len, v, len,
				    drl__mc_expiry(ttl_us), 0);
	else
		mrc = memcached_cas(c.mc, k.buf, k.len, v, len,
				    drl__mc_expiry(ttl_us), 0, version);
	switch (mrc) {
	case MEMCACHED_SUCCESS:
		rc = 0;
		break;
	case MEMCACHED_NOTSTORED:
	case MEMCACHED_DATA_EXISTS:
	case MEMCACHED_NOTFOUND:
		rc = drl_error_set(err, DRL_ECONFLICT,
				   "memcached %s: the state changed meanwhile",
				   version == 0 ? "add" : "cas");
		break;
	case MEMCACHED_E2BIG:
		rc = drl_error_set(err, DRL_ESTORE,
				   "memcached %s: state of %zu bytes is larger "
				   "than the server's item size limit",
				   version == 0 ? "add" : "cas", len);
		break;
	default:
		rc = store_error(&c, mrc, version == 0 ? "add" : "cas", err);
	}
	give_back(&c);
	return rc;
}

/* ---- delete (drl_reset) -------------------------------------------------- */

/* vtable del: one `delete` per key, in order (absent keys are no error).
 * Not atomic: memcached has no multi-key delete, and a pool's keys live
 * on several servers. A decision running meanwhile can see some of the
 * keys gone and others not yet (for a policy, some limits reset and
 * others not); on an error the keys before the failing one are gone. */
static int mc_del(drl_backend *b, size_t n, const drl_bytes *keys,
		  drl_error *err)
{
	mc_backend *m = (mc_backend *)b;
	call c;
	mkey k;
	if (n == 0)
		return 0;
	if (keys == NULL)
		return drl_error_set(err, DRL_EINVAL, "memcached: NULL keys");
	int rc = borrow(m, &c, err);
	for (size_t i = 0; i < n && rc == 0; i++) {
		drl__mc_map_key(m, keys[i], &k);
		memcached_return_t mrc =
			memcached_delete(c.mc, k.buf, k.len, 0);
		if (mrc != MEMCACHED_SUCCESS && mrc != MEMCACHED_NOTFOUND)
			rc = store_error(&c, mrc, "delete", err);
	}
	give_back(&c);
	return rc;
}

/* vtable destroy: close every connection, free everything. */
static void mc_destroy(drl_backend *b)
{
	mc_backend *m = (mc_backend *)b;

	if (m == NULL)
		return;
	if (m->pool != NULL)
		memcached_pool_destroy(m->pool);
	if (m->hasher != NULL)
		memcached_free(m->hasher);
	if (m->master != NULL)
		memcached_free(m->master);
	free(m);
}

/* ---- opening ------------------------------------------------------------- */

/* Add every server of the host list "a[:p],b[:p]..." to the master. */
static int add_servers(mc_backend *m, const char *hosts, drl_error *err)
{
	if (hosts == NULL || hosts[0] == '\0')
		return drl_error_set(
			err, DRL_EINVAL,
			"memcached URI: no server (expected "
			"memcached://host[:port][,host[:port]...])");
	drl_hostport *hp = calloc(SERVERS_MAX, sizeof *hp);
	size_t n;
	if (hp == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	/* A server listed twice is an error: ketama would give it twice
	 * the share of the keys. */
	int rc = drl_hostport_list(hosts, DEFAULT_PORT, "memcached URI", hp,
				   SERVERS_MAX, &n, err);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		memcached_return_t mrc = memcached_server_add(
			m->master, hp[i].host, (in_port_t)hp[i].port);
		if (mrc != MEMCACHED_SUCCESS)
			rc = drl_error_set(err, DRL_EINVAL,
					   "memcached URI: server %s:%d: %s",
					   hp[i].host, hp[i].port,
					   memcached_strerror(m->master, mrc));
	}
	free(hp);
	return rc;
}

/* memcached_server_cursor callback: count servers that told their version. */
static memcached_return_t count_answered(const memcached_st *mc,
					 const memcached_instance_st *server,
					 void *context)
{
	(void)mc;
	if (memcached_server_major_version(server) != UINT8_MAX)
		++*(size_t *)context;
	return MEMCACHED_SUCCESS;
}

/* Ask every server for its version (on a throwaway clone). Fails only
 * when none answers: a pool may start with a server down. */
static int probe(mc_backend *m, drl_error *err)
{
	memcached_st *p = memcached_clone(NULL, m->master);
	memcached_server_fn fn[1] = {count_answered};
	memcached_return_t mrc;
	size_t answered = 0;
	int rc = 0;

	if (p == NULL)
		return drl_error_set(err, DRL_ENOMEM, "memcached: no memory");
	mrc = memcached_version(p);
	if (mrc != MEMCACHED_SUCCESS) {
		memcached_server_cursor(p, fn, &answered, 1);
		if (answered == 0) {
			call c = {m, p, false};
			/* version() sums failures up as SOME_ERRORS; the
			 * handle's last error says what went wrong. */
			if (memcached_failed(memcached_last_error(p)))
				mrc = memcached_last_error(p);
			rc = store_error(&c, mrc, "open (no server answered)",
					 err);
		}
	}
	memcached_free(p);
	return rc;
}

/* Give m channels (chan.c): the async API's counter decisions then go
 * out on its event loop's thread, without a worker. */
static void use_channels(mc_backend *m)
{
	m->parent.caps |= DRL_CAP_CHANNEL;
	m->parent.add_read_start = drl__mc_add_read_start;
	m->parent.chan_open = drl__mc_chan_open;
	m->parent.chan_poll = drl__mc_chan_poll;
	m->parent.chan_process = drl__mc_chan_process;
	m->parent.chan_close = drl__mc_chan_close;
}

/* Read and check every option of *uri into m (before servers are added). */
static int read_options(mc_backend *m, drl_uri *uri, int64_t *timeout_ms,
			int64_t *pool, drl_error *err)
{
	int64_t binary;
	const char *prefix;
	int rc;

	int64_t channels;

	rc = drl_uri_option_int(uri, "timeout_ms", 1, 600000, 1000, timeout_ms,
				err);
	if (rc == 0)
		rc = drl_uri_option_int(uri, "channels", 0, 1, 1, &channels,
					err);
	if (rc == 0 && channels)
		use_channels(m);
	if (rc == 0)
		rc = drl_uri_option_int(uri, "pool", 1, 1024, 16, pool, err);
	if (rc == 0)
		rc = drl_uri_option_int(uri, "binary", 0, 1, 1, &binary, err);
	if (rc)
		return rc;
	m->binary = binary == 1;
	prefix = drl_uri_option(uri, "prefix");
	if (prefix != NULL) {
		size_t n = strlen(prefix);
		if (n > PREFIX_MAX)
			return drl_error_set(
				err, DRL_EINVAL,
				"memcached URI option prefix: longer "
				"than %d bytes",
				PREFIX_MAX);
		for (size_t i = 0; i < n; i++)
			if (!key_byte_ok((unsigned char)prefix[i]))
				return drl_error_set(
					err, DRL_EINVAL,
					"memcached URI option prefix: byte "
					"0x%02x at %zu (no spaces or control "
					"bytes in a memcached key)",
					(unsigned char)prefix[i], i);
		memcpy(m->prefix, prefix, n + 1);
		m->plen = n;
	}
	return drl_uri_check_all_used(uri, err);
}

/* Set the master's behaviours: protocol, hashing, timeouts, no ejection. */
static int configure(mc_backend *m, int64_t timeout_ms, drl_error *err)
{
	static const struct {
		memcached_behavior_t flag;
		int what; /* 0: literal, 1: ms, 2: µs, 3: binary */
		uint64_t value;
	} set[] = {
		{MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 3, 0},
		{MEMCACHED_BEHAVIOR_SUPPORT_CAS, 0, 1},
		{MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 0, 1},
		{MEMCACHED_BEHAVIOR_NO_BLOCK, 0, 1},
		{MEMCACHED_BEHAVIOR_TCP_NODELAY, 0, 1},
		{MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, 1, 0},
		{MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 1, 0},
		{MEMCACHED_BEHAVIOR_SND_TIMEOUT, 2, 0},
		{MEMCACHED_BEHAVIOR_RCV_TIMEOUT, 2, 0},
		{MEMCACHED_BEHAVIOR_AUTO_EJECT_HOSTS, 0, 0},
		{MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS, 0, 0},
		/* A failed server is tried again on the next call, not
		 * skipped for 2 s: backing off is the core's breaker's job
		 * (docs/failure.md), and a restarted server is used again as
		 * soon as it answers. */
		{MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 0, 0},
	};

	for (size_t i = 0; i < sizeof set / sizeof set[0]; i++) {
		uint64_t v = set[i].value;
		if (set[i].what == 1)
			v = (uint64_t)timeout_ms;
		else if (set[i].what == 2)
			v = (uint64_t)timeout_ms * 1000;
		else if (set[i].what == 3)
			v = m->binary;
		memcached_return_t mrc =
			memcached_behavior_set(m->master, set[i].flag, v);
		if (mrc != MEMCACHED_SUCCESS)
			return drl_error_set(
				err, DRL_EINTERNAL,
				"memcached: cannot set behaviour "
				"%d: %s",
				(int)set[i].flag,
				memcached_strerror(m->master, mrc));
	}
	return 0;
}

/* Add the servers named by the URI: a host list, or one unix socket. */
static int add_uri_servers(mc_backend *m, const drl_uri *uri, drl_error *err)
{
	if (strcmp(drl_uri_scheme(uri), "memcached+unix") == 0) {
		const char *path = drl_uri_path(uri);
		memcached_return_t mrc;
		if (drl_uri_hosts(uri) != NULL && drl_uri_hosts(uri)[0] != '\0')
			return drl_error_set(
				err, DRL_EINVAL,
				"memcached+unix URI: no host expected (write "
				"memcached+unix:///path/to/socket)");
		if (path == NULL || path[0] != '/')
			return drl_error_set(
				err, DRL_EINVAL,
				"memcached+unix URI: expected an absolute "
				"socket path "
				"(memcached+unix:///path/to/socket)");
		if (strlen(path) >= 108)
			return drl_error_set(err, DRL_EINVAL,
					     "memcached+unix URI: socket path "
					     "longer than 107 bytes");
		mrc = memcached_server_add_unix_socket(m->master, path);
		if (mrc != MEMCACHED_SUCCESS)
			return drl_error_set(
				err, DRL_EINVAL, "memcached+unix URI: %s",
				memcached_strerror(m->master, mrc));
		return 0;
	}
	if (drl_uri_path(uri) != NULL && drl_uri_path(uri)[0] != '\0')
		return drl_error_set(
			err, DRL_EINVAL,
			"memcached URI: unexpected path \"/%.48s\" "
			"(memcached has no databases)",
			drl_uri_path(uri));
	return add_servers(m, drl_uri_hosts(uri), err);
}

/* Open a memcached store from a parsed URI; see memcached.h. */
int drl__memcached_open(drl_backend **out, drl_uri *uri, drl_error *err)
{
	int64_t timeout_ms = 1000, pool = 16;
	bool lazy = false;
	mc_backend *m;
	int rc;

	if (out != NULL)
		*out = NULL;
	if (out == NULL || uri == NULL || drl_uri_scheme(uri) == NULL)
		return drl_error_set(err, DRL_EINVAL, "memcached: no URI");
	if (strcmp(drl_uri_scheme(uri), "memcached") != 0 &&
	    strcmp(drl_uri_scheme(uri), "memcached+unix") != 0)
		return drl_error_set(err, DRL_EINVAL,
				     "memcached: unknown scheme \"%.32s\"",
				     drl_uri_scheme(uri));
	if (drl_uri_user(uri) != NULL || drl_uri_password(uri) != NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "memcached URI: user or password given, "
				     "but SASL is not supported");
	m = calloc(1, sizeof *m);
	if (m == NULL)
		return drl_error_set(err, DRL_ENOMEM, "memcached: no memory");
	m->parent.version = 9; /* the vtable version this file fills */
	m->parent.caps = DRL_CAP_COUNTER | DRL_CAP_CAS | DRL_CAP_ADD_READ;
	m->parent.name = "memcached";
	m->parent.destroy = mc_destroy;
	m->parent.incr = mc_incr;
	m->parent.get_many = mc_get_many;
	m->parent.load = mc_load;
	m->parent.cas = mc_cas;
	m->parent.update = NULL; /* no in-process atomic step */
	m->parent.eval = NULL;   /* no server-side scripts */
	m->parent.now = NULL;    /* memcached has no clock to offer */
	m->parent.del = mc_del;
	m->parent.add_read = mc_add_read;

	rc = drl_uri_option_lazy(uri, &lazy, err);
	if (rc == 0)
		rc = read_options(m, uri, &timeout_ms, &pool, err);
	if (rc)
		goto fail;
	m->timeout_ms = timeout_ms;
	m->master = memcached_create(NULL);
	if (m->master == NULL) {
		rc = drl_error_set(err, DRL_ENOMEM, "memcached: no memory");
		goto fail;
	}
	rc = configure(m, timeout_ms, err);
	if (rc == 0)
		rc = add_uri_servers(m, uri, err);
	if (rc == 0)
		drl_uri_set_servers(uri, memcached_server_count(m->master));
	if (rc == 0 && !lazy)
		rc = probe(m, err);
	if (rc)
		goto fail;
	m->pool = memcached_pool_create(m->master, 1, (uint32_t)pool);
	m->hasher = memcached_clone(NULL, m->master);
	if (m->pool == NULL || m->hasher == NULL) {
		rc = drl_error_set(err, DRL_ENOMEM,
				   "memcached: cannot create the pool");
		goto fail;
	}
	m->pool_wait.tv_sec =
		(time_t)(timeout_ms >= 100 ? timeout_ms * 10 / 1000 : 1);
	m->pool_wait.tv_nsec = 0;
	*out = &m->parent;
	return 0;
fail:
	mc_destroy(&m->parent);
	return rc;
}
