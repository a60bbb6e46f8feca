/* drld's config file and its snapshots: see config.h. */
#include "config.h"

#include "regular.h"

#include <jansson.h>
#include <fcntl.h>
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

	if (k < 0 || (size_t)k >= ld->n)
		return -1;
	va_start(ap, fmt);
	vsnprintf(ld->msg + k, ld->n - (size_t)k, fmt, ap);
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

/* Build rule r called `name` from its object v. */
static int load_rule(const struct loader *ld, struct drld_rule *r,
		     const char *name, json_t *v)
{
	static const char *const known[] = {"limit", "key", "on_error",
					    "shadow", NULL};
	char where[DRLD_RULE_NAME_MAX + 16], tmsg[256];
	const char *limit, *key, *on_error;
	drl_error err = {0};

	snprintf(where, sizeof where, "rule \"%s\"", name);
	if (!json_is_object(v))
		return fail(ld, "%s: must be an object with \"limit\"", where);
	if (only_fields(ld, v, where, known, "limit, key, on_error, shadow") ||
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
	size_t len = strlen(limit) + (on_error ? strlen(on_error) + 10 : 0) +
		     (shadowed ? 9 : 0);
	char *spec = malloc(len + 1);
	if (spec == NULL)
		return fail(ld, "out of memory");
	snprintf(spec, len + 1, "%s%s%s%s", limit, on_error ? ";on_error=" : "",
		 on_error ? on_error : "", shadowed ? ";shadow=1" : "");
	char prefix[sizeof "drld:rule::" + DRLD_RULE_NAME_MAX];
	snprintf(prefix, sizeof prefix, "drld:rule:%s:", name);
	int rc = drld_limit_init(&r->limit, ld->store, spec, prefix, name, NULL,
				 &err);
	free(spec);
	if (rc != 0)
		return fail(ld, "%s: %s", where, err.message);
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

static void release(void *c)
{
	drld_config_release(c);
}

void drld_config_slot_init(struct drld_slot *s, struct drld_config *c)
{
	drld_slot_init(s, c, release);
}

struct drld_config *drld_config_acquire(struct drld_slot *s)
{
	return drld_slot_acquire(s);
}

void drld_config_swap(struct drld_slot *s, struct drld_config *c)
{
	drld_slot_swap(s, c);
}

void drld_config_slot_fini(struct drld_slot *s)
{
	drld_slot_fini(s);
}
