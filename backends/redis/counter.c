/*
 * The Redis store's counters: incr() and get_many() (every tx), and
 * add_read() and add_read_start() without a transaction or a script
 * (DRL_CAP_ADD_READ; tx=auto, the default), declared in
 * backends/redis/internal.h.
 *
 * One decision of a counter algorithm is INCRBY of the current counter,
 * PEXPIRE of it, and one MGET of the other counters it reads, pipelined
 * in one round trip: what Envoy's rate limit service sends, no EVALSHA,
 * no MULTI/EXEC. Redis runs each command atomically, which is all the
 * counter algorithms need (they increment first and give back an
 * increment that went over the limit: docs/algorithms.md). On the
 * server that is about a fifth of what a script doing the same costs
 * (docs/performance.md, "What a decision costs the server").
 *
 * MGET, not a GET each, for the others: on the server one MGET of nine
 * keys costs about what five GETs cost (scripts/bench_lua_micro.sh). The price:
 * MGET reads a key of another type (a list someone wrote over an older
 * sub-window) as nil, an unused counter, where GET says WRONGTYPE. The
 * current sub-window is still checked (INCRBY says WRONGTYPE), and an
 * older one was ours when it was current: only a key overwritten by
 * someone else after we wrote it reads so, and one overwritten with a
 * "0" could not be told from ours either way. A value that is no integer
 * is still DRL_ECORRUPT.
 * PEXPIRE every time, not PEXPIRE NX (Redis 7 only): the TTL a decision
 * asks for ends at the same moment for every caller of one sub-window
 * (its end plus the window, plus the grace), so rewriting it changes
 * nothing, it costs the same on the server (measured), and servers
 * before 7 need no other command. (NX would spare replicas one
 * PEXPIREAT per decision: not done.)
 *
 * A started call travels on the store's shared connections
 * (backends/redis/pipe.c) as a started script call does.
 *
 * Grouped counters (DRL_CAP_COUNTER_GROUPS; keys `group "#" index`,
 * include/drl/sys/backend.h "Counter groups"): the counters of one group
 * are the fields of one hash, so a decision is HINCRBY of the current
 * field and one HMGET of the others: one key looked up instead of n (an
 * MGET of nine keys looks up nine in a table of 100k+ keys, ~3.5x the
 * HMGET's time, scripts/bench_lua_micro.sh), and no PEXPIRE: the core
 * calls trim() (HDEL of the fields no decision reads any longer, and
 * PEXPIRE of the hash) when a decision found its field absent, i.e. once
 * per sub-window and hash. HMGET reads a field as a value; a key of
 * another type is WRONGTYPE (no nil as MGET gives).
 */
#include "internal.h"

#include <hiredis/hiredis.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GET_STACK 16      /* get_many replies on the stack */
#define ADD_READ_MAX 4096 /* keys one call may name */
#define ARGV_STACK 32     /* MGET argument vectors on the stack */

/* ---- counters ----------------------------------------------------------- */

/* A grouped counter's key (DRL_CAP_COUNTER_GROUPS): true, and key cut to
 * its group, *field to its index. */
static bool grouped_key(const rstore *s, drl_bytes *key, drl_bytes *field)
{
	size_t glen;
	if (!(s->parent.caps & DRL_CAP_COUNTER_GROUPS) ||
	    !drl_key_group_split(*key, &glen))
		return false;
	*field = (drl_bytes){(const char *)key->data + glen + 1,
			     key->len - glen - 1};
	key->len = glen;
	return true;
}

/* MULTI; INCRBY k delta; PEXPIRE k ttl; EXEC — one round trip (a grouped
 * counter: HINCRBY group field delta; PEXPIRE group ttl). */
