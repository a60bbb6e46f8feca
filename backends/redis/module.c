/*
 * The Redis store's eval() under tx=module: DRL.TWIN of the Redis module
 * (redis_module/drl_redis.so) instead of EVALSHA. The twin's name, its
 * first key and its integers go as they are; the module runs the
 * algorithm's C step (or its counters) on the server and answers the
 * twins' common form. One round trip, atomic on the server, no script.
 * A server without the module answers "unknown command": DRL_ESTORE with
 * what to do. Under tx=auto, script.c sends DRL.TWIN instead of EVALSHA
 * for the calls drl__redis_twin_takes() says the module takes, on a
 * connection whose server has it.
 *
 * A policy (several limits of one request) goes as one DRL.POLICY under
 * tx=module, and under tx=auto where the connection's server has the
 * module (drl__redis_module_policy): the module decides the limits as the
 * core would, with no other client in between.
 */
#include "internal.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <string.h>

/* The twin's name DRL.TWIN is sent. */
static const char *twin_name(const drl_script *script)
{
	return script && script->name ? script->name : "";
}

bool drl__redis_twin_takes(const rstore *s, const drl_script *script,
			   size_t nkeys, const drl_bytes *keys, size_t nargs,
			   const int64_t *args)
{
	static const char *const twins[] = {"counter", "token_bucket", "gcra",
					    "sliding_log"};
	const char *name = twin_name(script);
	bool named = false;
	for (size_t i = 0; i < sizeof twins / sizeof twins[0]; i++)
		named = named || strcmp(name, twins[i]) == 0;
	/* what DRL.TWIN refuses (redis_module/twin.c): the store's clock,
	 * drl_adjust, a PERIOD of no whole ms, a key past its buffer */
	return named && nkeys >= 1 && nargs >= 4 &&
	       nargs <= DRL__TWIN_ARGS_MAX && args[0] >= 0 &&
	       args[0] <= DRL_TIME_MAX_US && args[3] > 0 &&
	       args[3] % 1000 == 0 && keys[0].len >= 1 &&
	       keys[0].len <= DRL__TWIN_KEY_MAX - s->prefixlen;
}

int drl__redis_twin_result(rstore *s, const char *cmd, const drl_script *script,
			   const redisReply *r, int64_t *out, size_t nout,
			   size_t *nret, drl_error *err)
{
	const char *name = twin_name(script), *sp = *name ? " " : "";
	if (r->type == REDIS_REPLY_ERROR) {
		int redirect = drl__redis_cluster_reply(s, r, err);
		if (redirect)
			return redirect;
		drl__redis_readonly_check(s, r);
		const char *t = r->str ? r->str : "";
		int n = (int)(r->len < MSG_ERR_MAX ? r->len : MSG_ERR_MAX);
		if (strncmp(t, "ERR unknown command", 19) == 0)
			return drl_error_set(err, DRL_ESTORE,
					     "redis %s: tx=module: the server "
					     "has no %s command: load "
					     "the module (redis-server "
					     "--loadmodule drl_redis.so), or "
					     "use tx=lua",
					     s->where, cmd);
		return drl__redis_refused(
			s, r,
			drl_error_set(err,
				      strncmp(t, "ECORRUPT ", 9) == 0
					      ? DRL_ECORRUPT
					      : DRL_ESTORE,
				      "redis %s: %s%s%s: %.*s", s->where, cmd,
				      sp, name, n, t));
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements > nout)
		return drl_error_set(err, DRL_ECORRUPT,
				     "redis %s: %s%s%s answered a %s of "
				     "%zu, not a decision",
				     s->where, cmd, sp, name,
				     drl__redis_reply_type_name(r->type),
				     r->elements);
	for (size_t i = 0; i < r->elements; i++) {
		if (r->element[i]->type != REDIS_REPLY_INTEGER)
			return drl_error_set(err, DRL_ECORRUPT,
					     "redis %s: %s%s%s: value %zu "
					     "is no integer",
					     s->where, cmd, sp, name, i);
		out[i] = r->element[i]->integer;
	}
	*nret = r->elements;
	return 0;
}

