/* envoyproxy/ratelimit's YAML configuration: see envoy_config.h. */
#include "envoy_config.h"

#include "message.h"
#include "regular.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

void (*drld_envoy_load_hook)(int step, size_t i);

/* Largest config file read. */
#define FILE_MAX (16 << 20)

/* Deepest YAML nesting a config may have: a descriptor DRLD_ENVOY_DEPTH_MAX
 * levels down is a mapping 2 x 32 + 1 deep (the top level, then a list
 * and a mapping per level), its rate_limit and replaces a few more. */
#define YAML_DEPTH_MAX (2 * DRLD_ENVOY_DEPTH_MAX + 8)

/* Most YAML nodes (scalars, aliases, mappings, lists) a config file may
 * have: 16 per descriptor of the most a config may hold. libyaml's
 * document costs some 150 bytes a node: 16 MiB of "[a,a,...]" (8 M nodes)
 * took 1.3 GB before it was refused. */
#define YAML_NODES_MAX (16 * DRLD_ENVOY_NODES_MAX)

/* What the loader is working on: messages name the file, and through the
 * node and key, the line and the key. */
struct loader {
	const char *file; /* as messages name it: DIR/NAME */
	const char *name; /* NAME, opened in dirfd */
	int dirfd;        /* the directory read (a ConfigMap's version) */
	size_t dirlen;    /* of the directory as messages name it */
	drl_store *store;
	unsigned flags; /* DRLD_ENVOY_* */
	char *msg;
	size_t n;
	size_t nodes; /* descriptors loaded so far, all files */
	yaml_document_t *doc;
	const char *domain;
	struct stat *seen; /* the file being read, as opened */
};

/* Write "FILE:LINE: KEY: " and the message to ld->msg (LINE from node
 * `at`, left out when NULL; KEY left out when NULL). Returns -1. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static int
fail(const struct loader *ld, const yaml_node_t *at, const char *key,
     const char *fmt, ...)
{
	va_list ap;
	int k;

	if (at != NULL)
		k = snprintf(ld->msg, ld->n, "%s:%zu: %s%s", ld->file,
			     at->start_mark.line + 1, key ? key : "",
			     key ? ": " : "");
	else
		k = snprintf(ld->msg, ld->n, "%s: %s%s", ld->file,
			     key ? key : "", key ? ": " : "");
	va_start(ap, fmt);
	drld_message_rest(ld->msg, ld->n, k, fmt, ap);
	va_end(ap);
	return -1;
}

/* ---- YAML nodes --------------------------------------------------------- */

static yaml_node_t *node(const struct loader *ld, yaml_node_item_t i)
{
	return yaml_document_get_node(ld->doc, i);
}

/* Whether scalar v is YAML's null: empty, ~ or null, unquoted. */
static bool is_null(const yaml_node_t *v)
{
	const char *s = (const char *)v->data.scalar.value;

	return v->type == YAML_SCALAR_NODE &&
	       v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	       (s[0] == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
		strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0);
}

/* The text of scalar v in *out (NULL for null). -1 when v is not a
 * scalar or holds a NUL byte. */
static int text(const struct loader *ld, const yaml_node_t *v, const char *key,
		const char **out)
{
	if (v->type != YAML_SCALAR_NODE ||
	    strlen((const char *)v->data.scalar.value) != v->data.scalar.length)
		return fail(ld, v, key, "expected a string");
	*out = is_null(v) ? NULL : (const char *)v->data.scalar.value;
	return 0;
}

/* A YAML boolean (true/false, and YAML 1.1's yes/no/on/off, as the Go
 * YAML library that envoyproxy/ratelimit uses reads them). */
static int boolean(const struct loader *ld, const yaml_node_t *v,
		   const char *key, bool *out)
{
	static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes",
					  "YES",  "on",   "On",   "ON",  NULL};
	static const char *const no[] = {"false", "False", "FALSE", "no",
					 "No",    "NO",    "off",   "Off",
					 "OFF",   NULL};
	const char *s = NULL;

	if (text(ld, v, key, &s) != 0)
		return -1;
	for (size_t i = 0; s != NULL && yes[i] != NULL; i++)
		if (strcmp(s, yes[i]) == 0)
			return *out = true, 0;
	for (size_t i = 0; s != NULL && no[i] != NULL; i++)
		if (strcmp(s, no[i]) == 0)
			return *out = false, 0;
	return fail(ld, v, key, "\"%.64s\" is not true or false",
		    s ? s : "null");
}

/* A whole number in [0, max]. */
static int whole(const struct loader *ld, const yaml_node_t *v, const char *key,
		 uint64_t max, uint64_t *out)
{
	const char *s = NULL;
	uint64_t x = 0;

	if (text(ld, v, key, &s) != 0)
		return -1;
	if (s == NULL || s[0] == '\0')
		goto bad;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9' ||
		    x > (max - (uint64_t)(*p - '0')) / 10)
			goto bad;
		x = x * 10 + (uint64_t)(*p - '0');
	}
	*out = x;
	return 0;
bad:
	return fail(ld, v, key,
		    "\"%.64s\" is not a whole number from 0 to %llu",
		    s ? s : "null", (unsigned long long)max);
}

/* The fields of mapping m, checked: every key a known one (of the
 * NULL-terminated `known`), none twice; values[i] is known[i]'s value
 * node or NULL. `what` names the mapping in messages. */