int drl__redis_incr(drl_backend *b, drl_bytes key, int64_t delta,
		    int64_t ttl_us, int64_t *value, drl_error *err)
{
	rstore *s = (rstore *)b;
	char ms[24], d[24];
	size_t mslen = 0, dlen;
	keybuf k;
	conn proxy, *c;
	int rc = drl__redis_ttl_arg(s, ttl_us, ms, &mslen, err);
	if (rc)
		return rc;
	dlen = drl__redis_i64(d, delta);
	drl_bytes f = {NULL, 0};
	bool g = grouped_key(s, &key, &f);
	drl__redis_key_init(&k);
	rc = drl__redis_key_make(s, &k, key, err);
	if (rc == 0)
		rc = drl__redis_acquire_shared(s, &proxy, &c, err);
	if (rc) {
		drl__redis_key_done(&k);
		return rc;
	}

	const char *incr[4] = {g ? "HINCRBY" : "INCRBY", k.p, g ? f.data : d,
			       d};
	size_t incrl[4] = {g ? 7 : 6, k.len, g ? f.len : dlen, dlen};
	const char *pexp[3] = {"PEXPIRE", k.p, ms};
	size_t pexpl[3] = {7, k.len, mslen};
	const tx_cmd cmd[2] = {{g ? 4 : 3, incr, incrl}, {3, pexp, pexpl}};
	redisReply *r[4], *e;
	rc = drl__redis_begin(s, c, err);
	if (rc == 0)
		rc = drl__redis_tx_call(s, c, 2, cmd, r, "INCRBY", true, &e,
					err);
	drl__redis_key_done(&k);
	if (rc) {
		drl__redis_release(s, c);
		return rc;
	}
	if (e == NULL)
		rc = drl_error_set(err, DRL_ESTORE,
				   "redis %s: INCRBY: transaction aborted",
				   s->where);
	if (rc == 0) {
		redisReply *v = e->element[0], *x = e->element[1];
		if (v->type != REDIS_REPLY_INTEGER)
			rc = drl__redis_reply_error(s, "INCRBY", v, true, err);
		else if (x->type != REDIS_REPLY_INTEGER)
			rc = drl__redis_reply_error(s, "PEXPIRE", x, false,
						    err);
		else
			*value = v->integer;
	}
	drl__redis_free_replies(r, 4);
	drl__redis_release(s, c);
	return rc;
}

/* Parse a counter reply into *v: nil 0, a decimal string, an integer. */
int drl__redis_counter_value(rstore *s, const redisReply *r, int64_t *v,
			     drl_error *err)
{
	switch (r->type) {
	case REDIS_REPLY_NIL:
		*v = 0;
		return 0;
	case REDIS_REPLY_INTEGER:
		*v = r->integer;
		return 0;
	case REDIS_REPLY_STRING:
		if (r->str &&
		    drl_parse_int(r->str, r->len, INT64_MIN, INT64_MAX, v) == 0)
			return 0;
		return drl_error_set(err, DRL_ECORRUPT,
				     "redis %s: a counter holds a %zu-byte "
				     "value that is not an integer",
				     s->where, r->len);
	}
	return drl__redis_reply_error(s, "GET", r, false, err);
}

/*
 * n pipelined GETs, one round trip. Not MGET: MGET reads a key of another
 * type (a list, a hash) as nil, i.e. as a zero counter; GET reports it
 * (WRONGTYPE), so a damaged key can never look like an unused one.
 * Grouped counters of one group: one HMGET (WRONGTYPE too).
 */
int drl__redis_get_many(drl_backend *b, size_t n, const drl_bytes *keys,
			int64_t *values, drl_error *err)
{
	rstore *s = (rstore *)b;
	redisReply *stack[GET_STACK];
	redisReply **r = stack;
	keybuf k;
	conn proxy, *c;
	int rc;
	if (n == 0)
		return 0;
	if (drl__redis_get_group(s, n, keys, values, &rc, err))
		return rc;
	if (n > SIZE_MAX / sizeof *r)
		return drl_error_set(err, DRL_EINVAL, "redis: too many keys");
	if (n > GET_STACK) {
		r = malloc(n * sizeof *r);
		if (r == NULL)
			return drl_error_set(err, DRL_ENOMEM,
					     "redis %s: out of memory",
					     s->where);
	}
	rc = drl__redis_acquire_shared(s, &proxy, &c, err);
	if (rc) {
		if (r != stack)
			free(r);
		return rc;
	}
	drl__redis_key_init(&k);
	rc = drl__redis_begin(s, c, err);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		drl_bytes key = keys[i], f = {NULL, 0};
		bool g = grouped_key(s, &key, &f); /* HGET group field */
		rc = drl__redis_key_make(s, &k, key, err);
		if (rc == 0) {
			const char *argv[3] = {g ? "HGET" : "GET", k.p, f.data};
			size_t lens[3] = {g ? 4 : 3, k.len, f.len};
			rc = drl__redis_append(s, c, g ? 3 : 2, argv, lens,
					       err);
		}
	}
	drl__redis_key_done(&k);
	if (rc) {
		/* Queued but unsent commands would desync the next call. */
		c->broken = true;
	} else {
		rc = drl__redis_collect(s, c, n, r, "GET", err);
		if (rc == 0) {
			for (size_t i = 0; i < n && rc == 0; i++)
				rc = drl__redis_counter_value(s, r[i],
							      &values[i], err);
			drl__redis_free_replies(r, n);
		}
	}
	drl__redis_release(s, c);
	if (r != stack)
		free(r);
	return rc;
}

