/*
 * One decision's call of a Lua twin, as data, for the tools: see
 * twin_call.h. Built from the same pieces drl__script_decide sends: the
 * limit as the limit parser reads it, the key base as the limiter makes
 * it, and drl__script_args.
 */
#include "twin_call.h"

#include "internal.h"

#include <string.h>

_Static_assert(DRL__TWIN_KEY_MAX >= sizeof(((drl__key *)0)->buf),
	       "a store key fits drl__twin_call.key");
_Static_assert(DRL__TWIN_ARGS_MAX >= DRL__SCRIPT_NARGS,
	       "a twin's arguments fit drl__twin_call.args");

/* What the twins are told of plain Redis (backends/redis/store.c): it keeps
 * counters in groups (the counter twin then reads and writes the fields
 * of one hash). Never called. */
static int no_trim(drl_backend *b, size_t n, const drl_bytes *keys,
		   int64_t ttl_us, drl_error *err)
{
	(void)b, (void)n, (void)keys, (void)ttl_us;
	return drl_error_set(err, DRL_EINTERNAL, "not a store");
}

static const drl_backend plain_redis = {
	.version = 7,
	.caps = DRL_CAP_COUNTER | DRL_CAP_CAS | DRL_CAP_SCRIPT |
		DRL_CAP_COUNTER_GROUPS,
	.trim = no_trim,
};

int drl__twin_call_make(drl__twin_call *out, const char *spec,
			const char *prefix, const void *key, size_t keylen,
			int64_t now_us, int64_t cost, drl_error *err)
{
	drl__limit lim;
	drl__keybase kb;
	drl__key k;
	size_t plen = prefix != NULL ? strlen(prefix) : 0;
	int rc;

	memset(out, 0, sizeof *out);
	if (prefix == NULL || plen > DRL__PREFIX_MAX ||
	    strpbrk(prefix, "{}") != NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "key prefix missing, too long or holding "
				     "'{' or '}'");
	if (now_us < DRL__NOW_STORE || now_us > DRL__LUA_EXACT_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "time %lld is neither -1 (the store's "
				     "clock) nor one a twin computes with",
				     (long long)now_us);
	rc = drl__request_check(key, keylen, cost, err);
	if (rc != 0)
		return rc;
	rc = drl__limit_parse(&lim, spec, strlen(spec), err);
	if (rc != 0)
		return rc;
	if (lim.algo->lua == NULL || !lim.lua_ok)
		return drl_error_set(err, DRL_ENOTSUP,
				     "no Lua twin runs for this spec");

	/* as the limiter does for a decision, then drl__script_decide */
	drl__keybase_make(&kb, prefix, plen, &lim, key, keylen);
	drl_bytes kv = drl__key_plain(&k, &kb);
	drl__call call = {.key = &kb,
			  .now = now_us,
			  .cost = cost,
			  .backend = (drl_backend *)&plain_redis};
	out->name = lim.algo->lua->name;
	out->source = lim.algo->lua->source;
	out->nkeys = 1;
	memcpy(out->key, kv.data, kv.len);
	out->keylen = kv.len;
	out->nargs = drl__script_nargs(&lim);
	drl__script_args(&lim, &call, out->args);
	return 0;
}