static int fields(const struct loader *ld, const yaml_node_t *m,
		  const char *what, const char *const *known,
		  const char *expected, yaml_node_t **values)
{
	size_t nk = 0;

	while (known[nk] != NULL)
		values[nk++] = NULL;
	if (m->type != YAML_MAPPING_NODE)
		return fail(ld, m, NULL, "%s must be a mapping (of %s)", what,
			    expected);
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start;
	     p < m->data.mapping.pairs.top; p++) {
		yaml_node_t *k = node(ld, p->key);
		const char *name = NULL;
		size_t i = 0;

		if (k->type == YAML_SCALAR_NODE)
			name = (const char *)k->data.scalar.value;
		while (name != NULL && i < nk && strcmp(name, known[i]) != 0)
			i++;
		if (name == NULL || i == nk) {
			if (name != NULL && (strcmp(name, "quota_mode") == 0 ||
					     strcmp(name, "metadata") == 0))
				return fail(ld, k, name,
					    "not supported by drld "
					    "(docs/envoy.md)");
			return fail(ld, k, name ? name : "?",
				    "unknown key in %s (expected %s)", what,
				    expected);
		}
		if (values[i] != NULL)
			return fail(ld, k, name, "appears twice in %s", what);
		values[i] = node(ld, p->value);
	}
	return 0;
}

/* ---- units and specs ---------------------------------------------------- */

static const struct {
	const char *name;
	int unit;
	const char *period; /* in a libdrl spec */
	int64_t seconds;
} units[] = {
	{"second", DRLD_ENVOY_SECOND, "1s", 1},
	{"minute", DRLD_ENVOY_MINUTE, "1m", 60},
	{"hour", DRLD_ENVOY_HOUR, "1h", 3600},
	{"day", DRLD_ENVOY_DAY, "1d", 86400},
	{"week", DRLD_ENVOY_WEEK, "7d", 7 * 86400},
	{"month", DRLD_ENVOY_MONTH, "30d", 30 * 86400},
	{"year", DRLD_ENVOY_YEAR, "365d", 365 * 86400},
};
#define NUNITS (sizeof units / sizeof units[0])

int64_t drld_envoy_unit_seconds(int unit)
{
	for (size_t i = 0; i < NUNITS; i++)
		if (units[i].unit == unit)
			return units[i].seconds;
	return 0;
}

/* The unit called s (any case, as envoyproxy/ratelimit upper-cases it),
 * or -1. */
static int unit_index(const char *s)
{
	for (size_t i = 0; s != NULL && i < NUNITS; i++)
		if (strcasecmp(s, units[i].name) == 0)
			return (int)i;
	return -1;
}

/* ---- descriptors -------------------------------------------------------- */

static void node_free(struct drld_envoy_node *d);

static void limit_free(struct drld_envoy_limit *l)
{
	if (l == NULL)
		return;
	for (size_t i = 0; i < l->nreplaces; i++)
		free(l->replaces[i]);
	free(l->replaces);
	free(l->name);
	free(l->path);
	free(l->ov_alg);
	free(l->ov_tail);
	free(l->ov_prefix);
	drl_limiter_free(l->lim);
	free(l);
}

static void node_free(struct drld_envoy_node *d)
{
	for (size_t i = 0; i < d->nchildren; i++)
		node_free(&d->children[i]);
	free(d->children);
	free(d->key);
	free(d->value);
	limit_free(d->limit);
}

/* rate_limit.replaces: a sequence of {name: NAME}. */
static int load_replaces(const struct loader *ld, struct drld_envoy_limit *l,
			 const yaml_node_t *v)
{
	static const char *const known[] = {"name", NULL};
	yaml_node_t *vals[1];

	if (v->type != YAML_SEQUENCE_NODE)
		return fail(ld, v, "replaces",
			    "expected a list of {name: ...}");
	size_t n = (size_t)(v->data.sequence.items.top -
			    v->data.sequence.items.start);
	l->replaces = calloc(n + 1, sizeof *l->replaces);
	if (l->replaces == NULL)
		return fail(ld, v, "replaces", "out of memory");
	for (size_t i = 0; i < n; i++) {
		yaml_node_t *e = node(ld, v->data.sequence.items.start[i]);
		const char *name = NULL;
		if (fields(ld, e, "a replaces entry", known, "name", vals) ||
		    (vals[0] && text(ld, vals[0], "name", &name)))
			return -1;
		if (name == NULL || name[0] == '\0')
			return fail(ld, e, "replaces",
				    "should not have an empty replaces entry");
		if (l->name != NULL && strcmp(name, l->name) == 0)
			return fail(ld, e, "replaces",
				    "replaces should not contain the name of "
				    "the same descriptor (\"%.64s\")",
				    name);
		if ((l->replaces[l->nreplaces++] = strdup(name)) == NULL)
			return fail(ld, e, "replaces", "out of memory");
	}
	return 0;
}

/* A rate_limit's options beyond envoyproxy/ratelimit's (NULL: not
 * given). */
struct limit_extras {
	const char *algorithm;       /* "NAME[,options]" */
	const char *on_error;        /* deny, allow, local */
	const char *block_on_exceed; /* a duration: the near cache */
};

/* Make l's limiter: fixed_window, or `algorithm` ("NAME[,options]"),
 * at requests_per_unit per unit, with on_error and block_on_exceed when
 * given, and the library's shadow=1 for shadow_mode (it decides and
 * counts as without, answers allowed, and result.would_allow is the real
 * decision). */
