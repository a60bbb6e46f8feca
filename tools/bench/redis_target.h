/*
 * The one Redis server a redis:// or redis+unix:// store URI names, for
 * the parts of drl bench that talk to it without the library: the
 * ceiling (bench/ceiling_redis.c) and the server's own cost figures
 * (bench/server_cost.c).
 */
#ifndef DRL_TOOLS_BENCH_REDIS_TARGET_H
#define DRL_TOOLS_BENCH_REDIS_TARGET_H

#include "drl_config.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct redis_target {
	char host[256];
	int port;
	char sock[512]; /* redis+unix: the socket path; host unused */
	char user[128];
	char pass[256];
	int db;
} redis_target;

/* Whether the URI names one Redis server: redis:// or redis+unix://
 * (not redis-cluster://). */
bool bench_is_single_redis_uri(const char *uri);

/* The server of a redis:// or redis+unix:// URI into *t, read with the
 * library's own URI parser; false with why (whycap bytes) saying what is
 * wrong. */
bool bench_redis_target_parse(const char *uri, redis_target *t, char *why,
			      size_t whycap);

#if DRL_HAVE_REDIS
struct redisContext;
/* A hiredis connection to t, authenticated when t has a password, every
 * command bounded by timeout_ms, closed on exec. NULL with why saying why
 * ("cannot connect: ...", "AUTH failed: ..."). */
struct redisContext *bench_redis_connect(const redis_target *t, int timeout_ms,
					 char *why, size_t whycap);
#endif

#endif /* DRL_TOOLS_BENCH_REDIS_TARGET_H */
