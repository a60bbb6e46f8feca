/* drld's config file and its snapshots: see config.h. */
#include "config.h"

#include "message.h"
#include "regular.h"

#include <drl/resolver.h>
#include <jansson.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the loader is working on: messages name the file and, through
 * `where`, the rule or entry. */
struct loader {
	const char *path;
	drl_store *store;
	struct drld_metrics *metrics;
	char *msg;
	size_t n;
};

/* Write "FILE: " and the printf-style message to ld->msg. Returns -1. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int
fail(const struct loader *ld, const char *fmt, ...)
{
	va_list ap;
	int k = snprintf(ld->msg, ld->n, "%s: ", ld->path);

	va_start(ap, fmt);
	drld_message_rest(ld->msg, ld->n, k, fmt, ap);
	va_end(ap);
	return -1;
}

/* Largest config file read. */
#define FILE_MAX (16 << 20)

/* Parse the file as JSON (duplicate keys are an error). NULL with the
 * message filled when it cannot be read (or is not a regular file:
 * regular.h) or parsed. */
static json_t *read_json(const struct loader *ld)
{
	json_error_t je;
	char why[128];
	FILE *f = drld_open_regular(AT_FDCWD, ld->path, FILE_MAX, NULL, why,
				    sizeof why);

	if (f == NULL) {
		fail(ld, "%s", why);
		return NULL;
	}
	json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
	fclose(f);
	if (root == NULL) {
		if (je.line < 0)
			fail(ld, "%s", je.text);
		else
			fail(ld, "line %d, column %d: %s", je.line, je.column,
			     je.text);
		return NULL;
	}
	if (!json_is_object(root)) {
		fail(ld, "the config must be a JSON object");
		json_decref(root);
		return NULL;
	}
	return root;
}

int drld_config_peek_store(const char *path, char **store, char *msg, size_t n)
{
	struct loader ld = {.path = path, .msg = msg, .n = n};
	json_t *root = read_json(&ld);
	int rc = 0;

	*store = NULL;
	if (root == NULL)
		return -1;
	json_t *v = json_object_get(root, "store");
	if (v != NULL && !json_is_string(v))
		rc = fail(&ld, "\"store\" must be a string (a store URI)");
	else if (v != NULL && (*store = strdup(json_string_value(v))) == NULL)
		rc = fail(&ld, "out of memory");
	json_decref(root);
	return rc;
}

/* Whether name is a valid rule name: 1..DRLD_RULE_NAME_MAX of
 * [A-Za-z0-9_.-] (it appears in headers and metric labels unescaped). */
static bool good_name(const char *name)
{
	size_t len = strlen(name);

	if (len == 0 || len > DRLD_RULE_NAME_MAX)
		return false;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' ||
		      *p == '-'))
			return false;
	return true;
}

/* The string field `field` of object o in *out (NULL when absent).
 * Returns -1 (message filled) when present but not a string, or holding
 * a NUL byte. */