/* ---- add_read: no transaction, no script ------------------------------- */

/* The end of a call that formats an argument vector: what it took from
 * the heap freed; on failure c is broken (what was queued must never
 * reach the server out of step). Returns rc. */
static int argv_done(conn *c, int rc, const char **argv, const char **vstack,
		     size_t *lens, size_t *lstack)
{
	if (argv != vstack)
		free((void *)argv);
	if (lens != lstack)
		free(lens);
	if (rc)
		c->broken = true;
	return rc;
}

/* The replies of an add_read of n keys: INCRBY, PEXPIRE (not for a
 * group), and an MGET (HMGET) when there are others to read. */
static size_t add_read_replies(size_t n, bool grouped)
{
	return (grouped ? 1 : 2) + (n > 1);
}

/* Whether keys[0..n) are grouped counters (DRL_CAP_COUNTER_GROUPS),
 * into *glen the group's length. DRL_EINVAL when some are and some are
 * not, or they name different groups. */
static int group_of(rstore *s, size_t n, const drl_bytes *keys, bool *grouped,
		    size_t *glen, drl_error *err)
{
	*grouped = (s->parent.caps & DRL_CAP_COUNTER_GROUPS) &&
		   drl_key_group_split(keys[0], glen);
	for (size_t j = 1; j < n; j++) {
		size_t g = 0;
		bool in = (s->parent.caps & DRL_CAP_COUNTER_GROUPS) &&
			  drl_key_group_split(keys[j], &g);
		if (in != *grouped ||
		    (in && (g != *glen ||
			    memcmp(keys[j].data, keys[0].data, g) != 0)))
			return drl_error_set(err, DRL_EINVAL,
					     "redis %s: counters of different "
					     "groups in one call",
					     s->where);
	}
	return 0;
}

/* A grouped counter's field: its index, the bytes after '#'. */
static void field_of(drl_bytes key, size_t glen, const char **f, size_t *len)
{
	*f = (const char *)key.data + glen + 1;
	*len = key.len - glen - 1;
}

/*
 * Queue `cmd` pgroup [field of keys[j] for j in [from, n)] [extra] on c:
 * HINCRBY (extra: the delta), HMGET, HDEL. pgroup: the group behind the
 * store's prefix. On failure c is broken.
 */
static int append_group_cmd(rstore *s, conn *c, const char *cmd,
			    const char *pgroup, size_t pglen, size_t from,
			    size_t n, const drl_bytes *keys, size_t glen,
			    const char *extra, size_t extralen, drl_error *err)
{
	const char *vstack[ARGV_STACK];
	size_t lstack[ARGV_STACK];
	size_t argc = 2 + (n - from) + (extra != NULL);
	const char **argv =
		argc <= ARGV_STACK ? vstack : malloc(argc * sizeof *argv);
	size_t *lens =
		argc <= ARGV_STACK ? lstack : malloc(argc * sizeof *lens);
	int rc = 0;
	if (argv == NULL || lens == NULL) {
		rc = drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				   s->where);
	} else {
		argv[0] = cmd;
		lens[0] = strlen(cmd);
		argv[1] = pgroup;
		lens[1] = pglen;
		for (size_t j = from; j < n; j++)
			field_of(keys[j], glen, &argv[2 + j - from],
				 &lens[2 + j - from]);
		if (extra) {
			argv[argc - 1] = extra;
			lens[argc - 1] = extralen;
		}
		rc = drl__redis_append(s, c, (int)argc, argv, lens, err);
	}
	return argv_done(c, rc, argv, vstack, lens, lstack);
}

