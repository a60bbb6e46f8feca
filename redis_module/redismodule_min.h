/*
 * The part of Redis's module API (redismodule.h, API version 1) that
 * drl_redis.so uses, declared by hand: Debian ships no redismodule.h.
 *
 * Supported servers: Redis 7.0 and later (Debian 12's redis-server is
 * 7.0), and servers that keep Redis 7's module ABI (Valkey 7.2+). Every
 * function below exists since Redis 4.0 except RedisModule_ReplicateVerbatim
 * (4.0 too) and RedisModule_IsModuleNameBusy (optional: looked up, not
 * required). The numbers are the ABI: they are copied from Redis's
 * documented module API reference and never change within API version 1.
 * RedisModule_ScanKey, RedisModule_ScanCursorCreate and
 * RedisModule_ScanCursorDestroy exist since Redis 6.0 (scan.c; a
 * listpack hash is read in one call, a table-encoded one in several).
 * RedisModule_CreateString and RedisModule_FreeString are called with a
 * NULL context too (fields.c: strings that outlive a command), which the
 * reference documents ("ctx is optional and may be NULL ... the string
 * memory must be managed manually"), in Redis 7.0 as now.
 *
 * As in redismodule.h, every function is a pointer filled at load time by
 * RedisModule_Init() through the GetApi function whose address Redis puts
 * first in the context. One file (module.c) defines DRL_RM_DEFINE before
 * including it: the pointers and RedisModule_Init live there; the others
 * see the pointers declared (hidden: the module exports only its
 * RedisModule_OnLoad).
 */
#ifndef DRL_REDISMODULE_MIN_H
#define DRL_REDISMODULE_MIN_H

#include <stddef.h>
#include <stdint.h>

#define REDISMODULE_OK 0
#define REDISMODULE_ERR 1
#define REDISMODULE_APIVER_1 1

#define REDISMODULE_READ (1 << 0)
#define REDISMODULE_WRITE (1 << 1)

#define REDISMODULE_KEYTYPE_EMPTY 0
#define REDISMODULE_KEYTYPE_STRING 1
#define REDISMODULE_KEYTYPE_HASH 3

#define REDISMODULE_HASH_NONE 0
#define REDISMODULE_HASH_DELETE ((RedisModuleString *)(long)1)

#define REDISMODULE_REPLY_STRING 0
#define REDISMODULE_REPLY_ERROR 1
#define REDISMODULE_REPLY_INTEGER 2
#define REDISMODULE_REPLY_ARRAY 3
#define REDISMODULE_REPLY_NULL 4

typedef struct RedisModuleCtx RedisModuleCtx;
typedef struct RedisModuleKey RedisModuleKey;
typedef struct RedisModuleString RedisModuleString;
typedef struct RedisModuleCallReply RedisModuleCallReply;
typedef struct RedisModuleScanCursor RedisModuleScanCursor;
typedef long long mstime_t;

typedef int (*RedisModuleCmdFunc)(RedisModuleCtx *ctx, RedisModuleString **argv,
				  int argc);
typedef void (*RedisModuleScanKeyCB)(RedisModuleKey *key,
				     RedisModuleString *field,
				     RedisModuleString *value, void *privdata);

/* Every function the module uses but GetApi (the context's, below), in
 * the order RedisModule_Init looks them up: X(return type, name,
 * parameters, required). One not required is NULL on a server without
 * it. */