static int get_string(const struct loader *ld, json_t *o, const char *field,
		      const char *where, const char **out)
{
	json_t *v = json_object_get(o, field);

	*out = NULL;
	if (v == NULL)
		return 0;
	if (!json_is_string(v) ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return fail(ld, "%s: \"%s\" must be a string", where, field);
	*out = json_string_value(v);
	return 0;
}

/* Every key of object o is one of the NULL-terminated `known`. */
static int only_fields(const struct loader *ld, json_t *o, const char *where,
		       const char *const *known, const char *expected)
{
	const char *k;
	json_t *v;

	json_object_foreach(o, k, v)
	{
		size_t i = 0;
		while (known[i] != NULL && strcmp(known[i], k) != 0)
			i++;
		if (known[i] == NULL)
			return fail(ld,
				    "%s: unknown field \"%.64s\" (expected %s)",
				    where, k, expected);
	}
	return 0;
}

/* ---- limits_from: a limit per key -------------------------------------- */

/* One spec's limiter of a rule (spec as the source gave it). */
struct spec_limit {
	char *spec;
	struct drld_limit limit;
};

/* A map file's row: a value of "by" and its spec's limit. */
struct map_row {
	char *value;
	size_t len;
	const struct drld_limit *limit;
};

struct drld_per_key {
	struct drld_template *by; /* NULL: the rule's key */
	struct map_row *rows;     /* a map file's, sorted (row_cmp) */
	size_t nrows;
	drl_resolver *res; /* a Redis hash's, or NULL */
	/* how a spec is made into a limiter: the rule's */
	drl_store *store;
	char *suffix; /* the rule's ";on_error=...;shadow=1" */
	char prefix[sizeof "drld:rule::" + DRLD_RULE_NAME_MAX];
	char name[DRLD_RULE_NAME_MAX + 1]; /* the rule's */
	struct drld_rule_stats *stats;
	/* the limiters made so far, each its own allocation (a pointer to
	 * one stays valid); under lock */
	pthread_mutex_t lock;
	struct spec_limit *made[DRLD_RULE_SPECS_MAX];
	size_t nmade;
};

static int row_cmp(const void *a, const void *b)
{
	const struct map_row *x = a, *y = b;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return memcmp(x->value, y->value, x->len);
}

static void per_key_free(struct drld_per_key *pk)
{
	if (pk == NULL)
		return;
	drl_resolver_free(pk->res); /* first: its thread */
	for (size_t i = 0; i < pk->nrows; i++)
		free(pk->rows[i].value);
	free(pk->rows);
	for (size_t i = 0; i < pk->nmade; i++) {
		drld_limit_fini(&pk->made[i]->limit);
		free(pk->made[i]->spec);
		free(pk->made[i]);
	}
	drld_template_free(pk->by);
	free(pk->suffix);
	pthread_mutex_destroy(&pk->lock);
	free(pk);
}

/* The limit of `spec` (pk->lock held): the one made before, or a new
 * one. NULL when it cannot be made (err says why: a bad spec, or
 * DRLD_RULE_SPECS_MAX reached). */
static const struct drld_limit *spec_limit(struct drld_per_key *pk,
					   const char *spec, drl_error *err)
{
	for (size_t i = 0; i < pk->nmade; i++)
		if (strcmp(pk->made[i]->spec, spec) == 0)
			return &pk->made[i]->limit;
	if (pk->nmade == DRLD_RULE_SPECS_MAX) {
		snprintf(err->message, sizeof err->message,
			 "more than %d distinct specs", DRLD_RULE_SPECS_MAX);
		return NULL;
	}
	struct spec_limit *m = calloc(1, sizeof *m);
	size_t len = strlen(spec) + strlen(pk->suffix);
	char *full = malloc(len + 1);
	if (m == NULL || full == NULL || (m->spec = strdup(spec)) == NULL) {
		free(m);
		free(full);
		snprintf(err->message, sizeof err->message, "out of memory");
		return NULL;
	}
	snprintf(full, len + 1, "%s%s", spec, pk->suffix);
	int rc = drld_limit_init(&m->limit, pk->store, full, pk->prefix,
				 pk->name, pk->stats, err);
	free(full);
	if (rc != 0) {
		free(m->spec);
		free(m);
		return NULL;
	}
	pk->made[pk->nmade++] = m;
	return &m->limit;
}

const struct drld_limit *drld_rule_limit(const struct drld_rule *r,
					 const struct drld_request_parts *p)
{
	struct drld_per_key *pk = r->per_key;
	if (pk == NULL)
		return &r->limit;
	size_t len;
	char *v = drld_template_expand(pk->by ? pk->by : r->key, p, DRL_KEY_MAX,
				       &len);
	const struct drld_limit *l = NULL;
	if (v != NULL && len > 0 && pk->res == NULL) {
		struct map_row key = {.value = v, .len = len}, *row;
		row = pk->nrows ? bsearch(&key, pk->rows, pk->nrows,
					  sizeof *pk->rows, row_cmp)
				: NULL;
		l = row ? row->limit : NULL;
	} else if (v != NULL && len > 0) {
		char spec[DRL_RESOLVER_SPEC_MAX + 1];
		int is_default = 1;
		drl_error err = {0};
		if (drl_resolver_get(pk->res, v, len, spec, sizeof spec,
				     &is_default, NULL) == 0 &&
		    !is_default) {
			pthread_mutex_lock(&pk->lock);
			l = spec_limit(pk, spec, &err);
			pthread_mutex_unlock(&pk->lock);
		}
	}
	free(v);
	return l ? l : &r->limit;
}

/* The map file `file` (relative to the config file's folder) into pk's
 * rows, each spec's limiter made. */
static int load_map(const struct loader *ld, struct drld_per_key *pk,
		    const char *where, const char *file)
{
	char path[4096], why[128];
	if (file[0] == '/') {
		snprintf(path, sizeof path, "%s", file);
	} else {
		char *copy = strdup(ld->path);
		if (copy == NULL)
			return fail(ld, "out of memory");
		snprintf(path, sizeof path, "%s/%s", dirname(copy), file);
		free(copy);
	}
	FILE *f = drld_open_regular(AT_FDCWD, path, FILE_MAX, NULL, why,
				    sizeof why);
	if (f == NULL)
		return fail(ld, "%s: map %s: %s", where, path, why);
	json_error_t je;
	json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
	fclose(f);
	if (root == NULL)
		return fail(ld, "%s: map %s: line %d: %s", where, path, je.line,
			    je.text);
	int rc = 0;
	if (!json_is_object(root))
		rc = fail(ld, "%s: map %s: must be a JSON object of specs",
			  where, path);
	else if ((pk->rows = calloc(json_object_size(root) + 1,
				    sizeof *pk->rows)) == NULL)
		rc = fail(ld, "out of memory");
	const char *k;
	json_t *v;
	json_object_foreach(root, k, v)
	{
		if (rc != 0)
			break;
		drl_error err = {0};
		const char *spec = json_string_value(v);
		if (k[0] == '\0' || spec == NULL ||
		    strlen(spec) != json_string_length(v) ||
		    strlen(spec) > DRL_RESOLVER_SPEC_MAX) {
			rc = fail(ld,
				  "%s: map %s: \"%.64s\": expected a non-empty "
				  "key and a limit spec string",
				  where, path, k);
			break;
		}
		struct map_row *row = &pk->rows[pk->nrows];
		if ((row->limit = spec_limit(pk, spec, &err)) == NULL) {
			rc = fail(ld, "%s: map %s: \"%.64s\": %s", where, path,
				  k, err.message);
			break;
		}
		row->len = strlen(k);
		if ((row->value = strdup(k)) == NULL)
			rc = fail(ld, "out of memory");
		pk->nrows++;
	}
	json_decref(root);
	if (rc == 0)
		qsort(pk->rows, pk->nrows, sizeof *pk->rows, row_cmp);
	return rc;
}

/* Rule r's limits_from object v, its default spec `limit` and its
 * options `suffix`. */
static int load_per_key(const struct loader *ld, struct drld_rule *r,
			const char *where, json_t *v, const char *limit,
			const char *suffix)
{
	static const char *const known[] = {
		"by", "map", "redis", "hash", "ttl_ms", "max_keys", NULL};
	const char *by, *map, *redis, *hash;
	char tmsg[256];

	if (!json_is_object(v))
		return fail(ld,
			    "%s: \"limits_from\" must be an object with "
			    "\"map\" or \"redis\"",
			    where);
	if (only_fields(ld, v, where, known,
			"by, map, redis, hash, ttl_ms, max_keys (in "
			"limits_from)") ||
	    get_string(ld, v, "by", where, &by) ||
	    get_string(ld, v, "map", where, &map) ||
	    get_string(ld, v, "redis", where, &redis) ||
	    get_string(ld, v, "hash", where, &hash))
		return -1;
	if ((map == NULL) == (redis == NULL))
		return fail(ld,
			    "%s: limits_from: give one of \"map\" (a file) "
			    "or \"redis\" (a URI, with \"hash\")",
			    where);
	if (redis != NULL && hash == NULL)
		return fail(ld, "%s: limits_from: \"hash\" is missing", where);
	if (map != NULL && (hash || json_object_get(v, "ttl_ms") ||
			    json_object_get(v, "max_keys")))
		return fail(ld,
			    "%s: limits_from: hash, ttl_ms and max_keys "
			    "are for \"redis\"",
			    where);
	json_int_t ttl_ms = 60000, max_keys = 10000;
	json_t *t = json_object_get(v, "ttl_ms"), *m;
	if (t != NULL &&
	    (!json_is_integer(t) || (ttl_ms = json_integer_value(t)) < 1 ||
	     ttl_ms > INT64_C(86400000)))
		return fail(ld,
			    "%s: limits_from: \"ttl_ms\" must be a whole "
			    "number from 1 to 86400000",
			    where);
	if ((m = json_object_get(v, "max_keys")) != NULL &&
	    (!json_is_integer(m) || (max_keys = json_integer_value(m)) < 1 ||
	     max_keys > 1000000))
		return fail(ld,
			    "%s: limits_from: \"max_keys\" must be a whole "
			    "number from 1 to 1000000",
			    where);

	struct drld_per_key *pk = calloc(1, sizeof *pk);
	if (pk == NULL || (pk->suffix = strdup(suffix)) == NULL) {
		free(pk);
		return fail(ld, "out of memory");
	}
	pthread_mutex_init(&pk->lock, NULL);
	r->per_key = pk;
	pk->store = ld->store;
	strcpy(pk->name, r->name);
	snprintf(pk->prefix, sizeof pk->prefix, "drld:rule:%s:", r->name);
	if (by != NULL &&
	    drld_template_parse(&pk->by, by, tmsg, sizeof tmsg) != 0)
		return fail(ld, "%s: limits_from: by \"%.64s\": %s", where, by,
			    tmsg);
	if (map != NULL)
		return load_map(ld, pk, where, map);
	drl_resolver_options o = {.default_spec = limit,
				  .max_keys = (size_t)max_keys,
				  .ttl_us = (int64_t)ttl_ms * 1000};
	drl_error err = {0};
	if (drl_resolver_redis_new(&pk->res, redis, hash, &o, &err) != 0)
		return fail(ld, "%s: limits_from: %s", where, err.message);
	return 0;
}

/* Build rule r called `name` from its object v. */
static int load_rule(const struct loader *ld, struct drld_rule *r,
		     const char *name, json_t *v)
{
	static const char *const known[] = {"limit",  "key",         "on_error",
					    "shadow", "limits_from", NULL};
	char where[DRLD_RULE_NAME_MAX + 16], tmsg[256];
	const char *limit, *key, *on_error;
	drl_error err = {0};

	snprintf(where, sizeof where, "rule \"%s\"", name);
	if (!json_is_object(v))
		return fail(ld, "%s: must be an object with \"limit\"", where);
	if (only_fields(ld, v, where, known,
			"limit, key, on_error, shadow, limits_from") ||
	    get_string(ld, v, "limit", where, &limit) ||
	    get_string(ld, v, "key", where, &key) ||
	    get_string(ld, v, "on_error", where, &on_error))
		return -1;
	json_t *shadow = json_object_get(v, "shadow");
	if (shadow != NULL && !json_is_boolean(shadow))
		return fail(ld, "%s: \"shadow\" must be true or false", where);
	if (limit == NULL)
		return fail(ld, "%s: \"limit\" (a limit spec) is missing",
			    where);
	if (on_error != NULL && strcmp(on_error, "deny") != 0 &&
	    strcmp(on_error, "allow") != 0 && strcmp(on_error, "local") != 0)
		return fail(ld,
			    "%s: \"on_error\" is \"%.32s\" (expected deny, "
			    "allow or local)",
			    where, on_error);
	strcpy(r->name, name); /* good_name() checked its length */
	if (key == NULL)
		key = "{key}";
	if (drld_template_parse(&r->key, key, tmsg, sizeof tmsg) != 0)
		return fail(ld, "%s: key \"%.64s\": %s", where, key, tmsg);

	bool shadowed = json_is_true(shadow);
	char suffix[64];
	snprintf(suffix, sizeof suffix, "%s%s%s", on_error ? ";on_error=" : "",
		 on_error ? on_error : "", shadowed ? ";shadow=1" : "");
	size_t len = strlen(limit) + strlen(suffix);
	char *spec = malloc(len + 1);
	if (spec == NULL)
		return fail(ld, "out of memory");
	snprintf(spec, len + 1, "%s%s", limit, suffix);
	char prefix[sizeof "drld:rule::" + DRLD_RULE_NAME_MAX];
	snprintf(prefix, sizeof prefix, "drld:rule:%s:", name);
	int rc = drld_limit_init(&r->limit, ld->store, spec, prefix, name, NULL,
				 &err);
	free(spec);
	if (rc != 0)
		return fail(ld, "%s: %s", where, err.message);
	json_t *from = json_object_get(v, "limits_from");
	if (from != NULL)
		return load_per_key(ld, r, where, from, limit, suffix);
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct drld_rule *)a)->name,
		      ((const struct drld_rule *)b)->name);
}