/* The group behind the store's prefix into buf (stack, else malloc'd:
 * *heap to free). NULL: out of memory. */
static char *prefixed_group(rstore *s, drl_bytes key, size_t glen, char *stack,
			    size_t cap, char **heap, size_t *len)
{
	*heap = NULL;
	*len = s->prefixlen + glen;
	char *p = *len <= cap ? stack : (*heap = malloc(*len ? *len : 1));
	if (p == NULL)
		return NULL;
	if (s->prefixlen)
		memcpy(p, s->prefix, s->prefixlen);
	if (glen)
		memcpy(p + s->prefixlen, key.data, glen);
	return p;
}

/* HINCRBY group field(keys[0]) delta and (n > 1) HMGET group fields of
 * keys[1..n), on c. */
static int append_group_add_read(rstore *s, conn *c, size_t n,
				 const drl_bytes *keys, size_t glen,
				 int64_t delta, drl_error *err)
{
	char d[24], gstack[KEY_STACK], *heap;
	size_t dlen = drl__redis_i64(d, delta), pglen;
	const char *pg = prefixed_group(s, keys[0], glen, gstack, sizeof gstack,
					&heap, &pglen);
	int rc = 0;
	if (pg == NULL) {
		c->broken = true;
		rc = drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				   s->where);
	}
	if (rc == 0)
		rc = append_group_cmd(s, c, "HINCRBY", pg, pglen, 0, 1, keys,
				      glen, d, dlen, err);
	if (rc == 0 && n > 1)
		rc = append_group_cmd(s, c, "HMGET", pg, pglen, 1, n, keys,
				      glen, NULL, 0, err);
	free(heap);
	return rc;
}

/*
 * Queue INCRBY keys[0] delta, PEXPIRE keys[0] ms and (n > 1) MGET
 * keys[1..n) on c, every key behind the store's prefix (formatted into
 * one buffer the argument vector points into). On failure c is broken
 * (what was queued must never reach the server out of step).
 */
static int append_add_read(rstore *s, conn *c, size_t n, const drl_bytes *keys,
			   int64_t delta, int64_t ttl_us, drl_error *err)
{
	bool grouped;
	size_t glen = 0;
	int grc = group_of(s, n, keys, &grouped, &glen, err);
	if (grc || grouped) {
		if (grc == 0)
			grc = append_group_add_read(s, c, n, keys, glen, delta,
						    err);
		if (grc)
			c->broken = true;
		return grc;
	}
	char ms[24], d[24], kstack[KEY_STACK];
	const char *vstack[ARGV_STACK];
	size_t lstack[ARGV_STACK], mslen = 0, need = 0;
	int rc = drl__redis_ttl_arg(s, ttl_us, ms, &mslen, err);
	size_t dlen = drl__redis_i64(d, delta);
	for (size_t j = 0; j < n; j++)
		need += s->prefixlen + keys[j].len;
	char *kb = need <= sizeof kstack ? kstack : malloc(need);
	const char **argv = n <= ARGV_STACK ? vstack : malloc(n * sizeof *argv);
	size_t *lens = n <= ARGV_STACK ? lstack : malloc(n * sizeof *lens);
	if (rc == 0 && (kb == NULL || argv == NULL || lens == NULL))
		rc = drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				   s->where);
	/* argv[j]: keys[j] behind the prefix; argv[0] becomes "MGET" once
	 * INCRBY and PEXPIRE are queued. */
	if (rc == 0)
		(void)drl__redis_prefixed_keys(s, n, keys, kb, argv, lens);
	if (rc == 0) {
		const char *incr[3] = {"INCRBY", argv[0], d};
		size_t incrl[3] = {6, lens[0], dlen};
		const char *pexp[3] = {"PEXPIRE", argv[0], ms};
		size_t pexpl[3] = {7, lens[0], mslen};
		rc = drl__redis_append(s, c, 3, incr, incrl, err);
		if (rc == 0)
			rc = drl__redis_append(s, c, 3, pexp, pexpl, err);
	}
	if (rc == 0 && n > 1) {
		argv[0] = "MGET";
		lens[0] = 4;
		rc = drl__redis_append(s, c, (int)n, argv, lens, err);
	}
	if (kb != kstack)
		free(kb);
	return argv_done(c, rc, argv, vstack, lens, lstack);
}

