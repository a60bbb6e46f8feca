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
 * Replication: DRL.DECIDE and DRL.TWIN are replicated verbatim
 * (module.c), so nothing here replicates what it writes (neither the
 * key API nor RedisModule_Call without "!" does).
 */
#include "store.h"

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

/* Whether keys[0..n) are grouped counters of one group (*glen its
 * length). */
static bool one_group(size_t n, const drl_bytes *keys, size_t *glen)
{
	if (n == 0 || !drl_key_group_split(keys[0], glen))
		return false;
	for (size_t i = 1; i < n; i++) {
		size_t gl = 0;
		if (!drl_key_group_split(keys[i], &gl) || gl != *glen ||
		    memcmp(keys[i].data, keys[0].data, gl) != 0)
			return false;
	}
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

static void release_name(drl__rm_store *s, RedisModuleString *name)
{
	for (size_t i = 0; i < s->nkeynames; i++)
		if (name == s->keynames[i])
			return;
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

/* add_read of n grouped counters of one group (glen bytes): what
 * HMGET of the others and HINCRBY of the first field do, on one lookup
 * of the hash; an error changes nothing. No PEXPIRE, as the Redis
 * store's add_read: the core trims (and sets the TTL) when the field was
 * absent. */
static int group_add_read(drl__rm_store *s, size_t n, const drl_bytes *keys,
			  size_t glen, int64_t delta, int64_t *values,
			  drl_error *err)
{
	RedisModuleString *name;
	RedisModuleKey *k;
	int type;
	int rc = open_group(s, keys, glen, "HINCRBY", &name, &k, &type, err);
	/* the others first: a field that is no integer fails the call
	 * before anything is changed */
	for (size_t j = 1; rc == 0 && j <= n; j++) {
		size_t i = j % n;
		RedisModuleString *f = RedisModule_CreateString(
			s->ctx, (const char *)keys[i].data + glen + 1,
			keys[i].len - glen - 1);
		RedisModuleString *v = NULL;
		RedisModule_HashGet(k, REDISMODULE_HASH_NONE, f, &v, NULL);
		rc = i == 0 ? hash_add(s, k, f, v, delta, &values[0], err)
			    : field_value(v, &values[i], err);
		if (v)
			RedisModule_FreeString(s->ctx, v);
		RedisModule_FreeString(s->ctx, f);
	}
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

/* HDEL group field...; PEXPIRE group ttl (n grouped keys of one group),
 * on one lookup of the hash: a group that is gone stays gone, a hash
 * left empty is deleted (as HDEL does), a TTL of 0 deletes it (as
 * PEXPIRE does). */
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
	for (size_t i = 0; rc == 0 && type == REDISMODULE_KEYTYPE_HASH && i < n;
	     i++) {
		RedisModuleString *f = RedisModule_CreateString(
			s->ctx, (const char *)keys[i].data + glen + 1,
			keys[i].len - glen - 1);
		RedisModule_HashSet(k, REDISMODULE_HASH_NONE, f,
				    REDISMODULE_HASH_DELETE, NULL);
		RedisModule_FreeString(s->ctx, f);
	}
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
}
