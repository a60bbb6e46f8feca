/*
 * The Redis store's server-side scripts (tx=lua), declared in
 * backends/redis/internal.h: an algorithm's Lua twin run by EVALSHA (or EVAL
 * with its source), and the SHA1 of each script cached per store
 * (rstore's script cache).
 *
 * NOSCRIPT (a SCRIPT FLUSH, a restart, a failover) is answered inside
 * the call. A blocking call (drl__redis_eval) sends SCRIPT LOAD and the
 * EVALSHA again, pipelined, then EVAL with the source should a flush land
 * between those two. A started call (drl__redis_eval_start) is answered
 * by EVAL with the source: one more round trip that cannot meet NOSCRIPT.
 * Under tx=module a started call sends DRL.TWIN (module.c formats it and
 * reads its answer) on the same path, and meets no NOSCRIPT.
 *
 * Started calls travel on the store's shared connections
 * (backends/redis/pipe.c) and are finished by whichever thread leads
 * their pipe (its I/O thread, or a blocking caller's). Blocking calls
 * take their connection from the store (drl__redis_acquire_shared,
 * backends/redis/store.c): a shared one, or one of the pool.
 */
#include "internal.h"

#include <hiredis/hiredis.h>
#include <openssl/evp.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ARGV_STACK 32  /* EVALSHA argument vectors on the stack */
#define MEM_STACK 1024 /* EVALSHA argument bytes on the stack */

/* ---- scripts (tx=lua) --------------------------------------------------- */

/* The lowercase hex SHA1 of script's source, cached per (script, source)
 * pointer: a drl_script and its source must stay unchanged while the
 * store is open. */