/* The n counters of an (H)MGET reply m into values[0..n). */
static int many_values(rstore *s, const redisReply *m, const char *what,
		       size_t n, int64_t *values, drl_error *err)
{
	if (m->type != REDIS_REPLY_ARRAY)
		return drl__redis_reply_error(s, what, m, false, err);
	if (m->elements != n)
		return drl_error_set(err, DRL_ESTORE,
				     "redis %s: %s of %zu keys answered %zu "
				     "values",
				     s->where, what, n, (size_t)m->elements);
	for (size_t j = 0; j < n; j++) {
		int rc = drl__redis_counter_value(s, m->element[j], &values[j],
						  err);
		if (rc)
			return rc;
	}
	return 0;
}

/* The replies of append_add_read() into values[0..n). */
static int add_read_result(rstore *s, redisReply **r, size_t n, bool grouped,
			   int64_t *values, drl_error *err)
{
	const char *incr = grouped ? "HINCRBY" : "INCRBY";
	if (r[0]->type != REDIS_REPLY_INTEGER) /* INCRBY refused: none ran */
		return drl__redis_refused(
			s, r[0],
			drl__redis_reply_error(s, incr, r[0], true, err));
	if (!grouped && r[1]->type != REDIS_REPLY_INTEGER)
		return drl__redis_reply_error(s, "PEXPIRE", r[1], false, err);
	values[0] = r[0]->integer;
	if (n == 1)
		return 0;
	return many_values(s, r[grouped ? 1 : 2], grouped ? "HMGET" : "MGET",
			   n - 1, values + 1, err);
}

/* Bad arguments refused before a connection is taken (a call that
 * fails to format breaks its connection). */
static int check_args(rstore *s, size_t n, const drl_bytes *keys,
		      int64_t ttl_us, bool *grouped, drl_error *err)
{
	char ms[24];
	size_t mslen, glen;
	if (n == 0 || n > ADD_READ_MAX || keys == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "redis %s: add_read of %zu keys", s->where,
				     n);
	int rc = group_of(s, n, keys, grouped, &glen, err);
	return rc ? rc : drl__redis_ttl_arg(s, ttl_us, ms, &mslen, err);
}

bool drl__redis_get_group(rstore *s, size_t n, const drl_bytes *keys,
			  int64_t *values, int *rc, drl_error *err)
{
	bool grouped = false;
	size_t glen = 0;
	drl_error mixed = {0};
	if (n < 2 || group_of(s, n, keys, &grouped, &glen, &mixed) != 0 ||
	    !grouped)
		return false;
	char gstack[KEY_STACK], *heap;
	size_t pglen;
	const char *pg = prefixed_group(s, keys[0], glen, gstack, sizeof gstack,
					&heap, &pglen);
	conn proxy, *c;
	if (pg == NULL)
		*rc = drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				    s->where);
	else
		*rc = drl__redis_acquire_shared(s, &proxy, &c, err);
	if (pg && *rc == 0) {
		redisReply *r = NULL;
		*rc = drl__redis_begin(s, c, err);
		if (*rc == 0)
			*rc = append_group_cmd(s, c, "HMGET", pg, pglen, 0, n,
					       keys, glen, NULL, 0, err);
		if (*rc == 0)
			*rc = drl__redis_collect(s, c, 1, &r, "HMGET", err);
		if (*rc == 0) {
			*rc = many_values(s, r, "HMGET", n, values, err);
			drl__redis_free_replies(&r, 1);
		}
		drl__redis_release(s, c);
	}
	free(heap);
	return true;
}

/* trim(): HDEL group fields; PEXPIRE group ttl (checked by the caller:
 * n >= 1 grouped counters of one group, a valid ttl). */
