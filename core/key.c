/*
 * Store keys: <prefix><limit tag>:{<user key>}[:<suffix>]
 *
 * The user key is written as "<length>:<bytes>" when it is at most
 * DRL__KEY_INLINE_MAX bytes, and as "#<sha256 hex>" otherwise. The length
 * makes the encoding injective (no user key can end early and borrow the
 * suffix of another), '#' cannot start a length, and hashing bounds every
 * store key to DRL__KEY_BUF bytes so no decision allocates for its keys.
 * Braces form a Redis Cluster hash tag: every key of one (limit, user key)
 * lands in one slot. A counter is <base>:<index> (its own key), or
 * <base>#<index> on a store that keeps counters in groups: counter <index>
 * of the record <base> (include/drl/sys/backend.h, "Counter groups").
 */
#include "internal.h"

#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>

/* The longest store key: prefix, tag, ":{", the user key as named (its
 * length's digits, ':' and DRL__KEY_INLINE_MAX bytes; a digest is
 * shorter), '}', and a suffix (':', '-', 19 digits). The store contract
 * promises no longer key (include/drl/sys/backend.h). */
_Static_assert(DRL__PREFIX_MAX + sizeof(((drl__limit *)0)->tag) - 1 + 2 +
			       (3 + 1 + DRL__KEY_INLINE_MAX) + 1 + 21 <=
		       DRL_STORE_KEY_MAX,
	       "DRL_STORE_KEY_MAX holds every key the core sends");

size_t drl__put_uint(char *p, uint64_t v)
{
	char tmp[24];
	size_t n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (size_t i = 0; i < n; i++)
		p[i] = tmp[n - 1 - i];
	return n;
}

void drl__key_digest(const void *key, size_t keylen, drl__key_id_buf *id)
{
	SHA256(key, keylen, id->sha);
	id->bytes = id->sha;
	id->len = sizeof id->sha;
	id->digest = true;
}

void drl__keybase_make_id(drl__keybase *kb, const char *prefix, size_t plen,
			  const drl__limit *lim, const void *id, size_t idlen,
			  bool digest)
{
	char *p = kb->buf;
	memcpy(p, prefix, plen);
	p += plen;
	memcpy(p, lim->tag, lim->taglen);
	p += lim->taglen;
	*p++ = ':';
	*p++ = '{';
	if (!digest) {
		p += drl__put_uint(p, idlen);
		*p++ = ':';
		memcpy(p, id, idlen);
		p += idlen;
	} else {
		static const char hex[] = "0123456789abcdef";
		const unsigned char *md = id;
		*p++ = '#';
		for (size_t i = 0; i < idlen; i++) {
			*p++ = hex[md[i] >> 4];
			*p++ = hex[md[i] & 15];
		}
	}
	*p++ = '}';
	kb->len = (size_t)(p - kb->buf);
}

void drl__keybase_make(drl__keybase *kb, const char *prefix, size_t plen,
		       const drl__limit *lim, const void *key, size_t keylen)
{
	drl__key_id_buf id;
	drl__key_id(key, keylen, &id);
	drl__keybase_make_id(kb, prefix, plen, lim, id.bytes, id.len,
			     id.digest);
}

drl_bytes drl__key_plain(drl__key *k, const drl__keybase *kb)
{
	memcpy(k->buf, kb->buf, kb->len);
	k->len = kb->len;
	return (drl_bytes){k->buf, k->len};
}

/* kb, then sep, then suffix in decimal ('-' first when negative). */
static drl_bytes key_numbered(drl__key *k, const drl__keybase *kb, char sep,
			      int64_t suffix)
{
	memcpy(k->buf, kb->buf, kb->len);
	char *p = k->buf + kb->len;
	*p++ = sep;
	if (suffix < 0) {
		*p++ = '-';
		p += drl__put_uint(p, (uint64_t)0 - (uint64_t)suffix);
	} else {
		p += drl__put_uint(p, (uint64_t)suffix);
	}
	k->len = (size_t)(p - k->buf);
	return (drl_bytes){k->buf, k->len};
}

drl_bytes drl__key_indexed(drl__key *k, const drl__keybase *kb, int64_t suffix)
{
	return key_numbered(k, kb, ':', suffix);
}

drl_bytes drl__key_grouped(drl__key *k, const drl__keybase *kb, int64_t index)
{
	return key_numbered(k, kb, '#', index);
}

bool drl_key_group_split(drl_bytes key, size_t *glen)
{
	const char *p = key.data;
	size_t j = key.len;
	while (j > 0 && p[j - 1] >= '0' && p[j - 1] <= '9')
		j--;
	if (j == key.len)
		return false;
	if (j > 0 && p[j - 1] == '-')
		j--;
	if (j == 0 || p[j - 1] != '#')
		return false;
	*glen = j - 1;
	return true;
}

const char *drl_key_show(char *buf, size_t cap, drl_bytes key)
{
	const unsigned char *k = key.data;
	size_t o = 0;
	if (cap < 4) {
		if (cap > 0)
			buf[0] = '\0';
		return buf;
	}
	for (size_t i = 0; i < key.len; i++) {
		bool plain = k[i] >= 0x20 && k[i] < 0x7f && k[i] != '"' &&
			     k[i] != '\\';
		/* room for this byte's form and "..." after it, and the NUL */
		if (i == DRL_KEY_SHOW_MAX || o + (plain ? 1 : 4) + 3 >= cap) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		if (plain)
			buf[o++] = (char)k[i];
		else
			o += (size_t)snprintf(buf + o, cap - o, "\\x%02x",
					      k[i]);
	}
	buf[o] = '\0';
	return buf;
}
