/*
 * The stores built into this library, by URI scheme (backends/registry.c).
 * The core asks here (core/internal.h includes this file) and never names
 * a store itself.
 */
#ifndef DRL_BACKENDS_REGISTRY_H
#define DRL_BACKENDS_REGISTRY_H

#include <drl/sys/backend.h>

/* The built-in opener for a scheme, or NULL. */
drl_store_open_fn drl__backend_lookup(const char *scheme);
/* The schemes this build knows, comma-separated, for messages. */
const char *drl__backend_schemes(void);
/* The store a NULL or empty URI opens (the embedded one). */
const char *drl__backend_default_uri(void);
/* The URI of an in-process store refusing keys beyond max_keys live ones
 * (on_error=local's), written into buf (cap bytes, 64 are enough). */
const char *drl__backend_local_uri(char *buf, size_t cap, long max_keys);

#endif /* DRL_BACKENDS_REGISTRY_H */