static int append_trim(rstore *s, conn *c, size_t n, const drl_bytes *keys,
		       int64_t ttl_us, drl_error *err)
{
	char ms[24], gstack[KEY_STACK], *heap;
	size_t mslen = 0, glen = 0, pglen;
	(void)drl_key_group_split(keys[0], &glen);
	int rc = drl__redis_ttl_arg(s, ttl_us, ms, &mslen, err);
	const char *pg = prefixed_group(s, keys[0], glen, gstack, sizeof gstack,
					&heap, &pglen);
	if (rc == 0 && pg == NULL)
		rc = drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				   s->where);
	if (rc == 0)
		rc = append_group_cmd(s, c, "HDEL", pg, pglen, 0, n, keys, glen,
				      NULL, 0, err);
	if (rc == 0) {
		const char *pexp[3] = {"PEXPIRE", pg, ms};
		size_t pexpl[3] = {7, pglen, mslen};
		rc = drl__redis_append(s, c, 3, pexp, pexpl, err);
	}
	free(heap);
	if (rc)
		c->broken = true;
	return rc;
}

static int trim_result(rstore *s, redisReply **r, drl_error *err)
{
	if (r[0]->type != REDIS_REPLY_INTEGER)
		return drl__redis_refused(
			s, r[0],
			drl__redis_reply_error(s, "HDEL", r[0], true, err));
	if (r[1]->type != REDIS_REPLY_INTEGER)
		return drl__redis_reply_error(s, "PEXPIRE", r[1], false, err);
	return 0;
}

/* trim()'s arguments: n grouped counters of one group, a valid TTL. */
static int check_trim(rstore *s, size_t n, const drl_bytes *keys,
		      int64_t ttl_us, drl_error *err)
{
	bool grouped = false;
	int rc = n == 0 || n > ADD_READ_MAX || keys == NULL
			 ? drl_error_set(err, DRL_EINVAL,
					 "redis %s: trim of %zu keys", s->where,
					 n)
			 : check_args(s, n, keys, ttl_us, &grouped, err);
	if (rc == 0 && !grouped)
		rc = drl_error_set(err, DRL_EINVAL,
				   "redis %s: trim of keys that are no "
				   "grouped counters",
				   s->where);
	return rc;
}

int drl__redis_trim(drl_backend *b, size_t n, const drl_bytes *keys,
		    int64_t ttl_us, drl_error *err)
{
	rstore *s = (rstore *)b;
	redisReply *r[2];
	conn proxy, *c;
	int rc = check_trim(s, n, keys, ttl_us, err);
	if (rc == 0)
		rc = drl__redis_acquire_shared(s, &proxy, &c, err);
	if (rc)
		return rc;
	rc = drl__redis_begin(s, c, err);
	if (rc == 0)
		rc = append_trim(s, c, n, keys, ttl_us, err);
	if (rc == 0)
		rc = drl__redis_collect(s, c, 2, r, "HDEL", err);
	if (rc == 0) {
		rc = trim_result(s, r, err);
		drl__redis_free_replies(r, 2);
	}
	drl__redis_release(s, c);
	return rc;
}

int drl__redis_add_read(drl_backend *b, size_t n, const drl_bytes *keys,
			int64_t delta, int64_t ttl_us, int64_t *values,
			drl_error *err)
{
	rstore *s = (rstore *)b;
	redisReply *r[3];
	bool grouped = false;
	conn proxy, *c;
	int rc = check_args(s, n, keys, ttl_us, &grouped, err);
	if (rc)
		return rc;
	size_t nr = add_read_replies(n, grouped);
	rc = drl__redis_acquire_shared(s, &proxy, &c, err);
	if (rc == 0) {
		rc = drl__redis_begin(s, c, err);
		if (rc == 0)
			rc = append_add_read(s, c, n, keys, delta, ttl_us, err);
		if (rc == 0)
			rc = drl__redis_collect(s, c, nr, r, "INCRBY", err);
		if (rc == 0) {
			rc = add_read_result(s, r, n, grouped, values, err);
			drl__redis_free_replies(r, nr);
		}
		drl__redis_release(s, c);
	}
	return rc;
}

