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

/* clang-format off */
#ifdef DRL_RM_DEFINE
#define DRL_RM_API(ret, name, args) ret(*RedisModule_##name) args
#else
#define DRL_RM_API(ret, name, args) extern ret(*RedisModule_##name) args
#endif
DRL_RM_API(int, GetApi, (const char *, void *));
DRL_RM_API(void, SetModuleAttribs, (RedisModuleCtx *ctx, const char *name, int ver, int apiver));
DRL_RM_API(int, IsModuleNameBusy, (const char *name));
DRL_RM_API(int, CreateCommand, (RedisModuleCtx *ctx, const char *name, RedisModuleCmdFunc cmdfunc, const char *strflags, int firstkey, int lastkey, int keystep));
DRL_RM_API(void *, OpenKey, (RedisModuleCtx *ctx, RedisModuleString *keyname, int mode));
DRL_RM_API(void, CloseKey, (RedisModuleKey *kp));
DRL_RM_API(int, KeyType, (RedisModuleKey *kp));
DRL_RM_API(size_t, ValueLength, (RedisModuleKey *kp));
DRL_RM_API(int, DeleteKey, (RedisModuleKey *key));
DRL_RM_API(char *, StringDMA, (RedisModuleKey *key, size_t *len, int mode));
DRL_RM_API(int, StringSet, (RedisModuleKey *key, RedisModuleString *str));
DRL_RM_API(int, StringTruncate, (RedisModuleKey *key, size_t newlen));
DRL_RM_API(int, SetExpire, (RedisModuleKey *key, mstime_t expire));
DRL_RM_API(int, HashSet, (RedisModuleKey *key, int flags, ...));
DRL_RM_API(int, HashGet, (RedisModuleKey *key, int flags, ...));
DRL_RM_API(RedisModuleString *, CreateString, (RedisModuleCtx *ctx, const char *ptr, size_t len));
DRL_RM_API(RedisModuleString *, CreateStringFromLongLong, (RedisModuleCtx *ctx, long long ll));
DRL_RM_API(int, StringToLongLong, (const RedisModuleString *str, long long *ll));
DRL_RM_API(void, FreeString, (RedisModuleCtx *ctx, RedisModuleString *str));
DRL_RM_API(void, RetainString, (RedisModuleCtx *ctx, RedisModuleString *str));
DRL_RM_API(RedisModuleScanCursor *, ScanCursorCreate, (void));
DRL_RM_API(void, ScanCursorDestroy, (RedisModuleScanCursor *cursor));
DRL_RM_API(int, ScanKey, (RedisModuleKey *key, RedisModuleScanCursor *cursor, RedisModuleScanKeyCB fn, void *privdata));
DRL_RM_API(const char *, StringPtrLen, (const RedisModuleString *str, size_t *len));
DRL_RM_API(int, WrongArity, (RedisModuleCtx *ctx));
DRL_RM_API(int, ReplyWithError, (RedisModuleCtx *ctx, const char *err));
DRL_RM_API(int, ReplyWithArray, (RedisModuleCtx *ctx, long len));
DRL_RM_API(int, ReplyWithLongLong, (RedisModuleCtx *ctx, long long ll));
DRL_RM_API(int, ReplicateVerbatim, (RedisModuleCtx *ctx));
DRL_RM_API(RedisModuleCallReply *, Call, (RedisModuleCtx *ctx, const char *cmdname, const char *fmt, ...));
DRL_RM_API(int, CallReplyType, (RedisModuleCallReply *reply));
DRL_RM_API(long long, CallReplyInteger, (RedisModuleCallReply *reply));
DRL_RM_API(size_t, CallReplyLength, (RedisModuleCallReply *reply));
DRL_RM_API(RedisModuleCallReply *, CallReplyArrayElement, (RedisModuleCallReply *reply, size_t idx));
DRL_RM_API(const char *, CallReplyStringPtr, (RedisModuleCallReply *reply, size_t *len));
DRL_RM_API(void, FreeCallReply, (RedisModuleCallReply *reply));
#undef DRL_RM_API
/* clang-format on */

#define DRL_RM_GET(name)                                                       \
	(RedisModule_GetApi("RedisModule_" #name,                              \
			    (void *)&RedisModule_##name) == REDISMODULE_OK)

#ifdef DRL_RM_DEFINE
/* What redismodule.h's RedisModule_Init does: take GetApi from the context,
 * look up every function above (REDISMODULE_ERR when one is missing: a
 * server too old), register the module's name. */
static int RedisModule_Init(RedisModuleCtx *ctx, const char *name, int ver,
			    int apiver)
{
	void *getapi = ((void **)ctx)[0];
	RedisModule_GetApi = (int (*)(const char *, void *))(uintptr_t)getapi;
	if (!(DRL_RM_GET(SetModuleAttribs) && DRL_RM_GET(CreateCommand) &&
	      DRL_RM_GET(OpenKey) && DRL_RM_GET(CloseKey) &&
	      DRL_RM_GET(KeyType) && DRL_RM_GET(ValueLength) &&
	      DRL_RM_GET(DeleteKey) && DRL_RM_GET(StringDMA) &&
	      DRL_RM_GET(StringSet) && DRL_RM_GET(StringTruncate) &&
	      DRL_RM_GET(SetExpire) && DRL_RM_GET(HashSet) &&
	      DRL_RM_GET(HashGet) && DRL_RM_GET(CreateString) &&
	      DRL_RM_GET(CreateStringFromLongLong) &&
	      DRL_RM_GET(StringToLongLong) && DRL_RM_GET(FreeString) &&
	      DRL_RM_GET(RetainString) && DRL_RM_GET(ScanCursorCreate) &&
	      DRL_RM_GET(ScanCursorDestroy) && DRL_RM_GET(ScanKey) &&
	      DRL_RM_GET(StringPtrLen) && DRL_RM_GET(WrongArity) &&
	      DRL_RM_GET(ReplyWithError) && DRL_RM_GET(ReplyWithArray) &&
	      DRL_RM_GET(ReplyWithLongLong) && DRL_RM_GET(ReplicateVerbatim) &&
	      DRL_RM_GET(Call) && DRL_RM_GET(CallReplyType) &&
	      DRL_RM_GET(CallReplyInteger) && DRL_RM_GET(CallReplyLength) &&
	      DRL_RM_GET(CallReplyArrayElement) &&
	      DRL_RM_GET(CallReplyStringPtr) && DRL_RM_GET(FreeCallReply)))
		return REDISMODULE_ERR;
	if (!DRL_RM_GET(IsModuleNameBusy))
		RedisModule_IsModuleNameBusy = NULL;
	if (RedisModule_IsModuleNameBusy && RedisModule_IsModuleNameBusy(name))
		return REDISMODULE_ERR;
	RedisModule_SetModuleAttribs(ctx, name, ver, apiver);
	return REDISMODULE_OK;
}
#endif

#endif
