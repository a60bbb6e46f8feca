/*
 * The handlers that decide: POST /v1/check and protected paths, and the
 * one that forgets: POST /v1/reset. They speak in drld_reply (check.h);
 * http.c sends it.
 */
#include "check.h"

#include "common/args.h"
#include "common/json.h"
#include "common/result.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reply_reset(struct drld_reply *out, unsigned status,
			const char *type)
{
	out->status = status;
	out->type = type;
	out->len = 0;
	out->body[0] = '\0';
	out->policy[0] = out->ratelimit[0] = out->retry_after[0] = '\0';
	out->allow = NULL;
}

void drld_reply_error(struct drld_reply *out, unsigned status, const char *fmt,
		      ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	int k = vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (k < 0)
		k = 0;
	reply_reset(out, status, "application/json");
	size_t n = (size_t)k < sizeof msg ? (size_t)k : sizeof msg - 1;
	size_t at =
		(size_t)snprintf(out->body, sizeof out->body, "{\"error\":\"");
	at += tl_json_escape(out->body + at, sizeof out->body - at - 3, msg, n);
	memcpy(out->body + at, "\"}\n", 4);
	out->len = at + 3;
}

void drld_reply_text(struct drld_reply *out, unsigned status, const char *text)
{
	reply_reset(out, status, "text/plain; charset=utf-8");
	out->len = (size_t)snprintf(out->body, sizeof out->body, "%s", text);
}

/* Whether rc is the store failing (what on_error= answers, and 503). */
static bool store_failure(int rc)
{
	return rc == DRL_ESTORE || rc == DRL_ETIMEDOUT ||
	       rc == DRL_EUNAVAILABLE || rc == DRL_ECONFLICT ||
	       rc == DRL_ECORRUPT || rc == DRL_ERANGE;
}

/* Count a decision on l (rc, *r) that began at t0 (drl_mono_us). */
static void count(struct drld *d, const struct drld_limit *l, int rc,
		  const drl_result *r, int64_t t0)
{
	drld_metrics_duration(d->metrics, drl_mono_us() - t0);
	if (rc == 0)
		drld_metrics_decision(l->stats, r->allowed);
	if (rc == 0 && r->allowed && !r->would_allow)
		drld_metrics_shadow_denial(l->stats);
	if (store_failure(rc) || (rc == 0 && (r->path == DRL_PATH_LOCAL ||
					      r->path == DRL_PATH_FAIL_OPEN ||
					      r->path == DRL_PATH_FAIL_CLOSED)))
		drld_metrics_store_error(d->metrics);
}

/* Decide `cost` for the key on l, timing and counting it. */
static int decide(struct drld *d, const struct drld_limit *l, const char *key,
		  size_t keylen, int64_t cost, drl_result *r, drl_error *err)
{
	int64_t t0 = drl_mono_us();
	int rc = drl_allow(l->lim, key, keylen, cost, r, err);

	count(d, l, rc, r, t0);
	return rc;
}

/* The status for a failed decision: the caller's mistake, the store's,
 * or drld's. */
static unsigned error_status(int rc)
{
	if (rc == DRL_EINVAL)
		return 400;
	return store_failure(rc) ? 503 : 500;
}

/* Add decision r of l's headers to out: RateLimit-Policy; RateLimit when
 * the numbers are a limit's (not fail_open/fail_closed, which carry
 * none); Retry-After when denied and a retry can succeed. A shadowed
 * denial (allowed, would_allow 0) gets the RateLimit of the denial but no
 * Retry-After: nothing was refused. */
static void add_headers(struct drld_reply *out, const struct drld_limit *l,
			const drl_result *r)
{
	snprintf(out->policy, sizeof out->policy, "%s", l->policy);
	if (tl_ratelimit_has_numbers(r))
		drld_limit_ratelimit(l, r, out->ratelimit,
				     sizeof out->ratelimit);
	if (!r->allowed && r->retry_after_us != DRL_NEVER)
		snprintf(out->retry_after, sizeof out->retry_after, "%lld",
			 tl_ceil_div(r->retry_after_us, 1000000));
}

/* ---- POST /v1/check --------------------------------------------------- */

/* The fields of a /v1/check body. */
struct check_req {
	const char *key; /* UTF-8 bytes of the JSON string */
	size_t keylen;
	const char *limit; /* one of limit and rule */
	const char *rule;
	int64_t cost;
};

/* Read a string field: NULL and 400 when v is not a string; limit and
 * rule may not hold a NUL byte (key may). */
