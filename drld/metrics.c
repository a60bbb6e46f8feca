/* drld's counters and their Prometheus text: see metrics.h. */
#include "metrics.h"

#include <inttypes.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Histogram buckets of drld_check_duration_seconds: upper bounds in µs,
 * and the same bound as Prometheus prints it (seconds). */
static const struct {
	int64_t us;
	const char *le;
} buckets[] = {
	{50, "5e-05"},    {100, "0.0001"},  {250, "0.00025"}, {500, "0.0005"},
	{1000, "0.001"},  {2500, "0.0025"}, {5000, "0.005"},  {10000, "0.01"},
	{25000, "0.025"}, {50000, "0.05"},  {100000, "0.1"},  {250000, "0.25"},
	{500000, "0.5"},  {1000000, "1"},
};
#define NBUCKETS (sizeof buckets / sizeof buckets[0])

/* The statuses drld's handlers send; anything else counts as "other". */
static const unsigned codes[] = {200, 400, 404, 405, 413, 429, 500, 503};
#define NCODES (sizeof codes / sizeof codes[0])

struct drld_metrics {
	/* rules[0 .. nrules) are fully written before nrules is released
	 * (store-release), so a reader that loads nrules (acquire) may read
	 * them without the lock; the lock only serializes writers. */
	pthread_mutex_t lock;
	atomic_size_t nrules;
	struct drld_rule_stats rules[DRLD_METRICS_RULES_MAX];

	atomic_uint_fast64_t store_errors;
	atomic_uint_fast64_t http[NCODES + 1]; /* the last one: other */
	atomic_uint_fast64_t reloads_ok, reloads_error;
	/* not cumulative: bucket i counts durations in (bound i-1, bound i],
	 * the last one those above the largest bound */
	atomic_uint_fast64_t hist[NBUCKETS + 1];
	atomic_uint_fast64_t hist_sum_us;
	void (*extra)(FILE *, void *); /* drld_metrics_extra() */
	void *extra_arg;
	const drl_store *second; /* drld_metrics_second_store() */
};

int drld_metrics_new(struct drld_metrics **out)
{
	struct drld_metrics *m = calloc(1, sizeof *m);

	if (m == NULL)
		return -1;
	if (pthread_mutex_init(&m->lock, NULL) != 0) {
		free(m);
		return -1;
	}
	*out = m;
	return 0;
}

void drld_metrics_free(struct drld_metrics *m)
{
	if (m == NULL)
		return;
	pthread_mutex_destroy(&m->lock);
	free(m);
}

struct drld_rule_stats *drld_metrics_rule(struct drld_metrics *m,
					  const char *name)
{
	struct drld_rule_stats *r = NULL;

	if (strlen(name) > DRLD_RULE_NAME_MAX)
		return NULL;
	pthread_mutex_lock(&m->lock);
	size_t n = atomic_load_explicit(&m->nrules, memory_order_relaxed);
	for (size_t i = 0; i < n && r == NULL; i++)
		if (strcmp(m->rules[i].name, name) == 0)
			r = &m->rules[i];
	if (r == NULL && n < DRLD_METRICS_RULES_MAX) {
		r = &m->rules[n];
		strcpy(r->name, name); /* length checked above */
		atomic_store_explicit(&m->nrules, n + 1, memory_order_release);
	}
	pthread_mutex_unlock(&m->lock);
	return r;
}

