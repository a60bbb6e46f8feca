/*
 * drl_redis.so: libdrl's algorithms as a Redis module command (issue 43,
 * docs/stores.md "Redis module (tx=module)").
 *
 *   DRL.DECIDE key spec now_us cost
 *
 * decides one limit (`spec`, e.g. token_bucket:100/1m,burst=20) for the
 * state under `key` (the store key a client names: prefix, limit tag and
 * user key in one {hash tag}) at now_us, for `cost`, and answers the
 * twins' common form, an array of five integers: allowed (1/0),
 * remaining, reset_after_us, retry_after_us (-1: never), undo (what the
 * decision consumed). Bad arguments and keys get an error reply ("ERR
 * ...", "ECORRUPT ..." for a state libdrl did not write, "WRONGTYPE ..."
 * for a key of another type) and change nothing.
 *
 *   DRL.TWIN key twin now cost_or_peek LIMIT PERIOD_us burst [word [trailing]]
 *
 * is the same decision for the limit a Lua twin's name and arguments say
 * (what the Redis store sends under tx=module instead of EVALSHA), with
 * the same answer.
 *
 *   DRL.POLICY key twin now cost LIMIT PERIOD burst word trailing [key ...]
 *
 * decides a policy (several limits of one request, all or nothing) in
 * one command: per limit one group of DRL.TWIN's arguments (all seven
 * integers), 1 to 8 groups, the same now and cost in each. The limits
 * are decided as the client's core decides a policy (core/policy.c): in
 * order, the earlier ones given back when one denies, the later ones
 * then asked; no other client runs meanwhile. The answer: the policy's
 * decision in the common form, then the index of the limit it reports
 * (six integers).
 *
 * Load: redis-server --loadmodule /path/drl_redis.so (Redis 7.0+).
 */
#define DRL_RM_DEFINE
#include "decide.h"
#include "store.h"

#include <stdio.h>
#include <string.h>

/* The error reply for code and err: the Lua twins' words where they have
 * them, so a client reads both alike. */
static int reply_error(RedisModuleCtx *ctx, int code, const drl_error *err)
{
	char msg[DRL_ERROR_MESSAGE_MAX + 16];
	const char *word = code == DRL_ECORRUPT ? "ECORRUPT" : "ERR";
	/* the server's own error (a command the store ran): as it is */
	if (code == DRL_ESTORE && (strncmp(err->message, "WRONGTYPE", 9) == 0 ||
				   strncmp(err->message, "ERR ", 4) == 0))
		word = "";
	snprintf(msg, sizeof msg, "%s%s%s", word, *word ? " " : "",
		 err->message[0] ? err->message : drl_strerror(code));
	return RedisModule_ReplyWithError(ctx, msg);
}

static int decide_reply(RedisModuleCtx *ctx, RedisModuleString *key,
			const drl__rm_request *q);

/* The twins' common form for res and undo, then (index >= 0: a policy)
 * the index of the limit it reports. */
static int reply_decision(RedisModuleCtx *ctx, const drl_result *res,
			  int64_t undo, int index)
{
	RedisModule_ReplyWithArray(ctx, index >= 0 ? 6 : 5);
	RedisModule_ReplyWithLongLong(ctx, res->allowed);
	RedisModule_ReplyWithLongLong(ctx, res->remaining);
	RedisModule_ReplyWithLongLong(ctx, res->reset_after_us);
	RedisModule_ReplyWithLongLong(ctx, res->retry_after_us);
	RedisModule_ReplyWithLongLong(ctx, undo);
	if (index >= 0)
		RedisModule_ReplyWithLongLong(ctx, index);
	return REDISMODULE_OK;
}

static int decide_command(RedisModuleCtx *ctx, RedisModuleString **argv,
			  int argc)
{
	if (argc != 5)
		return RedisModule_WrongArity(ctx);
	const char *arg[4];
	size_t len[4];
	for (int i = 0; i < 4; i++)
		arg[i] = RedisModule_StringPtrLen(argv[i + 1], &len[i]);
	drl_error err = {0, {0}};
	drl__rm_request q;
	int rc = drl__rm_parse(&q, arg, len, &err);
	if (rc)
		return reply_error(ctx, rc, &err);
	return decide_reply(ctx, argv[1], &q);
}

/* Decide q on ctx's keys and reply (the common form, or an error); key
 * is the command's key argument (q's key). */
