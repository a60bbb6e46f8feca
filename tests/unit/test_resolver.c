/*
 * The resolver (include/drl/resolver.h): a callback's specs cached by key
 * with an LRU and a TTL, the default when the callback fails, bad input,
 * invalidation, threads sharing one resolver, and a limit per key on the
 * memory store that keeps its count when the key's spec changes.
 *
 * Time is the test's own clock (opts.now_us): nothing sleeps, and no
 * assertion is on speed.
 */
#include <drl/resolver.h>
#include <drl/sys/backend.h>

#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>

/* The source: "fixed_window:N/1m" with N from the table below; keys
 * starting with "bad" fail, "empty" answers "", "huge" overflows. */
struct src {
	atomic_int calls;
	int limit;             /* N */
	drl_resolver *r;       /* invalidate during a call, when set */
	int64_t *clock_during; /* advanced by the call, when set */
};

static int answer(void *arg, const void *key, size_t keylen, char *spec,
		  size_t cap, drl_error *err)
{
	struct src *s = arg;
	atomic_fetch_add(&s->calls, 1);
	if (s->r != NULL)
		drl_resolver_invalidate(s->r, key, keylen);
	if (keylen >= 3 && memcmp(key, "bad", 3) == 0)
		return drl_error_set(err, DRL_ESTORE, "no plan for it");
	if (keylen == 5 && memcmp(key, "empty", 5) == 0) {
		spec[0] = '\0';
		return 0;
	}
	if (keylen == 4 && memcmp(key, "typo", 4) == 0) {
		snprintf(spec, cap, "fixed_window:%d/1 minute", s->limit);
		return 0;
	}
	if (keylen == 4 && memcmp(key, "huge", 4) == 0) {
		memset(spec, 'x', cap - 1);
		spec[cap - 1] = '\0';
		return 0;
	}
	snprintf(spec, cap, "fixed_window:%d/1m", s->limit);
	return 0;
}

static int64_t clock_of(void *arg)
{
	return *(int64_t *)arg;
}

struct fx {
	struct src src;
	int64_t now;
	drl_resolver *r;
};

static drl_resolver *make(struct fx *f, size_t max, int64_t ttl,
			  const char *def)
{
	drl_resolver_options o = {
		.resolve = answer,
		.arg = &f->src,
		.default_spec = def,
		.max_keys = max,
		.ttl_us = ttl,
		.now_us = clock_of,
		.now_arg = &f->now,
	};
	drl_error err = {0};
	if (drl_resolver_new(&f->r, &o, &err) != 0)
		fail_msg("drl_resolver_new: %s", err.message);
	return f->r;
}

/* The spec of key into a static buffer (fails the test on an error). */
static const char *get(drl_resolver *r, const char *key, int *is_default)
{
	static char spec[DRL_RESOLVER_SPEC_MAX + 1];
	drl_error err = {0};
	int rc = drl_resolver_get(r, key, strlen(key), spec, sizeof spec,
				  is_default, &err);
	if (rc != 0)
		fail_msg("get %s: %s (%s)", key, err.message, drl_err_name(rc));
	return spec;
}

static void ttl_expiry(void **state)
{
	(void)state;
	struct fx f = {.src.limit = 5, .now = 1000};
	drl_resolver *r = make(&f, 8, 10 * SEC, NULL);

	assert_string_equal(get(r, "t1", NULL), "fixed_window:5/1m");
	assert_int_equal(atomic_load(&f.src.calls), 1);
	f.src.limit = 7; /* the source changes; the cache holds the old */
	f.now += 10 * SEC - 1;
	assert_string_equal(get(r, "t1", NULL), "fixed_window:5/1m");
	assert_int_equal(atomic_load(&f.src.calls), 1);
	f.now += 1; /* the TTL is over: asked again */
	assert_string_equal(get(r, "t1", NULL), "fixed_window:7/1m");
	assert_int_equal(atomic_load(&f.src.calls), 2);
	/* the TTL runs from the new answer */
	f.now += 10 * SEC - 1;
	assert_string_equal(get(r, "t1", NULL), "fixed_window:7/1m");
	assert_int_equal(atomic_load(&f.src.calls), 2);
	drl_resolver_stats st;
	assert_int_equal(drl_resolver_stats_get(r, &st), 0);
	assert_int_equal(st.calls, 2);
	assert_int_equal(st.hits, 2);
	assert_int_equal(st.failures, 0);
	drl_resolver_free(r);
}