/* A started add_read: its commands, its replies, and its owner. */
typedef struct add_call {
	rreq q; /* first: the pipe hands back &q */
	char *cmd;
	size_t n;
	bool grouped;
	bool trim; /* a trim: replies HDEL, PEXPIRE; no values */
	drl_eval_done_fn done;
	void *arg;
	int64_t *values;  /* n, in the allocation */
	redisReply *r[3]; /* call_replies() */
} add_call;

static size_t call_replies(const add_call *a)
{
	return a->trim ? 2 : add_read_replies(a->n, a->grouped);
}

static void add_call_free(add_call *a, bool replies)
{
	if (replies)
		drl__redis_free_replies(a->r, call_replies(a));
	free(a->cmd);
	free(a);
}

/* Its replies are in (or it failed): hand the outcome to the owner, as
 * drl__redis_add_read() would have returned it. */
static void add_complete(rstore *s, rreq *q)
{
	add_call *a = (add_call *)q;
	drl_error err = q->err;
	int rc = q->rc; /* on failure the pipe freed what it had read */
	if (rc == 0)
		rc = a->trim ? trim_result(s, a->r, &err)
			     : add_read_result(s, a->r, a->n, a->grouped,
					       a->values, &err);
	/* A started call is never run again: the plain code. */
	a->done(a->arg, drl__redis_code(rc), a->values, a->trim ? 0 : a->n,
		rc ? &err : NULL);
	add_call_free(a, q->rc == 0);
}

/* Start a (add_read or trim) call: its commands formatted into a
 * buffer of its own, then handed to a pipe, or queued on channel ch. */
static int call_start(rstore *s, drl_channel *ch, size_t n,
		      const drl_bytes *keys, int64_t delta, int64_t ttl_us,
		      bool grouped, bool trim, drl_eval_done_fn done, void *arg,
		      drl_error *err)
{
	if (done == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "redis: a started call without callback");
	add_call *a = calloc(1, sizeof *a + n * sizeof(int64_t));
	if (a == NULL)
		return drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				     s->where);
	a->values = (int64_t *)(a + 1);
	a->n = n;
	a->grouped = grouped;
	a->trim = trim;
	a->done = done;
	a->arg = arg;

	conn pc = {.shared = true};
	int rc = drl__redis_begin(s, &pc, err);
	if (rc == 0)
		rc = trim ? append_trim(s, &pc, n, keys, ttl_us, err)
			  : append_add_read(s, &pc, n, keys, delta, ttl_us,
					    err);
	if (rc) {
		free(pc.qbuf);
		free(a);
		return rc;
	}
	a->cmd = pc.qbuf;
	a->q.buf = a->cmd;
	a->q.len = pc.qlen;
	a->q.n = call_replies(a);
	a->q.r = a->r;
	a->q.what = trim ? "HDEL" : "INCRBY";
	a->q.complete = add_complete;
	a->q.chan = ch;
	a->q.deadline = drl__redis_deadline_in(s->timeout_ms);
	rc = drl__redis_req_queue(s, &a->q, err);
	if (rc)
		add_call_free(a, false);
	return rc;
}

int drl__redis_add_read_start(drl_backend *b, drl_channel *ch, size_t n,
			      const drl_bytes *keys, int64_t delta,
			      int64_t ttl_us, drl_eval_done_fn done, void *arg,
			      drl_error *err)
{
	rstore *s = (rstore *)b;
	bool grouped = false;
	int rc = check_args(s, n, keys, ttl_us, &grouped, err);
	return rc ? rc
		  : call_start(s, ch, n, keys, delta, ttl_us, grouped, false,
			       done, arg, err);
}

int drl__redis_trim_start(drl_backend *b, drl_channel *ch, size_t n,
			  const drl_bytes *keys, int64_t ttl_us,
			  drl_eval_done_fn done, void *arg, drl_error *err)
{
	rstore *s = (rstore *)b;
	int rc = check_trim(s, n, keys, ttl_us, err);
	return rc ? rc
		  : call_start(s, ch, n, keys, 0, ttl_us, true, true, done, arg,
			       err);
}
