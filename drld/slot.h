/*
 * Where the current snapshot of a config lives (drld's config, config.h;
 * the Envoy config, envoy/envoy_config.h): an immutable, reference-counted
 * object whose first member is its `atomic_size_t refs`. A request takes
 * a reference under a mutex held for one pointer load and one increment;
 * a SIGHUP reload swaps a new snapshot in and drops the old one's
 * reference, so the old one is freed by whoever lets go of it last.
 */
#ifndef DRLD_SLOT_H
#define DRLD_SLOT_H

#include <pthread.h>

struct drld_slot {
	pthread_mutex_t lock; /* held for a pointer swap or load + increment */
	void *cur;            /* NULL: none */
	void (*release)(void *); /* drops one reference */
};

/* Start the slot with snapshot c (the slot takes over c's reference; c
 * may be NULL), `release` dropping a reference. */
void drld_slot_init(struct drld_slot *s, void *c, void (*release)(void *));
/* A new reference to the current snapshot (NULL when none): release it. */
void *drld_slot_acquire(struct drld_slot *s);
/* Make c (and its reference) current; the old one's reference is
 * dropped. */
void drld_slot_swap(struct drld_slot *s, void *c);
/* Drop the slot's reference and destroy the lock. */
void drld_slot_fini(struct drld_slot *s);

/* DRLD_SLOT_TYPED(P, T, RELEASE): the four calls above for a slot of
 * snapshots of type T, each of which RELEASE(T *) drops a reference of:
 * P_slot_init(s, c), P_acquire(s), P_swap(s, c) and P_slot_fini(s).
 * T's first member is its reference count (drld_slot_acquire). */
#define DRLD_SLOT_TYPED(P, T, RELEASE)                                         \
	static inline void P##_slot_release_(void *c)                          \
	{                                                                      \
		RELEASE((T *)c);                                               \
	}                                                                      \
	static inline void P##_slot_init(struct drld_slot *s, T *c)            \
	{                                                                      \
		drld_slot_init(s, c, P##_slot_release_);                       \
	}                                                                      \
	static inline T *P##_acquire(struct drld_slot *s)                      \
	{                                                                      \
		return (T *)drld_slot_acquire(s);                              \
	}                                                                      \
	static inline void P##_swap(struct drld_slot *s, T *c)                 \
	{                                                                      \
		drld_slot_swap(s, c);                                          \
	}                                                                      \
	static inline void P##_slot_fini(struct drld_slot *s)                  \
	{                                                                      \
		drld_slot_fini(s);                                             \
	}

#endif /* DRLD_SLOT_H */
