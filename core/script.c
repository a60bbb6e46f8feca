/*
 * Running an algorithm's Lua twin on a store that executes scripts (Redis
 * tx=lua): one round trip, atomic on the server, no retries. The twin gets
 * the same numbers as the C step and answers with the same five fields;
 * tests/stores/test_redis_*.c hold the two to identical decisions.
 */
#include "internal.h"

#include <string.h>

bool drl__script_usable(const drl__limit *lim, const drl__call *call)
{
	drl_backend *b = call->backend;
	/* A store that needs every key declared gets them only when the
	 * time (hence a window's key) is known before the script runs. */
	bool now_ok = call->now == DRL__NOW_STORE
			      ? !(b->caps & DRL_CAP_DECLARED_KEYS)
			      : call->now <= DRL__LUA_EXACT_MAX;
	return (b->caps & DRL_CAP_SCRIPT) && b->eval && lim->algo->lua &&
	       lim->lua_ok && now_ok;
}

int drl__call_now(const drl__call *call, int64_t *now)
{
	if (call->now != DRL__NOW_STORE) {
		*now = call->now;
		return 0;
	}
	drl_backend *b = call->backend;
	if (!(b->caps & DRL_CAP_CLOCK) || !b->now)
		return drl_error_set(call->err, DRL_EINTERNAL,
				     "store clock requested from a store "
				     "without one");
	return b->now(b, now, call->err);
}

void drl__script_args(const drl__limit *lim, const drl__call *call,
		      int64_t args[DRL__SCRIPT_NARGS])
{
	/* What every twin reads first, then what only some do: a twin is
	 * sent the first drl__script_nargs (ARGV[1..]). */
	args[0] = call->now; /* DRL__NOW_STORE (-1): the twin reads TIME */
	/* a peek rides on the cost's sign: one argument fewer */
	args[1] = call->peek ? -1 - call->cost : call->cost;
	args[2] = lim->limit;
	args[3] = lim->period_us;
	args[4] = lim->burst;
	/* the counters' sub-windows, or the change rules of a state that
	 * records its parameters (the other is 0) */
	args[5] = lim->algo->keeps_params ? drl__change_word(lim)
					  : lim->subwindows;
	/* + 2: the counters are the fields of one hash (the twin's key) */
	args[6] = lim->trailing +
		  (lim->algo->grouped && lim->algo->grouped(lim, call->backend)
			   ? 2
			   : 0);
}

size_t drl__script_nargs(const drl__limit *lim)
{
	size_t n = lim->algo->lua_nargs;
	if (n == 0 || n >= DRL__SCRIPT_NARGS)
		return DRL__SCRIPT_NARGS;
	/* the change rules are the last a twin that keeps its parameters
	 * reads, and read as 0 when missing (lua_params.lua): the common
	 * rules (keep_used, version 0) cost the server no argument */
	if (lim->algo->keeps_params && n == 6 && drl__change_word(lim) == 0)
		return n - 1;
	return n;
}

int drl__script_answer(const drl__limit *lim, const int64_t *out, size_t nret,
		       drl_result *res, drl__undo *undo, drl_error *err)
{
	if (nret != DRL__SCRIPT_NOUT || (out[0] != 0 && out[0] != 1) ||
	    out[2] < 0 || out[3] < DRL_NEVER)
		return drl_error_set(err, DRL_ECORRUPT,
				     "%s script answered something that is "
				     "not a decision",
				     lim->algo->lua->name);
	drl__result_fill(res, out[0] == 1, lim->burst ? lim->burst : lim->limit,
			 out[1], out[2], out[3]);
	undo->a = out[4];
	return 0;
}

int drl__twin_pair(const drl__limit *lim, const drl__call *call,
		   const int64_t *out, size_t nret, int64_t max, int64_t *x,
		   int64_t *ahead, drl__call *rel, drl_error *err)
{
	*x = nret >= 1 ? out[0] : -1;
	*ahead = nret >= 2 ? out[1] : 0;
	if (nret < 1 || nret > 2 || *x < 0 || *x > max || *ahead < 0 ||
	    *ahead > DRL_TIME_MAX_US)
		return drl_error_set(err, DRL_ECORRUPT,
				     "%s script answered something that is "
				     "not a decision",
				     lim->algo->lua->name);
	*rel = *call;
	rel->now = 0;
	return 0;
}

int drl__twin_answer(const drl__limit *lim, const drl__call *call,
		     const int64_t *out, size_t nret, drl_result *res,
		     drl__undo *undo, drl_error *err)
{
	/* the answer says its form: DRL__SCRIPT_NOUT values are the common
	 * one (a store that runs the step itself answers it for every twin:
	 * Redis's module), fewer a twin's compact one (lua_answer) */
	if (lim->algo->lua_answer && nret != DRL__SCRIPT_NOUT)
		return lim->algo->lua_answer(lim, call, out, nret, res, undo,
					     err);
	return drl__script_answer(lim, out, nret, res, undo, err);
}

int drl__script_decide(const drl__limit *lim, const drl__call *call,
		       size_t nderived, const drl_bytes *derived,
		       drl_result *res, drl__undo *undo)
{
	drl_backend *b = call->backend;
	drl__key k;
	drl_bytes keys[1 + DRL_SUBWINDOWS_MAX + 1];
	size_t nkeys = 1;
	keys[0] = drl__key_plain(&k, call->key);
	if ((b->caps & DRL_CAP_DECLARED_KEYS) && nderived) {
		if (nderived > DRL_SUBWINDOWS_MAX + 1)
			return drl_error_set(call->err, DRL_EINTERNAL,
					     "%zu derived keys", nderived);
		memcpy(keys + 1, derived, nderived * sizeof *derived);
		nkeys += nderived;
	}
	int64_t args[DRL__SCRIPT_NARGS + 1];
	int64_t out[DRL__SCRIPT_NOUT];
	size_t nret = 0, nargs = drl__script_nargs(lim);
	drl__script_args(lim, call, args);
	/* drl_adjust: the twin's adjust mode is ARGV[DRL__SCRIPT_NARGS + 1],
	 * the delta, after all seven arguments (a lean twin's decision is
	 * sent fewer, a batch's never more: so no decision, nor a tool that
	 * sends a twin all seven, can look like an adjustment) */
	if (call->delta != 0) {
		nargs = DRL__SCRIPT_NARGS;
		args[nargs++] = call->delta;
	}
	DRL__COUNT(call->stats, scripts);
	int rc = b->eval(b, lim->algo->lua, nkeys, keys, nargs, args, out,
			 DRL__SCRIPT_NOUT, &nret, call->err);
	if (rc)
		return rc;
	return drl__twin_answer(lim, call, out, nret, res, undo, call->err);
}
