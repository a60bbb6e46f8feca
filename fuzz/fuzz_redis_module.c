/*
 * fuzz_redis_module: the argument parsers of the Redis module's commands
 * (redis_module/decide.h): DRL.DECIDE's (key, spec, now_us, cost),
 * DRL.TWIN's (key, twin, integers) and DRL.POLICY's (groups of DRL.TWIN's
 * arguments), as any Redis client may send them. Input: the arguments
 * separated by '\n' (each may hold any other byte, NUL included); the
 * first byte picks the command (& 3 == 2: DRL.POLICY, else odd: DRL.TWIN,
 * else DRL.DECIDE). A policy that parses is decided as the module
 * decides it (drl__rm_decide_policy) on a fresh memory:// store: rc 0,
 * a decision, limit_index one of its limits.
 *
 * Each argument is copied to a buffer of its own length, so ASan sees a
 * read past it. A call that does not parse must be DRL_EINVAL with a
 * message. One that parses is decided on a fresh memory:// store, as the
 * module decides it on the server's keys: rc 0, allowed 0 or 1,
 * remaining >= 0, retry_after 0 when allowed. DRL.TWIN keeps the limits
 * it took in a cache: each twin input is parsed as the cache stands
 * (earlier inputs' limits), then in full (cache emptied), then again
 * (from the cache when taken), and the three must answer alike.
 */
#include "fuzz.h"

#include "decide.h"

#include <stdio.h>

/* DRL.POLICY's most, and one more */
#define ARGS_MAX (DRL__RM_POLICY_GROUP * DRL_POLICY_LIMITS_MAX + 1)

static void fail(const char *what, int rc, const drl_error *err)
{
	fprintf(stderr, "fuzz_redis_module: %s: rc %s: %s\n", what,
		drl_err_name(rc), err->message);
	abort();
}

/* A fresh memory:// store, as the module's keys are to each call. */
static drl_backend *fresh_store(void)
{
	drl_backend *b = NULL;
	drl_error err = {0, {0}};
	if (drl_backend_open_with(&b, "memory://", NULL, 0, &err) != 0)
		abort();
	return b;
}

/* Whether res is a decision: allowed 0 or 1, remaining >= 0, no wait when
 * allowed. */
static bool is_decision(const drl_result *res)
{
	return (res->allowed == 0 || res->allowed == 1) &&
	       res->remaining >= 0 &&
	       (!res->allowed || res->retry_after_us == 0);
}

static void decide(const drl__rm_request *q)
{
	drl_backend *b = fresh_store();
	drl_error err = {0, {0}};
	drl_result res;
	int64_t undo = 0;
	int rc = drl__rm_decide(q, b, &res, &undo, &err);
	if (rc != 0)
		fail("decide on memory://", rc, &err);
	if (!is_decision(&res))
		fail("not a decision", rc, &err);
	b->destroy(b);
}

/* Whether a key of p begins another (a counter's group and a key of
 * its record: one limit may then read another's state as its own). */
static bool keys_overlap(const drl__rm_policy *p)
{
	for (size_t i = 0; i < p->n; i++)
		for (size_t j = 0; j < p->n; j++)
			if (i != j && p->q[i].kb.len < p->q[j].kb.len &&
			    memcmp(p->q[i].kb.buf, p->q[j].kb.buf,
				   p->q[i].kb.len) == 0)
				return true;
	return false;
}

static void decide_policy(const drl__rm_policy *p)
{
	drl_backend *b = fresh_store();
	drl_error err = {0, {0}};
	drl_result res;
	int rc = drl__rm_decide_policy(p, b, &res, &err);
	if (rc != 0 && keys_overlap(p) &&
	    (rc == DRL_ECORRUPT || rc == DRL_ESTORE) && err.message[0]) {
		b->destroy(b);
		return;
	}
	if (rc != 0)
		fail("policy on memory://", rc, &err);
	if (!is_decision(&res) || res.limit_index < 0 ||
	    (size_t)res.limit_index >= p->n)
		fail("policy: not a decision", rc, &err);
	b->destroy(b);
}

