/*
 * drld — an HTTP rate-limit service on libdrl, so applications in any
 * language share the same limits (docs/drld.md).
 *
 *   drld [--listen HOST:PORT] [--store URI] [--config FILE] [--threads N]
 *        [--max-connections N] [--max-connections-per-ip N]
 *        [--timeout-s N] [--drain-s N] [--max-body BYTES]
 *        [--conn-memory BYTES] [--max-specs N] [--memory-max-keys N]
 *        [--memory-max-keys-per-limit N]
 *        [--grpc-listen HOST:PORT] [--envoy-config DIR] [--shadow]
 *        [--grpc-headers] [--stop-cache-key-increment-when-overlimit]
 *        [--merge-domain-config] [--watch-config]
 *        [--grpc-threads N] [--grpc-pollers N]
 *        [--grpc-queue N]
 *        [--grpc-max-connection-age S] [--grpc-max-connection-age-grace S]
 *        [--grpc-max-connection-idle S]
 *        [--grpc-tls-cert FILE --grpc-tls-key FILE [--grpc-tls-client-ca FILE]
 *         [--grpc-tls-client-san NAME] [--grpc-tls-refresh S]]
 *
 * This file: arguments, signals, start, reload and stop. Signals are
 * blocked in every thread and read from a signalfd by the main thread,
 * which stops drld on SIGTERM/SIGINT outside any signal handler, and
 * hands SIGHUP's reload to the reload thread (reloader.h): the signal
 * thread never reads a file, so a read that hangs cannot make it miss
 * SIGTERM. Uses the public API (<drl/drl.h>) only.
 *
 * Exit status: 0 stopped by SIGTERM/SIGINT, 1 could not serve (e.g. the
 * address is in use), 2 bad usage, store URI or config, 3 the store could
 * not be reached.
 */
#include "common/insecure.h"
#include "common/json.h"
#include "common/memory_uri.h"
#include "common/opts.h"
#include "common/result.h"
#include "drld.h"
#include "envoy/envoy_config.h"
#include "envoy/grpc_service.h" /* plain C; defined only with DRLD_HAVE_ENVOY */
#include "http/http.h"
#include "listen_addr.h"
#include "reloader.h"
#include "watcher.h"
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <unistd.h>

enum { EXIT_OK = 0, EXIT_SERVE = 1, EXIT_USAGE = 2, EXIT_STORE = 3 };

/* Everything the command line sets. */
struct opts {
	struct drld_http_opts http;
	const char *listen;
	const char *store; /* NULL: the config's, else memory:// */
	const char *config;
	int64_t max_specs;
	int64_t memory_max_keys;   /* drld's default memory:// store */
	int64_t memory_limit_keys; /* its group_max_keys; 0: the default */
	int64_t drain_s;           /* --drain-s; -1: --timeout-s */
	const char *grpc_listen;   /* NULL: no gRPC service */
	const char *envoy_config;  /* NULL: no Envoy domains */
	/* --grpc-*; deciders is --grpc-threads (serve() makes it 0 on
	 * memory://) */
	struct drld_grpc_opts grpc;
	bool shadow, grpc_headers;
	bool stop_increment; /* --stop-cache-key-increment-when-overlimit */
	bool merge_domains;  /* --merge-domain-config */
	bool watch_config;   /* --watch-config */
};

/* --version: print it and stop (exit 0). */
static int print_version(void *target, const char *unused)
{
	printf("drld %s\n", drl_version());
	return EXIT_OK;
}

