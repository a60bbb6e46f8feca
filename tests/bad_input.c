/* The bad-input table and its runner: see bad_input.h. */
#include "bad_input.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define EINVAL_ DRL_EINVAL

/* A policy of DRL_POLICY_LIMITS_MAX + 1 different limits. */
#define NINE_LIMITS                                                            \
	"fixed_window:1/1s;fixed_window:2/2s;fixed_window:3/3s;"               \
	"fixed_window:4/4s;fixed_window:5/5s;fixed_window:6/6s;"               \
	"fixed_window:7/7s;fixed_window:8/8s;fixed_window:9/9s"

#define SPEC(s, m)                                                             \
	{                                                                      \
		BI_LIMITER_NEW, s, .spec = s, .code = EINVAL_, .msg = m        \
	}

/* The key rows of every call that takes one key (E: its entry point). */
#define KEY_ROWS(E)                                                            \
	{E, "key NULL", .nulls = BI_NULL_KEY, .code = EINVAL_,                 \
	 .msg = "NULL key"},                                                   \
		{E,                                                            \
		 "key length 0",                                               \
		 .set = BI_SET_KEYLEN,                                         \
		 .keylen = 0,                                                  \
		 .code = EINVAL_,                                              \
		 .msg = "key length 0 is outside 1..1048576 bytes"},           \
		{E,                                                            \
		 "key length DRL_KEY_MAX + 1",                                 \
		 .set = BI_SET_KEYLEN,                                         \
		 .keylen = DRL_KEY_MAX + 1,                                    \
		 .code = EINVAL_,                                              \
		 .msg = "key length 1048577 is outside"},                      \
	{                                                                      \
		E, "key length SIZE_MAX", .set = BI_SET_KEYLEN,                \
					  .keylen = SIZE_MAX, .code = EINVAL_, \
					  .msg = "is outside 1.."              \
	}

/* Rows given to both drl_allow (E = BI_ALLOW) and drl_allow_at. */
#define REQUEST_ROWS(E)                                                        \
	{E, "limiter NULL", .nulls = BI_NULL_LIMITER, .code = EINVAL_,         \
	 .msg = "NULL limiter"},                                               \
		KEY_ROWS(E),                                                   \
		{E,          "cost -1",       .set = BI_SET_COST,              \
		 .cost = -1, .code = EINVAL_, .msg = "cost -1 is negative"},   \
		{E,                                                            \
		 "cost INT64_MIN",                                             \
		 .set = BI_SET_COST,                                           \
		 .cost = INT64_MIN,                                            \
		 .code = EINVAL_,                                              \
		 .msg = "cost -9223372036854775808 is negative"},              \
	{                                                                      \
		E, "result NULL", .nulls = BI_NULL_RESULT, .code = EINVAL_,    \
				  .msg = "NULL result"                         \
	}

/* Explicit times outside 0..DRL_TIME_MAX_US (E: an _at entry point). */
#define TIME_ROWS(E)                                                           \
	{E,         "now -1",        .set = BI_SET_NOW,                        \
	 .now = -1, .code = EINVAL_, .msg = "time -1 us is outside 0..2^62"},  \
		{E,                                                            \
		 "now INT64_MIN",                                              \
		 .set = BI_SET_NOW,                                            \
		 .now = INT64_MIN,                                             \
		 .code = EINVAL_,                                              \
		 .msg = "is outside 0..2^62"},                                 \
		{E,                                                            \
		 "now DRL_TIME_MAX_US + 1",                                    \
		 .set = BI_SET_NOW,                                            \
		 .now = DRL_TIME_MAX_US + 1,                                   \
		 .code = EINVAL_,                                              \
		 .msg = "time 4611686018427387905 us is outside"},             \
	{                                                                      \
		E, "now INT64_MAX", .set = BI_SET_NOW, .now = INT64_MAX,       \
				    .code = EINVAL_,                           \
				    .msg = "is outside 0..2^62"                \
	}

