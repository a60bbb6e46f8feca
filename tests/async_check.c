/* The async API's checks on any store (tests/async_check.h). */
#include "async_check.h"

#include "testutil.h"

#include <poll.h>

#define T0 ASYNC_T0

/* Wait for the context's fd and process until *count reaches want; fails
 * the test when that takes longer than a generous deadline. */
void async_process_until(drl_async *a, const int *count, int want)
{
	int64_t end = tu_mono_ms() + tu_bound_ms(10000);
	while (*count < want) {
		int64_t left = end - tu_mono_ms();
		if (left <= 0)
			fail_msg("%d of %d callbacks after %lld ms", *count,
				 want, (long long)tu_bound_ms(10000));
		struct pollfd p = {.fd = drl_async_fd(a), .events = POLLIN};
		int rc = poll(&p, 1, (int)left);
		assert_true(rc >= 0);
		assert_true(drl_async_process(a) >= 0);
	}
	assert_int_equal(*count, want);
}

/* Every field of two outcomes. */
void async_same(int rc_a, const drl_result *a, const drl_error *ea, int rc_b,
		const drl_result *b, const drl_error *eb, const char *what,
		int step)
{
	if (rc_a != rc_b || a->allowed != b->allowed || a->limit != b->limit ||
	    a->remaining != b->remaining ||
	    a->reset_after_us != b->reset_after_us ||
	    a->retry_after_us != b->retry_after_us ||
	    a->limit_index != b->limit_index || a->path != b->path ||
	    a->would_allow != b->would_allow)
		fail_msg("%s step %d: async rc=%s allowed=%d limit=%lld "
			 "rem=%lld reset=%lld retry=%lld idx=%d path=%d, "
			 "blocking rc=%s allowed=%d limit=%lld rem=%lld "
			 "reset=%lld retry=%lld idx=%d path=%d",
			 what, step, drl_err_name(rc_a), a->allowed,
			 (long long)a->limit, (long long)a->remaining,
			 (long long)a->reset_after_us,
			 (long long)a->retry_after_us, a->limit_index, a->path,
			 drl_err_name(rc_b), b->allowed, (long long)b->limit,
			 (long long)b->remaining, (long long)b->reset_after_us,
			 (long long)b->retry_after_us, b->limit_index, b->path);
	if (rc_a != 0 && strcmp(ea->message, eb->message) != 0)
		fail_msg("%s step %d: async error \"%s\", blocking \"%s\"",
			 what, step, ea->message, eb->message);
}

/* One single request's outcome, as a callback saw it. */

void async_one_cb(drl_async *a, int rc, const drl_result *r,
		  const drl_error *err, void *arg)
{
	(void)a;
	async_one *o = arg;
	o->count++;
	o->rc = rc;
	o->result = *r;
	o->err = *err;
}

/* A batch's outcome, as its callback saw it. */

typedef struct batch_out {
	int count;
	int rc;
	drl_batch_item items[64];
	size_t n;
	drl_error err;
} batch_out;

static void batch_cb(drl_async *a, int rc, const drl_batch_item *items,
		     size_t n, const drl_error *err, void *arg)
{
	(void)a;
	batch_out *o = arg;
	o->count++;
	o->rc = rc;
	o->n = n;
	memcpy(o->items, items, n * sizeof *items);
	for (size_t i = 0; i < n; i++)
		o->items[i].key = NULL; /* the library's copy dies with us */
	o->err = *err;
}

enum { STEPS = 40 };

static const char *const keys[] = {"alice", "bob", "k"};

/* STEPS requests at explicit times on `spec`: each started alone through
 * the context and waited for, and the same request through drl_allow_at
 * on a twin limiter (its own prefix): the same outcome every step. */
