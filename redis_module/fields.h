/*
 * Hash field names as Redis strings, kept from one command to the next:
 * the fields a counter group's decision names (its sub-windows' indices)
 * are the same for every key of a limit, so a decision finds its field
 * strings made instead of making and freeing one per field.
 *
 * Threads: Redis's main thread only (the strings are shared between
 * commands, not between threads).
 */
#ifndef DRL_RM_FIELDS_H
#define DRL_RM_FIELDS_H

#include "redismodule_min.h"

/* A Redis string holding p[0..len) (len <= DRL__RM_FIELD_MAX: NULL
 * otherwise, or when out of memory; the caller then makes its own). It
 * belongs to the cache: valid and unchanged until the next call, which
 * may reuse its slot; never free it. */
RedisModuleString *drl__rm_field(const char *p, size_t len);

/* The longest field kept (a sub-window index: '-' and 20 digits). */
#define DRL__RM_FIELD_MAX 24

#endif