#define STR(x) #x
#define XSTR(x) STR(x)
#define O struct opts
static const tl_opt options[] = {
	TL_STRING("listen", 'l', "HOST:PORT", O, listen, "127.0.0.1:8080",
		  "numeric IPv4 or [IPv6] address and port (port 0 picks a "
		  "free one, printed when ready)"),
	TL_STRING("store", 's', "URI", O, store,
		  "the config's \"store\", else memory://",
		  "the store every limit lives in"),
	TL_STRING("config", 'c', "FILE", O, config, NULL,
		  "named rules and protected prefixes (JSON); reloaded on "
		  "SIGHUP"),
	TL_UINT("threads", 't', "N", O, http.threads, 1, 64, "2",
		"HTTP threads, each with its epoll"),
	TL_UINT("max-connections", 0, "N", O, http.max_connections, 1, 100000,
		"1024", "open connections at once"),
	TL_UINT("max-connections-per-ip", 0, "N", O, http.max_per_ip, 0, 100000,
		"0: no bound", "open connections from one client address"),
	TL_UINT("timeout-s", 0, "N", O, http.timeout_s, 1, 3600, "10",
		"close a connection idle this long, or whose request has not "
		"arrived whole in this long"),
	TL_UINT("drain-s", 0, "N", O, drain_s, 0, 3600, "--timeout-s",
		"on SIGTERM, how long the requests and gRPC calls in flight "
		"get to finish; idle connections are closed at once"),
	TL_UINT("max-body", 0, "BYTES", O, http.max_body, 64, 64 << 20, "8192",
		"largest /v1/check body; larger is 413"),
	TL_UINT("conn-memory", 0, "BYTES", O, http.conn_memory, 4096, 1 << 20,
		"32768",
		"memory per connection for the request line, headers and "
		"buffers; headers that do not fit are 431"),
	TL_UINT("max-specs", 0, "N", O, max_specs, 0, 65536, "256",
		"limits given in requests (\"limit\") kept at once, least "
		"recently used evicted; 0 refuses them"),
	TL_UINT("memory-max-keys", 0, "N", O, memory_max_keys, 1, 1000000000,
		"250000",
		"on memory:// (the default, or --store's without max_keys=): "
		"keys kept for the configured limits, and as many again for "
		"those requests choose"),
	TL_UINT("memory-max-keys-per-limit", 0, "N", O, memory_limit_keys, 1,
		1000000000, "a quarter of --memory-max-keys",
		"and of those, keys one limit may hold: a rule, an Envoy "
		"rate_limit, a spec"),
	TL_STRING("grpc-listen", 0, "HOST:PORT", O, grpc_listen, NULL,
		  "also serve Envoy's rate limit service (gRPC "
		  "ShouldRateLimit) there, or on the unix socket unix:/PATH; "
		  "off by default (docs/envoy.md)"),
	TL_STRING("envoy-config", 0, "DIR", O, envoy_config, NULL,
		  "envoyproxy/ratelimit's YAML config: every *.yaml/*.yml of "
		  "DIR; reloaded on SIGHUP"),
	TL_FLAG("shadow", 0, O, shadow,
		"answer every gRPC request OK, counting what would have been "
		"over limit"),
	TL_FLAG("grpc-headers", 0, O, grpc_headers,
		"add RateLimit-Limit/-Remaining/-Reset to gRPC answers "
		"(response_headers_to_add)"),
	TL_FLAG("watch-config", 0, O, watch_config,
		"reload --config and --envoy-config when they change on disk "
		"(inotify; a ConfigMap update too), as on SIGHUP (also "
		"RUNTIME_WATCH_ROOT=true)"),
	TL_FLAG("merge-domain-config", 0, O, merge_domains,
		"a domain in several files of --envoy-config is one domain "
		"(also MERGE_DOMAIN_CONFIG=true)"),
	TL_FLAG("stop-cache-key-increment-when-overlimit", 0, O, stop_increment,
		"count a call's descriptors all or nothing: none when one is "
		"over its limit (also STOP_CACHE_KEY_INCREMENT_WHEN_"
		"OVERLIMIT=true in the environment)"),
	TL_UINT("grpc-threads", 0, "N", O, grpc.deciders, 1,
		DRLD_GRPC_DECIDERS_MAX, XSTR(DRLD_GRPC_DECIDERS_DEFAULT),
		"threads that decide gRPC calls on a store over the network "
		"(memory:// decides on the pollers)"),
	TL_UINT("grpc-pollers", 0, "N", O, grpc.pollers, 1,
		DRLD_GRPC_POLLERS_MAX, "one per usable CPU, up to 8",
		"gRPC shards: a thread each, answering the connections dealt "
		"to it"),
	TL_UINT("grpc-queue", 0, "N", O, grpc.queue, 1, DRLD_GRPC_QUEUE_MAX,
		XSTR(DRLD_GRPC_QUEUE_DEFAULT),
		"gRPC calls that may wait for them; one more is "
		"RESOURCE_EXHAUSTED at once"),
	TL_UINT("grpc-max-connection-age", 0, "S", O, grpc.max_connection_age_s,
		0, DRLD_GRPC_AGE_MAX, XSTR(DRLD_GRPC_AGE_DEFAULT),
		"ask a client to move to a new connection once one is S "
		"seconds old (GOAWAY), so long-lived clients spread over new "
		"drld; 0: never"),
	TL_UINT("grpc-max-connection-age-grace", 0, "S", O,
		grpc.max_connection_age_grace_s, 0, DRLD_GRPC_AGE_MAX,
		XSTR(DRLD_GRPC_AGE_GRACE_DEFAULT),
		"then close it after S more seconds; 0: once its calls end"),
	TL_UINT("grpc-max-connection-idle", 0, "S", O,
		grpc.max_connection_idle_s, 0, DRLD_GRPC_AGE_MAX, "0: never",
		"close a connection without a call for S seconds (GOAWAY)"),
	TL_STRING("grpc-tls-cert", 0, "FILE", O, grpc.tls_cert, NULL,
		  "serve gRPC over TLS with this PEM certificate chain (and "
		  "--grpc-tls-key)"),
	TL_STRING("grpc-tls-key", 0, "FILE", O, grpc.tls_key, NULL,
		  "and this unencrypted PEM key"),
	TL_STRING("grpc-tls-client-ca", 0, "FILE", O, grpc.tls_client_ca, NULL,
		  "and require client certificates signed by these PEM CAs "
		  "(mutual TLS)"),
	TL_STRING("grpc-tls-client-san", 0, "NAME", O, grpc.tls_client_san,
		  NULL, "and that name in their subjectAltName"),
	TL_UINT("grpc-tls-refresh", 0, "S", O, grpc.tls_refresh_s, 1,
		DRLD_GRPC_TLS_REFRESH_MAX, XSTR(DRLD_GRPC_TLS_REFRESH_DEFAULT),
		"read the TLS files again every S seconds, serving renewed "
		"certificates"),
	TL_CALL("version", 'V', NULL, print_version, NULL, "the version"),
};
#undef O