/* Rows given to both batch entry points. */
#define BATCH_ROWS(E)                                                          \
	{E, "limiter NULL", .nulls = BI_NULL_LIMITER, .code = EINVAL_,         \
	 .msg = "NULL limiter"},                                               \
		{E, "items NULL", .nulls = BI_NULL_ITEMS, .code = EINVAL_,     \
		 .msg = "NULL items"},                                         \
		{E,                                                            \
		 "n 0",                                                        \
		 .set = BI_SET_N,                                              \
		 .n = 0,                                                       \
		 .code = EINVAL_,                                              \
		 .msg = "a batch of 0 items is outside 1..4096"},              \
		{E,                                                            \
		 "n DRL_BATCH_MAX + 1",                                        \
		 .set = BI_SET_N,                                              \
		 .n = DRL_BATCH_MAX + 1,                                       \
		 .code = EINVAL_,                                              \
		 .msg = "a batch of 4097 items is outside"},                   \
		{E,                                                            \
		 "n SIZE_MAX",                                                 \
		 .set = BI_SET_N,                                              \
		 .n = SIZE_MAX,                                                \
		 .code = EINVAL_,                                              \
		 .msg = "items is outside 1..4096"},                           \
		{E, "items with NULL keys", .nulls = BI_NULL_KEY,              \
		 .item_code = EINVAL_, .msg = "item 0: drl_allow: NULL key"},  \
		{E,                                                            \
		 "items with key length 0",                                    \
		 .set = BI_SET_KEYLEN,                                         \
		 .keylen = 0,                                                  \
		 .item_code = EINVAL_,                                         \
		 .msg = "item 0: key length 0 is outside"},                    \
		{E,                                                            \
		 "items with key length DRL_KEY_MAX + 1",                      \
		 .set = BI_SET_KEYLEN,                                         \
		 .keylen = DRL_KEY_MAX + 1,                                    \
		 .item_code = EINVAL_,                                         \
		 .msg = "item 0: key length 1048577"},                         \
	{                                                                      \
		E, "items with cost -1", .set = BI_SET_COST, .cost = -1,       \
					 .item_code = EINVAL_,                 \
					 .msg = "item 0: cost -1 is negative"  \
	}

/* Rows given to both drl_adjust (E = BI_ADJUST) and drl_adjust_at: the
 * cost is the delta. */
#define ADJUST_ROWS(E)                                                         \
	{E, "limiter NULL", .nulls = BI_NULL_LIMITER, .code = EINVAL_,         \
	 .msg = "drl_adjust: NULL limiter"},                                   \
		{E, "result NULL", .nulls = BI_NULL_RESULT, .code = EINVAL_,   \
		 .msg = "drl_adjust: NULL result"},                            \
		KEY_ROWS(E),                                                   \
		{E,                                                            \
		 "delta DRL_LIMIT_MAX + 1",                                    \
		 .set = BI_SET_COST,                                           \
		 .cost = DRL_LIMIT_MAX + 1,                                    \
		 .code = EINVAL_,                                              \
		 .msg = "delta 1000000001 is outside "                         \
			"-1000000000..1000000000"},                            \
		{E,                                                            \
		 "delta -DRL_LIMIT_MAX - 1",                                   \
		 .set = BI_SET_COST,                                           \
		 .cost = -DRL_LIMIT_MAX - 1,                                   \
		 .code = EINVAL_,                                              \
		 .msg = "delta -1000000001 is outside"},                       \
		{E,                                                            \
		 "delta INT64_MIN",                                            \
		 .set = BI_SET_COST,                                           \
		 .cost = INT64_MIN,                                            \
		 .code = EINVAL_,                                              \
		 .msg = "delta -9223372036854775808 is outside"},              \
	{                                                                      \
		E, "delta INT64_MAX", .set = BI_SET_COST, .cost = INT64_MAX,   \
				      .code = EINVAL_,                         \
				      .msg = "delta 9223372036854775807 is"    \
	}

