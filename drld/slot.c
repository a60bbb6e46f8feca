/* The current snapshot of a config: see slot.h. */
#include "slot.h"

#include <stdatomic.h>
#include <stddef.h>

void drld_slot_init(struct drld_slot *s, void *c, void (*release)(void *))
{
	pthread_mutex_init(&s->lock, NULL);
	s->cur = c;
	s->release = release;
}

void *drld_slot_acquire(struct drld_slot *s)
{
	pthread_mutex_lock(&s->lock);
	void *c = s->cur;
	if (c != NULL) /* refs is its first member */
		atomic_fetch_add_explicit((atomic_size_t *)c, 1,
					  memory_order_relaxed);
	pthread_mutex_unlock(&s->lock);
	return c;
}

void drld_slot_swap(struct drld_slot *s, void *c)
{
	pthread_mutex_lock(&s->lock);
	void *old = s->cur;
	s->cur = c;
	pthread_mutex_unlock(&s->lock);
	if (old != NULL)
		s->release(old);
}

void drld_slot_fini(struct drld_slot *s)
{
	if (s->cur != NULL)
		s->release(s->cur);
	s->cur = NULL;
	pthread_mutex_destroy(&s->lock);
}