static const tl_opts cli = {
	.prog = "drld",
	.synopsis =
		"usage: drld [--listen HOST:PORT] [--store URI] [--config "
		"FILE]\n"
		"            [--threads N] [--max-connections N]\n"
		"            [--max-connections-per-ip N] [--timeout-s N] "
		"[--drain-s N]\n"
		"            [--max-body BYTES] [--conn-memory BYTES] "
		"[--max-specs N]\n"
		"            [--memory-max-keys N] "
		"[--memory-max-keys-per-limit "
		"N]\n"
		"            [--grpc-listen HOST:PORT] [--envoy-config DIR] "
		"[--shadow]\n"
		"            [--grpc-headers] "
		"[--stop-cache-key-increment-when-overlimit]\n"
		"            [--merge-domain-config] [--watch-config]\n"
		"            [--grpc-threads N] [--grpc-pollers N]\n"
		"            [--grpc-queue N]\n"
		"            [--grpc-max-connection-age S]\n"
		"            [--grpc-max-connection-age-grace S]\n"
		"            [--grpc-max-connection-idle S]\n"
		"            [--grpc-tls-cert FILE --grpc-tls-key FILE\n"
		"             [--grpc-tls-client-ca FILE "
		"[--grpc-tls-client-san "
		"NAME]]\n"
		"             [--grpc-tls-refresh S]]\n"
		"       drld --help | --version\n",
	.intro = "\n"
		 "Serve rate-limit decisions over HTTP: POST /v1/check, GET "
		 "/metrics,\n"
		 "GET /healthz, and the path prefixes the config protects\n"
		 "(docs/drld.md).\n"
		 "\n",
	TL_TABLE(options),
	.outro = "\n"
		 "Signals: SIGHUP reloads the config on a thread of its own (a "
		 "bad\n"
		 "one is reported and the old one kept); SIGTERM or SIGINT "
		 "stop\n"
		 "accepting, finish the requests in flight and exit 0, "
		 "without\n"
		 "waiting for a reload stuck in a read.\n"
		 "\n"
		 "Exit status: 0 stopped by a signal, 1 could not serve, 2 bad "
		 "usage,\n"
		 "store URI or config, 3 the store could not be reached.\n",
};