/* clang-format off */
#define DRL_RM_FUNCS(X) \
	X(void, SetModuleAttribs, (RedisModuleCtx *ctx, const char *name, int ver, int apiver), 1) \
	X(int, CreateCommand, (RedisModuleCtx *ctx, const char *name, RedisModuleCmdFunc cmdfunc, const char *strflags, int firstkey, int lastkey, int keystep), 1) \
	X(void *, OpenKey, (RedisModuleCtx *ctx, RedisModuleString *keyname, int mode), 1) \
	X(void, CloseKey, (RedisModuleKey *kp), 1) \
	X(int, KeyType, (RedisModuleKey *kp), 1) \
	X(size_t, ValueLength, (RedisModuleKey *kp), 1) \
	X(int, DeleteKey, (RedisModuleKey *key), 1) \
	X(char *, StringDMA, (RedisModuleKey *key, size_t *len, int mode), 1) \
	X(int, StringSet, (RedisModuleKey *key, RedisModuleString *str), 1) \
	X(int, StringTruncate, (RedisModuleKey *key, size_t newlen), 1) \
	X(int, SetExpire, (RedisModuleKey *key, mstime_t expire), 1) \
	X(int, HashSet, (RedisModuleKey *key, int flags, ...), 1) \
	X(int, HashGet, (RedisModuleKey *key, int flags, ...), 1) \
	X(RedisModuleString *, CreateString, (RedisModuleCtx *ctx, const char *ptr, size_t len), 1) \
	X(RedisModuleString *, CreateStringFromLongLong, (RedisModuleCtx *ctx, long long ll), 1) \
	X(int, StringToLongLong, (const RedisModuleString *str, long long *ll), 1) \
	X(void, FreeString, (RedisModuleCtx *ctx, RedisModuleString *str), 1) \
	X(void, RetainString, (RedisModuleCtx *ctx, RedisModuleString *str), 1) \
	X(RedisModuleScanCursor *, ScanCursorCreate, (void), 1) \
	X(void, ScanCursorDestroy, (RedisModuleScanCursor *cursor), 1) \
	X(int, ScanKey, (RedisModuleKey *key, RedisModuleScanCursor *cursor, RedisModuleScanKeyCB fn, void *privdata), 1) \
	X(const char *, StringPtrLen, (const RedisModuleString *str, size_t *len), 1) \
	X(int, WrongArity, (RedisModuleCtx *ctx), 1) \
	X(int, ReplyWithError, (RedisModuleCtx *ctx, const char *err), 1) \
	X(int, ReplyWithArray, (RedisModuleCtx *ctx, long len), 1) \
	X(int, ReplyWithLongLong, (RedisModuleCtx *ctx, long long ll), 1) \
	X(int, ReplicateVerbatim, (RedisModuleCtx *ctx), 1) \
	X(RedisModuleCallReply *, Call, (RedisModuleCtx *ctx, const char *cmdname, const char *fmt, ...), 1) \
	X(int, CallReplyType, (RedisModuleCallReply *reply), 1) \
	X(long long, CallReplyInteger, (RedisModuleCallReply *reply), 1) \
	X(size_t, CallReplyLength, (RedisModuleCallReply *reply), 1) \
	X(RedisModuleCallReply *, CallReplyArrayElement, (RedisModuleCallReply *reply, size_t idx), 1) \
	X(const char *, CallReplyStringPtr, (RedisModuleCallReply *reply, size_t *len), 1) \
	X(void, FreeCallReply, (RedisModuleCallReply *reply), 1) \
	X(int, IsModuleNameBusy, (const char *name), 0)
#ifdef DRL_RM_DEFINE
#define DRL_RM_API(ret, name, args, required) ret(*RedisModule_##name) args;
#else
#define DRL_RM_API(ret, name, args, required) extern ret(*RedisModule_##name) args;
#endif
DRL_RM_API(int, GetApi, (const char *, void *), 1)
DRL_RM_FUNCS(DRL_RM_API)
#undef DRL_RM_API
/* clang-format on */

#define DRL_RM_GET(name)                                                       \
	(RedisModule_GetApi("RedisModule_" #name,                              \
			    (void *)&RedisModule_##name) == REDISMODULE_OK)

#ifdef DRL_RM_DEFINE
/* One function's look-up in RedisModule_Init: REDISMODULE_ERR when a
 * required one is missing (a server too old), NULL for another. */
#define DRL_RM_LOOKUP(ret, name, args, required)                               \
	if (!DRL_RM_GET(name)) {                                               \
		if (required)                                                  \
			return REDISMODULE_ERR;                                \
		RedisModule_##name = NULL;                                     \
	}

/* What redismodule.h's RedisModule_Init does: take GetApi from the context,
 * look up every function above (DRL_RM_LOOKUP), register the module's
 * name. */
static int RedisModule_Init(RedisModuleCtx *ctx, const char *name, int ver,
			    int apiver)
{
	void *getapi = ((void **)ctx)[0];
	RedisModule_GetApi = (int (*)(const char *, void *))(uintptr_t)getapi;
	DRL_RM_FUNCS(DRL_RM_LOOKUP)
	if (RedisModule_IsModuleNameBusy && RedisModule_IsModuleNameBusy(name))
		return REDISMODULE_ERR;
	RedisModule_SetModuleAttribs(ctx, name, ver, apiver);
	return REDISMODULE_OK;
}
#undef DRL_RM_LOOKUP
#endif

#endif