/* Add 1 to a counter; relaxed: counters order nothing. */
static void bump(atomic_uint_fast64_t *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

static uint64_t get(const atomic_uint_fast64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

void drld_metrics_decision(struct drld_rule_stats *r, bool allowed)
{
	bump(allowed ? &r->allowed : &r->denied);
}

void drld_metrics_shadow_denial(struct drld_rule_stats *r)
{
	bump(&r->shadow_denied);
}

void drld_metrics_reset(struct drld_rule_stats *r)
{
	bump(&r->resets);
}

void drld_metrics_store_error(struct drld_metrics *m)
{
	bump(&m->store_errors);
}

void drld_metrics_http(struct drld_metrics *m, unsigned status)
{
	size_t i = 0;

	while (i < NCODES && codes[i] != status)
		i++;
	bump(&m->http[i]);
}

void drld_metrics_duration(struct drld_metrics *m, int64_t us)
{
	size_t i = 0;

	if (us < 0)
		us = 0;
	while (i < NBUCKETS && us > buckets[i].us)
		i++;
	bump(&m->hist[i]);
	atomic_fetch_add_explicit(&m->hist_sum_us, (uint64_t)us,
				  memory_order_relaxed);
}

void drld_metrics_extra(struct drld_metrics *m, void (*fn)(FILE *, void *),
			void *arg)
{
	m->extra = fn;
	m->extra_arg = arg;
}

void drld_metrics_reload(struct drld_metrics *m, bool ok)
{
	bump(ok ? &m->reloads_ok : &m->reloads_error);
}

/* Write the HELP and TYPE lines of one metric. */
static void header(FILE *f, const char *name, const char *type,
		   const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void render_decisions(FILE *f, struct drld_metrics *m)
{
	size_t n = atomic_load_explicit(&m->nrules, memory_order_acquire);

	header(f, "drld_decisions_total", "counter",
	       "Decisions made, by rule (adhoc: limits given in the "
	       "request) and outcome.");
	for (size_t i = 0; i < n; i++) {
		const struct drld_rule_stats *r = &m->rules[i];
		fprintf(f,
			"drld_decisions_total{rule=\"%s\",decision="
			"\"allowed\"} %" PRIu64 "\n"
			"drld_decisions_total{rule=\"%s\",decision="
			"\"denied\"} %" PRIu64 "\n",
			r->name, get(&r->allowed), r->name, get(&r->denied));
	}
	header(f, "drld_shadow_denials_total", "counter",
	       "Denials of shadowed limits (shadow=1) answered allowed, by "
	       "rule.");
	for (size_t i = 0; i < n; i++)
		fprintf(f,
			"drld_shadow_denials_total{rule=\"%s\"} %" PRIu64 "\n",
			m->rules[i].name, get(&m->rules[i].shadow_denied));
	header(f, "drld_resets_total", "counter",
	       "Keys reset (POST /v1/reset), by rule.");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "drld_resets_total{rule=\"%s\"} %" PRIu64 "\n",
			m->rules[i].name, get(&m->rules[i].resets));
}

static void render_http(FILE *f, struct drld_metrics *m)
{
	header(f, "drld_http_requests_total", "counter",
	       "Responses sent by drld's handlers, by HTTP status.");
	for (size_t i = 0; i < NCODES; i++)
		fprintf(f,
			"drld_http_requests_total{code=\"%u\"} %" PRIu64 "\n",
			codes[i], get(&m->http[i]));
	fprintf(f, "drld_http_requests_total{code=\"other\"} %" PRIu64 "\n",
		get(&m->http[NCODES]));
}

static void render_histogram(FILE *f, struct drld_metrics *m)
{
	uint64_t cum = 0;
	uint64_t sum_us = get(&m->hist_sum_us);

	header(f, "drld_check_duration_seconds", "histogram",
	       "Time one decision took (the library call, store round "
	       "trip included).");
	for (size_t i = 0; i < NBUCKETS; i++) {
		cum += get(&m->hist[i]);
		fprintf(f,
			"drld_check_duration_seconds_bucket{le=\"%s\"} "
			"%" PRIu64 "\n",
			buckets[i].le, cum);
	}
	cum += get(&m->hist[NBUCKETS]);
	fprintf(f,
		"drld_check_duration_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n"
		"drld_check_duration_seconds_sum %" PRIu64 ".%06" PRIu64 "\n"
		"drld_check_duration_seconds_count %" PRIu64 "\n",
		cum, sum_us / 1000000, sum_us % 1000000, cum);
}

/* The store's drl_store_stats counters, as drld_store_NAME_total. */
static const struct {
	const char *name;
	size_t offset;
	const char *help;
} store_counters[] = {
	{"decisions", offsetof(drl_store_stats, decisions),
	 "Limits decided by the store."},
	{"cas_attempts", offsetof(drl_store_stats, cas_attempts),
	 "Optimistic load/CAS rounds."},
	{"cas_conflicts", offsetof(drl_store_stats, cas_conflicts),
	 "Rounds lost to a concurrent writer."},
	{"cas_exhausted", offsetof(drl_store_stats, cas_exhausted),
	 "Decisions that spent their retry budget."},
	{"scripts", offsetof(drl_store_stats, scripts),
	 "Decisions run as server-side scripts."},
	{"failures", offsetof(drl_store_stats, store_failures),
	 "Store calls that failed."},
	{"breaker_opens", offsetof(drl_store_stats, breaker_opens),
	 "Times the circuit breaker opened."},
	{"breaker_rejects", offsetof(drl_store_stats, breaker_rejects),
	 "Calls refused unsent while the breaker was open."},
	{"fallbacks", offsetof(drl_store_stats, fallbacks),
	 "Decisions made by an on_error policy."},
	{"near_denials", offsetof(drl_store_stats, near_denials),
	 "Decisions answered by a near cache."},
	{"near_syncs", offsetof(drl_store_stats, near_syncs),
	 "Peeks made by near cache threads."},
	{"shadow_denials", offsetof(drl_store_stats, shadow_denials),
	 "Denials of shadowed limits answered allowed."},
};

void drld_metrics_second_store(struct drld_metrics *m, const drl_store *s)
{
	m->second = s;
}

/* The counters of store and second (NULL: none), added up. */
static void render_store(FILE *f, const drl_store *store,
			 const drl_store *second)
{
	drl_store_stats s, s2;
	char name[96];

	if (drl_store_stats_get(store, &s) != 0)
		return;
	if (second != NULL && drl_store_stats_get(second, &s2) != 0)
		second = NULL;
	for (size_t i = 0; i < sizeof store_counters / sizeof store_counters[0];
	     i++) {
		uint64_t v, v2 = 0;
		memcpy(&v, (const char *)&s + store_counters[i].offset,
		       sizeof v);
		if (second != NULL)
			memcpy(&v2,
			       (const char *)&s2 + store_counters[i].offset,
			       sizeof v2);
		v += v2;
		snprintf(name, sizeof name, "drld_store_%s_total",
			 store_counters[i].name);
		header(f, name, "counter", store_counters[i].help);
		fprintf(f, "%s %" PRIu64 "\n", name, v);
	}
}

char *drld_metrics_render(struct drld_metrics *m, const drl_store *store,
			  const struct drld_gauges *g, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (f == NULL)
		return NULL;
	render_decisions(f, m);
	header(f, "drld_store_errors_total", "counter",
	       "Decisions the store failed (answered by on_error, or 503).");
	fprintf(f, "drld_store_errors_total %" PRIu64 "\n",
		get(&m->store_errors));
	render_http(f, m);
	render_histogram(f, m);
	header(f, "drld_config_reloads_total", "counter",
	       "Config reloads on SIGHUP, by result.");
	fprintf(f,
		"drld_config_reloads_total{result=\"ok\"} %" PRIu64 "\n"
		"drld_config_reloads_total{result=\"error\"} %" PRIu64 "\n",
		get(&m->reloads_ok), get(&m->reloads_error));
	header(f, "drld_adhoc_limiters", "gauge",
	       "Limiters cached for limits given in requests.");
	fprintf(f, "drld_adhoc_limiters %zu\n", g->adhoc_limiters);
	header(f, "drld_adhoc_evictions_total", "counter",
	       "Cached ad-hoc limiters evicted (least recently used).");
	fprintf(f, "drld_adhoc_evictions_total %" PRIu64 "\n",
		g->adhoc_evictions);
	header(f, "drld_http_requests_in_flight", "gauge",
	       "HTTP requests whose headers arrived and that are not yet "
	       "answered (this scrape is one).");
	fprintf(f, "drld_http_requests_in_flight %ld\n", g->requests_in_flight);
	render_store(f, store, m->second);
	if (m->extra != NULL)
		m->extra(f, m->extra_arg);
	if (fclose(f) != 0 || buf == NULL) {
		free(buf);
		return NULL;
	}
	return buf;
}