/* Whether two parsed requests say the same decision. */
static bool same(const drl__rm_request *a, const drl__rm_request *b)
{
	const drl__limit *x = &a->lim, *y = &b->lim;
	return x->algo == y->algo && x->limit == y->limit &&
	       x->period_us == y->period_us && x->burst == y->burst &&
	       x->subwindows == y->subwindows && x->trailing == y->trailing &&
	       x->on_change == y->on_change && x->version == y->version &&
	       x->lua_ok == y->lua_ok && x->taglen == y->taglen &&
	       memcmp(x->tag, y->tag, x->taglen) == 0 && a->now == b->now &&
	       a->cost == b->cost && a->peek == b->peek &&
	       a->kb.len == b->kb.len &&
	       memcmp(a->kb.buf, b->kb.buf, a->kb.len) == 0;
}

/* DRL.TWIN's parse of the input as the cache stands, in full, and from
 * the cache: one answer. */
static int parse_twin(drl__rm_request *q, char *const *arg, const size_t *len,
		      size_t n, drl_error *err)
{
	drl__rm_request full, again;
	drl_error e2 = {0, {0}}, e3 = {0, {0}};
	int rc = drl__rm_parse_twin(q, arg[0], len[0], arg[1], len[1], n - 2,
				    (const char *const *)arg + 2, len + 2, err);
	drl__rm_twin_cache_clear();
	int rc2 =
		drl__rm_parse_twin(&full, arg[0], len[0], arg[1], len[1], n - 2,
				   (const char *const *)arg + 2, len + 2, &e2);
	int rc3 = drl__rm_parse_twin(&again, arg[0], len[0], arg[1], len[1],
				     n - 2, (const char *const *)arg + 2,
				     len + 2, &e3);
	if (rc != rc2 || rc2 != rc3 ||
	    (rc == 0 && (!same(q, &full) || !same(&full, &again))) ||
	    (rc != 0 && (strcmp(err->message, e2.message) != 0 ||
			 strcmp(e2.message, e3.message) != 0)))
		fail("DRL.TWIN: the cache changed the answer", rc, err);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 4096)
		return 0;
	bool policy = (data[0] & 3) == 2, twin = data[0] & 1;
	char *arg[ARGS_MAX];
	size_t len[ARGS_MAX], n = 0;
	const uint8_t *p = data + 1, *end = data + size;
	while (n < ARGS_MAX) {
		const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = (size_t)((nl ? nl : end) - p);
		arg[n] = malloc(l ? l : 1);
		if (arg[n] == NULL)
			abort();
		memcpy(arg[n], p, l);
		len[n++] = l;
		if (nl == NULL)
			break;
		p = nl + 1;
	}
	drl__rm_request q;
	drl_error err = {0, {0}};
	int rc = 0;
	if (policy) {
		drl__rm_policy pol;
		rc = drl__rm_parse_policy(&pol, n, (const char *const *)arg,
					  len, &err);
		if (rc == 0)
			decide_policy(&pol);
		else if (rc != DRL_EINVAL || !err.message[0])
			fail("DRL.POLICY parse", rc, &err);
		rc = 1; /* decided here */
	} else if (twin && n >= 2)
		rc = parse_twin(&q, arg, len, n, &err);
	else if (!twin && n == 4)
		rc = drl__rm_parse(&q, (const char *const *)arg, len, &err);
	else
		rc = 1; /* Redis's arity check: the parser is not called */
	if (rc == 0)
		decide(&q);
	else if (rc != 1 && (rc != DRL_EINVAL || !err.message[0]))
		fail("parse", rc, &err);
	for (size_t i = 0; i < n; i++)
		free(arg[i]);
	return 0;
}
