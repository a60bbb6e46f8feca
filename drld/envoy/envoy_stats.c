/* Counters of the Envoy rate limit service: see envoy_stats.h. */
#include "envoy_stats.h"

#include "acceptor.h"     /* DRLD_CLOSED_* */
#include "grpc_service.h" /* DRLD_GRPC_POLLERS_MAX */

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 1024 /* hash buckets of the name table (a power of 2) */

struct entry {
	struct drld_envoy_stat stat;
	struct entry *next;
};

struct drld_envoy_stats {
	pthread_mutex_t lock; /* guards the chains and n */
	struct entry *buckets[NBUCKETS];
	/* every entry in insertion order, for rendering: entries[0 .. n)
	 * are written before n is released */
	struct entry *all[DRLD_ENVOY_STATS_MAX];
	atomic_size_t n;
	struct entry overflow;
	atomic_uint_fast64_t global_shadow;
	atomic_uint_fast64_t calls[DRLD_ENVOY_OUTCOMES];
	atomic_uint shards; /* connections[0 .. shards) are rendered */
	atomic_uint_fast64_t connections[DRLD_GRPC_POLLERS_MAX];
	atomic_uint_fast64_t closed[DRLD_CLOSED_REASONS];
};

int drld_envoy_stats_new(struct drld_envoy_stats **out)
{
	struct drld_envoy_stats *s = calloc(1, sizeof *s);

	if (s == NULL || pthread_mutex_init(&s->lock, NULL) != 0) {
		free(s);
		return -1;
	}
	s->overflow.stat.domain = "_overflow";
	s->overflow.stat.descriptor = "_overflow";
	*out = s;
	return 0;
}

void drld_envoy_stats_free(struct drld_envoy_stats *s)
{
	if (s == NULL)
		return;
	size_t n = atomic_load(&s->n);
	for (size_t i = 0; i < n; i++) {
		free(s->all[i]->stat.domain);
		free(s->all[i]->stat.descriptor);
		free(s->all[i]);
	}
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* FNV-1a over the domain, a 0 byte, and the descriptor. */
static size_t hash(const char *domain, const char *d, size_t len)
{
	uint64_t h = 1469598103934665603u;

	for (const char *p = domain; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211u;
	h *= 1099511628211u;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)d[i]) * 1099511628211u;
	return (size_t)(h & (NBUCKETS - 1));
}

struct drld_envoy_stat *drld_envoy_stats_get(struct drld_envoy_stats *s,
					     const char *domain,
					     const char *descriptor, size_t len)
{
	size_t b = hash(domain, descriptor, len);
	struct entry *e;

	pthread_mutex_lock(&s->lock);
	for (e = s->buckets[b]; e != NULL; e = e->next)
		if (strcmp(e->stat.domain, domain) == 0 &&
		    strlen(e->stat.descriptor) == len &&
		    memcmp(e->stat.descriptor, descriptor, len) == 0)
			break;
	size_t n = atomic_load_explicit(&s->n, memory_order_relaxed);
	if (e == NULL && n == DRLD_ENVOY_STATS_MAX)
		e = &s->overflow;
	if (e == NULL && (e = calloc(1, sizeof *e)) != NULL) {
		e->stat.domain = strdup(domain);
		e->stat.descriptor = strndup(descriptor, len);
		if (e->stat.domain == NULL || e->stat.descriptor == NULL) {
			free(e->stat.domain);
			free(e->stat.descriptor);
			free(e);
			e = NULL;
		} else {
			e->next = s->buckets[b];
			s->buckets[b] = e;
			s->all[n] = e;
			atomic_store_explicit(&s->n, n + 1,
					      memory_order_release);
		}
	}
	pthread_mutex_unlock(&s->lock);
	return e ? &e->stat : NULL;
}