static int make_limiter(const struct loader *ld, struct drld_envoy_limit *l,
			const yaml_node_t *at, const char *key, int u,
			const struct limit_extras *x)
{
	const char *algorithm = x->algorithm, *on_error = x->on_error;
	const char *block = x->block_on_exceed;
	char spec[512];
	drl_error err = {0};
	const char *comma = algorithm ? strchr(algorithm, ',') : NULL;
	int alen = algorithm ? (comma ? (int)(comma - algorithm)
				      : (int)strlen(algorithm))
			     : 12;

	int k = snprintf(spec, sizeof spec, "%.*s:%u/%s%s%s%s%s%s%s", alen,
			 algorithm ? algorithm : "fixed_window",
			 l->requests_per_unit, units[u].period,
			 comma ? comma : "", on_error ? ";on_error=" : "",
			 on_error ? on_error : "",
			 block ? ";block_on_exceed=" : "", block ? block : "",
			 l->shadow ? ";shadow=1" : "");
	if (k < 0 || (size_t)k >= sizeof spec)
		return fail(ld, at, key, "too long");
	char prefix[sizeof "drld:envoy::" + 16];
	bool own_prefix = ld->flags & DRLD_ENVOY_OWN_PREFIX;
	if (own_prefix) {
		uint64_t h = 1469598103934665603u; /* FNV-1a: spread only */
		const char *parts[2] = {ld->domain, l->path};
		for (int p = 0; p < 2; p++)
			for (const char *c = parts[p];; c++) {
				h = (h ^ (unsigned char)*c) * 1099511628211u;
				if (*c == '\0')
					break;
			}
		snprintf(prefix, sizeof prefix,
			 "drld:envoy:%016llx:", (unsigned long long)h);
	}
	if (drl_limiter_new(&l->lim, ld->store, spec,
			    own_prefix ? prefix : NULL, &err) != 0)
		return fail(ld, at, key, "%s", err.message);
	/* an override holds no process memory (adhoc.c refuses that from
	 * requests): on_error=local decides as deny */
	bool keep = on_error != NULL && strcmp(on_error, "local") != 0;
	size_t tlen = (comma ? strlen(comma) : 0) + 32;
	l->store = ld->store;
	if ((l->ov_alg = strndup(algorithm ? algorithm : "fixed_window",
				 (size_t)alen)) == NULL ||
	    (l->ov_tail = malloc(tlen)) == NULL ||
	    (own_prefix && (l->ov_prefix = strdup(prefix)) == NULL))
		return fail(ld, at, key, "out of memory");
	snprintf(l->ov_tail, tlen, "%s%s%s", comma ? comma : "",
		 on_error == NULL ? ""
		 : keep           ? ";on_error="
				  : ";on_error=deny",
		 keep ? on_error : "");
	return 0;
}

/* The rate_limit block v of descriptor path `path`. */
static int load_rate_limit(const struct loader *ld, struct drld_envoy_node *d,
			   const yaml_node_t *v, const char *path, bool shadow)
{
	static const char *const known[] = {
		"unit",     "requests_per_unit", "unlimited",
		"name",     "replaces",          "algorithm",
		"on_error", "block_on_exceed",   NULL};
	enum {
		UNIT,
		RPU,
		UNLIMITED,
		NAME,
		REPLACES,
		ALGORITHM,
		ON_ERROR,
		BLOCK
	};
	yaml_node_t *f[8];
	const char *unit = NULL, *name = NULL, *algorithm = NULL;
	const char *on_error = NULL, *block = NULL;
	uint64_t rpu = 0;
	bool unlimited = false;

	if (fields(ld, v, "rate_limit", known,
		   "unit, requests_per_unit, unlimited, name, replaces, "
		   "algorithm, on_error, block_on_exceed",
		   f) ||
	    (f[UNIT] && text(ld, f[UNIT], "unit", &unit)) ||
	    (f[RPU] &&
	     whole(ld, f[RPU], "requests_per_unit", DRL_LIMIT_MAX, &rpu)) ||
	    (f[UNLIMITED] &&
	     boolean(ld, f[UNLIMITED], "unlimited", &unlimited)) ||
	    (f[NAME] && text(ld, f[NAME], "name", &name)) ||
	    (f[ALGORITHM] && text(ld, f[ALGORITHM], "algorithm", &algorithm)) ||
	    (f[ON_ERROR] && text(ld, f[ON_ERROR], "on_error", &on_error)) ||
	    (f[BLOCK] && text(ld, f[BLOCK], "block_on_exceed", &block)))
		return -1;
	int u = unit_index(unit);
	if (unlimited && unit != NULL)
		return fail(ld, f[UNIT], "unit",
			    "should not specify a rate limit unit when "
			    "unlimited");
	if (unlimited && (f[RPU] || algorithm || on_error || block))
		return fail(ld, f[RPU] ? f[RPU] : v,
			    f[RPU] ? "requests_per_unit" : "rate_limit",
			    "an unlimited rate_limit takes no "
			    "requests_per_unit, algorithm, on_error or "
			    "block_on_exceed");
	if (!unlimited && u < 0)
		return fail(ld, f[UNIT] ? f[UNIT] : v, "unit",
			    "invalid rate limit unit \"%.32s\" (expected "
			    "second, minute, hour, day, week, month or year)",
			    unit ? unit : "");
	if (!unlimited && f[RPU] == NULL)
		return fail(ld, v, "requests_per_unit", "is missing");
	if (on_error != NULL && strcmp(on_error, "deny") != 0 &&
	    strcmp(on_error, "allow") != 0 && strcmp(on_error, "local") != 0)
		return fail(ld, f[ON_ERROR], "on_error",
			    "\"%.32s\" (expected deny, allow or local)",
			    on_error);

	struct drld_envoy_limit *l = calloc(1, sizeof *l);
	if ((d->limit = l) == NULL || (l->path = strdup(path)) == NULL ||
	    (name != NULL && (l->name = strdup(name)) == NULL))
		return fail(ld, v, "rate_limit", "out of memory");
	l->unlimited = unlimited;
	l->shadow = shadow;
	l->requests_per_unit = (uint32_t)rpu;
	l->unit = unlimited ? DRLD_ENVOY_UNKNOWN : units[u].unit;
	if (f[REPLACES] && load_replaces(ld, l, f[REPLACES]) != 0)
		return -1;
	/* a limit spec's own separator would set options the config
	 * does not show (algorithm: "token_bucket,burst=4;shadow=1") */
	if (algorithm != NULL && strchr(algorithm, ';') != NULL)
		return fail(ld, f[ALGORITHM], "algorithm",
			    "\"%.64s\": ';' is not allowed", algorithm);
	if (block != NULL && strchr(block, ';') != NULL)
		return fail(ld, f[BLOCK], "block_on_exceed",
			    "\"%.64s\": ';' is not allowed", block);

	/* where a limit the library refuses is reported: the one option
	 * given, else the rate_limit */
	const struct limit_extras x = {algorithm, on_error, block};
	const yaml_node_t *at = v;
	const char *key = "rate_limit";
	if (algorithm != NULL && block == NULL)
		at = f[ALGORITHM], key = "algorithm";
	else if (block != NULL && algorithm == NULL)
		at = f[BLOCK], key = "block_on_exceed";
	if (!unlimited && rpu > 0 && make_limiter(ld, l, at, key, u, &x) != 0)
		return -1;
	return 0;
}

