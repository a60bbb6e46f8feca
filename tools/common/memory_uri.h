/*
 * The bounds a service puts on a memory:// store whose keys its clients
 * choose (tools/common/memory_uri.c), for drld and the nginx module.
 */
#ifndef TL_MEMORY_URI_H
#define TL_MEMORY_URI_H

#include <drl/drl.h>

#include <stddef.h>
#include <stdint.h>

/* Longest URI tl_memory_uri() writes: a store URI and two options. */
#define TL_MEMORY_URI_MAX 4200

/*
 * Write into buf (cap bytes) the memory:// URI `uri` with bounds for
 * those it does not name: max_keys=`max_keys`, and group_max_keys (one
 * limit's share of the keys) = `share`, or a quarter of the store's
 * max_keys when share is 0; no group bound when the URI says max_keys=0
 * (no bound at all). An option the URI names is kept as written.
 * 0, or DRL_EINVAL (a URI that does not parse, a bad max_keys, too long)
 * with a message in err.
 */
int tl_memory_uri(char *buf, size_t cap, const char *uri, int64_t max_keys,
		  int64_t share, drl_error *err);

#endif /* TL_MEMORY_URI_H */