static void add(atomic_uint_fast64_t *c, uint64_t v)
{
	atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

void drld_envoy_stats_count(struct drld_envoy_stat *st, uint64_t hits,
			    bool over, bool shadow, int64_t limit,
			    int64_t remaining)
{
	add(&st->total_hits, hits);
	if (over) {
		/* a denial consumes nothing: all its hits were over */
		add(&st->over_limit, hits);
		if (shadow)
			add(&st->shadow_mode, hits);
		return;
	}
	add(&st->within_limit, hits);
	/* near: the hits that landed above floor(80% of the limit) */
	uint64_t near = limit > 0 ? (uint64_t)(limit * 4 / 5) : 0;
	uint64_t after = limit > remaining ? (uint64_t)(limit - remaining) : 0;
	uint64_t before = after > hits ? after - hits : 0;
	if (after > near)
		add(&st->near_limit, before >= near ? hits : after - near);
}

void drld_envoy_stats_global_shadow(struct drld_envoy_stats *s)
{
	add(&s->global_shadow, 1);
}

void drld_envoy_stats_call(struct drld_envoy_stats *s,
			   enum drld_envoy_outcome o)
{
	add(&s->calls[o], 1);
}

/* Write s as a Prometheus label value: \ " and newline escaped. */
static void label(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', f);
		if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static uint64_t get(const atomic_uint_fast64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

void drld_envoy_stats_render(struct drld_envoy_stats *s, FILE *f)
{
	static const struct {
		const char *name, *help;
		size_t offset;
	} counters[] = {
		{"total_hits", "Hits on a descriptor's limit.",
		 offsetof(struct drld_envoy_stat, total_hits)},
		{"over_limit", "Hits over the limit (denied, or shadowed).",
		 offsetof(struct drld_envoy_stat, over_limit)},
		{"near_limit", "Hits allowed above 80% of the limit.",
		 offsetof(struct drld_envoy_stat, near_limit)},
		{"within_limit", "Hits allowed.",
		 offsetof(struct drld_envoy_stat, within_limit)},
		{"shadow_mode", "Hits over a shadow_mode limit, answered OK.",
		 offsetof(struct drld_envoy_stat, shadow_mode)},
	};
	static const char *const outcomes[] = {
		"ok",       "over_limit", "invalid_argument",   "unavailable",
		"internal", "cancelled",  "resource_exhausted",
	};
	_Static_assert(sizeof outcomes / sizeof outcomes[0] ==
			       DRLD_ENVOY_OUTCOMES,
		       "a name for every outcome");
	size_t n = atomic_load_explicit(&s->n, memory_order_acquire);

	for (size_t c = 0; c < sizeof counters / sizeof counters[0]; c++) {
		fprintf(f, "# HELP drld_envoy_%s_total %s\n", counters[c].name,
			counters[c].help);
		fprintf(f, "# TYPE drld_envoy_%s_total counter\n",
			counters[c].name);
		for (size_t i = 0; i <= n; i++) {
			const struct drld_envoy_stat *st =
				i < n ? &s->all[i]->stat : &s->overflow.stat;
			const atomic_uint_fast64_t *v =
				(const atomic_uint_fast64_t
					 *)((const char *)st +
					    counters[c].offset);
			if (i == n && get(&st->total_hits) == 0)
				break; /* no overflow yet */
			fprintf(f, "drld_envoy_%s_total{domain=\"",
				counters[c].name);
			label(f, st->domain);
			fputs("\",descriptor=\"", f);
			label(f, st->descriptor);
			fprintf(f, "\"} %" PRIu64 "\n", get(v));
		}
	}
	fputs("# HELP drld_envoy_global_shadow_mode_total Requests over limit "
	      "answered OK by --shadow.\n"
	      "# TYPE drld_envoy_global_shadow_mode_total counter\n",
	      f);
	fprintf(f, "drld_envoy_global_shadow_mode_total %" PRIu64 "\n",
		get(&s->global_shadow));
	fputs("# HELP drld_grpc_calls_total ShouldRateLimit calls by "
	      "outcome.\n# TYPE drld_grpc_calls_total counter\n",
	      f);
	for (size_t o = 0; o < DRLD_ENVOY_OUTCOMES; o++)
		fprintf(f,
			"drld_grpc_calls_total{outcome=\"%s\"} %" PRIu64 "\n",
			outcomes[o], get(&s->calls[o]));
	unsigned shards = atomic_load(&s->shards);
	if (shards == 0)
		return;
	fputs("# HELP drld_grpc_connections_total gRPC connections drld's "
	      "listener dealt to each shard.\n"
	      "# TYPE drld_grpc_connections_total counter\n",
	      f);
	for (unsigned i = 0; i < shards; i++)
		fprintf(f,
			"drld_grpc_connections_total{shard=\"%u\"} %" PRIu64
			"\n",
			i, get(&s->connections[i]));
	static const char *const why[] = {"no_preface", "no_descriptor"};
	_Static_assert(sizeof why / sizeof why[0] == DRLD_CLOSED_REASONS,
		       "a name for every reason");
	fputs("# HELP drld_grpc_connections_closed_total gRPC connections "
	      "drld's listener closed without dealing them.\n"
	      "# TYPE drld_grpc_connections_closed_total counter\n",
	      f);
	for (unsigned i = 0; i < DRLD_CLOSED_REASONS; i++)
		fprintf(f,
			"drld_grpc_connections_closed_total{reason=\"%s\"} "
			"%" PRIu64 "\n",
			why[i], get(&s->closed[i]));
}

void drld_envoy_stats_closed(struct drld_envoy_stats *s, unsigned why)
{
	if (why < DRLD_CLOSED_REASONS)
		atomic_fetch_add_explicit(&s->closed[why], 1,
					  memory_order_relaxed);
}

void drld_envoy_stats_shards(struct drld_envoy_stats *s, unsigned n)
{
	atomic_store(&s->shards,
		     n < DRLD_GRPC_POLLERS_MAX ? n : DRLD_GRPC_POLLERS_MAX);
}

void drld_envoy_stats_connection(struct drld_envoy_stats *s, unsigned i)
{
	if (i < DRLD_GRPC_POLLERS_MAX)
		atomic_fetch_add_explicit(&s->connections[i], 1,
					  memory_order_relaxed);
}