static void lru_eviction(void **state)
{
	(void)state;
	struct fx f = {.src.limit = 1, .now = 0};
	drl_resolver *r = make(&f, 2, 100 * SEC, NULL);

	get(r, "a", NULL);
	get(r, "b", NULL);
	get(r, "a", NULL); /* a is the most recent now */
	assert_int_equal(atomic_load(&f.src.calls), 2);
	get(r, "c", NULL); /* evicts b, the least recently used */
	assert_int_equal(atomic_load(&f.src.calls), 3);
	get(r, "a", NULL);
	assert_int_equal(atomic_load(&f.src.calls), 3);
	get(r, "b", NULL); /* asked again; evicts c */
	assert_int_equal(atomic_load(&f.src.calls), 4);
	get(r, "a", NULL);
	assert_int_equal(atomic_load(&f.src.calls), 4);
	get(r, "c", NULL);
	assert_int_equal(atomic_load(&f.src.calls), 5);
	drl_resolver_stats st;
	drl_resolver_stats_get(r, &st);
	assert_int_equal(st.evictions, 3);
	drl_resolver_free(r);
}

static void default_on_failure(void **state)
{
	(void)state;
	struct fx f = {.src.limit = 3, .now = 0};
	drl_resolver *r = make(&f, 8, 10 * SEC, "fixed_window:100/1h");
	int d = -1;

	assert_string_equal(get(r, "bad1", &d), "fixed_window:100/1h");
	assert_int_equal(d, 1);
	/* the default is kept for the TTL too: a failing source is asked
	 * once per key per TTL */
	assert_string_equal(get(r, "bad1", &d), "fixed_window:100/1h");
	assert_int_equal(atomic_load(&f.src.calls), 1);
	/* an empty or oversized answer is a failure as well */
	assert_string_equal(get(r, "empty", &d), "fixed_window:100/1h");
	assert_int_equal(d, 1);
	assert_string_equal(get(r, "huge", &d), "fixed_window:100/1h");
	assert_int_equal(d, 1);
	/* so is a spec the library refuses (a typo in a plan's row): the
	 * default, kept for the TTL, never the refused spec */
	int before = atomic_load(&f.src.calls);
	assert_string_equal(get(r, "typo", &d), "fixed_window:100/1h");
	assert_int_equal(d, 1);
	assert_string_equal(get(r, "typo", &d), "fixed_window:100/1h");
	assert_int_equal(atomic_load(&f.src.calls), before + 1);
	assert_string_equal(get(r, "ok", &d), "fixed_window:3/1m");
	assert_int_equal(d, 0);
	drl_resolver_stats st;
	drl_resolver_stats_get(r, &st);
	assert_int_equal(st.failures, 4);
	drl_resolver_free(r);

	/* without a default the source's failure is the answer */
	struct fx g = {.src.limit = 3};
	r = make(&g, 8, 10 * SEC, NULL);
	char spec[64];
	drl_error err = {0};
	assert_int_equal(
		drl_resolver_get(r, "bad", 3, spec, sizeof spec, NULL, &err),
		DRL_ESTORE);
	assert_int_equal(err.code, DRL_ESTORE);
	assert_non_null(strstr(err.message, "no plan for it"));
	assert_int_equal(
		drl_resolver_get(r, "empty", 5, spec, sizeof spec, NULL, &err),
		DRL_ERANGE);
	assert_int_equal(
		drl_resolver_get(r, "typo", 4, spec, sizeof spec, NULL, &err),
		DRL_EINVAL);
	assert_non_null(strstr(err.message, "refused"));
	assert_non_null(strstr(err.message, "1 minute"));
	/* nothing was cached: asked again */
	drl_resolver_get(r, "bad", 3, spec, sizeof spec, NULL, NULL);
	assert_int_equal(atomic_load(&g.src.calls), 4);
	drl_resolver_free(r);
}