const bi_row bi_rows[] = {
	/* drl_limiter_new: arguments */
	{BI_LIMITER_NEW, "out NULL", .nulls = BI_NULL_OUT, .code = EINVAL_,
	 .msg = "out is NULL"},
	{BI_LIMITER_NEW, "store NULL", .nulls = BI_NULL_STORE, .code = EINVAL_,
	 .msg = "store is NULL"},
	{BI_LIMITER_NEW, "spec NULL", .nulls = BI_NULL_SPEC, .code = EINVAL_,
	 .msg = "spec is NULL"},
	{BI_LIMITER_NEW, "prefix of 129 bytes", .set = BI_SET_PREFIXLEN,
	 .prefixlen = 129, .code = EINVAL_,
	 .msg = "key prefix is 129 bytes; at most 128"},
	{BI_LIMITER_NEW, "prefix of 64 KiB", .set = BI_SET_PREFIXLEN,
	 .prefixlen = 65536, .code = EINVAL_,
	 .msg = "key prefix is 65536 bytes"},
	/* LIMIT */
	SPEC("", "empty limit spec"),
	SPEC("fixed_window:0/1s",
	     "LIMIT \"0\" must be an integer from 1 to 1000000000"),
	SPEC("fixed_window:-1/1s", "LIMIT \"-1\" must be an integer"),
	SPEC("fixed_window:1000000001/1s", "LIMIT \"1000000001\" must be"),
	SPEC("fixed_window:99999999999999999999/1s",
	     "LIMIT \"99999999999999999999\" must be"),
	SPEC("fixed_window:1e3/1s", "LIMIT \"1e3\" must be"),
	SPEC("fixed_window:+5/1s", "LIMIT \"+5\" must be"),
	/* PERIOD */
	SPEC("fixed_window:10/0ms", "PERIOD \"0ms\" must be from 1ms to 366d"),
	SPEC("fixed_window:10/367d", "PERIOD \"367d\" must be from 1ms"),
	SPEC("fixed_window:10/8785h", "PERIOD \"8785h\" must be from 1ms"),
	SPEC("fixed_window:10/99999999999999999999ms",
	     "must be from 1ms to 366d"),
	SPEC("fixed_window:10/1y", "PERIOD \"1y\" must be a count and a unit"),
	SPEC("fixed_window:10/1", "PERIOD \"1\" must be a count and a unit"),
	SPEC("fixed_window:10/1.5s", "PERIOD \"1.5s\" must be a count"),
	SPEC("fixed_window:10/1S", "PERIOD \"1S\" must be a count"),
	SPEC("fixed_window:10/ms", "PERIOD \"ms\" must be a count"),
	/* shape, algorithm, junk */
	SPEC("fixed_window", "expected ALGORITHM:LIMIT/PERIOD"),
	SPEC("fixed_window:10", "expected LIMIT/PERIOD after ':'"),
	SPEC("tokn_bucket:10/1s", "unknown algorithm \"tokn_bucket\""),
	SPEC("fixed_window: 10/1s", "spaces and control or non-ASCII bytes"),
	SPEC("fixed_window:10/1s\n", "spaces and control or non-ASCII bytes"),
	SPEC("fixed_window:10/1s\xc3\xa9",
	     "spaces and control or non-ASCII bytes"),
	/* options */
	SPEC("token_bucket:10/1s,burst=5,burst=6",
	     "option \"burst\" given twice"),
	SPEC("token_bucket:10/1s,bogus=1",
	     "unknown option \"bogus\" for token_bucket"),
	SPEC("fixed_window:10/1s,burst=5",
	     "unknown option \"burst\" for fixed_window"),
	SPEC("token_bucket:10/1s,burst", "option \"burst\" is not name=value"),
	SPEC("fixed_window:10/1s,", "trailing ','"),
	SPEC("token_bucket:10/1s,burst=0",
	     "burst=0 must be an integer from 1 to 1000000000"),
	SPEC("token_bucket:10/1s,burst=1000000001", "burst=1000000001 must be"),
	SPEC("gcra:1/366d,burst=1000000000", "exceeds 2^52 us"),
	SPEC("subwindow:10/1s,subwindows=0",
	     "subwindows=0 must be from 1 to 60"),
	SPEC("subwindow:10/1s,subwindows=61", "subwindows=61 must be"),
	SPEC("subwindow:10/7ms,subwindows=3",
	     "not a whole number of microseconds"),
	SPEC("subwindow:10/1s,trailing=2", "trailing=2 must be 0 or 1"),
	SPEC("sliding_log:10001/1s", "LIMIT must be at most 10000"),
	/* policies */
	SPEC("fixed_window:10/1s;", "empty limit in policy"),
	SPEC(";fixed_window:10/1s", "empty limit in policy"),
	SPEC("fixed_window:10/1s;fixed_window:10/1s",
	     "appears twice in the policy"),
	SPEC(NINE_LIMITS, "a policy has at most 8 limits"),
	SPEC("fixed_window:10/1s;on_error=sometimes",
	     "on_error=\"sometimes\": expected deny, allow or local"),
	SPEC("fixed_window:10/1s;on_error=deny;on_error=allow",
	     "option \"on_error\" given twice"),
	SPEC("on_error=deny", "has options but no limit"),
	SPEC("fixed_window:10/1s;frobnicate=1",
	     "unknown policy option \"frobnicate\""),
	/* the near cache's options (core/near.c) */
	SPEC("fixed_window:10/1s;near_cache=2",
	     "near_cache=\"2\": expected 0 or 1"),
	SPEC("fixed_window:10/1s;near_cache=", "near_cache=\"\": expected"),
	SPEC("fixed_window:10/1s;near_cache=1;near_cache=1",
	     "option \"near_cache\" given twice"),
	SPEC("fixed_window:10/1s;block_on_exceed=0",
	     "block_on_exceed=\"0\": expected a duration from 1ms to 1d"),
	SPEC("fixed_window:10/1s;block_on_exceed=0ms",
	     "block_on_exceed=\"0ms\": expected a duration"),
	SPEC("fixed_window:10/1s;block_on_exceed=-1s",
	     "block_on_exceed=\"-1s\": expected a duration"),
	SPEC("fixed_window:10/1s;block_on_exceed=abc",
	     "block_on_exceed=\"abc\": expected a duration"),
	SPEC("fixed_window:10/1s;block_on_exceed=1.5s",
	     "block_on_exceed=\"1.5s\": expected a duration"),
	SPEC("fixed_window:10/1s;block_on_exceed=25h",
	     "block_on_exceed=\"25h\": expected a duration from 1ms to 1d"),
	SPEC("fixed_window:10/1s;block_on_exceed=99999999999999999999ms",
	     "expected a duration from 1ms to 1d"),
	SPEC("fixed_window:10/1s;block_on_exceed=1s;block_on_exceed=2s",
	     "option \"block_on_exceed\" given twice"),
	SPEC("fixed_window:10/1s;near_cache_sync=10ms",
	     "near_cache_sync needs near_cache=1"),
	SPEC("fixed_window:10/1s;near_cache=0;near_cache_sync=10ms",
	     "near_cache_sync needs near_cache=1"),
	SPEC("fixed_window:10/1s;near_cache=1;near_cache_sync=0ms",
	     "near_cache_sync=\"0ms\": expected a duration from 1ms to 1m"),
	SPEC("fixed_window:10/1s;near_cache=1;near_cache_sync=2m",
	     "near_cache_sync=\"2m\": expected a duration from 1ms to 1m"),
	SPEC("fixed_window:10/1s;near_cache=1;near_cache_keys=0",
	     "near_cache_keys=\"0\": expected an integer from 1 to 1048576"),
	SPEC("fixed_window:10/1s;near_cache=1;near_cache_keys=1048577",
	     "near_cache_keys=\"1048577\": expected an integer"),
	SPEC("fixed_window:10/1s;block_on_exceed=1s;near_cache_keys=-1",
	     "near_cache_keys=\"-1\": expected an integer"),
	SPEC("fixed_window:10/1s;near_cache_keys=100",
	     "near_cache_keys needs near_cache=1 or block_on_exceed="),
	SPEC("block_on_exceed=1s", "has options but no limit"),

	REQUEST_ROWS(BI_ALLOW),
	REQUEST_ROWS(BI_ALLOW_AT),
	TIME_ROWS(BI_ALLOW_AT),
	BATCH_ROWS(BI_BATCH),
	BATCH_ROWS(BI_BATCH_AT),
	TIME_ROWS(BI_BATCH_AT),
	ADJUST_ROWS(BI_ADJUST),
	ADJUST_ROWS(BI_ADJUST_AT),
	TIME_ROWS(BI_ADJUST_AT),
};
const size_t bi_nrows = sizeof bi_rows / sizeof bi_rows[0];