int drl__redis_twin_append(rstore *s, conn *c, const drl_script *script,
			   size_t nkeys, const drl_bytes *keys, size_t nargs,
			   const int64_t *args, drl_error *err)
{
	if (nargs > DRL__TWIN_ARGS_MAX || nkeys < 1)
		return drl_error_set(err, DRL_EINVAL,
				     "redis %s: DRL.TWIN with %zu keys and %zu "
				     "integers: one key and at most %d",
				     s->where, nkeys, nargs,
				     DRL__TWIN_ARGS_MAX);
	const char *name = twin_name(script);
	const char *argv[3 + DRL__TWIN_ARGS_MAX];
	size_t lens[3 + DRL__TWIN_ARGS_MAX];
	char num[DRL__TWIN_ARGS_MAX][24];
	keybuf k;
	drl__redis_key_init(&k);
	int rc = drl__redis_key_make(s, &k, keys[0], err);
	if (rc == 0) {
		argv[0] = "DRL.TWIN";
		lens[0] = 8;
		argv[1] = k.p;
		lens[1] = k.len;
		argv[2] = name;
		lens[2] = strlen(name);
		for (size_t i = 0; i < nargs; i++) {
			lens[3 + i] = drl__redis_i64(num[i], args[i]);
			argv[3 + i] = num[i];
		}
		rc = drl__redis_append(s, c, (int)(3 + nargs), argv, lens, err);
	}
	drl__redis_key_done(&k);
	return rc;
}

int drl__redis_module_eval(drl_backend *b, const drl_script *script,
			   size_t nkeys, const drl_bytes *keys, size_t nargs,
			   const int64_t *args, int64_t *out, size_t nout,
			   size_t *nret, drl_error *err)
{
	rstore *s = (rstore *)b;
	/* drl_adjust: not done by the module yet; nothing sent, the core
	 * adjusts with the other primitives (include/drl/sys/backend.h,
	 * DRL_BACKEND_ESPLIT) */
	if (nargs > DRL__TWIN_ARGS_MAX)
		return DRL_BACKEND_ESPLIT;
	conn proxy, *c = NULL;
	redisReply *r = NULL;
	int rc = drl__redis_acquire_shared(s, &proxy, &c, err);
	if (rc)
		return rc;
	rc = drl__redis_begin(s, c, err);
	if (rc == 0)
		rc = drl__redis_twin_append(s, c, script, nkeys, keys, nargs,
					    args, err);
	if (rc == 0)
		rc = drl__redis_collect(s, c, 1, &r, "DRL.TWIN", err);
	if (rc == 0)
		rc = drl__redis_twin_result(s, "DRL.TWIN", script, r, out, nout,
					    nret, err);
	if (r)
		freeReplyObject(r);
	drl__redis_release(s, c);
	return rc;
}

int drl__redis_policy_append(rstore *s, conn *c, size_t n,
			     const drl_script *const *scripts,
			     const drl_bytes *keys, const int64_t *args,
			     drl_error *err)
{
	enum {
		G = 2 + DRL__TWIN_ARGS_MAX,
		ARGC = 1 + G * DRL_POLICY_LIMITS_MAX
	};
	if (n < 1 || n > DRL_POLICY_LIMITS_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "redis %s: DRL.POLICY of %zu limits",
				     s->where, n);
	const char *argv[ARGC];
	size_t lens[ARGC];
	char num[DRL_POLICY_LIMITS_MAX * DRL__TWIN_ARGS_MAX][24];
	char kbuf[DRL_POLICY_LIMITS_MAX * DRL__TWIN_KEY_MAX];
	size_t used = 0;
	argv[0] = "DRL.POLICY";
	lens[0] = 10;
	for (size_t i = 0; i < n; i++) {
		size_t a = 1 + i * G;
		used += drl__redis_prefixed_keys(s, 1, &keys[i], kbuf + used,
						 argv + a, lens + a);
		argv[a + 1] = twin_name(scripts[i]);
		lens[a + 1] = strlen(argv[a + 1]);
		for (size_t j = 0; j < DRL__TWIN_ARGS_MAX; j++) {
			size_t x = i * DRL__TWIN_ARGS_MAX + j;
			lens[a + 2 + j] = drl__redis_i64(num[x], args[x]);
			argv[a + 2 + j] = num[x];
		}
	}
	return drl__redis_append(s, c, (int)(1 + n * G), argv, lens, err);
}