static void run_single(drl_async *a, drl_store *s, const char *spec,
		       const char *what, int n)
{
	char pa[48], pb[48];
	snprintf(pa, sizeof pa, "as%d:", n);
	snprintf(pb, sizeof pb, "bs%d:", n);
	drl_limiter *la = tu_limiter(s, spec, pa),
		    *lb = tu_limiter(s, spec, pb);
	char key[16];
	for (int i = 0; i < STEPS; i++) {
		int64_t now = T0 + (int64_t)i * 97 * MS;
		int64_t cost = i % 7 == 3 ? 0 : i % 5 == 4 ? 2 : 1;
		snprintf(key, sizeof key, "%s", keys[i % 3]);
		async_one o = {0};
		drl_error err = {0};
		assert_int_equal(drl_async_allow_at(a, la, key, strlen(key),
						    cost, now, async_one_cb, &o,
						    &err),
				 0);
		memset(key, 'x', sizeof key - 1); /* the copy decides */
		snprintf(key, sizeof key, "%s", keys[i % 3]);
		async_process_until(a, &o.count, 1);
		drl_result r;
		drl_error eb = {0};
		int rc = drl_allow_at(lb, key, strlen(key), cost, now, &r, &eb);
		async_same(o.rc, &o.result, &o.err, rc, &r, &eb, what, i);
	}
	drl_limiter_free(la);
	drl_limiter_free(lb);
}

/* Batches of 1..11 items (every 7th item a bad key) at explicit times,
 * through the context and through drl_allow_batch_at. */
static void run_batches(drl_async *a, drl_store *s, const char *spec,
			const char *what, int n)
{
	char pa[48], pb[48];
	snprintf(pa, sizeof pa, "ab%d:", n);
	snprintf(pb, sizeof pb, "bb%d:", n);
	drl_limiter *la = tu_limiter(s, spec, pa),
		    *lb = tu_limiter(s, spec, pb);
	drl_batch_item in[16], blk[16];
	for (int step = 0; step < 8; step++) {
		size_t count = (size_t)(step * 3 % 11) + 1;
		for (size_t i = 0; i < count; i++) {
			size_t j = (size_t)step * 16 + i;
			in[i] = (drl_batch_item){
				.key = j % 7 == 6 ? NULL : keys[j % 3],
				.keylen = j % 7 == 6 ? 1 : strlen(keys[j % 3]),
				.cost = (int64_t)(j % 4 == 3 ? 0 : 1)};
		}
		memcpy(blk, in, sizeof in);
		int64_t now = T0 + (int64_t)step * 211 * MS;
		batch_out o = {0};
		drl_error err = {0};
		assert_int_equal(drl_async_batch_at(a, la, in, count, now,
						    batch_cb, &o, &err),
				 0);
		memset(in, 0, sizeof in); /* the copy decides */
		async_process_until(a, &o.count, 1);
		drl_error eb = {0};
		int rc = drl_allow_batch_at(lb, blk, count, now, &eb);
		assert_int_equal(o.rc, rc);
		assert_int_equal(o.n, count);
		for (size_t i = 0; i < count; i++) {
			drl_error none = {0};
			async_same(o.items[i].rc, &o.items[i].result, &none,
				   blk[i].rc, &blk[i].result, &none, what,
				   step * 100 + (int)i);
		}
		assert_string_equal(o.err.message, eb.message);
	}
	drl_limiter_free(la);
	drl_limiter_free(lb);
}

void async_check_equal(drl_async *a, drl_store *s, const char *spec,
		       const char *what, int n)
{
	run_single(a, s, spec, what, n);
	run_batches(a, s, spec, what, n);
}

enum { HOT = 400 };

typedef struct hot_count {
	int count, allowed, failed;
} hot_count;

static void hot_cb(drl_async *a, int rc, const drl_result *r,
		   const drl_error *err, void *arg)
{
	(void)a;
	(void)err;
	hot_count *h = arg;
	h->count++;
	if (rc)
		h->failed++;
	else if (r->allowed)
		h->allowed++;
}

void async_check_hot(drl_async *a, drl_limiter *l, const char *what,
		     bool real_clock)
{
	hot_count h = {0};
	for (int k = 0; k < HOT; k++) {
		int rc = real_clock ? drl_async_allow(a, l, "hot", 3, 1, hot_cb,
						      &h, NULL)
				    : drl_async_allow_at(a, l, "hot", 3, 1,
							 ASYNC_T0, hot_cb, &h,
							 NULL);
		assert_int_equal(rc, 0);
	}
	async_process_until(a, &h.count, HOT);
	if (h.failed || h.allowed != 100)
		fail_msg("%s: %d allowed, %d failed", what, h.allowed,
			 h.failed);
}
