/*
 * The field cache (fields.h): direct-mapped, FIELD_SLOTS strings made
 * with no context (so no command's automatic memory owns them: they live
 * until their slot is taken by other bytes). A miss costs what a string
 * per field cost before: one made, one freed.
 */
#include "fields.h"

#include <stdint.h>
#include <string.h>

#define FIELD_SLOTS 64

typedef struct slot {
	RedisModuleString *str; /* NULL: empty */
	size_t len;
	char b[DRL__RM_FIELD_MAX];
} slot;

static slot slots[FIELD_SLOTS];

static slot *slot_of(const char *p, size_t len)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)p[i]) * 16777619u;
	return &slots[h % FIELD_SLOTS];
}

RedisModuleString *drl__rm_field(const char *p, size_t len)
{
	if (len > DRL__RM_FIELD_MAX)
		return NULL;
	slot *s = slot_of(p, len);
	if (s->str && s->len == len && memcmp(s->b, p, len) == 0)
		return s->str;
	RedisModuleString *str =
		RedisModule_CreateString(NULL, len ? p : "", len);
	if (str == NULL)
		return NULL;
	if (s->str)
		RedisModule_FreeString(NULL, s->str);
	s->str = str;
	s->len = len;
	memcpy(s->b, p, len);
	return str;
}
