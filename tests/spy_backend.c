/* A counting wrapper around a real store: see spy_backend.h. */
#include "spy_backend.h"

#include "internal.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

struct spy {
	drl_backend parent; /* first: the store calls through this */
	drl_backend *inner;
	_Atomic unsigned long n[8]; /* spy_counts order */
	_Atomic int fail;           /* spy_fail: every call fails so */
	int record;
	drl_bytes *keys; /* distinct keys written, each malloc'd */
	size_t nkeys, capkeys;
};

enum { INCR, GET_MANY, LOAD, CAS, UPDATE, EVAL, NOW, DEL, METHODS };

/* Count a call of method m; its error when the spy fails on purpose. */
static int count(spy *s, int m, drl_error *err)
{
	atomic_fetch_add(&s->n[m], 1);
	int code = atomic_load(&s->fail);
	return code ? drl_error_set(err, code, "spy: failing on purpose") : 0;
}

/* Remember key k when recording (single-threaded tests only). */
static void note(spy *s, drl_bytes k)
{
	if (!s->record)
		return;
	for (size_t i = 0; i < s->nkeys; i++)
		if (s->keys[i].len == k.len &&
		    memcmp(s->keys[i].data, k.data, k.len) == 0)
			return;
	if (s->nkeys == s->capkeys) {
		size_t cap = s->capkeys ? 2 * s->capkeys : 64;
		drl_bytes *nk = realloc(s->keys, cap * sizeof *nk);
		assert_non_null(nk);
		s->keys = nk;
		s->capkeys = cap;
	}
	void *copy = malloc(k.len ? k.len : 1);
	assert_non_null(copy);
	memcpy(copy, k.data, k.len);
	s->keys[s->nkeys++] = (drl_bytes){copy, k.len};
}

static int s_incr(drl_backend *b, drl_bytes key, int64_t delta, int64_t ttl,
		  int64_t *value, drl_error *err)
{
	spy *s = (spy *)b;
	int rc = count(s, INCR, err);
	if (rc)
		return rc;
	note(s, key);
	return s->inner->incr(s->inner, key, delta, ttl, value, err);
}

static int s_get_many(drl_backend *b, size_t n, const drl_bytes *keys,
		      int64_t *values, drl_error *err)
{
	spy *s = (spy *)b;
	int rc = count(s, GET_MANY, err);
	if (rc)
		return rc;
	return s->inner->get_many(s->inner, n, keys, values, err);
}

static int s_load(drl_backend *b, drl_bytes key, void *buf, size_t cap,
		  size_t *len, uint64_t *version, drl_error *err)
{
	spy *s = (spy *)b;
	int rc = count(s, LOAD, err);
	if (rc)
		return rc;
	return s->inner->load(s->inner, key, buf, cap, len, version, err);
}

static int s_cas(drl_backend *b, drl_bytes key, const void *blob, size_t len,
		 uint64_t version, int64_t ttl, drl_error *err)
{
	spy *s = (spy *)b;
	int rc = count(s, CAS, err);
	if (rc)
		return rc;
	note(s, key);
	return s->inner->cas(s->inner, key, blob, len, version, ttl, err);
}

static int s_update(drl_backend *b, drl_bytes key, drl_update_fn fn, void *arg,
		    drl_error *err)
{
	spy *s = (spy *)b;
	int rc = count(s, UPDATE, err);
	if (rc)
		return rc;
	note(s, key);
	return s->inner->update(s->inner, key, fn, arg, err);
}

static int s_eval(drl_backend *b, const drl_script *script, size_t nkeys,
		  const drl_bytes *keys, size_t nargs, const int64_t *args,
		  int64_t *out, size_t nout, size_t *nret, drl_error *err)
{
	spy *s = (spy *)b;
	int rc = count(s, EVAL, err);
	if (rc)
		return rc;
	for (size_t i = 0; i < nkeys; i++)
		note(s, keys[i]);
	return s->inner->eval(s->inner, script, nkeys, keys, nargs, args, out,
			      nout, nret, err);
}

static int s_now(drl_backend *b, int64_t *now_us, drl_error *err)
{
	spy *s = (spy *)b;
	int rc = count(s, NOW, err);
	if (rc)
		return rc;
	return s->inner->now(s->inner, now_us, err);
}

static int s_del(drl_backend *b, size_t n, const drl_bytes *keys,
		 drl_error *err)
{
	spy *s = (spy *)b;
	int rc = count(s, DEL, err);
	if (rc)
		return rc;
	return s->inner->del(s->inner, n, keys, err);
}