static bool string_field(struct drld_reply *out, const char *name, json_t *v,
			 bool nul_ok, const char **s, size_t *len)
{
	if (!json_is_string(v) || (!nul_ok && strlen(json_string_value(v)) !=
						      json_string_length(v))) {
		drld_reply_error(out, 400, "\"%s\" must be a string%s", name,
				 nul_ok ? "" : " without NUL bytes");
		return false;
	}
	*s = json_string_value(v);
	if (len != NULL)
		*len = json_string_length(v);
	return true;
}

/* Fill q from the parsed body. Returns false with a 400 in out. */
static bool read_fields(json_t *root, struct check_req *q,
			struct drld_reply *out)
{
	const char *k;
	json_t *v;

	*q = (struct check_req){.cost = 1};
	if (!json_is_object(root)) {
		drld_reply_error(out, 400, "the body must be a JSON object");
		return false;
	}
	json_object_foreach(root, k, v)
	{
		bool ok = true;
		if (strcmp(k, "key") == 0)
			ok = string_field(out, k, v, true, &q->key, &q->keylen);
		else if (strcmp(k, "limit") == 0)
			ok = string_field(out, k, v, false, &q->limit, NULL);
		else if (strcmp(k, "rule") == 0)
			ok = string_field(out, k, v, false, &q->rule, NULL);
		else if (strcmp(k, "cost") == 0) {
			ok = json_is_integer(v) && json_integer_value(v) >= 0;
			if (ok)
				q->cost = json_integer_value(v);
			else
				drld_reply_error(out, 400,
						 "\"cost\" must be an integer "
						 ">= 0");
		} else {
			drld_reply_error(out, 400,
					 "unknown field \"%.64s\" (expected "
					 "key, limit, rule, cost)",
					 k);
			ok = false;
		}
		if (!ok)
			return false;
	}
	if (q->key == NULL || q->keylen == 0 || q->keylen > DRL_KEY_MAX) {
		drld_reply_error(out, 400,
				 "\"key\" must be a string of 1 to %d bytes",
				 DRL_KEY_MAX);
		return false;
	}
	if ((q->limit == NULL) == (q->rule == NULL)) {
		drld_reply_error(out, 400,
				 "give one of \"limit\" (a spec) and \"rule\" "
				 "(a name from the config)");
		return false;
	}
	return true;
}

/* Answer the decision: 200 with every field, or the error. */
static void reply_decision(struct drld_reply *out, const struct drld_limit *l,
			   int rc, const drl_result *r, const drl_error *err)
{
	if (rc != 0) {
		drld_reply_error(out, error_status(rc), "%s",
				 err->message[0] ? err->message
						 : drl_strerror(rc));
		return;
	}
	reply_reset(out, 200, "application/json");
	out->len = (size_t)snprintf(
		out->body, sizeof out->body,
		"{\"allowed\":%s,\"limit\":%lld,\"remaining\":%lld,"
		"\"reset_after_ms\":%lld,\"retry_after_ms\":%lld,"
		"\"limit_index\":%d,\"path\":\"%s\",\"would_allow\":%s}\n",
		r->allowed ? "true" : "false", (long long)r->limit,
		(long long)r->remaining, tl_ceil_div(r->reset_after_us, 1000),
		tl_ceil_div(r->retry_after_us, 1000), r->limit_index,
		tl_path_name(r->path), r->would_allow ? "true" : "false");
	add_headers(out, l, r);
}

/* The key a rule builds for this request into *key (malloc'd). Returns
 * false with a 400/500 in out. */
static bool rule_key(const struct drld_rule *rule,
		     const struct drld_request_parts *parts, char **key,
		     size_t *len, struct drld_reply *out)
{
	*key = drld_template_expand(rule->key, parts, DRL_KEY_MAX, len);
	if (*key == NULL && *len > DRL_KEY_MAX)
		drld_reply_error(out, 400,
				 "rule \"%s\" built a key of %zu bytes (at "
				 "most %d)",
				 rule->name, *len, DRL_KEY_MAX);
	else if (*key == NULL)
		drld_reply_error(out, 500, "out of memory");
	else if (*len == 0)
		drld_reply_error(out, 400, "rule \"%s\" built an empty key",
				 rule->name);
	return *key != NULL && *len != 0;
}

/* What a /v1/check or /v1/reset body names: a limit (a rule's, or the
 * ad-hoc one of its spec, held by ref) and the store key. */
struct target {
	const struct drld_limit *l;
	const char *key;
	size_t keylen;
	char *built;                /* a rule's key, malloc'd */
	struct drld_adhoc_ref *ref; /* an ad-hoc limit, or NULL */
};

/* Find q's limit and key into *t. Returns false with the error in out
 * (404 an unknown rule, 400 a bad spec or key). */