#define usage_error(...) tl_opts_error(&cli, __VA_ARGS__)

/* envoyproxy/ratelimit's boolean setting `name` from the environment, read
 * as its Go strconv.ParseBool reads it: true sets *on (a flag already set
 * stays set). Returns -1 to go on, or a usage error (2) for another
 * value. */
static int env_bool(const char *name, bool *on)
{
	static const char *const yes[] = {"1",    "t",    "T",
					  "TRUE", "true", "True"};
	static const char *const no[] = {"0",     "f",     "F",
					 "FALSE", "false", "False"};
	const char *v = getenv(name);
	bool known = v == NULL || v[0] == '\0';

	for (size_t i = 0; !known && i < sizeof yes / sizeof *yes; i++) {
		if (strcmp(v, yes[i]) == 0)
			known = *on = true;
		known = known || strcmp(v, no[i]) == 0;
	}
	if (!known)
		return usage_error("bad %s '%.32s': expected true or false",
				   name, v);
	return -1;
}

/* Parse argv into *o. Returns -1 to go on, or an exit status. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	int first, st;

	*o = (struct opts){
		.http = {.threads = 2,
			 .max_connections = 1024,
			 .timeout_s = 10,
			 .max_body = 8192,
			 .conn_memory = 32768},
		.listen = "127.0.0.1:8080",
		.max_specs = 256,
		/* 250,000 keys a store, two stores (rules, ad-hoc limits):
		 * at 200-450 bytes a key, 0.1-0.23 GB when both are full,
		 * inside the 512 MiB deploy/kubernetes.yaml gives the pod
		 * (1,000,000 was up to 0.9 GB: an OOM kill at the bound).
		 * docs/security.md 5. */
		.memory_max_keys = 250000,
		.drain_s = -1,
		.grpc = {.deciders = DRLD_GRPC_DECIDERS_DEFAULT,
			 .pollers = 0, /* drld_grpc_pollers_default() */
			 .queue = DRLD_GRPC_QUEUE_DEFAULT,
			 .max_connection_age_s = DRLD_GRPC_AGE_DEFAULT,
			 .max_connection_age_grace_s =
				 DRLD_GRPC_AGE_GRACE_DEFAULT,
			 .tls_refresh_s = DRLD_GRPC_TLS_REFRESH_DEFAULT},
	};
	if ((st = tl_opts_parse(&cli, argc, argv, o, &first)) >= 0)
		return st;
	if ((st = env_bool("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
			   &o->stop_increment)) >= 0 ||
	    (st = env_bool("MERGE_DOMAIN_CONFIG", &o->merge_domains)) >= 0 ||
	    (st = env_bool("RUNTIME_WATCH_ROOT", &o->watch_config)) >= 0)
		return st;
	if (!DRLD_HAVE_ENVOY && (o->grpc_listen || o->envoy_config))
		return usage_error("this drld was built without gRPC "
				   "(meson -Dgrpc=enabled)");
	if (first < argc)
		return usage_error("unexpected argument '%s'", argv[first]);
	const struct drld_grpc_opts *g = &o->grpc;
	if ((g->tls_cert == NULL) != (g->tls_key == NULL))
		return usage_error("--grpc-tls-cert and --grpc-tls-key go "
				   "together");
	if (g->tls_client_ca != NULL && g->tls_cert == NULL)
		return usage_error("--grpc-tls-client-ca needs "
				   "--grpc-tls-cert and --grpc-tls-key");
	if (g->tls_client_san != NULL &&
	    (g->tls_client_ca == NULL || g->tls_client_san[0] == '\0'))
		return usage_error("--grpc-tls-client-san needs a name and "
				   "--grpc-tls-client-ca");
	if (g->tls_cert != NULL && o->grpc_listen == NULL)
		return usage_error("--grpc-tls-cert without --grpc-listen");
	if (!drld_parse_listen(o->listen, &o->http.addr))
		return usage_error("bad --listen '%s': expected a numeric "
				   "address and a port, e.g. 127.0.0.1:8080 "
				   "or [::1]:8080",
				   o->listen);
	struct sockaddr_storage grpc_addr;
	if (o->grpc_listen != NULL && !drld_is_unix_listen(o->grpc_listen) &&
	    !drld_parse_listen(o->grpc_listen, &grpc_addr))
		return usage_error(
			"bad --grpc-listen '%s': expected a numeric "
			"address and a port, e.g. 127.0.0.1:8081, "
			"or unix:/ABSOLUTE/PATH of at most %zu bytes",
			o->grpc_listen, DRLD_UNIX_PATH_MAX);
	return -1;
}

