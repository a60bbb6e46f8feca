/*
 * Numbers from a real redis-server's INFO, for tests (header-only; a
 * failed INFO fails the running cmocka test).
 */
#ifndef DRL_TESTS_REDIS_INFO_H
#define DRL_TESTS_REDIS_INFO_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The integer after `field` ("cmdstat_get:calls=") in INFO `section`
 * of c; 0 when it is absent. */
static inline long long redis_info_num(redisContext *c, const char *section,
				       const char *field)
{
	redisReply *r = redisCommand(c, "INFO %s", section);
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	const char *p = strstr(r->str, field);
	long long v = p ? atoll(p + strlen(field)) : 0;
	freeReplyObject(r);
	return v;
}

/* How many times c's server ran command `cmd` (lower case, "hmget",
 * "script|load") since its last CONFIG RESETSTAT. */
static inline long long redis_cmd_calls(redisContext *c, const char *cmd)
{
	char field[64];
	snprintf(field, sizeof field, "cmdstat_%s:calls=", cmd);
	return redis_info_num(c, "commandstats", field);
}

#endif