static void bad_input(void **state)
{
	(void)state;
	struct fx f = {.src.limit = 3};
	drl_resolver *r = NULL;
	drl_error err = {0};
	drl_resolver_options o = {
		.resolve = answer, .arg = &f.src, .max_keys = 4, .ttl_us = SEC};

	assert_int_equal(drl_resolver_new(NULL, &o, &err), DRL_EINVAL);
	assert_int_equal(drl_resolver_new(&r, NULL, &err), DRL_EINVAL);
	o.resolve = NULL;
	assert_int_equal(drl_resolver_new(&r, &o, &err), DRL_EINVAL);
	assert_non_null(strstr(err.message, "resolve"));
	o.resolve = answer;
	o.max_keys = 0;
	assert_int_equal(drl_resolver_new(&r, &o, &err), DRL_EINVAL);
	assert_non_null(strstr(err.message, "max_keys"));
	o.max_keys = ((size_t)1 << 24) + 1;
	assert_int_equal(drl_resolver_new(&r, &o, &err), DRL_EINVAL);
	o.max_keys = 4;
	o.ttl_us = 0;
	assert_int_equal(drl_resolver_new(&r, &o, &err), DRL_EINVAL);
	assert_non_null(strstr(err.message, "ttl_us"));
	o.ttl_us = -5;
	assert_int_equal(drl_resolver_new(&r, &o, &err), DRL_EINVAL);
	o.ttl_us = SEC;
	o.default_spec = "";
	assert_int_equal(drl_resolver_new(&r, &o, &err), DRL_EINVAL);
	assert_non_null(strstr(err.message, "default_spec"));
	char big[DRL_RESOLVER_SPEC_MAX + 2];
	memset(big, 'f', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	o.default_spec = big;
	assert_int_equal(drl_resolver_new(&r, &o, &err), DRL_EINVAL);
	assert_null(r);
	/* a default the library would refuse is refused here, not at the
	 * first failure of the source */
	o.default_spec = "fixed_window:0/1m";
	assert_int_equal(drl_resolver_new(&r, &o, &err), DRL_EINVAL);
	assert_non_null(strstr(err.message, "default_spec is refused"));
	assert_null(r);
	o.default_spec = NULL;

	assert_int_equal(drl_resolver_new(&r, &o, &err), 0);
	char spec[32];
	assert_int_equal(
		drl_resolver_get(NULL, "k", 1, spec, sizeof spec, NULL, &err),
		DRL_EINVAL);
	assert_int_equal(drl_resolver_get(r, "k", 1, NULL, 8, NULL, &err),
			 DRL_EINVAL);
	assert_int_equal(
		drl_resolver_get(r, "k", 0, spec, sizeof spec, NULL, &err),
		DRL_EINVAL);
	assert_int_equal(
		drl_resolver_get(r, NULL, 1, spec, sizeof spec, NULL, &err),
		DRL_EINVAL);
	assert_int_equal(drl_resolver_get(r, "k", (size_t)DRL_KEY_MAX + 1, spec,
					  sizeof spec, NULL, &err),
			 DRL_EINVAL);
	assert_int_equal(atomic_load(&f.src.calls), 0);
	/* a spec that does not fit the caller's buffer: DRL_ERANGE, from
	 * the source and from the cache alike */
	assert_int_equal(drl_resolver_get(r, "k", 1, spec, 8, NULL, &err),
			 DRL_ERANGE);
	assert_int_equal(drl_resolver_get(r, "k", 1, spec, 8, NULL, &err),
			 DRL_ERANGE);
	assert_int_equal(
		drl_resolver_get(r, "k", 1, spec, sizeof spec, NULL, NULL), 0);
	assert_string_equal(spec, "fixed_window:3/1m");
	assert_int_equal(drl_resolver_stats_get(NULL, NULL), DRL_EINVAL);
	drl_resolver_invalidate(NULL, "k", 1); /* no-op */
	drl_resolver_invalidate(r, "k", 0);    /* no-op */
	drl_resolver_free(r);
	drl_resolver_free(NULL);
}

static void invalidation(void **state)
{
	(void)state;
	struct fx f = {.src.limit = 2, .now = 0};
	drl_resolver *r = make(&f, 8, 100 * SEC, NULL);

	get(r, "a", NULL);
	get(r, "b", NULL);
	f.src.limit = 9;
	drl_resolver_invalidate(r, "a", 1);
	assert_string_equal(get(r, "a", NULL), "fixed_window:9/1m");
	assert_string_equal(get(r, "b", NULL), "fixed_window:2/1m");
	drl_resolver_invalidate(r, NULL, 0);
	assert_string_equal(get(r, "b", NULL), "fixed_window:9/1m");
	assert_int_equal(atomic_load(&f.src.calls), 4);
	/* an invalidation while the source is being asked: that answer
	 * is given but not kept (it may be older than the change) */
	f.src.r = r;
	f.src.limit = 11;
	assert_string_equal(get(r, "c", NULL), "fixed_window:11/1m");
	f.src.r = NULL;
	assert_string_equal(get(r, "c", NULL), "fixed_window:11/1m");
	assert_int_equal(atomic_load(&f.src.calls), 6);
	drl_resolver_free(r);
}

/* arg_free is called once, by drl_resolver_free. */
static int freed;
static void count_free(void *arg)
{
	(void)arg;
	freed++;
}

static void arg_free_once(void **state)
{
	(void)state;
	struct src s = {.limit = 1};
	drl_resolver_options o = {.resolve = answer,
				  .arg = &s,
				  .arg_free = count_free,
				  .max_keys = 1,
				  .ttl_us = SEC};
	drl_resolver *r = NULL;
	assert_int_equal(drl_resolver_new(&r, &o, NULL), 0);
	assert_int_equal(freed, 0);
	drl_resolver_free(r);
	assert_int_equal(freed, 1);
}

/* Threads sharing one small resolver: every answer is its key's. */
struct worker {
	drl_resolver *r;
	int id;
	int wrong;
};

static int per_key(void *arg, const void *key, size_t keylen, char *spec,
		   size_t cap, drl_error *err)
{
	(void)arg, (void)err;
	snprintf(spec, cap, "fixed_window:%.*s/1m", (int)keylen,
		 (const char *)key);
	return 0;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	char key[16], spec[64], want[64];
	for (int i = 0; i < 2000; i++) {
		int k = (i * 7 + w->id) % 13 + 1;
		snprintf(key, sizeof key, "%d", k);
		snprintf(want, sizeof want, "fixed_window:%d/1m", k);
		if (drl_resolver_get(w->r, key, strlen(key), spec, sizeof spec,
				     NULL, NULL) != 0 ||
		    strcmp(spec, want) != 0)
			w->wrong++;
		if (i % 97 == 0)
			drl_resolver_invalidate(w->r, key, strlen(key));
	}
	return NULL;
}

static void threads(void **state)
{
	(void)state;
	int64_t now = 0;
	drl_resolver_options o = {.resolve = per_key,
				  .max_keys = 5,
				  .ttl_us = SEC,
				  .now_us = clock_of,
				  .now_arg = &now};
	drl_resolver *r = NULL;
	assert_int_equal(drl_resolver_new(&r, &o, NULL), 0);
	struct worker w[4];
	pthread_t t[4];
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){.r = r, .id = i};
		assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].wrong, 0);
	}
	drl_resolver_stats st;
	drl_resolver_stats_get(r, &st);
	assert_int_equal(st.hits + st.calls, 4 * 2000);
	drl_resolver_free(r);
}

