/*
 * drl__rm_store: the store vtable over the keys of the Redis server the
 * module runs in. A command runs alone on Redis's main thread, so every
 * primitive is atomic as it is: update() runs the step in place (no
 * load/cas, no retries).
 *
 * The bytes are the Redis store's (backends/redis/state.c, counter.c):
 *  - a state blob is a string value, written with its TTL in whole ms
 *    (rounded up); through the low-level key API (no command parsing),
 *    in place once the value is Redis's own raw string;
 *  - a counter is a decimal string changed by INCRBY, or, when grouped
 *    (`group "#" index`, DRL_CAP_COUNTER_GROUPS), field `index` of the
 *    hash `group` changed by HINCRBY. A decision's counters (add_read:
 *    one group) go through the low-level hash API, one lookup of the
 *    group, by HINCRBY's rules (Redis's own integer parsing, overflow
 *    check and texts), and so does trim (HDEL's and PEXPIRE's work);
 *    incr and get_many (a peek's reads, keys not grouped) through
 *    RedisModule_Call of those very commands.
 * A key of another type is DRL_ESTORE (Redis's WRONGTYPE text); a value
 * that is no integer where a counter is read is DRL_ECORRUPT.
 *
 * What a group's decision costs (the server's thread): its field names
 * come from a cache kept between commands (fields.h), and a field is
 * looked up only while the hash may hold it: once the lookups have found
 * as many fields as the hash holds (RedisModule_ValueLength), the rest
 * are absent; a trim right after skips the fields that add_read showed
 * absent (drl__rm_store.known). Redis 7.0's module API reads a field only
 * by a listpack scan (lpFind) that makes a string of its value, so a
 * field that is there costs one scan and one string; a hash of SCAN_MIN
 * fields or more is read in one pass over its entries instead (scan.h),
 * which costs less from there on (two strings per entry, one walk).
 *
 * Replication: DRL.DECIDE and DRL.TWIN are replicated verbatim
 * (module.c), so nothing here replicates what it writes (neither the
 * key API nor RedisModule_Call without "!" does).
 */
#include "store.h"
#include "scan.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* PEXPIRE's argument for ttl_us: whole ms rounded up, at least 0 (0
 * deletes the key: the value matters no longer). */
static long long ttl_ms(int64_t ttl_us)
{
	if (ttl_us <= 0)
		return 0;
	return ttl_us / 1000 + (ttl_us % 1000 != 0);
}

/* DRL_ESTORE for an error reply (or none) of cmd, with the server's text. */
static int call_failed(RedisModuleCallReply *r, const char *cmd, drl_error *err)
{
	size_t len = 0;
	const char *msg = "no reply";
	if (r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_ERROR)
		msg = RedisModule_CallReplyStringPtr(r, &len);
	else if (r)
		msg = "unexpected reply", len = 16;
	else
		len = 8;
	/* the server's text first: a client reads "WRONGTYPE ..." as from
	 * the command itself */
	return drl_error_set(err, DRL_ESTORE, "%.*s (%s)",
			     (int)(len > 200 ? 200 : len), msg, cmd);
}

/* An integer reply of cmd into *v. */
static int call_int(RedisModuleCallReply *r, const char *cmd, int64_t *v,
		    drl_error *err)
{
	if (r == NULL ||
	    RedisModule_CallReplyType(r) != REDISMODULE_REPLY_INTEGER)
		return call_failed(r, cmd, err);
	*v = RedisModule_CallReplyInteger(r);
	return 0;
}