static const char *const entry_names[] = {
	"drl_limiter_new",    "drl_allow",  "drl_allow_at",  "drl_allow_batch",
	"drl_allow_batch_at", "drl_adjust", "drl_adjust_at",
};

/* DRL_KEY_MAX + 1 bytes of 'k': every key a row passes points here, so a
 * length the library failed to check would read past it (ASan). */
static char *big_key(void)
{
	static char *k;
	if (k == NULL) {
		k = malloc(DRL_KEY_MAX + 1);
		assert_non_null(k);
		memset(k, 'k', DRL_KEY_MAX + 1);
	}
	return k;
}

/* Assert the outcome of a refused call: code, err.code and message. */
static void expect_refused(const bi_row *row, int rc, const drl_error *err)
{
	const char *name = entry_names[row->entry];
	if (rc != row->code)
		fail_msg("%s, %s: returned %s, expected %s (%s)", name,
			 row->what, drl_err_name(rc), drl_err_name(row->code),
			 err->message);
	if (rc == 0)
		return;
	if (err->code != rc)
		fail_msg("%s, %s: err.code %d, returned %d", name, row->what,
			 err->code, rc);
	if (row->msg && strstr(err->message, row->msg) == NULL)
		fail_msg("%s, %s: message \"%s\" lacks \"%s\"", name, row->what,
			 err->message, row->msg);
}