/* A key's limit from the resolver, on the memory store: when its spec
 * changes (2 -> 5 a minute), the count stays (3 more, not 5). */
static void limit_per_key(void **state)
{
	(void)state;
	struct fx f = {.src.limit = 2, .now = 0};
	drl_resolver *r = make(&f, 8, 60 * SEC, "fixed_window:1/1m");
	drl_store *s = tu_store("memory://");
	const int64_t t0 = INT64_C(1700000000) * SEC;
	int allowed = 0;

	for (int round = 0; round < 2; round++) {
		drl_limiter *l = tu_limiter(s, get(r, "tenant", NULL), NULL);
		for (int i = 0; i < 6; i++) {
			drl_result res;
			assert_int_equal(drl_allow_at(l, "tenant", 6, 1,
						      t0 + round * SEC, &res,
						      NULL),
					 0);
			allowed += res.allowed;
		}
		drl_limiter_free(l);
		assert_int_equal(allowed, round == 0 ? 2 : 5);
		f.src.limit = 5;
		drl_resolver_invalidate(r, "tenant", 6);
	}
	/* a key the source knows nothing about gets the default */
	drl_limiter *l = tu_limiter(s, get(r, "bad-tenant", NULL), NULL);
	drl_result res;
	drl_allow_at(l, "bad-tenant", 10, 1, t0, &res, NULL);
	assert_int_equal(res.limit, 1);
	drl_limiter_free(l);
	drl_store_free(s);
	drl_resolver_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ttl_expiry),
		cmocka_unit_test(lru_eviction),
		cmocka_unit_test(default_on_failure),
		cmocka_unit_test(bad_input),
		cmocka_unit_test(invalidation),
		cmocka_unit_test(arg_free_once),
		cmocka_unit_test(threads),
		cmocka_unit_test(limit_per_key),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