static int load_rules(const struct loader *ld, struct drld_config *c,
		      json_t *rules)
{
	const char *name;
	json_t *v;

	if (!json_is_object(rules))
		return fail(ld, "\"rules\" must be an object of named rules");
	if (json_object_size(rules) > DRLD_RULES_MAX)
		return fail(ld, "more than %d rules", DRLD_RULES_MAX);
	c->rules = calloc(json_object_size(rules) + 1, sizeof *c->rules);
	if (c->rules == NULL)
		return fail(ld, "out of memory");
	json_object_foreach(rules, name, v)
	{
		if (!good_name(name) || strcmp(name, "adhoc") == 0)
			return fail(ld,
				    "rule name \"%.64s\": expected 1 to %d of "
				    "A-Z a-z 0-9 _ . - (and not \"adhoc\", "
				    "which names ad-hoc limits in metrics)",
				    name, DRLD_RULE_NAME_MAX);
		/* counted as soon as it holds anything to free */
		if (load_rule(ld, &c->rules[c->nrules++], name, v) != 0)
			return -1;
	}
	qsort(c->rules, c->nrules, sizeof *c->rules, by_name);
	return 0;
}

/* Build protect entry p (index i) from its object v. */
static int load_protect_entry(const struct loader *ld,
			      const struct drld_config *c,
			      struct drld_protect *p, size_t i, json_t *v)
{
	static const char *const known[] = {"prefix", "rule", NULL};
	char where[48];
	const char *prefix, *rule;