static void run_limiter_new(const bi_target *t, const bi_row *row)
{
	static char prefix[65536 + 1];
	drl_limiter *sentinel = (drl_limiter *)(void *)prefix;
	drl_limiter *l = sentinel;
	drl_error err = {0};
	const char *pre = BI_PREFIX;
	if (row->set & BI_SET_PREFIXLEN) {
		assert_true(row->prefixlen < sizeof prefix);
		memset(prefix, 'p', row->prefixlen);
		prefix[row->prefixlen] = '\0';
		pre = prefix;
	}
	const char *spec = row->nulls & BI_NULL_SPEC ? NULL
			   : row->spec               ? row->spec
						     : BI_SPEC;
	int rc = drl_limiter_new(row->nulls & BI_NULL_OUT ? NULL : &l,
				 row->nulls & BI_NULL_STORE ? NULL : t->store,
				 spec, pre, &err);
	expect_refused(row, rc, &err);
	if (!(row->nulls & BI_NULL_OUT) && l != NULL)
		fail_msg("drl_limiter_new, %s: *out not NULL on failure",
			 row->what);
}

static void run_one(drl_limiter *good, const bi_row *row)
{
	drl_result r;
	drl_error err = {0};
	memset(&r, 0, sizeof r);
	r.allowed = 1; /* a failed call must leave a denial */
	drl_limiter *l = row->nulls & BI_NULL_LIMITER ? NULL : good;
	const char *key = row->nulls & BI_NULL_KEY ? NULL : big_key();
	size_t keylen = row->set & BI_SET_KEYLEN ? row->keylen : 1;
	int64_t cost = row->set & BI_SET_COST ? row->cost : 1;
	int64_t now = row->set & BI_SET_NOW ? row->now : BI_NOW;
	drl_result *res = row->nulls & BI_NULL_RESULT ? NULL : &r;
	int rc;
	switch (row->entry) {
	case BI_ALLOW:
		rc = drl_allow(l, key, keylen, cost, res, &err);
		break;
	case BI_ADJUST:
		rc = drl_adjust(l, key, keylen, cost, res, &err);
		break;
	case BI_ADJUST_AT:
		rc = drl_adjust_at(l, key, keylen, cost, now, res, &err);
		break;
	default:
		rc = drl_allow_at(l, key, keylen, cost, now, res, &err);
		break;
	}
	expect_refused(row, rc, &err);
	if (res != NULL && r.allowed)
		fail_msg("%s, %s: result says allowed after an error",
			 entry_names[row->entry], row->what);
}

