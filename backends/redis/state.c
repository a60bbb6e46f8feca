/*
 * The Redis store's optimistic state (tx=watch, and every store for the
 * core's load/cas): load() is WATCH k; GET k on a connection the calling
 * thread then holds (call.c), cas() is MULTI/SET/EXEC on that connection.
 */
#include "internal.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- optimistic state: WATCH/GET, MULTI/SET/EXEC ------------------------ */

/* A nonzero version token. */
static uint64_t new_version(rstore *s)
{
	uint64_t v;
	do
		v = atomic_fetch_add(&s->next_version, 1) + 1;
	while (v == 0);
	return v;
}

/*
 * WATCH k; GET k, one round trip, and keep the connection for this
 * thread's cas(). The version is a token for "what this thread watched":
 * the WATCH itself is the check.
 */
int drl__redis_load(drl_backend *b, drl_bytes key, void *buf, size_t cap,
		    size_t *len, uint64_t *version, drl_error *err)
{
	rstore *s = (rstore *)b;
	keybuf k;
	conn *c;
	drl__redis_key_init(&k);
	int rc = drl__redis_key_make(s, &k, key, err);
	if (rc == 0)
		rc = drl__redis_acquire(s, &c, err);
	if (rc) {
		drl__redis_key_done(&k);
		return rc;
	}
	const char *watch[2] = {"WATCH", k.p}, *get[2] = {"GET", k.p};
	size_t watchl[2] = {5, k.len}, getl[2] = {3, k.len};
	redisReply *r[2];
	rc = drl__redis_begin(s, c, err);
	if (rc == 0)
		rc = drl__redis_append(s, c, 2, watch, watchl, err);
	if (rc == 0) {
		c->watching = true;
		rc = drl__redis_append(s, c, 2, get, getl, err);
	}
	if (rc == 0)
		rc = drl__redis_collect(s, c, 2, r, "WATCH/GET", err);
	drl__redis_key_done(&k);
	if (rc) {
		drl__redis_release(s, c);
		return rc;
	}

	uint64_t v = 0;
	bool keep = false;
	if (!drl__redis_is_status(r[0], "OK")) {
		if (r[0]->type != REDIS_REPLY_ERROR)
			c->broken = true;
		rc = drl__redis_reply_error(s, "WATCH", r[0], false, err);
	} else if (r[1]->type == REDIS_REPLY_NIL) {
		*len = 0;
		keep = true;
	} else if (r[1]->type == REDIS_REPLY_STRING) {
		if (r[1]->len > cap) {
			*len = r[1]->len;
			rc = drl_error_set(err, DRL_ERANGE,
					   "redis %s: state of %zu bytes does "
					   "not fit %zu",
					   s->where, r[1]->len, cap);
		} else {
			if (r[1]->len)
				memcpy(buf, r[1]->str, r[1]->len);
			*len = r[1]->len;
			v = new_version(s);
			keep = true;
		}
	} else {
		if (r[1]->type != REDIS_REPLY_ERROR)
			c->broken = true;
		rc = drl__redis_reply_error(s, "GET", r[1], false, err);
	}
	drl__redis_free_replies(r, 2);
	if (!keep) {
		drl__redis_release(s, c);
		return rc;
	}
	*version = v;
	return drl__redis_hold(s, c, key, v, err);
}

/*
 * Store blob at key if it is unchanged since this thread's load() of it
 * (MULTI; SET k blob PX ttl; EXEC on the watching connection; nil EXEC:
 * DRL_ECONFLICT). Without that load: version 0 is SET NX, anything else
 * DRL_ECONFLICT.
 */
int drl__redis_cas(drl_backend *b, drl_bytes key, const void *blob, size_t len,
		   uint64_t version, int64_t ttl_us, drl_error *err)
{
	rstore *s = (rstore *)b;
	char ms[24];
	size_t mslen = 0;
	conn *c = NULL;
	keybuf k;
	int rc = drl__redis_ttl_arg(s, ttl_us, ms, &mslen, err);
	if (rc)
		return rc;
	/* the held connection watches key since the matching load */
	conn *c0 = drl__redis_take_held(s, key, version);
	bool checked = c0 != NULL;
	c = c0;
	if (c == NULL && version != 0)
		return drl_error_set(err, DRL_ECONFLICT,
				     "redis %s: cas without a matching load "
				     "on this thread",
				     s->where);
	drl__redis_key_init(&k);
	rc = drl__redis_key_make(s, &k, key, err);
	if (rc == 0 && c == NULL)
		rc = drl__redis_acquire(s, &c, err);
	if (rc) {
		if (c)
			drl__redis_release(s, c);
		drl__redis_key_done(&k);
		return rc;
	}

	const char *data = len ? blob : "";
	const char *set[6] = {"SET", k.p, data, "PX", ms, "NX"};
	size_t setl[6] = {3, k.len, len, 2, mslen, 2};
	redisReply *r[3];
	if (checked) {
		/* The held connection: its WATCH is the check. */
		const tx_cmd cmd[1] = {{5, set, setl}};
		redisReply *e;
		drl__redis_call_start(c);
		rc = drl__redis_tx_call(s, c, 1, cmd, r, "SET", false, &e, err);
		drl__redis_key_done(&k);
		if (rc) {
			drl__redis_release(s, c);
			return rc;
		}
		if (e == NULL)
			rc = drl_error_set(err, DRL_ECONFLICT,
					   "redis %s: the state changed "
					   "since it was loaded",
					   s->where);
		else if (!drl__redis_is_status(e->element[0], "OK"))
			rc = drl__redis_reply_error(s, "SET", e->element[0],
						    false, err);
		drl__redis_free_replies(r, 3);
		drl__redis_release(s, c);
		return rc;
	}

	/* No load to check against, version 0: only if absent. */
	rc = drl__redis_begin(s, c, err);
	if (rc == 0)
		rc = drl__redis_append(s, c, 6, set, setl, err);
	if (rc == 0)
		rc = drl__redis_collect(s, c, 1, r, "SET NX", err);
	drl__redis_key_done(&k);
	if (rc) {
		drl__redis_release(s, c);
		return rc;
	}
	if (r[0]->type == REDIS_REPLY_NIL)
		rc = drl_error_set(err, DRL_ECONFLICT,
				   "redis %s: the state appeared since it was "
				   "loaded",
				   s->where);
	else if (!drl__redis_is_status(r[0], "OK"))
		rc = drl__redis_refused(
			s, r[0],
			drl__redis_reply_error(s, "SET", r[0], false, err));
	drl__redis_free_replies(r, 1);
	drl__redis_release(s, c);
	return rc;
}