static int load_descriptors(struct loader *ld, struct drld_envoy_node *parent,
			    const yaml_node_t *seq, const char *prefix,
			    int depth);

/* Whether siblings a and b have the same key and value. */
static bool same(const struct drld_envoy_node *a,
		 const struct drld_envoy_node *b)
{
	return strcmp(a->key, b->key) == 0 &&
	       (a->value == NULL
			? b->value == NULL
			: b->value != NULL && strcmp(a->value, b->value) == 0);
}

/* FNV-1a of a sibling's key and value (a NUL between; none without a
 * value), for the duplicate check. */
static size_t sibling_hash(const struct drld_envoy_node *d)
{
	uint64_t h = 1469598103934665603u;

	for (const char *p = d->key; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211u;
	if (d->value != NULL) {
		h *= 1099511628211u; /* the NUL */
		for (const char *p = d->value; *p; p++)
			h = (h ^ (unsigned char)*p) * 1099511628211u;
	}
	return (size_t)h;
}

/* The siblings seen so far of one descriptors list, by their key and
 * value: an open-addressing table of child indices (+1; 0 is empty), at
 * most half full. Linear in the list's length where comparing each with
 * every earlier one took 1.6 s for 20,000 and more than 20 s for 65,536
 * (issue 33). */
struct siblings {
	size_t *slot;
	size_t mask;
};

static int siblings_init(struct siblings *s, size_t n)
{
	size_t cap = 16;

	while (cap < 2 * n)
		cap *= 2;
	s->mask = cap - 1;
	s->slot = calloc(cap, sizeof *s->slot);
	return s->slot == NULL ? -1 : 0;
}

/* Add child i of parent; the index of an earlier sibling with the same
 * key and value, or -1 when there is none. */
static long siblings_add(struct siblings *s,
			 const struct drld_envoy_node *children, size_t i)
{
	size_t at = sibling_hash(&children[i]) & s->mask;

	for (; s->slot[at] != 0; at = (at + 1) & s->mask)
		if (same(&children[s->slot[at] - 1], &children[i]))
			return (long)(s->slot[at] - 1);
	s->slot[at] = i + 1;
	return -1;
}

/* Descriptor d from mapping v; its path is prefix + key[_value]. */
static int load_descriptor(struct loader *ld, struct drld_envoy_node *d,
			   const yaml_node_t *v, const char *prefix, int depth)
{
	static const char *const known[] = {"key",
					    "value",
					    "rate_limit",
					    "descriptors",
					    "shadow_mode",
					    "detailed_metric",
					    "value_to_metric",
					    "share_threshold",
					    NULL};
	enum {
		KEY,
		VALUE,
		RATE_LIMIT,
		DESCRIPTORS,
		SHADOW,
		DETAILED,
		V2M,
		SHARE
	};
	yaml_node_t *f[8];
	const char *key = NULL, *value = NULL;
	bool shadow = false, detailed = false;
	char path[4096];

	if (fields(ld, v, "a descriptor", known,
		   "key, value, rate_limit, descriptors, shadow_mode, "
		   "detailed_metric, value_to_metric, share_threshold",
		   f) ||
	    (f[KEY] && text(ld, f[KEY], "key", &key)) ||
	    (f[VALUE] && text(ld, f[VALUE], "value", &value)) ||
	    (f[SHADOW] && boolean(ld, f[SHADOW], "shadow_mode", &shadow)) ||
	    (f[DETAILED] &&
	     boolean(ld, f[DETAILED], "detailed_metric", &detailed)) ||
	    (f[V2M] &&
	     boolean(ld, f[V2M], "value_to_metric", &d->value_to_metric)) ||
	    (f[SHARE] &&
	     boolean(ld, f[SHARE], "share_threshold", &d->share_threshold)))
		return -1;
	if (key == NULL || key[0] == '\0')
		return fail(ld, f[KEY] ? f[KEY] : v, "key",
			    "descriptor has an empty key");
	if (value != NULL && value[0] == '\0')
		value = NULL; /* as envoyproxy/ratelimit: no value */
	if ((d->key = strdup(key)) == NULL ||
	    (value != NULL && (d->value = strdup(value)) == NULL))
		return fail(ld, v, "key", "out of memory");
	d->wildcard = value != NULL && strchr(value, '*') != NULL;
	if (d->share_threshold && !d->wildcard)
		return fail(ld, f[SHARE], "share_threshold",
			    "can only be used with a wildcard value "
			    "(holding '*')");
	int k = snprintf(path, sizeof path, "%s%s%s%s", prefix, key,
			 value ? "_" : "", value ? value : "");
	if (k < 0 || (size_t)k >= sizeof path)
		return fail(ld, v, "key", "the descriptor path is too long");
	if (f[RATE_LIMIT] &&
	    load_rate_limit(ld, d, f[RATE_LIMIT], path, shadow) != 0)
		return -1;
	if (d->limit != NULL)
		d->limit->detailed_metric = detailed;
	if (f[DESCRIPTORS] == NULL)
		return 0;
	if (depth + 1 >= DRLD_ENVOY_DEPTH_MAX)
		return fail(ld, f[DESCRIPTORS], "descriptors",
			    "nested more than %d levels deep",
			    DRLD_ENVOY_DEPTH_MAX);
	if (strlen(path) + 2 > sizeof path)
		return fail(ld, v, "key", "the descriptor path is too long");
	strcat(path, ".");
	return load_descriptors(ld, d, f[DESCRIPTORS], path, depth + 1);
}

/* The descriptors list seq into parent's children. */
static int load_descriptors(struct loader *ld, struct drld_envoy_node *parent,
			    const yaml_node_t *seq, const char *prefix,
			    int depth)
{
	if (is_null(seq))
		return 0;
	if (seq->type != YAML_SEQUENCE_NODE)
		return fail(ld, seq, "descriptors", "expected a list");
	size_t n = (size_t)(seq->data.sequence.items.top -
			    seq->data.sequence.items.start);
	if (n > DRLD_ENVOY_NODES_MAX - ld->nodes)
		return fail(ld, seq, "descriptors",
			    "more than %d descriptors in all",
			    DRLD_ENVOY_NODES_MAX);
	ld->nodes += n;
	struct siblings seen;
	parent->children = calloc(n + 1, sizeof *parent->children);
	if (parent->children == NULL || siblings_init(&seen, n) != 0) {
		free(parent->children);
		parent->children = NULL;
		return fail(ld, seq, "descriptors", "out of memory");
	}
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		yaml_node_t *v = node(ld, seq->data.sequence.items.start[i]);
		struct drld_envoy_node *d = &parent->children[i];
		parent->nchildren = i + 1; /* freed from now on */
		if (load_descriptor(ld, d, v, prefix, depth) != 0)
			rc = -1;
		else if (siblings_add(&seen, parent->children, i) >= 0)
			rc = fail(ld, v, "key",
				  "duplicate descriptor composite "
				  "key \"%s.%s%s%s%s\"",
				  ld->domain, prefix, d->key,
				  d->value ? "_" : "",
				  d->value ? d->value : "");
	}
	free(seen.slot);
	return rc;
}