/* Queue DRL.POLICY for calls[0..n) on c's call. */
static int policy_append(rstore *s, conn *c, size_t n,
			 const drl_script_call *calls, drl_error *err)
{
	const drl_script *scripts[DRL_POLICY_LIMITS_MAX];
	drl_bytes keys[DRL_POLICY_LIMITS_MAX];
	int64_t args[DRL_POLICY_LIMITS_MAX * DRL__TWIN_ARGS_MAX];
	for (size_t i = 0; i < n && i < DRL_POLICY_LIMITS_MAX; i++) {
		scripts[i] = calls[i].script;
		keys[i] = calls[i].keys[0];
		memcpy(args + i * DRL__TWIN_ARGS_MAX, calls[i].args,
		       sizeof *args * DRL__TWIN_ARGS_MAX);
	}
	return drl__redis_policy_append(s, c, n, scripts, keys, args, err);
}

/* Whether the module takes every call of the policy as DRL.TWIN would. */
static bool policy_takes(const rstore *s, size_t n,
			 const drl_script_call *calls)
{
	if (n < 1 || n > DRL_POLICY_LIMITS_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		const drl_script_call *k = &calls[i];
		if (k->nargs != DRL__TWIN_ARGS_MAX ||
		    k->args[0] != calls[0].args[0] ||
		    k->args[1] != calls[0].args[1] ||
		    !drl__redis_twin_takes(s, k->script, k->nkeys, k->keys,
					   k->nargs, k->args))
			return false;
	}
	return true;
}

int drl__redis_module_policy(drl_backend *b, size_t n,
			     const drl_script_call *calls, int64_t *out,
			     size_t nout, size_t *nret, drl_error *err)
{
	rstore *s = (rstore *)b;
	if (!policy_takes(s, n, calls))
		return DRL_ENOTSUP;
	conn proxy, *c = NULL;
	redisReply *r = NULL;
	int rc = drl__redis_acquire_shared(s, &proxy, &c, err);
	if (rc)
		return rc;
	/* tx=auto: a connection of its own asks its server (once); a shared
	 * one goes by the last answer seen, and an "unknown command" from
	 * its server ran nothing */
	if (s->auto_twin && !c->shared) {
		rc = drl__redis_begin(s, c, err);
		if (rc == 0)
			rc = drl__redis_conn_probe(s, c, err);
		if (rc == 0 && c->twin != TWIN_YES)
			rc = DRL_ENOTSUP;
	} else if (s->auto_twin && !atomic_load(&s->twin_seen)) {
		rc = DRL_ENOTSUP;
	}
	if (rc == 0)
		rc = drl__redis_begin(s, c, err);
	if (rc == 0)
		rc = policy_append(s, c, n, calls, err);
	if (rc == 0)
		rc = drl__redis_collect(s, c, 1, &r, "DRL.POLICY", err);
	if (rc == 0 && s->auto_twin && r->type == REDIS_REPLY_ERROR && r->str &&
	    strncmp(r->str, "ERR unknown command", 19) == 0)
		rc = DRL_ENOTSUP;
	if (rc == 0)
		rc = drl__redis_twin_result(s, "DRL.POLICY", NULL, r, out, nout,
					    nret, err);
	if (r)
		freeReplyObject(r);
	drl__redis_release(s, c);
	return rc;
}
