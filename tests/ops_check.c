/* drl_reset and shadow=1 judged on one store: see ops_check.h. */
#include "ops_check.h"

#include "server_fixture.h"
#include "spy_backend.h"
#include "testutil.h"

/* Periods of a minute and more: every key a check writes outlives the
 * check (memcached keeps a counter's first TTL), even under valgrind. */
const char *const ops_specs[] = {
	"fixed_window:5/1m",
	"sliding_window:5/1m",
	"subwindow:6/1m,subwindows=4",
	"subwindow:6/1m,subwindows=4,trailing=1",
	"token_bucket:3/1m,burst=7",
	"gcra:3/40s,burst=4",
	"sliding_log:5/1m",
	/* too large for a Lua twin's doubles: tx=lua falls back to CAS */
	"sliding_window:1000000000/1d",
	/* policies */
	"token_bucket:5/1m;fixed_window:8/3m",
	"sliding_log:4/1m;gcra:2/1m,burst=3;subwindow:9/2m,subwindows=3,"
	"trailing=1",
};
const size_t ops_nspecs = sizeof ops_specs / sizeof ops_specs[0];

static drl_server redis_srv, mc_srv;
static int have_redis, have_mc;

int ops_servers_start(void **state)
{
	(void)state;
	return drl_fixture_start_pair(&redis_srv, &have_redis, &mc_srv,
				      &have_mc);
}

int ops_servers_stop(void **state)
{
	(void)state;
	drl_fixture_stop_pair(&redis_srv, have_redis, &mc_srv, have_mc);
	return 0;
}

const drl_server *ops_redis(void)
{
	return have_redis ? &redis_srv : NULL;
}

ops_spied ops_spied_open(const char *spec)
{
	ops_spied s;
	drl_error err = {0};
	s.st = spy_open("memory://", &s.sp);
	if (drl_limiter_new(&s.l, s.st, spec, NULL, &err))
		fail_msg("%s: %s", spec, err.message);
	return s;
}

void ops_spied_free(ops_spied *s)
{
	drl_limiter_free(s->l);
	drl_store_free(s->st);
}

size_t ops_store_uris(char uris[OPS_URIS_MAX][OPS_URI_MAX])
{
	size_t n = 0;
	snprintf(uris[n++], OPS_URI_MAX, "memory://");
	if (have_redis) {
		snprintf(uris[n++], OPS_URI_MAX, "redis://127.0.0.1:%d?tx=lua",
			 redis_srv.port);
		snprintf(uris[n++], OPS_URI_MAX,
			 "redis://127.0.0.1:%d?tx=watch", redis_srv.port);
	}
	if (have_mc)
		snprintf(uris[n++], OPS_URI_MAX, "memcached://127.0.0.1:%d",
			 mc_srv.port);
	return n;
}

void ops_every_store(ops_check_fn fn)
{
	char uris[OPS_URIS_MAX][OPS_URI_MAX];
	size_t nuris = ops_store_uris(uris);
	for (size_t u = 0; u < nuris; u++) {
		drl_store *a, *b;
		drl_error err = {0};
		if (drl_store_open(&a, uris[u], &err) ||
		    drl_store_open(&b, uris[u], &err))
			fail_msg("%s: %s", uris[u], err.message);
		for (size_t i = 0; i < ops_nspecs; i++)
			fn(a, b, uris[u], ops_specs[i]);
		drl_store_free(a);
		drl_store_free(b);
	}
}

/* Numbers the checks of this process: prefixes and times of their own. */
static int checks;

/* A time aligned to every period above, distinct per check. */
static int64_t base_time(int n)
{
	return INT64_C(1700000000) * SEC + (int64_t)n * 86400 * SEC;
}

static drl_limiter *limiter(drl_store *st, const char *spec, const char *prefix)
{
	drl_limiter *l;
	drl_error err = {0};
	if (drl_limiter_new(&l, st, spec, prefix, &err))
		fail_msg("%s (prefix %s): %s", spec, prefix, err.message);
	return l;
}

static drl_result decide(drl_limiter *l, const char *key, int64_t cost,
			 int64_t now, const char *name)
{
	drl_result r;
	drl_error err = {0};
	if (drl_allow_at(l, key, strlen(key), cost, now, &r, &err))
		fail_msg("%s: key %s at %lld: %s", name, key, (long long)now,
			 err.message);
	return r;
}

/* Whether a and b are the same answer, field for field. */
static bool same(const drl_result *a, const drl_result *b)
{
	return a->allowed == b->allowed && a->would_allow == b->would_allow &&
	       a->limit == b->limit && a->remaining == b->remaining &&
	       a->reset_after_us == b->reset_after_us &&
	       a->retry_after_us == b->retry_after_us &&
	       a->limit_index == b->limit_index && a->path == b->path;
}

static void fail_differ(const char *what, const char *spec, const char *name,
			int step, const drl_result *want, const drl_result *got)
{
	fail_msg("%s: %s on %s, step %d: want allowed=%d would=%d rem=%lld "
		 "reset=%lld retry=%lld index=%d path=%d, got allowed=%d "
		 "would=%d rem=%lld reset=%lld retry=%lld index=%d path=%d",
		 what, spec, name, step, want->allowed, want->would_allow,
		 (long long)want->remaining, (long long)want->reset_after_us,
		 (long long)want->retry_after_us, want->limit_index, want->path,
		 got->allowed, got->would_allow, (long long)got->remaining,
		 (long long)got->reset_after_us, (long long)got->retry_after_us,
		 got->limit_index, got->path);
}

/* ---- reset ---------------------------------------------------------------- */

/* The user keys of the main limiter: "alice" is reset, the others are
 * neighbours whose bytes it shares. */
