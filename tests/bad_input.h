/*
 * The bad-input table shared by tests/test_bad_input.c (memory://) and
 * tests/test_bad_input_stores.c (Redis, memcached): each row is one entry
 * point given one bad input, the code it must return and a substring its
 * message must contain. After every row the runner asserts that nothing
 * reached the store: no call at all (the spy, tests/spy_backend.h) and
 * nothing stored (the target's own check: memory keys, Redis DBSIZE and
 * INFO commandstats, memcached stats). docs/bad-input.md is this table in
 * prose; keep the two in step.
 */
#ifndef DRL_TESTS_BAD_INPUT_H
#define DRL_TESTS_BAD_INPUT_H

#include "spy_backend.h"

#include <drl/drl.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The entry point a row calls. */
typedef enum bi_entry {
	BI_LIMITER_NEW, /* drl_limiter_new(&l, store, spec, prefix, &err) */
	BI_ALLOW,       /* drl_allow(l, key, keylen, cost, &r, &err) */
	BI_ALLOW_AT,    /* drl_allow_at(..., now, &r, &err) */
	BI_BATCH,       /* drl_allow_batch(l, items, n, &err) */
	BI_BATCH_AT,    /* drl_allow_batch_at(l, items, n, now, &err) */
	BI_ADJUST,    /* drl_adjust(l, key, keylen, cost as delta, &r, &err) */
	BI_ADJUST_AT, /* drl_adjust_at(..., now, &r, &err) */
} bi_entry;

/* Arguments a row sets to NULL. */
enum {
	BI_NULL_OUT = 1 << 0,     /* drl_limiter_new's out */
	BI_NULL_STORE = 1 << 1,   /* drl_limiter_new's store */
	BI_NULL_SPEC = 1 << 2,    /* drl_limiter_new's spec */
	BI_NULL_LIMITER = 1 << 3, /* drl_allow*'s limiter */
	BI_NULL_KEY = 1 << 4,     /* the key (every item's, in a batch) */
	BI_NULL_RESULT = 1 << 5,  /* drl_allow*'s result */
	BI_NULL_ITEMS = 1 << 6,   /* drl_allow_batch*'s items */
};

/* Fields a row overrides; the others keep the good call's values. */
enum {
	BI_SET_KEYLEN = 1 << 0,
	BI_SET_COST = 1 << 1,
	BI_SET_NOW = 1 << 2,
	BI_SET_N = 1 << 3,
	BI_SET_PREFIXLEN = 1 << 4,
};

/* The good call each row spoils: this spec and prefix, key "k" (keylen
 * bytes of 'k'), cost 1, time BI_NOW, a batch of BI_ITEMS items. */
#define BI_SPEC "fixed_window:10/1s"
#define BI_PREFIX "bad:"
#define BI_NOW (INT64_C(1700000000) * 1000000)
#define BI_ITEMS 3

typedef struct bi_row {
	bi_entry entry;
	const char *what; /* the bad input, in words (for failures) */
	unsigned nulls;   /* BI_NULL_* */
	unsigned set;     /* BI_SET_* */
	const char *spec; /* BI_LIMITER_NEW; NULL: BI_SPEC */
	size_t prefixlen; /* BI_SET_PREFIXLEN: a prefix of so many 'p' */
	size_t keylen;    /* BI_SET_KEYLEN (every item's, in a batch) */
	int64_t cost;     /* BI_SET_COST (every item's, in a batch) */
	int64_t now;      /* BI_SET_NOW */
	size_t n;         /* BI_SET_N: items in the batch */
	int code;         /* what the call returns */
	int item_code;    /* batches returning 0: every item's rc */
	bool never;       /* returns 0: denied with retry_after DRL_NEVER */
	const char *msg;  /* substring of err.message; NULL: not checked */
} bi_row;

extern const bi_row bi_rows[];
extern const size_t bi_nrows;

/* A store URI row: drl_store_open(&s, uri, &err) must fail. "{addr}" in
 * uri stands for the target server's host:port. */
typedef struct bi_uri_row {
	const char *uri;
	int code;
	const char *msg;
} bi_uri_row;

/* What the runner needs to know about the store behind the rows. The
 * hooks see the server itself; `what` names the row for failures. */
typedef struct bi_target {
	const char *name;
	drl_store *store; /* a spy store (spy_open), empty at the start */
	spy *spy;
	const char *addr; /* host:port for "{addr}"; NULL: none */
	void *ctx;        /* for the hooks */
	/* Remember the server's counters before a row (may be NULL). */
	void (*before)(void *ctx);
	/* Assert that since before() the server ran no command of the
	 * library's at all (!decided: the input was refused), or none that
	 * writes (decided: a decision was made, so reads and script calls
	 * that wrote nothing are fine). May be NULL. */
	void (*no_writes)(void *ctx, const char *what, bool decided);
	/* Assert that the store holds no key at all. */
	void (*empty)(void *ctx, const char *what);
} bi_target;

/* Run every row of bi_rows against t, asserting each. */
void bi_run_rows(const bi_target *t);

/* Run URI rows: each must fail with its code and message, leave *out
 * NULL, open no connection and run no command (no_writes(..., false)). */
void bi_run_uri_rows(const bi_target *t, const bi_uri_row *rows, size_t n);

/* Costs that can never be allowed (above the capacity, up to INT64_MAX,
 * and sums with a counter that overflow int64) on every algorithm: each is
 * denied with DRL_NEVER, and the quota and the store are left as they
 * were. */
void bi_run_overflow(const bi_target *t);

#endif