	snprintf(where, sizeof where, "protect[%zu]", i);
	if (!json_is_object(v))
		return fail(ld,
			    "%s: must be an object with \"prefix\" and "
			    "\"rule\"",
			    where);
	if (only_fields(ld, v, where, known, "prefix, rule") ||
	    get_string(ld, v, "prefix", where, &prefix) ||
	    get_string(ld, v, "rule", where, &rule))
		return -1;
	if (prefix == NULL || prefix[0] != '/' ||
	    strlen(prefix) > DRLD_PREFIX_MAX)
		return fail(ld,
			    "%s: \"prefix\" must be a path starting with '/' "
			    "(at most %d bytes)",
			    where, DRLD_PREFIX_MAX);
	if (rule == NULL)
		return fail(ld, "%s: \"rule\" is missing", where);
	p->rule = drld_config_rule(c, rule);
	if (p->rule == NULL)
		return fail(ld, "%s: unknown rule \"%.64s\"", where, rule);
	if (drld_template_uses_key(p->rule->key))
		return fail(ld,
			    "%s: rule \"%s\" builds its key with {key}, which "
			    "only /v1/check requests have (give the rule a "
			    "\"key\" such as \"{ip}\")",
			    where, rule);
	p->len = strlen(prefix);
	p->prefix = strdup(prefix);
	return p->prefix == NULL ? fail(ld, "out of memory") : 0;
}

