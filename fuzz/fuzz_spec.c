/*
 * fuzz_spec: the limit spec and policy parser (drl_limiter_new), and the
 * decisions of whatever it accepts. Input: the spec text (a NUL is added;
 * a NUL inside ends it early, as for any C string).
 *
 * Each input gets a fresh memory store. A spec that does not parse must be
 * DRL_EINVAL with a message. One that parses is asked for decisions at a
 * few times with a few costs, and each decision must keep the documented
 * semantics (README, "Limit specs"): rc 0 on the memory store, allowed 0 or
 * 1, retry_after 0 when allowed, a cost of 0 always allowed and consuming
 * nothing, a denied request consuming nothing (the quota a peek reports is
 * the same before and after it), remaining >= 0.
 */
#include "fuzz.h"

#include <drl/drl.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T0 INT64_C(1795351356000000)

static void fail(const char *what, const char *spec, int64_t t, int64_t cost,
		 const drl_result *r, int rc)
{
	fprintf(stderr,
		"fuzz_spec: %s: spec \"%.200s\" t=%lld cost=%lld: rc %s "
		"allowed %d remaining %lld retry %lld reset %lld\n",
		what, spec, (long long)t, (long long)cost, drl_err_name(rc),
		r->allowed, (long long)r->remaining,
		(long long)r->retry_after_us, (long long)r->reset_after_us);
	abort();
}

/* The store's count of shadowed denials (each input has a store of its
 * own, so only this input's decisions move it). */
static uint64_t shadow_denials(const drl_store *store)
{
	drl_store_stats st;
	memset(&st, 0, sizeof st);
	if (drl_store_stats_get(store, &st) != 0)
		abort();
	return st.shadow_denials;
}

/* One decision, checked; returns it. */
static drl_result decide(drl_limiter *lim, const drl_store *store,
			 const char *spec, int64_t t, int64_t cost)
{
	drl_result r;
	drl_error err = {0};
	memset(&r, 0, sizeof r);
	uint64_t shadowed_before = shadow_denials(store);
	int rc = drl_allow_at(lim, "user", 4, cost, t, &r, &err);
	if (rc != 0)
		fail(err.message, spec, t, cost, &r, rc);
	if (r.allowed != 0 && r.allowed != 1)
		fail("allowed is not 0 or 1", spec, t, cost, &r, rc);
	if (r.would_allow != 0 && r.would_allow != 1)
		fail("would_allow is not 0 or 1", spec, t, cost, &r, rc);
	uint64_t shadowed = shadow_denials(store) - shadowed_before;
	if (r.allowed != r.would_allow && !(r.allowed && shadowed == 1))
		fail("answer differs from the decision, no shadow denial "
		     "counted",
		     spec, t, cost, &r, rc);
	if (r.allowed == r.would_allow && shadowed != 0)
		fail("a shadow denial counted for an answer that is the "
		     "decision",
		     spec, t, cost, &r, rc);
	if (r.would_allow && r.retry_after_us != 0)
		fail("allowed with a retry_after", spec, t, cost, &r, rc);
	if (!r.would_allow && r.retry_after_us < 0 &&
	    r.retry_after_us != DRL_NEVER)
		fail("negative retry_after", spec, t, cost, &r, rc);
	if (cost == 0 && !r.would_allow)
		fail("a peek was denied", spec, t, cost, &r, rc);
	if (r.remaining < 0 || r.reset_after_us < 0 || r.limit_index < 0 ||
	    r.limit_index >= DRL_POLICY_LIMITS_MAX)
		fail("a field out of range", spec, t, cost, &r, rc);
	return r;
}

/* cost at t between two peeks: a denial leaves the quota as it was. */
static void round_at(drl_limiter *lim, const drl_store *store, const char *spec,
		     int64_t t, int64_t cost)
{
	drl_result before = decide(lim, store, spec, t, 0);
	drl_result r = decide(lim, store, spec, t, cost);
	drl_result after = decide(lim, store, spec, t, 0);
	if (!r.would_allow && after.remaining != before.remaining)
		fail("a denial consumed quota", spec, t, cost, &r, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int64_t costs[] = {1, 3, 1, 1000000001, 2};
	static const int64_t times[] = {T0,       T0,
					T0 + 999, T0 + 1000000,
					T0 - 5,   T0 + INT64_C(86400000000)};
	drl_store *store = NULL;
	drl_limiter *lim = NULL;
	drl_error err = {0};
	char *spec;
	spec = fuzz_text(data, size, 4096);
	if (spec == NULL)
		return 0;
	if (drl_store_open(&store, "memory://", &err) != 0)
		abort();
	int rc = drl_limiter_new(&lim, store, spec, "f:", &err);
	if (rc != 0) {
		if ((rc != DRL_EINVAL && rc != DRL_ENOMEM) || err.code != rc ||
		    err.message[0] == '\0') {
			fprintf(stderr, "fuzz_spec: \"%.200s\": %s \"%s\"\n",
				spec, drl_err_name(rc), err.message);
			abort();
		}
	} else {
		for (size_t i = 0; i < sizeof times / sizeof times[0]; i++)
			round_at(lim, store, spec, times[i],
				 costs[i % (sizeof costs / sizeof costs[0])]);
	}
	drl_limiter_free(lim);
	drl_store_free(store);
	free(spec);
	return 0;
}
