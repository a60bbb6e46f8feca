/*
 * A decision started by one script call and finished when its reply comes
 * (the async API's own path, core/async.c): the steps drl_allow() takes
 * around the store's answer (core/limiter.c: breaker, the Lua twin, the
 * on_error policy, the near cache, shadow mode), with the store call in
 * the middle started by eval_start() instead of waited for.
 *
 * Only what the store's started calls decide takes this path: a policy
 * of one limit whose algorithm starts its own calls (the counters with
 * add_read_start: no script) or whose twin the store runs, at a time
 * known without a store call
 * (the caller's, the local clock, or the store's read by the twin
 * itself). Everything else (policies of several limits, with their
 * refunds; stores that cannot start a call) is decided by the blocking
 * call on a worker, with the same decisions.
 */
#include "internal.h"

#include <string.h>

bool drl__started_why(const drl_limiter *l, int64_t now_us, int64_t *now,
		      const char **why)
{
	drl_backend *b = l->store->backend;
	const char *no = NULL;
	if (l->nlimits != 1)
		no = "a policy of several limits is decided on a worker (a "
		     "denial gives back the others: more store calls)";
	else if (b->version < 5 || !(b->caps & DRL_CAP_EVAL_START) ||
		 !b->eval_start)
		no = "the store sends no call without waiting (tx=watch, "
		     "pipelines=0, memcached, a store of your own): a worker "
		     "decides";
	else if (b->caps & DRL_CAP_DECLARED_KEYS)
		no = "Redis Cluster's calls may need ASKING, which shared "
		     "connections never send: a worker decides";
	if (no) {
		*why = no;
		return false;
	}
	const drl__limit *lim = &l->limits[0];
	drl__call probe = {.backend = b, .now = now_us};
	if (now_us == DRL__NOW_READ)
		/* As drl__limiter_now: the twin reads the store's clock, or
		 * the store has none and the local one decides. */
		probe.now = (b->caps & DRL_CAP_CLOCK) ? DRL__NOW_STORE
						      : drl_now_us();
	if (lim->algo->startable && lim->algo->startable(lim, &probe)) {
		*why = "sent at start without a script (tx=auto's counter "
		       "commands), finished by the store's I/O thread";
	} else if (drl__script_usable(lim, &probe)) {
		*why = "sent at start as the algorithm's server-side script, "
		       "finished by the store's I/O thread";
	} else {
		*why = !lim->lua_ok
			       ? "the limit's numbers (max(LIMIT, burst) x "
				 "PERIOD in us) pass 2^52, which the server's "
				 "doubles cannot hold exactly: a worker "
				 "decides by the exact C step"
			       : "the time is past what the server's doubles "
				 "hold exactly: a worker decides";
		return false;
	}
	*now = probe.now;
	return true;
}

bool drl__started_usable(const drl_limiter *l, int64_t now_us, int64_t *now)
{
	const char *why;
	return drl__started_why(l, now_us, now, &why);
}

/* The outcome rc of d's store step (or of the breaker, when it refused
 * the call: entered false) made final as drl__limiter_guarded() and
 * decide_near() make it, then handed to d's owner. */
static void finish(drl__started *d, int rc, bool entered)
{
	drl_limiter *l = d->l;
	if (entered)
		drl__breaker_leave(l->store, d->probe, rc);
	if (rc == 0) {
		d->result->limit_index = 0;
	} else {
		drl__result_deny(d->result);
		if (drl__is_store_failure(rc) &&
		    l->on_error != DRL__ON_ERROR_RETURN)
			rc = drl__fallback(l, d->key, d->keylen, d->cost,
					   d->now, d->result, d->err);
	}
	if (rc == 0 && d->near && d->result->path == DRL_PATH_STORE)
		drl__near_record(l->near, d->near, d->cost, d->result);
	if (rc == 0)
		drl__shadow_answer(l, d->result);
	*d->rc = rc;
	d->finished(d->arg);
}

/* The algorithm's own started decision is over. */
static void decided(void *arg, int rc, const drl_result *res,
		    const drl_error *err)
{
	drl__started *d = arg;
	if (rc == 0)
		*d->result = *res;
	else if (d->err && err)
		*d->err = *err;
	finish(d, rc, true);
}

/* eval_start()'s outcome: the twin's answer, or the store's error. */
static void script_done(void *arg, int rc, const int64_t *out, size_t nret,
			const drl_error *err)
{
	drl__started *d = arg;
	if (rc == 0) {
		drl__undo undo; /* one limit: nothing to refund */
		drl__call call = {
			.now = d->now, .cost = d->cost, .peek = d->cost == 0};
		memset(d->result, 0, sizeof *d->result);
		rc = drl__twin_answer(&d->l->limits[0], &call, out, nret,
				      d->result, &undo, d->err);
	} else if (d->err && err) {
		*d->err = *err;
	}
	finish(d, rc, true);
}

void drl__started_begin(drl__started *d)
{
	drl_limiter *l = d->l;
	drl__limit *lim = &l->limits[0];
	drl_backend *b = l->store->backend;
	int rc = drl__breaker_enter(l->store, &d->probe, d->err);
	if (rc) {
		finish(d, rc, false);
		return;
	}
	drl__call call = {
		.backend = b,
		.now = d->now,
		.cost = d->cost,
		.peek = d->cost == 0,
		.err = d->err,
		.stats = &l->store->stats,
	};
	drl__keybase kb;
	drl__key k;
	drl__keybase_make(&kb, l->prefix, l->prefixlen, lim, d->key, d->keylen);
	call.key = &kb;
	DRL__COUNT(call.stats, decisions);
	/* The algorithm's own started calls first (counters: no script),
	 * the twin for what they do not take. */
	rc = DRL_ENOTSUP;
	if (lim->algo->start && lim->algo->startable(lim, &call))
		rc = lim->algo->start(lim, &call, decided, d);
	if (rc != DRL_ENOTSUP) {
		if (rc)
			finish(d,
			       drl_error_set(d->err, rc,
					     "could not start a decision"),
			       true);
		return;
	}
	drl_bytes key = drl__key_plain(&k, &kb);
	int64_t args[DRL__SCRIPT_NARGS];
	drl__script_args(lim, &call, args);
	DRL__COUNT(call.stats, scripts);
	rc = b->eval_start(b, lim->algo->lua, 1, &key, DRL__SCRIPT_NARGS, args,
			   DRL__SCRIPT_NOUT, script_done, d, d->err);
	if (rc)
		finish(d, rc, true);
}