static const char *const user_keys[] = {"alice", "alice2", "alic", "5:alice",
					"alice:1"};
enum { NUSERS = 5, NPAIRS = NUSERS + 2, STEPS_BEFORE = 40, STEPS_AFTER = 30 };

typedef struct pair {
	drl_limiter *l;
	const char *key;
} pair;

void ops_check_reset(drl_store *st, const char *name, const char *spec)
{
	int n = checks++;
	char prefix[32], wider[40];
	snprintf(prefix, sizeof prefix, "reset%d:", n);
	snprintf(wider, sizeof wider, "%sx", prefix); /* same hash tag */
	drl_limiter *main_l = limiter(st, spec, prefix);
	drl_limiter *wide_l = limiter(st, spec, wider);
	drl_limiter *other_l = limiter(st, "token_bucket:2/7m", prefix);
	pair p[NPAIRS];
	for (int i = 0; i < NUSERS; i++)
		p[i] = (pair){main_l, user_keys[i]};
	p[NUSERS] = (pair){wide_l, "alice"};
	p[NUSERS + 1] = (pair){other_l, "alice"};

	/* Traffic over two minutes: every window of a minute sees some. */
	int64_t t = base_time(n) + 30 * SEC;
	for (int s = 0; s < STEPS_BEFORE; s++, t += 3 * SEC)
		for (int i = 0; i < NPAIRS; i++)
			(void)decide(p[i].l, p[i].key, 1, t, name);
	drl_result before[NPAIRS], after;
	for (int i = 1; i < NPAIRS; i++)
		before[i] = decide(p[i].l, p[i].key, 0, t, name);
	drl_error err = {0};
	if (drl_reset_at(main_l, "alice", 5, t, &err))
		fail_msg("%s on %s: drl_reset_at: %s", spec, name, err.message);
	for (int i = 1; i < NPAIRS; i++) {
		after = decide(p[i].l, p[i].key, 0, t, name);
		if (!same(&before[i], &after))
			fail_differ("a neighbour changed", spec, name, i,
				    &before[i], &after);
	}

	/* "alice" as on a store that never saw it. */
	tu fresh = tu_open("memory://", spec);
	for (int s = 0; s < STEPS_AFTER; s++, t += 2 * SEC) {
		drl_result want = decide(fresh.lim, "alice", 1, t, "memory");
		drl_result got = decide(main_l, "alice", 1, t, name);
		if (!same(&want, &got))
			fail_differ("not as fresh after a reset", spec, name, s,
				    &want, &got);
	}
	tu_free(&fresh);
	drl_limiter_free(main_l);
	drl_limiter_free(wide_l);
	drl_limiter_free(other_l);
}

/* ---- shadow --------------------------------------------------------------- */

enum { SHADOW_STEPS = 200 };

/* One decision of `key` on l: a single call, or (batch) a batch of one. */
static drl_result decide_one(drl_limiter *l, const char *key, int64_t cost,
			     int64_t now, bool batch, const char *name)
{
	if (!batch)
		return decide(l, key, cost, now, name);
	drl_batch_item it = {.key = key, .keylen = strlen(key), .cost = cost};
	drl_error err = {0};
	if (drl_allow_batch_at(l, &it, 1, now, &err) || it.rc)
		fail_msg("%s: batch of %s: %s", name, key, err.message);
	return it.result;
}

void ops_check_shadow(drl_store *plain, drl_store *shadowed, const char *name,
		      const char *spec)
{
	int n = checks++;
	char prefix[32], shadow_spec[160];
	snprintf(prefix, sizeof prefix, "shadow%d:", n);
	snprintf(shadow_spec, sizeof shadow_spec, "%s;shadow=1", spec);
	drl_limiter *pl = limiter(plain, spec, prefix);
	/* another prefix: the two must not share state on one server */
	snprintf(prefix, sizeof prefix, "shadow%ds:", n);
	drl_limiter *sl = limiter(shadowed, shadow_spec, prefix);
	drl_store_stats p0 = tu_stats(plain), s0 = tu_stats(shadowed);
	uint64_t x = 0x9e3779b97f4a7c15u * (uint64_t)(n + 1), denials = 0;
	int64_t t = base_time(n);
	static const char *const keys[] = {"bob", "carol", "dave"};
	for (int s = 0; s < SHADOW_STEPS; s++) {
		x = x * 6364136223846793005u + 1442695040888963407u;
		if ((x >> 33) % 10 == 0)
			t -= (int64_t)((x >> 20) % (15 * SEC)); /* backwards */
		else
			t += (int64_t)((x >> 20) % (20 * SEC));
		int64_t cost = (int64_t)((x >> 40) % 5);
		if ((x >> 50) % 23 == 0)
			cost = 1000000001; /* beyond every capacity */
		const char *key = keys[(x >> 45) % 3];
		bool batch = (x >> 55) % 5 == 0;
		drl_result want = decide_one(pl, key, cost, t, batch, name);
		drl_result got = decide_one(sl, key, cost, t, batch, name);
		if (want.would_allow != want.allowed)
			fail_differ("would_allow is not allowed", spec, name, s,
				    &want, &want);
		denials += !want.allowed;
		/* the answer is allowed; everything else is the decision */
		drl_result expect = want;
		expect.allowed = 1;
		if (!same(&expect, &got))
			fail_differ("shadowed", spec, name, s, &expect, &got);
	}
	drl_store_stats p1 = tu_stats(plain), s1 = tu_stats(shadowed);
	assert_int_equal(p1.shadow_denials, p0.shadow_denials);
	assert_int_equal(s1.shadow_denials - s0.shadow_denials, denials);
	drl_limiter_free(pl);
	drl_limiter_free(sl);
}