/* trim (counter groups): passed through, neither counted nor failed nor
 * recorded (a first write's upkeep, not a decision's call). */
static int s_trim(drl_backend *b, size_t n, const drl_bytes *keys,
		  int64_t ttl_us, drl_error *err)
{
	spy *s = (spy *)b;
	return s->inner->trim(s->inner, n, keys, ttl_us, err);
}

static void s_destroy(drl_backend *b)
{
	spy *s = (spy *)b;
	s->inner->destroy(s->inner);
	spy_forget_keys(s);
	free(s->keys);
	free(s);
}

int spy_store(drl_store **out, spy **sp, drl_backend *inner, drl_error *err)
{
	spy *s = calloc(1, sizeof *s);
	if (s == NULL) {
		inner->destroy(inner);
		return drl_error_set(err, DRL_ENOMEM, "spy: out of memory");
	}
	s->inner = inner;
	s->parent = (drl_backend){
		.version = inner->version,
		/* no started calls (nor channels): each call is counted as
		 * it is made; no add_read: the counters' calls are counted
		 * one by one */
		.caps = inner->caps &
			~(unsigned)(DRL_CAP_EVAL_START | DRL_CAP_ADD_READ |
				    DRL_CAP_CHANNEL),
		.name = inner->name,
		.destroy = s_destroy,
		.incr = s_incr,
		.get_many = s_get_many,
		.load = s_load,
		.cas = s_cas,
		.update = inner->update ? s_update : NULL,
		.eval = inner->eval ? s_eval : NULL,
		.now = inner->now ? s_now : NULL,
		.del = inner->version >= 4 && inner->del ? s_del : NULL,
		.trim = inner->version >= 7 && inner->trim ? s_trim : NULL,
	};
	int rc = drl_store_from_backend(out, &s->parent, err);
	if (rc) {
		s_destroy(&s->parent);
		return rc;
	}
	*sp = s;
	return 0;
}

drl_store *spy_open(const char *uri, spy **sp)
{
	drl__uri u;
	drl_error err = {0};
	drl_backend *b = NULL;
	drl_store *st = NULL;
	int rc = drl__uri_parse(&u, uri, &err);
	if (rc == 0) {
		drl_store_open_fn open = drl__backend_lookup(u.scheme);
		rc = open ? open(&b, &u, &err)
			  : drl_error_set(&err, DRL_EINVAL, "no scheme");
		drl__uri_clear(&u);
	}
	if (rc == 0)
		rc = spy_store(&st, sp, b, &err);
	if (rc)
		fail_msg("spy_open %s: %s (%s)", uri, err.message,
			 drl_err_name(rc));
	return st;
}

void spy_set_version(spy *sp, int version)
{
	sp->parent.version = version;
}

drl_backend *spy_inner(spy *sp)
{
	return sp->inner;
}

void spy_fail(spy *sp, int code)
{
	atomic_store(&sp->fail, code);
}

void spy_reset(spy *sp)
{
	for (size_t i = 0; i < METHODS; i++)
		atomic_store(&sp->n[i], 0);
}

spy_counts spy_get(const spy *sp)
{
	spy *s = (spy *)sp; /* atomic loads only */
	return (spy_counts){
		atomic_load(&s->n[INCR]),   atomic_load(&s->n[GET_MANY]),
		atomic_load(&s->n[LOAD]),   atomic_load(&s->n[CAS]),
		atomic_load(&s->n[UPDATE]), atomic_load(&s->n[EVAL]),
		atomic_load(&s->n[NOW]),    atomic_load(&s->n[DEL]),
	};
}

unsigned long spy_total(const spy *sp)
{
	spy_counts c = spy_get(sp);
	return c.incr + c.get_many + c.load + c.cas + c.update + c.eval +
	       c.now + c.del;
}

unsigned long spy_writes(const spy *sp)
{
	spy_counts c = spy_get(sp);
	return c.incr + c.cas + c.update + c.eval + c.del;
}

void spy_record(spy *sp, int on)
{
	sp->record = on;
}

size_t spy_nkeys(const spy *sp)
{
	return sp->nkeys;
}

const drl_bytes *spy_key(const spy *sp, size_t i)
{
	return i < sp->nkeys ? &sp->keys[i] : NULL;
}

void spy_forget_keys(spy *sp)
{
	for (size_t i = 0; i < sp->nkeys; i++)
		free((void *)sp->keys[i].data);
	sp->nkeys = 0;
}
