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
	if (code == DRL_ESTORE && strncmp(err->message, "WRONGTYPE", 9) == 0)
		word = "";
	snprintf(msg, sizeof msg, "%s%s%s", word, *word ? " " : "",
		 err->message[0] ? err->message : drl_strerror(code));
	return RedisModule_ReplyWithError(ctx, msg);
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
	drl__rm_store st;
	drl__rm_store_init(&st, ctx);
	drl_result res;
	int64_t undo = 0;
	rc = drl__rm_decide(&q, &st.parent, &res, &undo, &err);
	/* replicas and the AOF run the same command: deterministic, the
	 * time being an argument */
	RedisModule_ReplicateVerbatim(ctx);
	if (rc)
		return reply_error(ctx, rc, &err);
	RedisModule_ReplyWithArray(ctx, 5);
	RedisModule_ReplyWithLongLong(ctx, res.allowed);
	RedisModule_ReplyWithLongLong(ctx, res.remaining);
	RedisModule_ReplyWithLongLong(ctx, res.reset_after_us);
	RedisModule_ReplyWithLongLong(ctx, res.retry_after_us);
	RedisModule_ReplyWithLongLong(ctx, undo);
	return REDISMODULE_OK;
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
	return RedisModule_CreateCommand(ctx, "drl.decide", decide_command,
					 "write deny-oom", 1, 1, 1);
}