static int script_sha1(rstore *s, const drl_script *sc, char hex[41],
		       drl_error *err)
{
	pthread_mutex_lock(&s->script_mu);
	for (size_t i = 0; i < SCRIPT_CACHE; i++) {
		if (s->scripts[i].script == sc &&
		    s->scripts[i].source == sc->source) {
			memcpy(hex, s->scripts[i].hex, 41);
			pthread_mutex_unlock(&s->script_mu);
			return 0;
		}
	}
	pthread_mutex_unlock(&s->script_mu);

	static const char digits[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (!EVP_Digest(sc->source, strlen(sc->source), md, &mdlen, EVP_sha1(),
			NULL) ||
	    mdlen != 20)
		return drl_error_set(err, DRL_EINTERNAL,
				     "redis: SHA1 of script %s failed",
				     sc->name ? sc->name : "?");
	for (unsigned i = 0; i < 20; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[40] = '\0';

	pthread_mutex_lock(&s->script_mu);
	script_sha *e = &s->scripts[s->script_next++ % SCRIPT_CACHE];
	e->script = sc;
	e->source = sc->source;
	memcpy(e->hex, hex, 41);
	pthread_mutex_unlock(&s->script_mu);
	return 0;
}

/* A script's reply into out[]: an array of integers, one integer, or nil
 * (no values). */
static int script_result(rstore *s, const drl_script *sc, const redisReply *r,
			 int64_t *out, size_t nout, size_t *nret,
			 drl_error *err)
{
	const char *name = sc->name ? sc->name : "?";
	switch (r->type) {
	case REDIS_REPLY_NIL:
		*nret = 0;
		return 0;
	case REDIS_REPLY_INTEGER:
		if (nout < 1)
			break;
		out[0] = r->integer;
		*nret = 1;
		return 0;
	case REDIS_REPLY_ARRAY:
		if (r->elements > nout)
			break;
		for (size_t i = 0; i < r->elements; i++) {
			if (r->element[i]->type != REDIS_REPLY_INTEGER)
				return drl_error_set(
					err, DRL_EINTERNAL,
					"redis %s: script %s: result %zu is a "
					"%s, not an integer",
					s->where, name, i,
					drl__redis_reply_type_name(
						r->element[i]->type));
			out[i] = r->element[i]->integer;
		}
		*nret = r->elements;
		return 0;
	case REDIS_REPLY_ERROR: {
		int redirect = drl__redis_cluster_reply(s, r, err);
		if (redirect)
			return redirect;
		drl__redis_readonly_check(s, r);
		/* A twin that finds malformed state answers "ECORRUPT ...". */
		int n = (int)(r->len < MSG_ERR_MAX ? r->len : MSG_ERR_MAX);
		bool corrupt = r->str && strncmp(r->str, "ECORRUPT ", 9) == 0;
		/* READONLY: the script's first write was refused (a replica
		 * refuses them all, and a script runs whole): nothing ran. */
		return drl__redis_refused(
			s, r,
			drl_error_set(err, corrupt ? DRL_ECORRUPT : DRL_ESTORE,
				      "redis %s: script %s: %.*s", s->where,
				      name, n, r->str ? r->str : ""));
	}
	default:
		return drl_error_set(err, DRL_EINTERNAL,
				     "redis %s: script %s returned a %s, not "
				     "integers",
				     s->where, name,
				     drl__redis_reply_type_name(r->type));
	}
	return drl_error_set(err, DRL_ERANGE,
			     "redis %s: script %s returned %zu values; room "
			     "for %zu",
			     s->where, name,
			     r->type == REDIS_REPLY_ARRAY ? r->elements : 1,
			     nout);
}

/* 1 when r is a NOSCRIPT error (script cache flushed, failover). */
static bool is_noscript(const redisReply *r)
{
	return r->type == REDIS_REPLY_ERROR && r->str &&
	       strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/* Check a script call's shape; its SHA1 into hex. */
static int script_prepare(rstore *s, const drl_script *script, size_t nkeys,
			  size_t nargs, char hex[41], drl_error *err)
{
	if (script == NULL || script->source == NULL)
		return drl_error_set(err, DRL_EINVAL, "redis: no script");
	if (nkeys > ARGS_MAX || nargs > ARGS_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "redis: script %s: too many keys or "
				     "arguments",
				     script->name ? script->name : "?");
	return script_sha1(s, script, hex, err);
}

/*
 * Queue EVALSHA hex nkeys keys... args... on c (or, with `source`, EVAL
 * source ...): keys with the store's prefix, integers as decimal strings,
 * the argument vector on the stack when small (hiredis copies it at
 * once). On failure c is broken: what was queued before must never reach
 * the server out of step.
 */
static int append_script_call(rstore *s, conn *c, const char hex[41],
			      const char *source, size_t nkeys,
			      const drl_bytes *keys, size_t nargs,
			      const int64_t *args, drl_error *err)
{
	size_t argc = 3 + nkeys + nargs;
	size_t mem = 24 + nargs * 24;
	if (s->prefixlen)
		for (size_t i = 0; i < nkeys; i++)
			mem += s->prefixlen + keys[i].len;
	const char *sargv[ARGV_STACK];
	size_t slens[ARGV_STACK];
	char smem[MEM_STACK];
	const char **argv = sargv;
	size_t *lens = slens;
	char *m = smem, *p;
	int rc;
	if (argc > ARGV_STACK) {
		argv = malloc(argc * sizeof *argv);
		lens = malloc(argc * sizeof *lens);
	}
	if (mem > sizeof smem)
		m = malloc(mem);
	if (argv == NULL || lens == NULL || m == NULL) {
		c->broken = true;
		rc = drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				   s->where);
		goto out;
	}
	p = m;
	argv[0] = source ? "EVAL" : "EVALSHA";
	lens[0] = strlen(argv[0]);
	argv[1] = source ? source : hex;
	lens[1] = source ? strlen(source) : 40;
	argv[2] = p;
	lens[2] = drl__redis_i64(p, (int64_t)nkeys);
	p += lens[2];
	p += drl__redis_prefixed_keys(s, nkeys, keys, p, argv + 3, lens + 3);
	for (size_t i = 0; i < nargs; i++) {
		argv[3 + nkeys + i] = p;
		lens[3 + nkeys + i] = drl__redis_i64(p, args[i]);
		p += lens[3 + nkeys + i];
	}
	rc = drl__redis_append(s, c, (int)argc, argv, lens, err);
out:
	if (argv != sargv)
		free((void *)argv);
	if (lens != slens)
		free(lens);
	if (m != smem)
		free(m);
	return rc;
}

/* Queue SCRIPT LOAD source. */
static int append_script_load(rstore *s, conn *c, const drl_script *script,
			      drl_error *err)
{
	const char *argv[3] = {"SCRIPT", "LOAD", script->source};
	size_t lens[3] = {6, 4, strlen(script->source)};
	return drl__redis_append(s, c, 3, argv, lens, err);
}

/* SCRIPT LOAD's reply r: the SHA1 we send with EVALSHA, or an error. */
static int script_loaded(rstore *s, const drl_script *script,
			 const char hex[41], const redisReply *r,
			 drl_error *err)
{
	if (r->type != REDIS_REPLY_STRING)
		return drl__redis_reply_error(s, "SCRIPT LOAD", r, false, err);
	if (r->len != 40 || strncasecmp(r->str, hex, 40) != 0)
		return drl_error_set(err, DRL_EINTERNAL,
				     "redis %s: SCRIPT LOAD of %s gave "
				     "another SHA1",
				     s->where,
				     script->name ? script->name : "?");
	return 0;
}

/*
 * EVALSHA's reply `first` (freed here) into out[]. On NOSCRIPT: SCRIPT LOAD
 * and EVALSHA again on c's call, pipelined, once.
 */
static int script_answer(rstore *s, conn *c, const drl_script *script,
			 const char hex[41], size_t nkeys,
			 const drl_bytes *keys, size_t nargs,
			 const int64_t *args, redisReply *first, int64_t *out,
			 size_t nout, size_t *nret, drl_error *err)
{
	redisReply *r[2] = {first, NULL};
	int rc = 0;
	if (is_noscript(r[0])) {
		freeReplyObject(r[0]);
		r[0] = NULL;
		rc = append_script_load(s, c, script, err);
		if (rc == 0)
			rc = append_script_call(s, c, hex, NULL, nkeys, keys,
						nargs, args, err);
		if (rc == 0)
			rc = drl__redis_collect(s, c, 2, r,
						"SCRIPT LOAD/EVALSHA", err);
		if (rc != 0)
			r[0] = r[1] =
				NULL; /* drl__redis_collect() freed what it read */
		if (rc == 0) {
			rc = script_loaded(s, script, hex, r[0], err);
			freeReplyObject(r[0]);
			r[0] = r[1];
			r[1] = NULL;
		}
		/* A SCRIPT FLUSH between the two: EVAL with the source
		 * cannot meet NOSCRIPT (the script did not run: once). */
		if (rc == 0 && is_noscript(r[0])) {
			freeReplyObject(r[0]);
			r[0] = NULL;
			rc = append_script_call(s, c, hex, script->source,
						nkeys, keys, nargs, args, err);
			if (rc == 0)
				rc = drl__redis_collect(s, c, 1, r, "EVAL",
							err);
			if (rc != 0)
				r[0] = NULL;
		}
	}
	if (rc == 0)
		rc = script_result(s, script, r[0], out, nout, nret, err);
	if (r[0])
		freeReplyObject(r[0]);
	return rc;
}

/* ---- tx=auto: DRL.TWIN where the connection's server has it ------------ */

/* A blocking tx=auto call and the form its command has on c. */
typedef struct auto_call {
	conn *c;
	const drl_script *script;
	const char *hex;
	size_t nkeys, nargs;
	const drl_bytes *keys;
	const int64_t *args;
	bool twin; /* DRL.TWIN queued, not EVALSHA */
} auto_call;

/* Queue a's command on a->c's call in the form `twin` says. */
static int auto_append(rstore *s, auto_call *a, bool twin, drl_error *err)
{
	int rc = drl__redis_begin(s, a->c, err);
	if (rc == 0 && twin)
		rc = drl__redis_twin_append(s, a->c, a->script, a->nkeys,
					    a->keys, a->nargs, a->args, err);
	else if (rc == 0)
		rc = append_script_call(s, a->c, a->hex, NULL, a->nkeys,
					a->keys, a->nargs, a->args, err);
	if (rc == 0)
		a->twin = twin;
	return rc;
}

/* rreq.form of a blocking call on the shared connections: formatted
 * again in the form of the connection it goes out on (the caller waits
 * meanwhile: its proxy is not touched by anyone else). */
static int auto_form(rstore *s, rreq *q, bool twin, drl_error *err)
{
	auto_call *a = q->form_arg;
	if (twin == a->twin)
		return 0;
	int rc = auto_append(s, a, twin, err);
	if (rc)
		return rc;
	q->buf = a->c->qbuf;
	q->len = a->c->qlen;
	q->what = twin ? "DRL.TWIN" : "EVALSHA";
	return 0;
}

/*
 * EVALSHA sha nkeys keys... args... (integers as decimal strings), or with
 * `may_twin` (tx=auto, a call the module takes) DRL.TWIN on a connection
 * whose server has it.
 */
static int eval_by(rstore *s, const drl_script *script, size_t nkeys,
		   const drl_bytes *keys, size_t nargs, const int64_t *args,
		   bool may_twin, int64_t *out, size_t nout, size_t *nret,
		   drl_error *err)
{
	char hex[41];
	conn proxy, *c;
	int rc = script_prepare(s, script, nkeys, nargs, hex, err);
	if (rc == 0)
		rc = drl__redis_acquire_shared(s, &proxy, &c, err);
	if (rc)
		return rc;
	auto_call a = {.c = c,
		       .script = script,
		       .hex = hex,
		       .nkeys = nkeys,
		       .nargs = nargs,
		       .keys = keys,
		       .args = args};
	/* A connection of its own: what its server said (asked once). A
	 * shared one: the last answer seen, formatted again by the pipe
	 * for the connection it goes out on. */
	bool twin = may_twin && atomic_load(&s->twin_seen);
	if (may_twin && !c->shared) {
		rc = drl__redis_begin(s, c, err);
		if (rc == 0)
			rc = drl__redis_conn_probe(s, c, err);
		twin = c->twin == TWIN_YES;
	}
	if (rc == 0)
		rc = auto_append(s, &a, twin, err);
	if (rc == 0 && may_twin && c->shared) {
		c->form = auto_form;
		c->form_arg = &a;
	}
	redisReply *r = NULL;
	if (rc == 0)
		rc = drl__redis_collect(s, c, 1, &r,
					twin ? "DRL.TWIN" : "EVALSHA", err);
	c->form = NULL;
	/* the form that went out (a shared call's may have changed) */
	if (rc == 0 && a.twin) {
		rc = drl__redis_twin_result(s, "DRL.TWIN", script, r, out, nout,
					    nret, err);
		freeReplyObject(r);
	} else if (rc == 0) {
		rc = script_answer(s, c, script, hex, nkeys, keys, nargs, args,
				   r, out, nout, nret, err);
	}
	drl__redis_release(s, c);
	return rc;
}

int drl__redis_eval(drl_backend *b, const drl_script *script, size_t nkeys,
		    const drl_bytes *keys, size_t nargs, const int64_t *args,
		    int64_t *out, size_t nout, size_t *nret, drl_error *err)
{
	return eval_by((rstore *)b, script, nkeys, keys, nargs, args, false,
		       out, nout, nret, err);
}

int drl__redis_auto_eval(drl_backend *b, const drl_script *script, size_t nkeys,
			 const drl_bytes *keys, size_t nargs,
			 const int64_t *args, int64_t *out, size_t nout,
			 size_t *nret, drl_error *err)
{
	rstore *s = (rstore *)b;
	return eval_by(
		s, script, nkeys, keys, nargs, args,
		drl__redis_twin_takes(s, script, nkeys, keys, nargs, args), out,
		nout, nret, err);
}

/*
 * A script call started by drl__redis_eval_start(): EVALSHA formatted at
 * start, sent on the shared connections with other calls, and finished by
 * whichever thread leads its pipe (eval_complete). The keys and arguments
 * are copied (the caller's need not outlive the start) for the one case
 * that formats again: a NOSCRIPT, answered by EVAL with the source (one
 * round trip that cannot meet NOSCRIPT, and Redis keeps the script for
 * the EVALSHAs after it). Owned by the pipes from the start until
 * eval_complete frees it; one allocation.
 */
typedef struct eval_call {
	rreq q; /* first: the pipe hands back &q */
	redisReply *r[1];
	const drl_script *script;
	char *cmd; /* the formatted command in flight */
	bool twin; /* DRL.TWIN (tx=module; tx=auto: for now), not a script */
	/* DRL.POLICY of npolicy limits (tx=module), their twins: keys[i],
	 * args[i * DRL__TWIN_ARGS_MAX ..] */
	size_t npolicy;
	const drl_script *scripts[DRL_POLICY_LIMITS_MAX];
	bool by_source;
	char hex[41]; /* the script's SHA1 (not under tx=module) */
	drl_eval_done_fn done;
	void *arg;
	size_t nkeys, nargs, nout;
	drl_bytes *keys; /* copies, in the allocation */
	int64_t *args;
	int64_t *out;
} eval_call;

static void eval_call_free(eval_call *e)
{
	if (e->r[0])
		freeReplyObject(e->r[0]);
	free(e->cmd);
	free(e);
}

/* Format e's call (DRL.TWIN, EVALSHA, or EVAL with the source) into
 * e->cmd and point e->q at it. */
static int eval_format(rstore *s, eval_call *e, drl_error *err)
{
	conn pc = {.shared = true};
	int rc = drl__redis_begin(s, &pc, err);
	if (rc == 0 && e->npolicy)
		rc = drl__redis_policy_append(s, &pc, e->npolicy, e->scripts,
					      e->keys, e->args, err);
	else if (rc == 0 && e->twin)
		rc = drl__redis_twin_append(s, &pc, e->script, e->nkeys,
					    e->keys, e->nargs, e->args, err);
	else if (rc == 0)
		rc = append_script_call(
			s, &pc, e->hex, e->by_source ? e->script->source : NULL,
			e->nkeys, e->keys, e->nargs, e->args, err);
	if (rc) {
		free(pc.qbuf);
		return rc;
	}
	free(e->cmd);
	e->cmd = pc.qbuf;
	e->q.buf = e->cmd;
	e->q.len = pc.qlen;
	e->q.n = 1;
	e->q.r = e->r;
	e->q.what = e->npolicy     ? "DRL.POLICY"
		    : e->twin      ? "DRL.TWIN"
		    : e->by_source ? "EVAL"
				   : "EVALSHA";
	return 0;
}

/* rreq.form of a started tx=auto call: formatted again when the
 * connection it goes out on says otherwise (a failure keeps it as it
 * was, e->twin too). */
static int eval_form(rstore *s, rreq *q, bool twin, drl_error *err)
{
	eval_call *e = (eval_call *)q;
	if (twin == e->twin)
		return 0;
	e->twin = twin;
	int rc = eval_format(s, e, err);
	if (rc)
		e->twin = !twin;
	return rc;
}

/* A started script call's reply is in (or it failed): hand its outcome
 * to its owner, as drl__redis_eval() would have returned it. */
static void eval_complete(rstore *s, rreq *q)
{
	eval_call *e = (eval_call *)q;
	drl_error err = q->err;
	int rc = q->rc;
	size_t nret = 0;
	if (rc) /* the pipe freed what it had read */
		e->r[0] = NULL;
	if (rc == 0 && !e->twin && !e->by_source && is_noscript(e->r[0])) {
		freeReplyObject(e->r[0]);
		e->r[0] = NULL;
		e->by_source = true;
		q->rc = 0;
		rc = eval_format(s, e, &err);
		if (rc == 0)
			rc = drl__redis_req_queue(s, q, &err);
		if (rc == 0)
			return; /* back here when its reply is in */
	}
	if (rc == 0 && e->twin)
		rc = drl__redis_twin_result(
			s, e->npolicy ? "DRL.POLICY" : "DRL.TWIN",
			e->npolicy ? NULL : e->script, e->r[0], e->out, e->nout,
			&nret, &err);
	else if (rc == 0)
		rc = script_result(s, e->script, e->r[0], e->out, e->nout,
				   &nret, &err);
	/* A started call is never run again: the plain code. */
	e->done(e->arg, drl__redis_code(rc), e->out, nret, rc ? &err : NULL);
	eval_call_free(e);
}

/* An eval_call with room for copies of keys and args and nout results. */
static eval_call *eval_call_new(size_t nkeys, const drl_bytes *keys,
				size_t nargs, const int64_t *args, size_t nout)
{
	size_t keybytes = 0;
	for (size_t i = 0; i < nkeys; i++)
		keybytes += keys[i].len;
	eval_call *e =
		calloc(1, sizeof *e + nkeys * sizeof *keys +
				  (nargs + nout) * sizeof *args + keybytes);
	if (e == NULL)
		return NULL;
	e->keys = (drl_bytes *)(e + 1);
	e->args = (int64_t *)(e->keys + nkeys);
	e->out = e->args + nargs;
	char *kd = (char *)(e->out + nout);
	for (size_t i = 0; i < nkeys; i++) {
		if (keys[i].len)
			memcpy(kd, keys[i].data, keys[i].len);
		e->keys[i] = (drl_bytes){kd, keys[i].len};
		kd += keys[i].len;
	}
	if (nargs)
		memcpy(e->args, args, nargs * sizeof *args);
	e->nkeys = nkeys;
	e->nargs = nargs;
	e->nout = nout;
	return e;
}

/*
 * drl__redis_eval() without waiting: EVALSHA (tx=module: DRL.TWIN)
 * formatted now and queued on a pipe; eval_complete() hands the outcome to done(arg, ...) on the thread
 * that leads the pipe (the pipe's I/O thread, or a blocking caller's).
 */
int drl__redis_eval_start(drl_backend *b, drl_channel *ch,
			  const drl_script *script, size_t nkeys,
			  const drl_bytes *keys, size_t nargs,
			  const int64_t *args, size_t nout,
			  drl_eval_done_fn done, void *arg, drl_error *err)
{
	rstore *s = (rstore *)b;
	char hex[41] = "";
	if (done == NULL || nout > ARGS_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "redis: eval_start: no callback, or "
				     "%zu results",
				     nout);
	int rc = s->module_tx
			 ? 0
			 : script_prepare(s, script, nkeys, nargs, hex, err);
	if (rc)
		return rc;
	eval_call *e = eval_call_new(nkeys, keys, nargs, args, nout);
	if (e == NULL)
		return drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				     s->where);
	e->script = script;
	memcpy(e->hex, hex, sizeof e->hex);
	e->twin = s->module_tx;
	/* tx=auto: in the form of the last connection that answered, and
	 * again in its own connection's when it goes out (eval_form) */
	if (s->auto_twin &&
	    drl__redis_twin_takes(s, script, nkeys, keys, nargs, args)) {
		e->twin = atomic_load(&s->twin_seen);
		e->q.form = eval_form;
	}
	e->done = done;
	e->arg = arg;
	e->q.complete = eval_complete;
	e->q.chan = ch;
	e->q.deadline = drl__redis_deadline_in(s->timeout_ms);
	rc = eval_format(s, e, err);
	if (rc == 0)
		rc = drl__redis_req_queue(s, &e->q, err);
	if (rc)
		eval_call_free(e);
	return rc;
}

/*
 * DRL.POLICY started (tx=module): one eval_call whose keys and integers
 * are every limit's, formatted by module.c and answered as DRL.TWIN is
 * (eval_complete: the module's integers, here six).
 */
int drl__redis_policy_start(drl_backend *b, drl_channel *ch, size_t n,
			    const drl_script_call *calls, size_t nout,
			    drl_eval_done_fn done, void *arg, drl_error *err)
{
	rstore *s = (rstore *)b;
	enum { A = DRL__TWIN_ARGS_MAX };
	if (done == NULL || nout > ARGS_MAX || n < 1 ||
	    n > DRL_POLICY_LIMITS_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "redis: a started policy of %zu limits, "
				     "or no callback",
				     n);
	drl_bytes keys[DRL_POLICY_LIMITS_MAX];
	int64_t args[DRL_POLICY_LIMITS_MAX * A];
	for (size_t i = 0; i < n; i++) {
		if (calls[i].nkeys < 1 || calls[i].nargs != A)
			return drl_error_set(err, DRL_EINVAL,
					     "redis: a policy's limit %zu has "
					     "%zu keys and %zu integers",
					     i, calls[i].nkeys, calls[i].nargs);
		keys[i] = calls[i].keys[0];
		memcpy(args + i * A, calls[i].args, sizeof *args * A);
	}
	eval_call *e = eval_call_new(n, keys, n * A, args, nout);
	if (e == NULL)
		return drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				     s->where);
	e->npolicy = n;
	for (size_t i = 0; i < n; i++)
		e->scripts[i] = calls[i].script;
	e->script = calls[0].script;
	e->twin = true; /* answered as DRL.TWIN is */
	e->done = done;
	e->arg = arg;
	e->q.complete = eval_complete;
	e->q.chan = ch;
	e->q.deadline = drl__redis_deadline_in(s->timeout_ms);
	int rc = eval_format(s, e, err);
	if (rc == 0)
		rc = drl__redis_req_queue(s, &e->q, err);
	if (rc)
		eval_call_free(e);
	return rc;
}