static int decide_reply(RedisModuleCtx *ctx, RedisModuleString *key,
			const drl__rm_request *q)
{
	drl_error err = {0, {0}};
	drl__rm_store st;
	drl__rm_store_init(&st, ctx, &key, 1);
	drl_result res;
	int64_t undo = 0;
	int rc = drl__rm_decide(q, &st.parent, &res, &undo, &err);
	/* replicas and the AOF run the same command: deterministic, the
	 * time being an argument */
	RedisModule_ReplicateVerbatim(ctx);
	if (rc)
		return reply_error(ctx, rc, &err);
	return reply_decision(ctx, &res, undo, -1);
}

/* DRL.TWIN key twin arg...: as DRL.DECIDE, the limit said by a Lua
 * twin's name and arguments (what the Redis store sends under tx=module
 * instead of EVALSHA twin 1 key arg...); the same answer. */
static int twin_command(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
	if (argc < 3 || argc > 3 + DRL__SCRIPT_NARGS + 1)
		return RedisModule_WrongArity(ctx);
	const char *arg[DRL__SCRIPT_NARGS + 3];
	size_t len[DRL__SCRIPT_NARGS + 3];
	for (int i = 1; i < argc; i++)
		arg[i - 1] = RedisModule_StringPtrLen(argv[i], &len[i - 1]);
	drl_error err = {0, {0}};
	drl__rm_request q;
	int rc = drl__rm_parse_twin(&q, arg[0], len[0], arg[1], len[1],
				    (size_t)argc - 3, arg + 2, len + 2, &err);
	if (rc)
		return reply_error(ctx, rc, &err);
	return decide_reply(ctx, argv[1], &q);
}

/* DRL.POLICY group...: the limits of one request, one DRL.TWIN group
 * each (policy.c). The arity is checked before any argument is read. */
static int policy_command(RedisModuleCtx *ctx, RedisModuleString **argv,
			  int argc)
{
	enum { G = DRL__RM_POLICY_GROUP, MAX = G * DRL_POLICY_LIMITS_MAX };
	if (argc < 1 + G || argc > 1 + MAX || (argc - 1) % G != 0)
		return RedisModule_WrongArity(ctx);
	const char *arg[MAX];
	size_t len[MAX];
	RedisModuleString *keys[DRL_POLICY_LIMITS_MAX];
	size_t nargs = (size_t)argc - 1;
	for (size_t i = 0; i < nargs; i++)
		arg[i] = RedisModule_StringPtrLen(argv[i + 1], &len[i]);
	for (size_t i = 0; i < nargs / G; i++)
		keys[i] = argv[1 + i * G];
	drl_error err = {0, {0}};
	drl__rm_policy p;
	int rc = drl__rm_parse_policy(&p, nargs, arg, len, &err);
	if (rc)
		return reply_error(ctx, rc, &err);
	drl__rm_store st;
	drl__rm_store_init(&st, ctx, keys, p.n);
	drl_result res;
	rc = drl__rm_decide_policy(&p, &st.parent, &res, &err);
	RedisModule_ReplicateVerbatim(ctx);
	if (rc)
		return reply_error(ctx, rc, &err);
	/* nothing for the client to give back */
	return reply_decision(ctx, &res, 0, res.limit_index);
}

/* Redis calls this at --loadmodule / MODULE LOAD. The key is argument 1
 * (first = last = 1, step 1): Redis 7 makes its key spec from that, so
 * Cluster routes the command by it and COMMAND GETKEYS names it. */
__attribute__((visibility("default"))) int RedisModule_OnLoad(
	RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
	(void)argv, (void)argc;
	if (RedisModule_Init(ctx, "drl", 1, REDISMODULE_APIVER_1) !=
	    REDISMODULE_OK)
		return REDISMODULE_ERR;
	if (RedisModule_CreateCommand(ctx, "drl.decide", decide_command,
				      "write deny-oom", 1, 1,
				      1) != REDISMODULE_OK ||
	    RedisModule_CreateCommand(ctx, "drl.twin", twin_command,
				      "write deny-oom", 1, 1,
				      1) != REDISMODULE_OK)
		return REDISMODULE_ERR;
	/* DRL.POLICY's keys: every group's first argument (first 1, last
	 * the last argument, step one group), the legacy range Redis 7
	 * makes its key spec from; Cluster refuses keys of several slots
	 * (CROSSSLOT) before the command runs. */
	return RedisModule_CreateCommand(ctx, "drl.policy", policy_command,
					 "write deny-oom", 1, -1,
					 DRL__RM_POLICY_GROUP);
}