/* ---- files -------------------------------------------------------------- */

/* Report p's parse error. Returns -1. */
static int bad_yaml(const struct loader *ld, const yaml_parser_t *p)
{
	snprintf(ld->msg, ld->n, "%s:%zu: bad YAML: %s%s%s", ld->file,
		 p->problem_mark.line + 1,
		 p->problem ? p->problem : "unknown error",
		 p->context ? " " : "", p->context ? p->context : "");
	return -1;
}

/* Walk f's YAML events before it is loaded, refusing nesting deeper than
 * YAML_DEPTH_MAX as soon as it arrives, and more than YAML_NODES_MAX
 * nodes. libyaml's scanner does work proportional to the depth for each
 * token: 50,000 levels (100 KB) took 7 s to load before any check could
 * see them; stopped at the bound, the walk is linear in the file. */
static int prescan(const struct loader *ld, FILE *f)
{
	yaml_parser_t p;
	yaml_event_t e;
	size_t depth = 0, nodes = 0;
	int rc = 0;

	yaml_parser_initialize(&p);
	yaml_parser_set_input_file(&p, f);
	for (;;) {
		if (!yaml_parser_parse(&p, &e)) {
			rc = bad_yaml(ld, &p);
			break;
		}
		yaml_event_type_t t = e.type;
		size_t line = e.start_mark.line + 1;
		yaml_event_delete(&e);
		if (t == YAML_STREAM_END_EVENT)
			break;
		if (t == YAML_MAPPING_START_EVENT ||
		    t == YAML_SEQUENCE_START_EVENT)
			depth++;
		else if ((t == YAML_MAPPING_END_EVENT ||
			  t == YAML_SEQUENCE_END_EVENT) &&
			 depth > 0)
			depth--;
		if (t == YAML_MAPPING_START_EVENT ||
		    t == YAML_SEQUENCE_START_EVENT || t == YAML_SCALAR_EVENT ||
		    t == YAML_ALIAS_EVENT)
			nodes++;
		if (depth > YAML_DEPTH_MAX) {
			snprintf(ld->msg, ld->n,
				 "%s:%zu: YAML nested more than %d levels "
				 "deep",
				 ld->file, line, YAML_DEPTH_MAX);
			rc = -1;
			break;
		}
		if (nodes > YAML_NODES_MAX) {
			snprintf(ld->msg, ld->n,
				 "%s:%zu: more than %d YAML nodes", ld->file,
				 line, YAML_NODES_MAX);
			rc = -1;
			break;
		}
	}
	yaml_parser_delete(&p);
	rewind(f);
	return rc;
}

/* The YAML document of one file into doc. */
static int parse_file(const struct loader *ld, yaml_document_t *doc)
{
	yaml_parser_t p;
	char why[128];
	FILE *f = drld_open_regular(ld->dirfd, ld->name, FILE_MAX, ld->seen,
				    why, sizeof why);
	int rc = 0;

	if (f == NULL)
		return fail(ld, NULL, NULL, "%s", why);
	if (prescan(ld, f) != 0) {
		fclose(f);
		return -1;
	}
	yaml_parser_initialize(&p);
	yaml_parser_set_input_file(&p, f);
	if (!yaml_parser_load(&p, doc)) {
		rc = bad_yaml(ld, &p);
	} else {
		yaml_document_t extra;
		if (!yaml_parser_load(&p, &extra)) {
			snprintf(ld->msg, ld->n, "%s:%zu: bad YAML: %s",
				 ld->file, p.problem_mark.line + 1,
				 p.problem ? p.problem : "unknown error");
			rc = -1;
		} else if (yaml_document_get_root_node(&extra) != NULL) {
			snprintf(ld->msg, ld->n,
				 "%s:%zu: a second YAML document (one domain "
				 "per file)",
				 ld->file, extra.start_mark.line + 1);
			rc = -1;
		}
		yaml_document_delete(&extra);
		if (rc != 0)
			yaml_document_delete(doc);
	}
	yaml_parser_delete(&p);
	fclose(f);
	return rc;
}