static void run_batch(drl_limiter *good, const bi_row *row)
{
	drl_batch_item items[BI_ITEMS];
	drl_error err = {0};
	for (size_t i = 0; i < BI_ITEMS; i++) {
		memset(&items[i], 0, sizeof items[i]);
		items[i].key = row->nulls & BI_NULL_KEY ? NULL : big_key();
		items[i].keylen = row->set & BI_SET_KEYLEN ? row->keylen : 1;
		items[i].cost = row->set & BI_SET_COST ? row->cost : 1;
		items[i].rc = 12345; /* "not touched" */
		items[i].result.limit = 777;
	}
	drl_limiter *l = row->nulls & BI_NULL_LIMITER ? NULL : good;
	drl_batch_item *it = row->nulls & BI_NULL_ITEMS ? NULL : items;
	size_t n = row->set & BI_SET_N ? row->n : BI_ITEMS;
	int64_t now = row->set & BI_SET_NOW ? row->now : BI_NOW;
	int rc = row->entry == BI_BATCH
			 ? drl_allow_batch(l, it, n, &err)
			 : drl_allow_batch_at(l, it, n, now, &err);
	expect_refused(row, rc, &err);
	const char *name = entry_names[row->entry];
	for (size_t i = 0; i < BI_ITEMS; i++) {
		if (rc != 0) { /* the call was refused: no item touched */
			if (items[i].rc != 12345 ||
			    items[i].result.limit != 777)
				fail_msg("%s, %s: item %zu touched", name,
					 row->what, i);
			continue;
		}
		if (items[i].rc != row->item_code)
			fail_msg("%s, %s: item %zu rc %s, expected %s", name,
				 row->what, i, drl_err_name(items[i].rc),
				 drl_err_name(row->item_code));
		if (items[i].result.allowed)
			fail_msg("%s, %s: item %zu allowed", name, row->what,
				 i);
	}
	if (rc == 0 && row->msg && strstr(err.message, row->msg) == NULL)
		fail_msg("%s, %s: message \"%s\" lacks \"%s\"", name, row->what,
			 err.message, row->msg);
}

/* Key "k" still has its full quota: a fresh peek (cost 0). */
static void expect_full_quota(drl_limiter *l, const char *what)
{
	drl_result r;
	drl_error err = {0};
	int rc = drl_allow_at(l, "k", 1, 0, BI_NOW, &r, &err);
	if (rc)
		fail_msg("peek after %s: %s", what, err.message);
	if (!r.allowed || r.remaining != r.limit)
		fail_msg("after %s: key k has %lld of %lld left", what,
			 (long long)r.remaining, (long long)r.limit);
}