static bool resolve(struct drld *d, const struct drld_config *c,
		    const struct check_req *q,
		    const struct drld_request_parts *parts, struct target *t,
		    struct drld_reply *out)
{
	*t = (struct target){.key = q->key, .keylen = q->keylen};
	if (q->rule != NULL) {
		const struct drld_rule *rule = drld_config_rule(c, q->rule);
		struct drld_request_parts p = *parts;

		if (rule == NULL) {
			drld_reply_error(out, 404, "unknown rule \"%.64s\"",
					 q->rule);
			return false;
		}
		p.key = q->key;
		p.keylen = q->keylen;
		if (!rule_key(rule, &p, &t->built, &t->keylen, out)) {
			free(t->built);
			t->built = NULL;
			return false;
		}
		t->key = t->built;
		t->l = drld_rule_limit(rule, &p);
		return true;
	}
	drl_error err = {0};
	int rc = drld_adhoc_get(d->adhoc, q->limit, &t->ref, &err);
	if (rc != 0) {
		drld_reply_error(out, rc == DRL_ENOMEM ? 500 : 400, "%s",
				 err.message);
		return false;
	}
	t->l = drld_adhoc_limit(t->ref);
	return true;
}

/* Give back what resolve() took. */
static void target_done(struct target *t)
{
	free(t->built);
	if (t->ref != NULL)
		drld_adhoc_put(t->ref);
}

/* Most JSON tokens, and longest string (a key of DRL_KEY_MAX bytes, each
 * written as a 6-byte escape, and its quotes) and other token, of a body
 * read_body() hands to jansson. */
#define BODY_TOKENS_MAX 256
#define BODY_STRING_MAX (6 * (size_t)DRL_KEY_MAX + 2)
#define BODY_WORD_MAX 64

/* Whether body[0..len) is small enough in JSON terms for jansson to
 * build: at most BODY_TOKENS_MAX tokens, no string over BODY_STRING_MAX
 * bytes and no other token over BODY_WORD_MAX. A body has a few scalar
 * fields; built whole, a large one cost jansson some 2 to 8 times its size
 * (an array of 10 million small values, a string of 50 MB), on top of
 * the body (issue 33). What this passes, or cuts short, jansson still
 * checks. */
static bool json_small(const char *body, size_t len)
{
	size_t tokens = 0;

	for (size_t i = 0; i < len; tokens++) {
		size_t j = i + 1;
		if (tokens == BODY_TOKENS_MAX)
			return false;
		if (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' ||
		    body[i] == '\r') {
			i++;
			tokens--; /* not a token */
			continue;
		}
		if (body[i] == '"') {
			while (j < len && body[j] != '"')
				j += body[j] == '\\' ? 2 : 1;
			if (j - i > BODY_STRING_MAX)
				return false;
			i = j + 1;
			continue;
		}
		if (strchr("{}[]:,", body[i]) == NULL || body[i] == '\0') {
			while (j < len &&
			       strchr(" \t\n\r{}[]:,\"", body[j]) == NULL)
				j++;
			if (j - i > BODY_WORD_MAX)
				return false;
		}
		i = j;
	}
	return true;
}

/* Parse a /v1/check or /v1/reset body into q (its strings live in
 * *root, which the caller decrefs when this returns true). Returns false
 * with a 400 in out. */