/* One file into domain dom. */
static int load_file(struct loader *ld, struct drld_envoy_domain *dom)
{
	static const char *const known[] = {"domain", "descriptors", NULL};
	yaml_document_t doc;
	yaml_node_t *f[2];
	const char *name = NULL;
	int rc = -1;

	if (parse_file(ld, &doc) != 0)
		return -1;
	ld->doc = &doc;
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	if (root == NULL)
		fail(ld, NULL, "domain", "the file is empty");
	else if (fields(ld, root, "the top level", known, "domain, descriptors",
			f) == 0 &&
		 (f[0] == NULL || text(ld, f[0], "domain", &name) == 0)) {
		if (name == NULL || name[0] == '\0')
			fail(ld, f[0] ? f[0] : root, "domain",
			     "config file cannot have an empty domain");
		else if ((dom->name = strdup(name)) == NULL)
			fail(ld, root, "domain", "out of memory");
		else {
			ld->domain = dom->name;
			rc = f[1] ? load_descriptors(ld, &dom->root, f[1], "",
						     0)
				  : 0;
		}
	}
	yaml_document_delete(&doc);
	ld->doc = NULL;
	return rc;
}

static int by_string(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The config files in ld->dirfd, sorted, into *names (*count of them),
 * each named "dir/NAME" (NAME: what follows strlen(dir) + 1 bytes). */
static int list_files(const struct loader *ld, const char *dir, char ***names,
		      size_t *count)
{
	int fd = dup(ld->dirfd);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *e = NULL;
	size_t n = 0;

	*names = NULL;
	*count = 0;
	if (d == NULL) {
		int e0 = errno;
		if (fd >= 0)
			close(fd);
		return fail(ld, NULL, NULL, "%s", strerror(e0));
	}
	rewinddir(d); /* the dup shares the offset an earlier listing left */
	*names = calloc(DRLD_ENVOY_FILES_MAX, sizeof **names);
	while (*names != NULL && (e = readdir(d)) != NULL) {
		size_t len = strlen(e->d_name);
		bool yaml =
			(len > 5 &&
			 strcmp(e->d_name + len - 5, ".yaml") == 0) ||
			(len > 4 && strcmp(e->d_name + len - 4, ".yml") == 0);
		if (e->d_name[0] == '.' || !yaml)
			continue;
		if (n == DRLD_ENVOY_FILES_MAX) {
			closedir(d);
			*count = n;
			return fail(ld, NULL, NULL, "more than %d config files",
				    DRLD_ENVOY_FILES_MAX);
		}
		if (asprintf(&(*names)[n], "%s/%s", dir, e->d_name) < 0) {
			(*names)[n] = NULL;
			break;
		}
		n++;
	}
	closedir(d);
	*count = n;
	if (*names == NULL || e != NULL)
		return fail(ld, NULL, NULL, "out of memory");
	/* envoyproxy/ratelimit's HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED:
	 * an emptied directory (a volume not mounted yet, a bad deploy)
	 * would answer OK for every domain, rate limiting silently off */
	if (n == 0)
		return fail(ld, NULL, NULL,
			    "no *.yaml or *.yml file (an empty config would "
			    "turn every limit off)");
	qsort(*names, n, sizeof **names, by_string);
	return 0;
}

static void config_free(struct drld_envoy_config *c)
{
	for (size_t i = 0; i < c->ndomains; i++) {
		free(c->domains[i].name);
		node_free(&c->domains[i].root);
	}
	free(c->domains);
	free(c);
}

static int by_domain(const void *a, const void *b)
{
	return strcmp(((const struct drld_envoy_domain *)a)->name,
		      ((const struct drld_envoy_domain *)b)->name);
}

/* Give every limit under d its counters (once the config is good). */
static int attach(struct drld_envoy_node *d, const char *domain,
		  struct drld_envoy_stats *stats)
{
	if (d->limit != NULL && (d->limit->stats = drld_envoy_stats_get(
					 stats, domain, d->limit->path,
					 strlen(d->limit->path))) == NULL)
		return -1;
	for (size_t i = 0; i < d->nchildren; i++)
		if (attach(&d->children[i], domain, stats) != 0)
			return -1;
	return 0;
}

/* DRLD_ENVOY_MERGE_DOMAINS: add the top-level descriptors of `from` (just
 * loaded from ld->file, emptied here) to those of `to` (first loaded from
 * `first`), refusing a composite key both hold, as envoyproxy/ratelimit
 * patches a domain. */
static int merge_domain(struct loader *ld, struct drld_envoy_domain *to,
			struct drld_envoy_domain *from, const char *first)
{
	struct drld_envoy_node *r = &to->root, *f = &from->root;
	size_t n = r->nchildren + f->nchildren;
	struct drld_envoy_node *all =
		realloc(r->children, (n + 1) * sizeof *all);
	struct siblings seen;

	if (all == NULL)
		return fail(ld, NULL, NULL, "out of memory");
	r->children = all;
	if (f->nchildren > 0)
		memcpy(all + r->nchildren, f->children,
		       f->nchildren * sizeof *all);
	r->nchildren = n;
	free(f->children); /* its nodes are to's now */
	f->children = NULL;
	f->nchildren = 0;
	if (siblings_init(&seen, n) != 0)
		return fail(ld, NULL, NULL, "out of memory");
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++)
		if (siblings_add(&seen, all, i) >= 0)
			rc = fail(ld, NULL, "key",
				  "duplicate descriptor composite key "
				  "\"%s.%s%s%s\" (domain \"%.64s\" is merged "
				  "with %s)",
				  to->name, all[i].key, all[i].value ? "_" : "",
				  all[i].value ? all[i].value : "", to->name,
				  first);
	free(seen.slot);
	return rc;
}

/* Load the files, then check domains are distinct (or merge them) and
 * attach counters. */