/* ---- the server's state ----------------------------------------------- */

/* Whether `store` decides a one-limit policy without a worker
 * (drl_async_direct()): both fronts then start decisions through the async
 * API (http/async_loop.h, envoy/grpc_async.h). */
static bool async_worth(drl_store *store)
{
	drl_limiter *l = NULL;
	if (drl_limiter_new(&l, store, "fixed_window:1/1s", "probe:", NULL))
		return false;
	bool direct = drl_async_direct(l) != 0;
	drl_limiter_free(l);
	return direct;
}

/* Open the store: --store, else the config's "store", else memory://.
 * *config_store gets the config's (malloc'd, or NULL), for reloads to
 * compare with. Returns -1 to go on, or an exit status. */
static int open_store(struct drld *d, const struct opts *o, char **config_store)
{
	char msg[DRLD_CONFIG_MSG_MAX];
	drl_error err = {0};

	*config_store = NULL;
	if (o->config != NULL &&
	    drld_config_peek_store(o->config, config_store, msg, sizeof msg)) {
		fprintf(stderr, "drld: bad config: %s\n", msg);
		return EXIT_USAGE;
	}
	/* drld's default: memory:// bounded (the library's has no bound,
	 * and clients choose the keys), and a second one as large for the
	 * limits clients choose (ad-hoc specs, gRPC overrides with periods
	 * up to a year), so filling it cannot lock the configured limits
	 * out. Both refuse a new key once full ("memory store full"), and
	 * a new key of a limit holding --memory-max-keys-per-limit keys:
	 * each configured limit's keys have a prefix of their own there,
	 * so a client that chooses one limit's keys (a {key} or header
	 * rule) fills only that limit's share (issue 33, hole 5). */
	const char *uri = o->store        ? o->store
			  : *config_store ? *config_store
					  : "memory://";
	/* memory:// never waits for the network: gRPC calls on it are
	 * decided where they are read (envoy/grpc_service.h) */
	d->store_in_process = strncasecmp(uri, "memory:", 7) == 0;
	char memory[TL_MEMORY_URI_MAX];
	int rc = 0;
	if (d->store_in_process) {
		/* An operator's memory:// (--store, the config's "store") gets
		 * the same protection: the bounds it does not name are
		 * drld's (issue 45, hole 8). */
		rc = tl_memory_uri(memory, sizeof memory, uri,
				   o->memory_max_keys, o->memory_limit_keys,
				   &err);
		uri = memory;
	}
	tl_warn_insecure("drld", uri);
	if (rc == 0)
		rc = drl_store_open(&d->store, uri, &err);
	if (rc == 0 && d->store_in_process)
		rc = drl_store_open(&d->adhoc_store, memory, &err);
	if (rc == 0 && d->adhoc_store)
		drld_metrics_second_store(d->metrics, d->adhoc_store);
	if (rc != 0) {
		/* the library's messages never quote a password */
		fprintf(stderr, "drld: %s: %s (%s)\n",
			o->store ? "--store" : "the store", err.message,
			drl_err_name(rc));
		return rc == DRL_EINVAL ? EXIT_USAGE : EXIT_STORE;
	}
	/* a store that decides without a thread waiting (Redis tx=lua on
	 * shared connections): the servers start decisions through the
	 * async API */
	d->store_direct = !d->store_in_process && async_worth(d->store);
	return -1;
}

#if DRLD_HAVE_ENVOY
/* Write the Envoy service's counters into /metrics. */
static void render_envoy(FILE *f, void *arg)
{
	drld_envoy_stats_render(arg, f);
}
#endif

#if DRLD_HAVE_ENVOY
/* How --envoy-config is loaded (DRLD_ENVOY_*). */
static unsigned envoy_flags(const struct drld *d, const struct opts *o)
{
	/* drld's default memory store bounds keys per key prefix */
	return (d->adhoc_store != NULL ? DRLD_ENVOY_OWN_PREFIX : 0) |
	       (o->merge_domains ? DRLD_ENVOY_MERGE_DOMAINS : 0);
}
#endif