static bool read_body(const char *body, size_t len, struct check_req *q,
		      json_t **root, struct drld_reply *out)
{
	json_error_t je;

	*root = NULL;
	if (!json_small(body, len)) {
		drld_reply_error(out, 400,
				 "bad JSON: more than %d tokens, a string of "
				 "more than %zu bytes or another token of more "
				 "than %d (a body is a few fields)",
				 BODY_TOKENS_MAX, BODY_STRING_MAX,
				 BODY_WORD_MAX);
		return false;
	}
	*root = json_loadb(len ? body : "", len,
			   JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
	if (*root == NULL) {
		drld_reply_error(out, 400, "bad JSON: %s (line %d, column %d)",
				 je.text, je.line, je.column);
		return false;
	}
	if (read_fields(*root, q, out))
		return true;
	json_decref(*root);
	return false;
}

/* What a handler does with the limit and key a body names. */
typedef void (*target_fn)(struct drld *d, const struct check_req *q,
			  const struct target *t, struct drld_reply *out);

/* Parse body[0..len), find its limit and key under c, and run fn on
 * them; or answer the error. */
static void handle(struct drld *d, const struct drld_config *c,
		   const char *body, size_t len,
		   const struct drld_request_parts *parts, target_fn fn,
		   struct drld_reply *out)
{
	struct check_req q;
	struct target t;
	json_t *root;

	if (!read_body(body, len, &q, &root, out))
		return;
	if (resolve(d, c, &q, parts, &t, out)) {
		fn(d, &q, &t, out);
		target_done(&t);
	}
	json_decref(root);
}

/* Decide q's cost on t. */
static void check_target(struct drld *d, const struct check_req *q,
			 const struct target *t, struct drld_reply *out)
{
	drl_error err = {0};
	drl_result r;
	int rc = decide(d, t->l, t->key, t->keylen, q->cost, &r, &err);

	reply_decision(out, t->l, rc, &r, &err);
}

void drld_check(struct drld *d, const struct drld_config *c, const char *body,
		size_t len, const struct drld_request_parts *parts,
		struct drld_reply *out)
{
	handle(d, c, body, len, parts, check_target, out);
}

/* A /v1/check decision in flight through the async context. */
struct started_check {
	struct drld *d;
	struct target t; /* its limit (and an ad-hoc one's ref) */
	int64_t t0;
	struct drld_reply *out;
	void (*done)(void *arg);
	void *arg;
};

static void check_decided(drl_async *as, int rc, const drl_result *r,
			  const drl_error *err, void *arg)
{
	(void)as;
	struct started_check *s = arg;
	void (*done)(void *) = s->done;
	void *darg = s->arg;

	count(s->d, s->t.l, rc, r, s->t0);
	reply_decision(s->out, s->t.l, rc, r, err);
	target_done(&s->t);
	free(s);
	done(darg);
}

int drld_check_start(struct drld *d, drl_async *as, const struct drld_config *c,
		     const char *body, size_t len,
		     const struct drld_request_parts *parts,
		     struct drld_reply *out, void (*suspend)(void *arg),
		     void (*done)(void *arg), void *arg)
{
	struct check_req q;
	struct target t;
	json_t *root;
	struct started_check *s = NULL;

	if (!read_body(body, len, &q, &root, out))
		return 0;
	if (!resolve(d, c, &q, parts, &t, out)) {
		json_decref(root);
		return 0;
	}
	if (!drl_async_direct(t.l->lim) || (s = malloc(sizeof *s)) == NULL) {
		check_target(d, &q, &t, out); /* blocking, as drld_check */
		target_done(&t);
		json_decref(root);
		return 0;
	}
	*s = (struct started_check){.d = d,
				    .t = t,
				    .t0 = drl_mono_us(),
				    .out = out,
				    .done = done,
				    .arg = arg};
	drl_error err = {0};
	suspend(arg);
	/* the key is copied at start: root may go */
	int rc = drl_async_allow(as, t.l->lim, t.key, t.keylen, q.cost,
				 check_decided, s, &err);
	json_decref(root);
	if (rc != 0) { /* not started: answered as a failed decision */
		drl_result r;
		memset(&r, 0, sizeof r);
		check_decided(as, rc, &r, &err, s);
	}
	return 1;
}

/* ---- POST /v1/reset --------------------------------------------------- */

/* Forget t's key on its limit (q's cost plays no part). */
static void reset_target(struct drld *d, const struct check_req *q,
			 const struct target *t, struct drld_reply *out)
{
	drl_error err = {0};
	int rc = drl_reset(t->l->lim, t->key, t->keylen, &err);

	(void)d;
	(void)q;
	if (rc != 0) {
		drld_reply_error(
			out, rc == DRL_ENOTSUP ? 501 : error_status(rc), "%s",
			err.message[0] ? err.message : drl_strerror(rc));
		return;
	}
	drld_metrics_reset(t->l->stats);
	reply_reset(out, 200, "application/json");
	out->len = (size_t)snprintf(out->body, sizeof out->body,
				    "{\"reset\":true}\n");
}

void drld_reset(struct drld *d, const struct drld_config *c, const char *body,
		size_t len, const struct drld_request_parts *parts,
		struct drld_reply *out)
{
	handle(d, c, body, len, parts, reset_target, out);
}

/* ---- protected paths -------------------------------------------------- */

void drld_protect(struct drld *d, const struct drld_rule *rule,
		  const struct drld_request_parts *parts,
		  struct drld_reply *out)
{
	drl_error err = {0};
	drl_result r;
	char *key;
	size_t len;

	if (!rule_key(rule, parts, &key, &len, out)) {
		free(key);
		return;
	}
	const struct drld_limit *l = drld_rule_limit(rule, parts);
	int rc = decide(d, l, key, len, 1, &r, &err);
	free(key);
	if (rc != 0) { /* no detail for the proxied client */
		drld_reply_text(out, error_status(rc),
				rc == DRL_EINVAL ? "bad request\n"
						 : "rate limit unavailable\n");
		return;
	}
	if (r.allowed)
		drld_reply_text(out, 200, "ok\n");
	else
		drld_reply_text(out, 429, "too many requests\n");
	add_headers(out, l, &r);
}