static int incr(drl_backend *b, drl_bytes key, int64_t delta, int64_t ttl_us,
		int64_t *value, drl_error *err)
{
	RedisModuleCtx *ctx = ((drl__rm_store *)b)->ctx;
	size_t glen = 0;
	bool g = drl_key_group_split(key, &glen);
	const char *k = key.len ? key.data : "";
	((drl__rm_store *)b)->known.group = NULL; /* a write */
	RedisModuleCallReply *r =
		g ? RedisModule_Call(ctx, "HINCRBY", "bbl", k, glen,
				     k + glen + 1, key.len - glen - 1,
				     (long long)delta)
		  : RedisModule_Call(ctx, "INCRBY", "bl", k, key.len,
				     (long long)delta);
	int rc = call_int(r, g ? "HINCRBY" : "INCRBY", value, err);
	if (r)
		RedisModule_FreeCallReply(r);
	if (rc)
		return rc;
	int64_t ignored;
	r = RedisModule_Call(ctx, "PEXPIRE", "bl", k, g ? glen : key.len,
			     ttl_ms(ttl_us));
	rc = call_int(r, "PEXPIRE", &ignored, err);
	if (r)
		RedisModule_FreeCallReply(r);
	return rc;
}

/* A counter's value from a reply element: absent (nil) is 0. */
static int reply_value(RedisModuleCallReply *e, const char *cmd, int64_t *v,
		       drl_error *err)
{
	size_t len = 0;
	int type = e ? RedisModule_CallReplyType(e) : -1;
	if (type == REDISMODULE_REPLY_NULL) {
		*v = 0;
		return 0;
	}
	if (type != REDISMODULE_REPLY_STRING)
		return call_failed(e, cmd, err);
	const char *s = RedisModule_CallReplyStringPtr(e, &len);
	if (drl_parse_int(s, len, INT64_MIN, INT64_MAX, v))
		return drl_error_set(err, DRL_ECORRUPT,
				     "counter holds %zu bytes that are not an "
				     "integer",
				     len);
	return 0;
}

/* One counter's value: absent is 0. */
static int get_one(RedisModuleCtx *ctx, drl_bytes key, int64_t *v,
		   drl_error *err)
{
	size_t glen = 0;
	bool g = drl_key_group_split(key, &glen);
	const char *k = key.len ? key.data : "";
	RedisModuleCallReply *r =
		g ? RedisModule_Call(ctx, "HGET", "bb", k, glen, k + glen + 1,
				     key.len - glen - 1)
		  : RedisModule_Call(ctx, "GET", "b", k, key.len);
	int rc = reply_value(r, g ? "HGET" : "GET", v, err);
	if (r)
		RedisModule_FreeCallReply(r);
	return rc;
}

/* Whether p[0..n) are all ASCII digits: eight at a time (a byte is a
 * digit when its high nibble is 3 and adding 6 leaves it 3; a carry out
 * of a byte comes only from one that fails its own test). */
static bool digits(const char *p, size_t n)
{
	const uint64_t hi = UINT64_C(0xF0F0F0F0F0F0F0F0);
	const uint64_t six = UINT64_C(0x0606060606060606);
	const uint64_t threes = UINT64_C(0x3333333333333333);
	for (; n >= 8; p += 8, n -= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		if (((v & hi) | (((v + six) & hi) >> 4)) != threes)
			return false;
	}
	for (; n > 0; p++, n--)
		if ((unsigned char)(*p - '0') > 9)
			return false;
	return true;
}

/* Whether drl_key_group_split(key) would split key into the group
 * g[0..glen) and a field: key is that group, '#' and a field of that
 * form ('-'? and one or more digits), checked forward (no scan back over
 * the group, which the bytes compared already say). */
static bool in_group(drl_bytes key, const char *g, size_t glen)
{
	const char *p = key.data;
	if (key.len < glen + 2 || p[glen] != '#' || memcmp(p, g, glen) != 0)
		return false;
	size_t j = glen + 1 + (p[glen + 1] == '-');
	return j < key.len && digits(p + j, key.len - j);
}

/* Whether keys[0..n) are grouped counters of one group (*glen its
 * length). */
static bool one_group(size_t n, const drl_bytes *keys, size_t *glen)
{
	if (n == 0 || !drl_key_group_split(keys[0], glen))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!in_group(keys[i], keys[0].data, *glen))
			return false;
	return true;
}