/* The Envoy service's state: its counters and --envoy-config. Returns -1
 * to go on, or an exit status. */
static int setup_envoy(struct drld *d, const struct opts *o)
{
	d->envoy_shadow = o->shadow;
	d->envoy_headers = o->grpc_headers;
	d->envoy_stop_increment = o->stop_increment;
#if DRLD_HAVE_ENVOY
	char msg[DRLD_ENVOY_MSG_MAX];
	struct drld_envoy_config *ec = NULL;
	if (drld_envoy_stats_new(&d->envoy_stats) != 0) {
		fputs("drld: out of memory\n", stderr);
		return EXIT_SERVE;
	}
	drld_envoy_slot_init(&d->envoy, NULL);
	drld_metrics_extra(d->metrics, render_envoy, d->envoy_stats);
	if (o->envoy_config != NULL &&
	    drld_envoy_config_load(&ec, o->envoy_config, d->store,
				   envoy_flags(d, o), d->envoy_stats, msg,
				   sizeof msg) != 0) {
		fprintf(stderr, "drld: bad --envoy-config: %s\n", msg);
		return EXIT_USAGE;
	}
	drld_envoy_swap(&d->envoy, ec);
#endif
	return -1;
}

/* Make everything but the HTTP side. Returns -1 to go on, or an exit
 * status (what was made is freed by teardown()). */
static int setup(struct drld *d, const struct opts *o, char **config_store)
{
	char msg[DRLD_CONFIG_MSG_MAX];
	struct drld_config *cfg;

	if (drld_metrics_new(&d->metrics) != 0 ||
	    (d->adhoc_stats = drld_metrics_rule(d->metrics, "adhoc")) == NULL) {
		fputs("drld: out of memory\n", stderr);
		return EXIT_SERVE;
	}
	int st = open_store(d, o, config_store);
	if (st >= 0)
		return st;
	if (drld_adhoc_new(&d->adhoc,
			   d->adhoc_store ? d->adhoc_store : d->store,
			   (size_t)o->max_specs, d->adhoc_stats) != 0) {
		fputs("drld: out of memory\n", stderr);
		return EXIT_SERVE;
	}
	if (drld_config_load(&cfg, o->config, d->store, d->metrics, msg,
			     sizeof msg) != 0) {
		fprintf(stderr, "drld: bad config: %s\n", msg);
		return EXIT_USAGE;
	}
	drld_config_slot_init(&d->config, cfg);
	return setup_envoy(d, o);
}

static void teardown(struct drld *d)
{
#if DRLD_HAVE_ENVOY
	if (d->envoy_stats != NULL) { /* setup_envoy() made them */
		drld_envoy_slot_fini(&d->envoy);
		drld_envoy_stats_free(d->envoy_stats);
	}
#endif
	if (d->config.cur != NULL)
		drld_config_slot_fini(&d->config);
	drld_adhoc_free(d->adhoc);
	drl_store_free(d->adhoc_store);
	drl_store_free(d->store);
	drld_metrics_free(d->metrics);
}

/* SIGHUP for --envoy-config: as reload() below. */
static void reload_envoy(struct drld *d, const struct opts *o)
{
#if DRLD_HAVE_ENVOY
	char msg[DRLD_ENVOY_MSG_MAX];
	struct drld_envoy_config *ec;

	if (drld_envoy_config_load(&ec, o->envoy_config, d->store,
				   envoy_flags(d, o), d->envoy_stats, msg,
				   sizeof msg) != 0) {
		fprintf(stderr,
			"drld: reload failed, keeping the old envoy config: "
			"%s\n",
			msg);
		drld_metrics_reload(d->metrics, false);
		return;
	}
	fprintf(stderr, "drld: reloaded %s: %zu domains\n", o->envoy_config,
		ec->ndomains);
	drld_envoy_swap(&d->envoy, ec);
	drld_metrics_reload(d->metrics, true);
#else
	(void)d;
	(void)o;
#endif
}