/* Longest prefix first, so the first match is the longest. */
static int by_length(const void *a, const void *b)
{
	const struct drld_protect *x = a, *y = b;

	if (x->len != y->len)
		return x->len < y->len ? 1 : -1;
	return strcmp(x->prefix, y->prefix);
}

static int load_protect(const struct loader *ld, struct drld_config *c,
			json_t *protect)
{
	size_t i;
	json_t *v;

	if (!json_is_array(protect))
		return fail(ld, "\"protect\" must be an array of "
				"{\"prefix\", \"rule\"} objects");
	if (json_array_size(protect) > DRLD_PROTECT_MAX)
		return fail(ld, "more than %d protect entries",
			    DRLD_PROTECT_MAX);
	c->protect = calloc(json_array_size(protect) + 1, sizeof *c->protect);
	if (c->protect == NULL)
		return fail(ld, "out of memory");
	json_array_foreach(protect, i, v)
	{
		if (load_protect_entry(ld, c, &c->protect[i], i, v) != 0) {
			c->nprotect = i + 1; /* free what entry i holds */
			return -1;
		}
		c->nprotect = i + 1;
	}
	qsort(c->protect, c->nprotect, sizeof *c->protect, by_length);
	for (i = 1; i < c->nprotect; i++)
		if (strcmp(c->protect[i - 1].prefix, c->protect[i].prefix) == 0)
			return fail(ld,
				    "protect: prefix \"%.64s\" appears twice",
				    c->protect[i].prefix);
	return 0;
}

