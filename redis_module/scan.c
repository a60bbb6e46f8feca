/*
 * One pass over a group's hash (scan.h). A field is matched by its bytes,
 * held as three zero-padded words and a length (a field is at most
 * DRL__RM_FIELD_MAX = 24 bytes), so an entry is compared with every key
 * by word compares, and every key naming it gets its value (the same
 * field named twice gets it twice). An entry the pass reports again (a
 * table-encoded hash: ScanKey's cursor may return one twice) changes
 * nothing.
 */
#include "scan.h"

#include <stdint.h>
#include <string.h>

#define WORDS (DRL__RM_FIELD_MAX / 8)

typedef struct field {
	uint64_t w[WORDS];
	size_t len;
} field;

typedef struct pass {
	size_t n;
	field f[DRL__RM_SCAN_MAX];
	RedisModuleString **v;
	bool first[DRL__RM_SCAN_MAX]; /* the first key naming an entry */
	size_t unmatched;             /* entries no key names */
} pass;

static void pack(field *f, const char *p, size_t len)
{
	memset(f->w, 0, sizeof f->w);
	memcpy(f->w, p, len);
	f->len = len;
}

static bool same(const field *a, const field *b)
{
	return a->len == b->len && a->w[0] == b->w[0] && a->w[1] == b->w[1] &&
	       a->w[2] == b->w[2];
}

static void on_entry(RedisModuleKey *key, RedisModuleString *name,
		     RedisModuleString *value, void *privdata)
{
	(void)key;
	pass *ps = privdata;
	size_t len = 0;
	const char *p = RedisModule_StringPtrLen(name, &len);
	if (len > DRL__RM_FIELD_MAX) {
		ps->unmatched++;
		return;
	}
	field e;
	pack(&e, p, len);
	bool named = false;
	for (size_t i = 0; i < ps->n; i++) {
		if (!same(&ps->f[i], &e))
			continue;
		if (ps->v[i]) /* reported again */
			return;
		if (!named)
			ps->first[i] = true;
		named = true;
		RedisModule_RetainString(NULL, value);
		ps->v[i] = value;
	}
	if (!named)
		ps->unmatched++;
}

bool drl__rm_scan_fields(RedisModuleKey *k, size_t n, const drl_bytes *keys,
			 size_t glen, RedisModuleString **v, size_t *found,
			 size_t *nfound, bool *all)
{
	pass ps;
	if (n > DRL__RM_SCAN_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		size_t len = keys[i].len - glen - 1;
		if (len > DRL__RM_FIELD_MAX)
			return false;
		pack(&ps.f[i], (const char *)keys[i].data + glen + 1, len);
		ps.first[i] = false;
		v[i] = NULL;
	}
	ps.n = n;
	ps.v = v;
	ps.unmatched = 0;
	RedisModuleScanCursor *c = RedisModule_ScanCursorCreate();
	while (RedisModule_ScanKey(k, c, on_entry, &ps))
		;
	RedisModule_ScanCursorDestroy(c);
	*nfound = 0;
	for (size_t i = 0; i < n; i++)
		if (ps.first[i])
			found[(*nfound)++] = i;
	*all = ps.unmatched == 0;
	return true;
}
