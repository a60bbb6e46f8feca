/*
 * Running an algorithm's Lua twin on a store that executes scripts (Redis
 * tx=lua): one round trip, atomic on the server, no retries. The twin gets
 * the same numbers as the C step and answers with the same five fields;
 * tests/test_redis_*.c hold the two to identical decisions.
 */
#include "internal.h"

bool drl__script_usable(const drl__limit *lim, const drl__call *call)
{
	drl_backend *b = call->backend;
	return (b->caps & DRL_CAP_SCRIPT) && b->eval && lim->algo->lua &&
	       lim->lua_ok &&
	       (call->now == DRL__NOW_STORE || call->now <= DRL__LUA_EXACT_MAX);
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

int drl__script_decide(const drl__limit *lim, const drl__call *call,
		       drl_result *res, drl__undo *undo)
{
	drl_backend *b = call->backend;
	drl__key k;
	drl_bytes key = drl__key_plain(&k, call->key);
	const int64_t args[] = {
		call->now,      call->cost,      call->peek,
		lim->limit,     lim->period_us,  lim->burst,
		lim->subwindows, lim->trailing,  DRL__TTL_GRACE_US,
	};
	int64_t out[5];
	size_t nret = 0;
	DRL__COUNT(call->stats, scripts);
	int rc = b->eval(b, lim->algo->lua, 1, &key,
			 sizeof args / sizeof args[0], args, out, 5, &nret,
			 call->err);
	if (rc)
		return rc;
	if (nret != 5 || (out[0] != 0 && out[0] != 1) || out[2] < 0 ||
	    out[3] < DRL_NEVER)
		return drl_error_set(call->err, DRL_ECORRUPT,
				     "%s script answered something that is "
				     "not a decision",
				     lim->algo->lua->name);
	drl__result_fill(res, out[0] == 1,
			 lim->burst ? lim->burst : lim->limit, out[1], out[2],
			 out[3]);
	undo->a = out[4];
	return 0;
}