/* SIGHUP: load the config again; swap it in when valid, else report it
 * and keep the old one. Requests go on meanwhile in the HTTP threads. */
static void reload(struct drld *d, const struct opts *o,
		   const char *config_store)
{
	char msg[DRLD_CONFIG_MSG_MAX];
	struct drld_config *cfg;

	if (o->envoy_config != NULL)
		reload_envoy(d, o);
	if (o->config == NULL) {
		if (o->envoy_config == NULL)
			fputs("drld: SIGHUP: no --config to reload\n", stderr);
		return;
	}
	if (drld_config_load(&cfg, o->config, d->store, d->metrics, msg,
			     sizeof msg) != 0) {
		fprintf(stderr,
			"drld: reload failed, keeping the old config: "
			"%s\n",
			msg);
		drld_metrics_reload(d->metrics, false);
		return;
	}
	if (o->store == NULL &&
	    !(cfg->store == NULL
		      ? config_store == NULL
		      : config_store != NULL &&
				strcmp(cfg->store, config_store) == 0)) {
		fprintf(stderr,
			"drld: reload failed, keeping the old config: "
			"%s: \"store\" cannot change on reload "
			"(restart drld)\n",
			o->config);
		drld_config_release(cfg);
		drld_metrics_reload(d->metrics, false);
		return;
	}
	fprintf(stderr,
		"drld: reloaded %s: %zu rules, %zu protected "
		"prefixes\n",
		o->config, cfg->nrules, cfg->nprotect);
	drld_config_swap(&d->config, cfg);
	drld_metrics_reload(d->metrics, true);
}

/* What the reload thread needs. */
struct reload_arg {
	struct drld *d;
	const struct opts *o;
	const char *config_store;
};

/* The reload thread's work for one SIGHUP. */
static void reload_run(void *p)
{
	const struct reload_arg *a = p;
	reload(a->d, a->o, a->config_store);
}

/* The config watcher's callback: a reload, as on SIGHUP. */
static void watch_kick(void *arg)
{
	drld_reloader_kick(arg);
}

/* Print the line tests and scripts wait for. */
static void say_listening(const struct opts *o, unsigned port)
{
	char host[INET6_ADDRSTRLEN];
	const struct sockaddr_storage *ss = &o->http.addr;

	if (ss->ss_family == AF_INET6) {
		inet_ntop(AF_INET6,
			  &((const struct sockaddr_in6 *)ss)->sin6_addr, host,
			  sizeof host);
		fprintf(stderr, "drld: listening on [%s]:%u\n", host, port);
	} else {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr,
			  host, sizeof host);
		fprintf(stderr, "drld: listening on %s:%u\n", host, port);
	}
}

#if DRLD_HAVE_ENVOY
/* Print the line tests wait for: "drld: grpc listening on HOST:PORT",
 * the host as given, the port as bound. */
static void say_grpc(const char *listen, unsigned port)
{
	if (drld_is_unix_listen(listen)) {
		fprintf(stderr, "drld: grpc listening on %s\n", listen);
		return;
	}
	const char *colon = strrchr(listen, ':');
	fprintf(stderr, "drld: grpc listening on %.*s:%u\n",
		(int)(colon - listen), listen, port);
}
#endif

/* Serve until SIGTERM/SIGINT, reloading on SIGHUP. Returns the exit
 * status. */