/* The fields of keys[0..n) (grouped, of a group glen bytes long) as
 * strings for a vector argument (RedisModule_Call's "v"); NULL when out
 * of memory. Free with free_fields. */
static RedisModuleString **fields_of(RedisModuleCtx *ctx, size_t n,
				     const drl_bytes *keys, size_t glen)
{
	RedisModuleString **f = malloc(n * sizeof *f);
	for (size_t i = 0; f && i < n; i++)
		f[i] = RedisModule_CreateString(
			ctx, (const char *)keys[i].data + glen + 1,
			keys[i].len - glen - 1);
	return f;
}

static void free_fields(RedisModuleCtx *ctx, RedisModuleString **f, size_t n)
{
	for (size_t i = 0; i < n; i++)
		RedisModule_FreeString(ctx, f[i]);
	free(f);
}

/* The counters of one group: one HMGET. */
static int get_group(RedisModuleCtx *ctx, size_t n, const drl_bytes *keys,
		     size_t glen, int64_t *values, drl_error *err)
{
	RedisModuleString **f = fields_of(ctx, n, keys, glen);
	if (f == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	RedisModuleCallReply *r =
		RedisModule_Call(ctx, "HMGET", "bv", keys[0].data, glen, f, n);
	int rc = 0;
	if (r == NULL ||
	    RedisModule_CallReplyType(r) != REDISMODULE_REPLY_ARRAY ||
	    RedisModule_CallReplyLength(r) != n)
		rc = call_failed(r, "HMGET", err);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = reply_value(RedisModule_CallReplyArrayElement(r, i),
				 "HMGET", &values[i], err);
	if (r)
		RedisModule_FreeCallReply(r);
	free_fields(ctx, f, n);
	return rc;
}

static int get_many(drl_backend *b, size_t n, const drl_bytes *keys,
		    int64_t *values, drl_error *err)
{
	RedisModuleCtx *ctx = ((drl__rm_store *)b)->ctx;
	size_t glen = 0;
	if (n > 1 && one_group(n, keys, &glen))
		return get_group(ctx, n, keys, glen, values, err);
	for (size_t i = 0; i < n; i++) {
		int rc = get_one(ctx, keys[i], &values[i], err);
		if (rc)
			return rc;
	}
	return 0;
}

/* The Redis string for key: one of the command's own key arguments when
 * key is its bytes (no copy), else a new one (release_name frees it). */
static RedisModuleString *name_of(drl__rm_store *s, drl_bytes key)
{
	for (size_t i = 0; i < s->nkeynames; i++) {
		size_t len = 0;
		const char *p = RedisModule_StringPtrLen(s->keynames[i], &len);
		if (len == key.len && memcmp(p, key.data, len) == 0)
			return s->keynames[i];
	}
	return RedisModule_CreateString(s->ctx, key.len ? key.data : "",
					key.len);
}

/* Whether name is one of the command's key arguments. */
static bool is_keyname(const drl__rm_store *s, const RedisModuleString *name)
{
	for (size_t i = 0; i < s->nkeynames; i++)
		if (name == s->keynames[i])
			return true;
	return false;
}

static void release_name(drl__rm_store *s, RedisModuleString *name)
{
	if (!is_keyname(s, name))
		RedisModule_FreeString(s->ctx, name);
}

/* v (a field's value, or NULL: absent) + delta into field f of the hash
 * k, *out the new value: HINCRBY's rules (Redis's integer parsing, no
 * overflow) and texts. */
static int hash_add(drl__rm_store *s, RedisModuleKey *k, RedisModuleString *f,
		    RedisModuleString *v, int64_t delta, int64_t *out,
		    drl_error *err)
{
	long long old = 0;
	if (v && RedisModule_StringToLongLong(v, &old) != REDISMODULE_OK)
		return drl_error_set(err, DRL_ESTORE,
				     "ERR hash value is not an integer "
				     "(HINCRBY)");
	if ((delta < 0 && old < INT64_MIN - delta) ||
	    (delta > 0 && old > INT64_MAX - delta))
		return drl_error_set(err, DRL_ESTORE,
				     "ERR increment or decrement would "
				     "overflow (HINCRBY)");
	RedisModuleString *nv =
		RedisModule_CreateStringFromLongLong(s->ctx, old + delta);
	RedisModule_HashSet(k, REDISMODULE_HASH_NONE, f, nv, NULL);
	RedisModule_FreeString(s->ctx, nv);
	*out = old + delta;
	return 0;
}

/* A counter's value from a field's value (NULL: absent, 0), as
 * reply_value reads HMGET's. */
static int field_value(RedisModuleString *v, int64_t *out, drl_error *err)
{
	size_t len = 0;
	const char *p = v ? RedisModule_StringPtrLen(v, &len) : NULL;
	*out = 0;
	if (p && drl_parse_int(p, len, INT64_MIN, INT64_MAX, out))
		return drl_error_set(err, DRL_ECORRUPT,
				     "counter holds %zu bytes that are not an "
				     "integer",
				     len);
	return 0;
}

/* The group hash of keys[0] (its first glen bytes) opened for reading
 * and writing, in *k, with its name in *name (close_group() both): 0 when
 * it is a hash or absent (*type says which), else Redis's WRONGTYPE for
 * cmd. */
static int open_group(drl__rm_store *s, const drl_bytes *keys, size_t glen,
		      const char *cmd, RedisModuleString **name,
		      RedisModuleKey **k, int *type, drl_error *err)
{
	*name = name_of(s, (drl_bytes){keys[0].data, glen});
	*k = RedisModule_OpenKey(s->ctx, *name,
				 REDISMODULE_READ | REDISMODULE_WRITE);
	*type = RedisModule_KeyType(*k);
	if (*type != REDISMODULE_KEYTYPE_EMPTY &&
	    *type != REDISMODULE_KEYTYPE_HASH)
		return drl_error_set(err, DRL_ESTORE,
				     "WRONGTYPE Operation against a key "
				     "holding the wrong kind of value (%s)",
				     cmd);
	return 0;
}

static void close_group(drl__rm_store *s, RedisModuleString *name,
			RedisModuleKey *k)
{
	RedisModule_CloseKey(k);
	release_name(s, name);
}

/* The string of keys[i]'s field (keys grouped, of a group glen bytes
 * long): the field cache's (fields.h), valid until the next field_of(),
 * or, for a field too long for it, one of its own that field_done()
 * frees. */
static RedisModuleString *field_of(drl__rm_store *s, drl_bytes key, size_t glen)
{
	const char *p = (const char *)key.data + glen + 1;
	size_t len = key.len - glen - 1;
	RedisModuleString *f = drl__rm_field(p, len);
	return f ? f : RedisModule_CreateString(s->ctx, p, len);
}

static void field_done(drl__rm_store *s, drl_bytes key, size_t glen,
		       RedisModuleString *f)
{
	if (key.len - glen - 1 > DRL__RM_FIELD_MAX)
		RedisModule_FreeString(s->ctx, f);
}

/* keys[i]'s field's value in the hash k (a new string, or NULL: absent). */
static RedisModuleString *hash_get(drl__rm_store *s, RedisModuleKey *k,
				   drl_bytes key, size_t glen)
{
	RedisModuleString *f = field_of(s, key, glen), *v = NULL;
	RedisModule_HashGet(k, REDISMODULE_HASH_NONE, f, &v, NULL);
	field_done(s, key, glen, f);
	return v;
}

/* Whether the fields of keys[at[0..n)] (grouped, one group: the fields
 * alone differ) are n different ones. */
static bool distinct(const drl_bytes *keys, const size_t *at, size_t n)
{
	for (size_t i = 1; i < n; i++)
		for (size_t j = 0; j < i; j++) {
			drl_bytes a = keys[at[i]], b = keys[at[j]];
			if (a.len == b.len &&
			    memcmp(a.data, b.data, a.len) == 0)
				return false;
		}
	return true;
}

/* s->known after an add_read that wrote keys[0]'s field of the group
 * `name` and found present, before it, the fields of keys[at[0..n)],
 * distinct, which were all the hash held (else known is nothing). */
static void know(drl__rm_store *s, RedisModuleString *name,
		 const drl_bytes *keys, size_t glen, const size_t *at, size_t n,
		 bool all)
{
	bool had0 = n > 0 && at[0] == 0; /* keys[0] is looked up first */
	size_t m = n + !had0;
	s->known.group = NULL;
	if (!all || m > DRL__RM_KNOWN_MAX || !is_keyname(s, name))
		return;
	for (size_t j = 0; j < m; j++) {
		drl_bytes key = keys[j < n ? at[j] : 0];
		size_t len = key.len - glen - 1;
		if (len > DRL__RM_FIELD_MAX)
			return;
		s->known.len[j] = (unsigned char)len;
		memcpy(s->known.f[j], (const char *)key.data + glen + 1, len);
	}
	s->known.n = m;
	s->known.group = name;
}

/* The most present fields an add_read counts (found[] below): past it,
 * every field is looked up. */
#define FOUND_MAX DRL__RM_SCAN_MAX

/* From how many fields in the hash an add_read reads it in one pass
 * (scan.h) instead of a lookup per field: where the pass costs fewer
 * instructions (callgrind, a sub-window counter of 10: about 360 fewer a
 * field it holds, and about 860 more for the pass itself). */
#define SCAN_MIN 5

/* add_read of n grouped counters of one group (glen bytes): what
 * HMGET of the others and HINCRBY of the first field do, on one lookup
 * of the hash; an error changes nothing. keys[0]'s field is looked up
 * first and written last (a field that is no integer fails the call
 * before anything is changed, the others' first, as before); once the
 * lookups have found as many distinct fields as the hash holds, the
 * fields left are absent and are not looked up. A hash of SCAN_MIN
 * fields or more is read in one pass (scan.h), with the same answers and
 * errors. No PEXPIRE, as the Redis store's add_read: the core trims (and
 * sets the TTL) when the field was absent. */
static int group_add_read(drl__rm_store *s, size_t n, const drl_bytes *keys,
			  size_t glen, int64_t delta, int64_t *values,
			  drl_error *err)
{
	RedisModuleString *name, *v0 = NULL;
	RedisModuleKey *k;
	int type;
	size_t found[FOUND_MAX], nfound = 0;
	RedisModuleString *sv[DRL__RM_SCAN_MAX];
	bool scanned = false, all = false;
	s->known.group = NULL;
	int rc = open_group(s, keys, glen, "HINCRBY", &name, &k, &type, err);
	/* the hash's fields not found yet; SIZE_MAX: not counted */
	size_t left = rc == 0 ? RedisModule_ValueLength(k) : 0;
	if (left >= SCAN_MIN)
		scanned = drl__rm_scan_fields(k, n, keys, glen, sv, found,
					      &nfound, &all);
	size_t i = 0;
	for (; rc == 0 && i < n; i++) {
		RedisModuleString *v = scanned ? sv[i]
				       : left  ? hash_get(s, k, keys[i], glen)
					       : NULL;
		if (v && !scanned && left != SIZE_MAX) {
			left--;
			if (nfound == FOUND_MAX)
				left = SIZE_MAX;
			else
				found[nfound++] = i;
			/* the same field named twice is found twice */
			if (left == 0 && !distinct(keys, found, nfound))
				left = SIZE_MAX;
		}
		if (i == 0)
			v0 = v;
		else
			rc = field_value(v, &values[i], err);
		if (i > 0 && v)
			RedisModule_FreeString(s->ctx, v);
	}
	/* the values read and not used (an error stopped the loop) */
	for (; scanned && i < n; i++)
		if (sv[i])
			RedisModule_FreeString(s->ctx, sv[i]);
	if (rc == 0) {
		RedisModuleString *f = field_of(s, keys[0], glen);
		rc = hash_add(s, k, f, v0, delta, &values[0], err);
		field_done(s, keys[0], glen, f);
		if (rc == 0)
			know(s, name, keys, glen, found, nfound,
			     scanned ? all : left == 0);
	}
	if (v0)
		RedisModule_FreeString(s->ctx, v0);
	close_group(s, name, k);
	return rc;
}

static int add_read(drl_backend *b, size_t n, const drl_bytes *keys,
		    int64_t delta, int64_t ttl_us, int64_t *values,
		    drl_error *err)
{
	size_t glen = 0;
	if (n == 1 ? drl_key_group_split(keys[0], &glen)
		   : one_group(n, keys, &glen))
		return group_add_read((drl__rm_store *)b, n, keys, glen, delta,
				      values, err);
	/* the others first, as above */
	int rc = n > 1 ? get_many(b, n - 1, keys + 1, values + 1, err) : 0;
	return rc ? rc : incr(b, keys[0], delta, ttl_us, &values[0], err);
}

/* The string key k (empty or a string) holds v[n] afterwards: written in
 * place (resized, no new object once the value is Redis's own raw
 * string), or through a new string when v points into the old value
 * (which resizing may move) or is empty (no key to size). */
static int put_string(drl__rm_store *s, RedisModuleKey *k, const char *old,
		      size_t oldlen, const void *v, size_t n)
{
	const char *b = v;
	uintptr_t o = (uintptr_t)old, p0 = (uintptr_t)b;
	if (n == 0 || (old && p0 < o + oldlen && o < p0 + n)) {
		RedisModuleString *str = RedisModule_CreateString(s->ctx, b, n);
		int rc = RedisModule_StringSet(k, str);
		RedisModule_FreeString(s->ctx, str);
		return rc;
	}
	size_t len = 0;
	char *p;
	if (RedisModule_StringTruncate(k, n) != REDISMODULE_OK ||
	    (p = RedisModule_StringDMA(k, &len, REDISMODULE_WRITE)) == NULL ||
	    len != n)
		return REDISMODULE_ERR;
	memcpy(p, b, n);
	return REDISMODULE_OK;
}

/* Whether keys' field (grouped, of a group glen bytes long) may be in
 * the hash named `name` of `len` fields: not when s->known says which
 * fields it holds and that one is not among them. */
static bool may_hold(const drl__rm_store *s, RedisModuleString *name,
		     size_t len, drl_bytes key, size_t glen)
{
	if (s->known.group != name || s->known.n != len)
		return true;
	const char *p = (const char *)key.data + glen + 1;
	size_t flen = key.len - glen - 1;
	for (size_t j = 0; j < s->known.n; j++)
		if (s->known.len[j] == flen &&
		    memcmp(s->known.f[j], p, flen) == 0)
			return true;
	return false;
}

/* HDEL group field...; PEXPIRE group ttl (n grouped keys of one group),
 * on one lookup of the hash: a group that is gone stays gone, a hash
 * left empty is deleted (as HDEL does), a TTL of 0 deletes it (as
 * PEXPIRE does). A field that the add_read before it showed absent
 * (s->known) is not looked up. */
static int trim(drl_backend *b, size_t n, const drl_bytes *keys, int64_t ttl_us,
		drl_error *err)
{
	drl__rm_store *s = (drl__rm_store *)b;
	size_t glen = 0;
	if (n == 0)
		return 0;
	if (!one_group(n, keys, &glen))
		return drl_error_set(err, DRL_EINVAL,
				     "trim: keys of different groups");
	RedisModuleString *name;
	RedisModuleKey *k;
	int type;
	int rc = open_group(s, keys, glen, "HDEL", &name, &k, &type, err);
	size_t len = rc == 0 ? RedisModule_ValueLength(k) : 0;
	for (size_t i = 0; rc == 0 && type == REDISMODULE_KEYTYPE_HASH && i < n;
	     i++) {
		if (!may_hold(s, name, len, keys[i], glen))
			continue;
		RedisModuleString *f = field_of(s, keys[i], glen);
		RedisModule_HashSet(k, REDISMODULE_HASH_NONE, f,
				    REDISMODULE_HASH_DELETE, NULL);
		field_done(s, keys[i], glen, f);
	}
	s->known.group = NULL;
	if (rc == 0 && RedisModule_KeyType(k) == REDISMODULE_KEYTYPE_HASH) {
		long long ms = ttl_ms(ttl_us);
		if (ms == 0)
			RedisModule_DeleteKey(k);
		else if (RedisModule_SetExpire(k, ms) != REDISMODULE_OK)
			rc = drl_error_set(err, DRL_ESTORE, "PEXPIRE: refused");
	}
	close_group(s, name, k);
	return rc;
}

/* The step on the string at key, in place: one lookup, no retries. */
static int update(drl_backend *b, drl_bytes key, drl_update_fn fn, void *arg,
		  drl_error *err)
{
	drl__rm_store *s = (drl__rm_store *)b;
	RedisModuleString *name = name_of(s, key);
	s->known.group = NULL; /* a write */
	RedisModuleKey *k = RedisModule_OpenKey(
		s->ctx, name, REDISMODULE_READ | REDISMODULE_WRITE);
	int rc, type = RedisModule_KeyType(k);
	const char *old = NULL;
	size_t oldlen = 0;
	if (type == REDISMODULE_KEYTYPE_STRING)
		old = RedisModule_StringDMA(k, &oldlen, REDISMODULE_READ);
	if (type != REDISMODULE_KEYTYPE_EMPTY &&
	    type != REDISMODULE_KEYTYPE_STRING) {
		rc = drl_error_set(err, DRL_ESTORE,
				   "WRONGTYPE Operation against a key holding "
				   "the wrong kind of value");
		goto done;
	}
	const void *nb = NULL;
	size_t nl = 0;
	int64_t ttl = 0;
	rc = fn(arg, old, oldlen, &nb, &nl, &ttl);
	if (rc != 1)
		goto done;
	if (ttl <= 0) {
		RedisModule_DeleteKey(k);
		goto done;
	}
	if (put_string(s, k, old, oldlen, nb, nl) != REDISMODULE_OK ||
	    RedisModule_SetExpire(k, ttl_ms(ttl)) != REDISMODULE_OK)
		rc = drl_error_set(err, DRL_ESTORE, "SET: refused");
done:
	RedisModule_CloseKey(k);
	release_name(s, name);
	return rc;
}

static void destroy(drl_backend *b)
{
	(void)b; /* on the caller's stack */
}

void drl__rm_store_init(drl__rm_store *s, RedisModuleCtx *ctx,
			RedisModuleString **keynames, size_t n)
{
	static const drl_backend proto = DRL_BACKEND_INIT(7);
	s->parent = proto;
	s->parent.name = "redis-module";
	s->parent.caps = DRL_CAP_COUNTER | DRL_CAP_UPDATE |
			 DRL_CAP_COUNTER_GROUPS | DRL_CAP_INPROC |
			 DRL_CAP_ADD_READ;
	s->parent.destroy = destroy;
	s->parent.incr = incr;
	s->parent.get_many = get_many;
	s->parent.add_read = add_read;
	s->parent.update = update;
	s->parent.trim = trim;
	s->ctx = ctx;
	s->keynames = keynames;
	s->nkeynames = n;
	s->known.group = NULL;
}