/* Give every rule its counters (only once the config is known good, so
 * a bad config adds no names to the metrics). */
static int attach_stats(const struct loader *ld, struct drld_config *c)
{
	for (size_t i = 0; i < c->nrules; i++) {
		struct drld_rule *r = &c->rules[i];
		r->limit.stats = drld_metrics_rule(ld->metrics, r->name);
		if (r->limit.stats == NULL)
			return fail(ld,
				    "rule \"%s\": more than %d rule names "
				    "since drld started (restart it)",
				    r->name, DRLD_METRICS_RULES_MAX);
		if (r->per_key != NULL) {
			r->per_key->stats = r->limit.stats;
			for (size_t j = 0; j < r->per_key->nmade; j++)
				r->per_key->made[j]->limit.stats =
					r->limit.stats;
		}
	}
	return 0;
}

/* Build c from the parsed file. */
static int build(const struct loader *ld, struct drld_config *c, json_t *root)
{
	static const char *const known[] = {"store", "rules", "protect", NULL};
	const char *store;
	json_t *v;

	if (only_fields(ld, root, "the top level", known,
			"store, rules, protect") ||
	    get_string(ld, root, "store", "the top level", &store))
		return -1;
	if (store != NULL && (c->store = strdup(store)) == NULL)
		return fail(ld, "out of memory");
	if ((v = json_object_get(root, "rules")) != NULL &&
	    load_rules(ld, c, v) != 0)
		return -1;
	if ((v = json_object_get(root, "protect")) != NULL &&
	    load_protect(ld, c, v) != 0)
		return -1;
	return attach_stats(ld, c);
}

static void config_free(struct drld_config *c)
{
	for (size_t i = 0; i < c->nrules; i++) {
		per_key_free(c->rules[i].per_key);
		drld_template_free(c->rules[i].key);
		drld_limit_fini(&c->rules[i].limit);
	}
	for (size_t i = 0; i < c->nprotect; i++)
		free(c->protect[i].prefix);
	free(c->rules);
	free(c->protect);
	free(c->store);
	free(c);
}

int drld_config_load(struct drld_config **out, const char *path,
		     drl_store *store, struct drld_metrics *metrics, char *msg,
		     size_t n)
{
	struct loader ld = {.path = path,
			    .store = store,
			    .metrics = metrics,
			    .msg = msg,
			    .n = n};
	struct drld_config *c = calloc(1, sizeof *c);
	json_t *root = NULL;

	*out = NULL;
	if (c == NULL) {
		snprintf(msg, n, "out of memory");
		return -1;
	}
	atomic_init(&c->refs, 1);
	if (path != NULL &&
	    ((root = read_json(&ld)) == NULL || build(&ld, c, root) != 0)) {
		json_decref(root);
		config_free(c);
		return -1;
	}
	json_decref(root);
	*out = c;
	return 0;
}

void drld_config_release(struct drld_config *c)
{
	if (c != NULL &&
	    atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
		config_free(c);
}

static int rule_cmp(const void *name, const void *rule)
{
	return strcmp(name, ((const struct drld_rule *)rule)->name);
}

const struct drld_rule *drld_config_rule(const struct drld_config *c,
					 const char *name)
{
	if (c->nrules == 0) /* rules are sorted by name */
		return NULL;
	return bsearch(name, c->rules, c->nrules, sizeof *c->rules, rule_cmp);
}

const struct drld_rule *drld_config_protects(const struct drld_config *c,
					     const char *path)
{
	size_t len = strlen(path);

	for (size_t i = 0; i < c->nprotect; i++)
		if (c->protect[i].len <= len &&
		    memcmp(path, c->protect[i].prefix, c->protect[i].len) == 0)
			return c->protect[i].rule;
	return NULL;
}

/* drld_slot finds the reference count as the first member */
_Static_assert(offsetof(struct drld_config, refs) == 0, "refs comes first");