static int serve(struct drld *d, const struct opts *o, int sfd,
		 const char *config_store)
{
	char msg[256];
	struct drld_http *h;

	if (drld_http_start(&h, d, &o->http, msg, sizeof msg) != 0) {
		fprintf(stderr, "drld: --listen %s: %s\n", o->listen, msg);
		return EXIT_SERVE;
	}
#if DRLD_HAVE_ENVOY
	struct drld_grpc *g = NULL;
	struct drld_grpc_opts go = o->grpc;
	if (d->store_in_process)
		go.deciders = 0;
	go.preface_timeout_s = o->http.timeout_s;
	if (o->grpc_listen != NULL &&
	    drld_grpc_start(&g, d, o->grpc_listen, &go, msg, sizeof msg) != 0) {
		fprintf(stderr, "drld: --grpc-listen %s: %s\n", o->grpc_listen,
			msg);
		(void)drld_http_stop(h, 0);
		return EXIT_SERVE;
	}
	if (g != NULL)
		say_grpc(o->grpc_listen, drld_grpc_port(g));
#endif
	struct drld_reloader *rl = NULL;
	struct reload_arg ra = {d, o, config_store};
	int rc = drld_reloader_start(&rl, reload_run, &ra);
	if (rc != 0) {
		fprintf(stderr, "drld: the reload thread: %s\n", strerror(rc));
#if DRLD_HAVE_ENVOY
		(void)drld_grpc_stop(g, 0);
#endif
		(void)drld_http_stop(h, 0);
		return EXIT_SERVE;
	}
	struct drld_watcher *wt = NULL;
	const char *watched[] = {o->config, o->envoy_config};
	if (o->watch_config && drld_watcher_start(&wt, watched, 2, watch_kick,
						  rl, msg, sizeof msg) != 0) {
		fprintf(stderr, "drld: --watch-config: %s\n", msg);
		rc = EXIT_SERVE;
	}
	if (rc == EXIT_SERVE) {
		(void)drld_reloader_stop(rl);
#if DRLD_HAVE_ENVOY
		(void)drld_grpc_stop(g, 0);
#endif
		(void)drld_http_stop(h, 0);
		return EXIT_SERVE;
	}
	say_listening(o, drld_http_port(h));
	for (;;) {
		struct signalfd_siginfo si;
		ssize_t got = read(sfd, &si, sizeof si);
		if (got < 0 && errno == EINTR)
			continue;
		if (got != (ssize_t)sizeof si) {
			perror("drld: reading signals");
			break;
		}
		if (si.ssi_signo == SIGHUP) {
			drld_reloader_kick(rl);
			continue;
		}
		fprintf(stderr, "drld: %s: stopping\n",
			si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
		break;
	}
	drld_watcher_stop(wt); /* no reload is asked for after this */
	unsigned drain =
		o->drain_s >= 0 ? (unsigned)o->drain_s : o->http.timeout_s;
	bool stopped = true;
#if DRLD_HAVE_ENVOY
	stopped = drld_grpc_stop(g, drain);
#endif
	if (!drld_http_stop(h, drain) || !stopped) {
		/* threads still wait in a stalled store, their requests
		 * answered 503 and their calls cancelled (http/http.c,
		 * envoy/grpc_service.cc): end the process with them in it,
		 * as below */
		fflush(NULL);
		_exit(EXIT_OK);
	}
	if (!drld_reloader_stop(rl)) {
		/* the reload uses the store and the limits teardown() would
		 * free: end the process with the reload in it (nothing is
		 * served any more; the old config was never replaced) */
		fputs("drld: a reload is still reading the config; exiting "
		      "without waiting for it\n",
		      stderr);
		fflush(NULL);
		_exit(EXIT_OK);
	}
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	struct opts o = {0};
	struct drld d = {0};
	char *config_store = NULL;
	sigset_t set;
	int st = parse_args(argc, argv, &o);

	if (st >= 0)
		return st;
	char msg[512];
	if (o.grpc.tls_cert != NULL &&
	    drld_tls_check(o.grpc.tls_cert, o.grpc.tls_key,
			   o.grpc.tls_client_ca, msg, sizeof msg) != 0) {
		fprintf(stderr, "drld: %s\n", msg);
		return EXIT_USAGE;
	}
	/* before any thread exists (the store's, the near caches', the
	 * HTTP pool): every thread inherits the mask, and only the
	 * signalfd sees these signals */
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	signal(SIGPIPE, SIG_IGN);
	int sfd = -1;
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0 ||
	    (sfd = signalfd(-1, &set, SFD_CLOEXEC)) < 0) {
		perror("drld: signalfd");
		return EXIT_SERVE;
	}
	/* a block of 1 MiB or more (a large request body, its JSON string)
	 * goes back to the system when freed: glibc's threshold otherwise
	 * rises to the largest block freed, and a few 50 MB bodies kept
	 * ~1 GB resident after they were answered (issue 33) */
	(void)mallopt(M_MMAP_THRESHOLD, 1 << 20);
	st = setup(&d, &o, &config_store);
	if (st < 0)
		st = serve(&d, &o, sfd, config_store);
	teardown(&d);
	free(config_store);
	close(sfd);
	return st;
}