void bi_run_rows(const bi_target *t)
{
	drl_limiter *good = NULL;
	drl_error err = {0};
	if (drl_limiter_new(&good, t->store, BI_SPEC, BI_PREFIX, &err))
		fail_msg("%s: good limiter: %s", t->name, err.message);
	for (size_t i = 0; i < bi_nrows; i++) {
		const bi_row *row = &bi_rows[i];
		char what[160];
		snprintf(what, sizeof what, "%s, %s: %s",
			 entry_names[row->entry], row->what, t->name);
		if (t->before)
			t->before(t->ctx);
		spy_reset(t->spy);
		switch (row->entry) {
		case BI_LIMITER_NEW:
			run_limiter_new(t, row);
			break;
		case BI_ALLOW:
		case BI_ALLOW_AT:
		case BI_ADJUST:
		case BI_ADJUST_AT:
			run_one(good, row);
			break;
		case BI_BATCH:
		case BI_BATCH_AT:
			run_batch(good, row);
			break;
		}
		/* A batch that ran reads its one time before it looks at
		 * its items (the store's clock, with clock=server): the
		 * only call a row may make, and it writes nothing. */
		bool ran = row->code == 0;
		unsigned long calls = spy_total(t->spy);
		if (ran)
			calls -= spy_get(t->spy).now;
		if (calls != 0)
			fail_msg("%s: %lu calls reached the store", what,
				 calls);
		if (t->no_writes)
			t->no_writes(t->ctx, what, ran);
		t->empty(t->ctx, what);
		expect_full_quota(good, what);
	}
	drl_limiter_free(good);
	t->empty(t->ctx, "the peeks after the rows");
}

/* uri with "{addr}" replaced by addr, into buf. */
static const char *fill_addr(char *buf, size_t cap, const char *uri,
			     const char *addr)
{
	const char *at = strstr(uri, "{addr}");
	if (at == NULL || addr == NULL) {
		snprintf(buf, cap, "%s", uri);
		return buf;
	}
	snprintf(buf, cap, "%.*s%s%s", (int)(at - uri), uri, addr, at + 6);
	return buf;
}

void bi_run_uri_rows(const bi_target *t, const bi_uri_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char uri[1024], what[1200];
		drl_error err = {0};
		drl_store *s = (drl_store *)(void *)&err; /* not NULL */
		fill_addr(uri, sizeof uri, rows[i].uri, t->addr);
		snprintf(what, sizeof what, "drl_store_open(\"%s\")", uri);
		if (t->before)
			t->before(t->ctx);
		int rc = drl_store_open(&s, uri, &err);
		if (rc != rows[i].code)
			fail_msg("%s: returned %s, expected %s (%s)", what,
				 drl_err_name(rc), drl_err_name(rows[i].code),
				 err.message);
		if (s != NULL)
			fail_msg("%s: *out not NULL on failure", what);
		if (err.code != rc)
			fail_msg("%s: err.code %d, returned %d", what, err.code,
				 rc);
		if (rows[i].msg && strstr(err.message, rows[i].msg) == NULL)
			fail_msg("%s: message \"%s\" lacks \"%s\"", what,
				 err.message, rows[i].msg);
		if (t->no_writes)
			t->no_writes(t->ctx, what, false);
		t->empty(t->ctx, what);
	}
}

/* Specs of every algorithm (and a policy) for the overflow runs. */
static const char *const overflow_specs[] = {
	"fixed_window:10/1s",
	"sliding_window:10/1s",
	"subwindow:10/1s,subwindows=5",
	"token_bucket:10/1s",
	"gcra:10/1s",
	"sliding_log:10/1s",
	"fixed_window:10/1s;token_bucket:20/1m",
	"token_bucket:1000000000/366d",
};
#define NSPECS (sizeof overflow_specs / sizeof overflow_specs[0])

/* Costs no limit can ever allow (0 stands for the capacity + 1); with a
 * counter at 3, INT64_MAX - 2 and INT64_MAX - 1 also overflow int64 when
 * added to it. */
static const int64_t overflow_costs[] = {
	0, DRL_LIMIT_MAX + 1, INT64_MAX - 2, INT64_MAX - 1, INT64_MAX,
};
#define NCOSTS (sizeof overflow_costs / sizeof overflow_costs[0])

