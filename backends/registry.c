/* The stores built into this library, by URI scheme. The only place that
 * names them all; the core asks here and never names a store itself. */
#include "registry.h"

#include "drl_config.h"
#include "memory.h"
#if DRL_HAVE_REDIS
#include "redis/redis.h"
#include "redis/cluster.h"
#include "redis/sentinel.h"
#endif
#if DRL_HAVE_MEMCACHED
#include "memcached.h"
#endif

#include <stdio.h>
#include <string.h>

static const struct {
	const char *scheme;
	drl_store_open_fn open;
} builtin[] = {
	{"memory", drl__memory_open},
#if DRL_HAVE_REDIS
	{"redis", drl__redis_open},
	{"rediss", drl__redis_open},
	{"redis+unix", drl__redis_open},
	{"redis-cluster", drl__redis_cluster_open},
	{"rediss-cluster", drl__redis_cluster_open},
	{"redis-sentinel", drl__redis_sentinel_open},
	{"rediss-sentinel", drl__redis_sentinel_open},
#endif
#if DRL_HAVE_MEMCACHED
	{"memcached", drl__memcached_open},
	{"memcached+unix", drl__memcached_open},
#endif
};

drl_store_open_fn drl__backend_lookup(const char *scheme)
{
	for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++)
		if (strcmp(builtin[i].scheme, scheme) == 0)
			return builtin[i].open;
	return NULL;
}

const char *drl__backend_schemes(void)
{
	return "memory"
#if DRL_HAVE_REDIS
	       ", redis, rediss, redis+unix, redis-cluster, rediss-cluster, "
	       "redis-sentinel, rediss-sentinel"
#endif
#if DRL_HAVE_MEMCACHED
	       ", memcached, memcached+unix"
#endif
		;
}

const char *drl__backend_default_uri(void)
{
	return "memory://";
}

const char *drl__backend_local_uri(char *buf, size_t cap, long max_keys)
{
	snprintf(buf, cap, "memory://?max_keys=%ld", max_keys);
	return buf;
}