static int load_all(struct loader *ld, struct drld_envoy_config *c,
		    char **files, size_t nfiles, struct stat *seen,
		    struct drld_envoy_stats *stats)
{
	/* first[j]: the file domains[j] was first read from */
	const char **first = calloc(nfiles + 1, sizeof *first);
	c->domains = calloc(nfiles + 1, sizeof *c->domains);
	if (c->domains == NULL || first == NULL) {
		free(first);
		return fail(ld, NULL, NULL, "out of memory");
	}
	int rc = 0;
	for (size_t i = 0; i < nfiles && rc == 0; i++) {
		size_t at = c->ndomains;
		struct drld_envoy_domain *dom = &c->domains[at];
		ld->file = files[i];
		ld->name = files[i] + ld->dirlen + 1;
		ld->seen = &seen[i];
		c->ndomains = at + 1; /* freed from now on */
		if (load_file(ld, dom) != 0) {
			rc = -1;
			break;
		}
		if (drld_envoy_load_hook)
			drld_envoy_load_hook(DRLD_ENVOY_HOOK_READ, i);
		first[at] = files[i];
		for (size_t j = 0; rc == 0 && j < at; j++) {
			if (strcmp(c->domains[j].name, dom->name) != 0)
				continue;
			if (!(ld->flags & DRLD_ENVOY_MERGE_DOMAINS))
				rc = fail(ld, NULL, "domain",
					  "duplicate domain \"%.64s\" (also in "
					  "%s; --merge-domain-config merges "
					  "them)",
					  dom->name, first[j]);
			else if ((rc = merge_domain(ld, &c->domains[j], dom,
						    first[j])) == 0) {
				free(dom->name);
				node_free(&dom->root);
				memset(dom, 0, sizeof *dom);
				c->ndomains = at;
			}
			break;
		}
	}
	free(first);
	if (rc != 0)
		return -1;
	qsort(c->domains, c->ndomains, sizeof *c->domains, by_domain);
	for (size_t i = 0; i < c->ndomains; i++)
		if (attach(&c->domains[i].root, c->domains[i].name, stats) !=
		    0) {
			ld->file = "the metrics";
			return fail(ld, NULL, NULL, "out of memory");
		}
	return 0;
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; names != NULL && i < n; i++)
		free(names[i]);
	free(names);
}

/* Whether dir still holds exactly files[0 .. n), each still the file
 * seen[i] says was read (device, inode, size and modification time,
 * through any symbolic link): nothing was swapped while they were read. */
static bool unchanged(struct loader *ld, const char *dir, char **files,
		      size_t n, const struct stat *seen)
{
	char **now = NULL;
	size_t nnow = 0;
	bool same = list_files(ld, dir, &now, &nnow) == 0 && nnow == n;

	for (size_t i = 0; same && i < n; i++) {
		struct stat st;
		if (drld_envoy_load_hook)
			drld_envoy_load_hook(DRLD_ENVOY_HOOK_CHECK, i);
		same = strcmp(now[i], files[i]) == 0 &&
		       fstatat(ld->dirfd, files[i] + ld->dirlen + 1, &st, 0) ==
			       0 &&
		       st.st_dev == seen[i].st_dev &&
		       st.st_ino == seen[i].st_ino &&
		       st.st_size == seen[i].st_size &&
		       st.st_mtim.tv_sec == seen[i].st_mtim.tv_sec &&
		       st.st_mtim.tv_nsec == seen[i].st_mtim.tv_nsec;
	}
	free_names(now, nnow);
	return same;
}

/* The directory one load reads, opened: a Kubernetes ConfigMap volume's
 * current version (DIR/..data, a symbolic link to a directory the
 * kubelet never changes, only replaces) when there is one, else DIR
 * itself. Reading every file in the version the link named when it was
 * opened makes one snapshot even while the link flips on: checking the
 * names through the link afterwards could pass on a flip back and forth
 * during the check (issue 45, hole 7). -1 (errno set) when DIR cannot be
 * opened. */