/* A peek (cost 0) at key "k". */
static drl_result peek_result(drl_limiter *l)
{
	drl_result r;
	drl_error err = {0};
	if (drl_allow_at(l, "k", 1, 0, BI_NOW, &r, &err))
		fail_msg("peek: %s", err.message);
	return r;
}

static int64_t peek(drl_limiter *l)
{
	return peek_result(l).remaining;
}

/* Every overflowing cost, alone and as a batch, on l: denied with
 * DRL_NEVER, no write, quota unchanged. */
static void overflow_once(const bi_target *t, drl_limiter *l, const char *spec,
			  bool primed)
{
	char what[160];
	drl_result p = peek_result(l);
	int64_t before = p.remaining;
	int64_t costs[NCOSTS];
	drl_batch_item items[NCOSTS];
	for (size_t c = 0; c < NCOSTS; c++)
		costs[c] = overflow_costs[c] ? overflow_costs[c] : p.limit + 1;
	for (size_t c = 0; c <= NCOSTS; c++) {
		bool batch = c == NCOSTS;
		snprintf(what, sizeof what, "%s %s, %s cost %lld: %s", spec,
			 primed ? "after cost 3" : "on a fresh key",
			 batch ? "a batch of every" : "one",
			 batch ? 0LL : (long long)costs[c], t->name);
		if (t->before)
			t->before(t->ctx);
		spy_reset(t->spy);
		drl_result r = {0};
		drl_error err = {0};
		int rc;
		if (!batch) {
			rc = drl_allow_at(l, "k", 1, costs[c], BI_NOW, &r,
					  &err);
		} else {
			for (size_t i = 0; i < NCOSTS; i++)
				items[i] = (drl_batch_item){
					.key = "k",
					.keylen = 1,
					.cost = costs[i],
				};
			rc = drl_allow_batch_at(l, items, NCOSTS, BI_NOW, &err);
		}
		if (rc)
			fail_msg("%s: %s (%s)", what, err.message,
				 drl_err_name(rc));
		for (size_t i = 0; i < (batch ? NCOSTS : 1); i++) {
			const drl_result *res = batch ? &items[i].result : &r;
			if (batch && items[i].rc)
				fail_msg("%s: item %zu rc %s", what, i,
					 drl_err_name(items[i].rc));
			if (res->allowed || res->retry_after_us != DRL_NEVER)
				fail_msg("%s: item %zu allowed %d, retry %lld",
					 what, i, res->allowed,
					 (long long)res->retry_after_us);
		}
		spy_counts k = spy_get(t->spy);
		if (k.incr || k.cas)
			fail_msg("%s: %lu incr and %lu cas calls", what, k.incr,
				 k.cas);
		if (t->no_writes)
			t->no_writes(t->ctx, what, true);
		if (!primed)
			t->empty(t->ctx, what);
		if (peek(l) != before)
			fail_msg("%s: quota went from %lld to %lld", what,
				 (long long)before, (long long)peek(l));
	}
}

/* Every spec on fresh keys first (the store stays empty), then on keys
 * where cost 3 was taken. */
void bi_run_overflow(const bi_target *t)
{
	drl_limiter *l[NSPECS];
	drl_error err = {0};
	for (size_t s = 0; s < NSPECS; s++) {
		char prefix[32];
		snprintf(prefix, sizeof prefix, "ovf%zu:", s);
		if (drl_limiter_new(&l[s], t->store, overflow_specs[s], prefix,
				    &err))
			fail_msg("%s: %s", overflow_specs[s], err.message);
		overflow_once(t, l[s], overflow_specs[s], false);
	}
	for (size_t s = 0; s < NSPECS; s++) {
		drl_result r;
		if (drl_allow_at(l[s], "k", 1, 3, BI_NOW, &r, &err) ||
		    !r.allowed)
			fail_msg("%s: cost 3 not allowed", overflow_specs[s]);
		overflow_once(t, l[s], overflow_specs[s], true);
		drl_limiter_free(l[s]);
	}
}