static int open_snapshot(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int version = openat(fd, "..data", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (version < 0)
		return fd;
	close(fd);
	return version;
}

/* One attempt at loading dir into *out: 0, -1 (the message in ld), or 1
 * when the directory changed while it was read (nothing kept). */
static int load_once(struct loader *ld, const char *dir,
		     struct drld_envoy_config **out,
		     struct drld_envoy_stats *stats)
{
	struct drld_envoy_config *c = calloc(1, sizeof *c);
	char **files = NULL;
	size_t nfiles = 0;
	struct stat *seen = NULL;
	int rc = -1;

	if (c == NULL) {
		snprintf(ld->msg, ld->n, "out of memory");
		return -1;
	}
	atomic_init(&c->refs, 1);
	ld->nodes = 0;
	ld->dirfd = open_snapshot(dir);
	ld->dirlen = strlen(dir);
	if (ld->dirfd < 0)
		fail(ld, NULL, NULL, "%s", strerror(errno));
	else if (list_files(ld, dir, &files, &nfiles) == 0) {
		seen = calloc(nfiles, sizeof *seen);
		if (seen == NULL)
			fail(ld, NULL, NULL, "out of memory");
		else if (load_all(ld, c, files, nfiles, seen, stats) == 0)
			rc = unchanged(ld, dir, files, nfiles, seen) ? 0 : 1;
	}
	free(seen);
	free_names(files, nfiles);
	if (ld->dirfd >= 0)
		close(ld->dirfd);
	ld->dirfd = -1;
	if (rc == 0) {
		c->nfiles = nfiles;
		*out = c;
	} else {
		config_free(c);
	}
	return rc;
}

/* Loads in a row that may find the directory changed before one is
 * given up. */
#define LOAD_TRIES 10

int drld_envoy_config_load(struct drld_envoy_config **out, const char *dir,
			   drl_store *store, unsigned flags,
			   struct drld_envoy_stats *stats, char *msg, size_t n)
{
	struct loader ld = {.file = dir,
			    .dirfd = -1,
			    .store = store,
			    .flags = flags,
			    .msg = msg,
			    .n = n};

	*out = NULL;
	/* A reload must be one snapshot of the directory: a Kubernetes
	 * ConfigMap volume swaps every file at once (a "..data" symbolic
	 * link), and reading some files before and some after a swap made
	 * a config that was never deployed (22 of 30 reloads, issue 33).
	 * So the files are read from the version ..data names when the
	 * load starts (open_snapshot), then checked unchanged; a change
	 * (a plain directory edited meanwhile) means reading them all
	 * again. */
	for (int i = 0; i < LOAD_TRIES; i++) {
		int rc = load_once(&ld, dir, out, stats);
		if (rc <= 0)
			return rc;
	}
	snprintf(msg, n,
		 "%s: its files changed while they were read, %d times in a "
		 "row",
		 dir, LOAD_TRIES);
	return -1;
}

void drld_envoy_config_release(struct drld_envoy_config *c)
{
	if (c != NULL &&
	    atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
		config_free(c);
}

/* A domain asked for (length-delimited: it may hold any byte, NUL too)
 * against a configured one (NUL-terminated, no NUL inside): the order of
 * strcmp, which sorted the domains. */
struct domain_key {
	const char *name;
	size_t len;
};

static int domain_cmp(const void *key, const void *elem)
{
	const struct domain_key *k = key;
	const char *d = ((const struct drld_envoy_domain *)elem)->name;
	size_t dlen = strlen(d);
	int cmp = memcmp(k->name, d, k->len < dlen ? k->len : dlen);
	if (cmp != 0)
		return cmp;
	return k->len < dlen ? -1 : k->len > dlen;
}

const struct drld_envoy_domain *drld_envoy_config_domain(
	const struct drld_envoy_config *c, const char *name, size_t len)
{
	/* bsearch(3), not strncmp: a requested name with a NUL inside made
	 * the hand-written search read past the end of a shorter domain. */
	struct domain_key k = {name, len};
	if (c->ndomains == 0)
		return NULL;
	return bsearch(&k, c->domains, c->ndomains, sizeof *c->domains,
		       domain_cmp);
}

/* ---- matching ----------------------------------------------------------- */

/* Whether s (n bytes) matches glob p: '*' is any run of bytes. */
static bool glob(const char *p, const char *s, size_t n)
{
	const char *star = NULL;
	size_t i = 0, back = 0;

	while (i < n) {
		if (*p == '*') {
			star = p++;
			back = i;
		} else if (*p != '\0' && *p == s[i]) {
			p++;
			i++;
		} else if (star != NULL) {
			p = star + 1;
			i = ++back;
		} else
			return false;
	}
	while (*p == '*')
		p++;
	return *p == '\0';
}

/* Whether NUL-terminated a equals b (n bytes). */
static bool eq(const char *a, const char *b, size_t n)
{
	return strncmp(a, b, n) == 0 && a[n] == '\0' && memchr(b, 0, n) == NULL;
}

void drld_envoy_match(const struct drld_envoy_domain *d,
		      const struct drld_envoy_entry *e, size_t n,
		      struct drld_envoy_match *m)
{
	const struct drld_envoy_node *at = &d->root;

	memset(m, 0, sizeof *m);
	for (size_t i = 0; i < n && i < DRLD_ENVOY_DEPTH_MAX; i++) {
		const struct drld_envoy_node *next = NULL, *c;
		bool by_wildcard = false;

		/* key and value exactly, then a wildcard value, then the key
		 * alone (envoyproxy/ratelimit's GetLimit) */
		for (size_t j = 0; next == NULL && j < at->nchildren; j++) {
			c = &at->children[j];
			if (c->value != NULL && !c->wildcard &&
			    eq(c->key, e[i].key, e[i].keylen) &&
			    eq(c->value, e[i].value, e[i].valuelen))
				next = c;
		}
		for (size_t j = 0; next == NULL && j < at->nchildren; j++) {
			c = &at->children[j];
			if (c->wildcard && eq(c->key, e[i].key, e[i].keylen) &&
			    glob(c->value, e[i].value, e[i].valuelen))
				next = c, by_wildcard = true;
		}
		for (size_t j = 0; next == NULL && j < at->nchildren; j++) {
			c = &at->children[j];
			if (c->value == NULL &&
			    eq(c->key, e[i].key, e[i].keylen))
				next = c;
		}
		if (next == NULL)
			break;
		/* the metric shows: a shared or unflagged wildcard's
		 * pattern, the request's value for value_to_metric or a
		 * value the config names, else nothing (config_impl.go) */
		if (by_wildcard && next->share_threshold)
			m->shared[i] = next->value;
		if (by_wildcard &&
		    (next->share_threshold || !next->value_to_metric)) {
			m->mvalue[i] = next->value;
			m->mlen[i] = strlen(next->value);
		} else if (next->value != NULL || next->value_to_metric) {
			m->mvalue[i] = e[i].value;
			m->mlen[i] = e[i].valuelen;
		}
		if (next->value_to_metric)
			m->by_request = true;
		if (next->limit != NULL && i == n - 1)
			m->limit = next->limit;
		if (next->nchildren == 0)
			break;
		at = next;
	}
	if (m->limit != NULL && m->limit->detailed_metric) {
		m->by_request = true;
		for (size_t i = 0; i < n && i < DRLD_ENVOY_DEPTH_MAX; i++)
			if (m->shared[i] == NULL) {
				m->mvalue[i] = e[i].value;
				m->mlen[i] = e[i].valuelen;
			}
	}
}

/* ---- the slot ----------------------------------------------------------- */

/* drld_slot finds the reference count as the first member */
_Static_assert(offsetof(struct drld_envoy_config, refs) == 0,
	       "refs comes first");
