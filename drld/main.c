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
#include "common/args.h"
#include "common/insecure.h"
#include "common/json.h"
#include "common/memory_uri.h"
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
#include <getopt.h>
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

static const char synopsis[] =
	"usage: drld [--listen HOST:PORT] [--store URI] [--config FILE]\n"
	"            [--threads N] [--max-connections N]\n"
	"            [--max-connections-per-ip N] [--timeout-s N] [--drain-s "
	"N]\n"
	"            [--max-body BYTES] [--conn-memory BYTES] [--max-specs N]\n"
	"            [--memory-max-keys N] [--memory-max-keys-per-limit N]\n"
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
	"             [--grpc-tls-client-ca FILE [--grpc-tls-client-san "
	"NAME]]\n"
	"             [--grpc-tls-refresh S]]\n"
	"       drld --help | --version\n";

static const char details[] =
	"\n"
	"Serve rate-limit decisions over HTTP: POST /v1/check, GET /metrics,\n"
	"GET /healthz, and the path prefixes the config protects\n"
	"(docs/drld.md).\n"
	"\n"
	"  -l, --listen HOST:PORT  numeric IPv4 or [IPv6] address and port\n"
	"                          (default 127.0.0.1:8080; port 0 picks a\n"
	"                          free one, printed when ready)\n"
	"  -s, --store URI         the store every limit lives in (default:\n"
	"                          the config's \"store\", else memory://)\n"
	"  -c, --config FILE       named rules and protected prefixes (JSON);\n"
	"                          reloaded on SIGHUP\n"
	"  -t, --threads N         HTTP threads, each with its epoll\n"
	"                          (default 2, 1..64)\n"
	"      --max-connections N open connections at once (default 1024,\n"
	"                          1..100000)\n"
	"      --max-connections-per-ip N\n"
	"                          open connections from one client address\n"
	"                          (default 0: no bound; 0..100000)\n"
	"      --timeout-s N       close a connection idle this long, or\n"
	"                          whose request has not arrived whole in\n"
	"                          this long (default 10, 1..3600)\n"
	"      --drain-s N         on SIGTERM, how long the requests and\n"
	"                          gRPC calls in flight get to finish\n"
	"                          (default: --timeout-s, 0..3600); idle\n"
	"                          connections are closed at once\n"
	"      --max-body BYTES    largest /v1/check body; larger is 413\n"
	"                          (default 8192, 64..67108864)\n"
	"      --conn-memory BYTES memory per connection for the request "
	"line,\n"
	"                          headers and buffers; headers that do not\n"
	"                          fit are 431 (default 32768, 4096..1048576)\n"
	"      --max-specs N       limits given in requests (\"limit\") kept\n"
	"                          at once, least recently used evicted\n"
	"                          (default 256, 0..65536; 0 refuses them)\n"
	"      --memory-max-keys N on memory:// (the default, or --store's\n"
	"                          without max_keys=): keys kept for\n"
	"                          the configured limits, and as many again\n"
	"                          for those requests choose (default\n"
	"                          250000, 1..1000000000)\n"
	"      --memory-max-keys-per-limit N\n"
	"                          and of those, keys one limit may hold:\n"
	"                          a rule, an Envoy rate_limit, a spec\n"
	"                          (default a quarter of --memory-max-keys)\n";

/* The gRPC options' part of --help (one string would be longer than C99
 * compilers must support). */
static const char details_grpc[] =
	"      --grpc-listen HOST:PORT  also serve Envoy's rate limit service\n"
	"                          (gRPC ShouldRateLimit) there, or on the\n"
	"                          unix socket unix:/PATH; off by default\n"
	"                          (docs/envoy.md)\n"
	"      --envoy-config DIR  envoyproxy/ratelimit's YAML config: every\n"
	"                          *.yaml/*.yml of DIR; reloaded on SIGHUP\n"
	"      --shadow            answer every gRPC request OK, counting\n"
	"                          what would have been over limit\n"
	"      --grpc-headers      add RateLimit-Limit/-Remaining/-Reset to\n"
	"                          gRPC answers (response_headers_to_add)\n"
	"      --watch-config      reload --config and --envoy-config when\n"
	"                          they change on disk (inotify; a\n"
	"                          ConfigMap update too), as on SIGHUP\n"
	"                          (also RUNTIME_WATCH_ROOT=true)\n"
	"      --merge-domain-config\n"
	"                          a domain in several files of\n"
	"                          --envoy-config is one domain (also\n"
	"                          MERGE_DOMAIN_CONFIG=true)\n"
	"      --stop-cache-key-increment-when-overlimit\n"
	"                          count a call's descriptors all or\n"
	"                          nothing: none when one is over its limit\n"
	"                          (also STOP_CACHE_KEY_INCREMENT_WHEN_\n"
	"                          OVERLIMIT=true in the environment)\n"
	"      --grpc-threads N    threads that decide gRPC calls on a store\n"
	"                          over the network (default 16, 1..256;\n"
	"                          memory:// decides on the pollers)\n"
	"      --grpc-pollers N    gRPC shards: a thread each, answering\n"
	"                          the connections dealt to it (default:\n"
	"                          one per usable CPU, 1..8; max 64)\n"
	"      --grpc-queue N      gRPC calls that may wait for them; one\n"
	"                          more is RESOURCE_EXHAUSTED at once\n"
	"                          (default 4096, 1..65536)\n"
	"      --grpc-max-connection-age S\n"
	"                          ask a client to move to a new connection\n"
	"                          once one is S seconds old (GOAWAY), so\n"
	"                          long-lived clients spread over new drld\n"
	"                          (default 86400, 0..604800; 0: never)\n"
	"      --grpc-max-connection-age-grace S\n"
	"                          then close it after S more seconds\n"
	"                          (default 3600; 0: once its calls end)\n"
	"      --grpc-max-connection-idle S\n"
	"                          close a connection without a call for S\n"
	"                          seconds (GOAWAY; default 0: never,\n"
	"                          0..604800)\n"
	"      --grpc-tls-cert FILE, --grpc-tls-key FILE\n"
	"                          serve gRPC over TLS with this PEM\n"
	"                          certificate chain and unencrypted key\n"
	"      --grpc-tls-client-ca FILE\n"
	"                          and require client certificates signed by\n"
	"                          these PEM CAs (mutual TLS)\n"
	"      --grpc-tls-client-san NAME\n"
	"                          and that name in their subjectAltName\n"
	"      --grpc-tls-refresh S\n"
	"                          read the TLS files again every S seconds,\n"
	"                          serving renewed certificates (default 60,\n"
	"                          1..86400)\n"
	"  -h, --help              this text\n"
	"  -V, --version           the version\n"
	"\n"
	"Signals: SIGHUP reloads the config on a thread of its own (a bad\n"
	"one is reported and the old one kept); SIGTERM or SIGINT stop\n"
	"accepting, finish the requests in flight and exit 0, without\n"
	"waiting for a reload stuck in a read.\n"
	"\n"
	"Exit status: 0 stopped by a signal, 1 could not serve, 2 bad usage,\n"
	"store URI or config, 3 the store could not be reached.\n";

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

/* Report a usage error: "drld: " and the message, then the synopsis.
 * Returns 2. */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static int
usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("drld: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n%sTry 'drld --help' for more.\n", synopsis);
	return EXIT_USAGE;
}

/* A numeric option in [min, max] into *out, or a usage error (2). */
static int number(const char *name, const char *arg, int64_t min, int64_t max,
		  int64_t *out)
{
	if (!tl_parse_uint(arg, min, max, out))
		return usage_error("bad %s '%s': expected a whole number from "
				   "%lld to %lld",
				   name, arg, (long long)min, (long long)max);
	return -1;
}

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
	enum {
		O_MAXCONN = 256,
		O_PERIP,
		O_TIMEOUT,
		O_DRAIN,
		O_MAXBODY,
		O_CONNMEM,
		O_MAXSPECS,
		O_MEMKEYS,
		O_LIMITKEYS,
		O_GRPC,
		O_ENVOY,
		O_SHADOW,
		O_HEADERS,
		O_STOP_INCREMENT,
		O_MERGE_DOMAINS,
		O_WATCH,
		O_GRPC_THREADS,
		O_GRPC_POLLERS,
		O_GRPC_QUEUE,
		O_GRPC_AGE,
		O_GRPC_AGE_GRACE,
		O_GRPC_IDLE,
		O_TLS_CERT,
		O_TLS_KEY,
		O_TLS_CA,
		O_TLS_REFRESH,
		O_TLS_SAN
	};
	static const struct option longopts[] = {
		{"listen", required_argument, NULL, 'l'},
		{"store", required_argument, NULL, 's'},
		{"config", required_argument, NULL, 'c'},
		{"threads", required_argument, NULL, 't'},
		{"max-connections", required_argument, NULL, O_MAXCONN},
		{"max-connections-per-ip", required_argument, NULL, O_PERIP},
		{"timeout-s", required_argument, NULL, O_TIMEOUT},
		{"drain-s", required_argument, NULL, O_DRAIN},
		{"max-body", required_argument, NULL, O_MAXBODY},
		{"conn-memory", required_argument, NULL, O_CONNMEM},
		{"max-specs", required_argument, NULL, O_MAXSPECS},
		{"memory-max-keys", required_argument, NULL, O_MEMKEYS},
		{"memory-max-keys-per-limit", required_argument, NULL,
		 O_LIMITKEYS},
		{"grpc-listen", required_argument, NULL, O_GRPC},
		{"envoy-config", required_argument, NULL, O_ENVOY},
		{"shadow", no_argument, NULL, O_SHADOW},
		{"grpc-headers", no_argument, NULL, O_HEADERS},
		{"stop-cache-key-increment-when-overlimit", no_argument, NULL,
		 O_STOP_INCREMENT},
		{"merge-domain-config", no_argument, NULL, O_MERGE_DOMAINS},
		{"watch-config", no_argument, NULL, O_WATCH},
		{"grpc-threads", required_argument, NULL, O_GRPC_THREADS},
		{"grpc-pollers", required_argument, NULL, O_GRPC_POLLERS},
		{"grpc-queue", required_argument, NULL, O_GRPC_QUEUE},
		{"grpc-max-connection-age", required_argument, NULL,
		 O_GRPC_AGE},
		{"grpc-max-connection-age-grace", required_argument, NULL,
		 O_GRPC_AGE_GRACE},
		{"grpc-max-connection-idle", required_argument, NULL,
		 O_GRPC_IDLE},
		{"grpc-tls-cert", required_argument, NULL, O_TLS_CERT},
		{"grpc-tls-key", required_argument, NULL, O_TLS_KEY},
		{"grpc-tls-client-ca", required_argument, NULL, O_TLS_CA},
		{"grpc-tls-refresh", required_argument, NULL, O_TLS_REFRESH},
		{"grpc-tls-client-san", required_argument, NULL, O_TLS_SAN},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	int64_t threads = 2, maxconn = 1024, timeout = 10, maxbody = 8192;
	int64_t perip = 0;
	int64_t deciders = DRLD_GRPC_DECIDERS_DEFAULT;
	int64_t pollers = 0; /* drld_grpc_pollers_default() */
	int64_t queue = DRLD_GRPC_QUEUE_DEFAULT, age = DRLD_GRPC_AGE_DEFAULT;
	int64_t age_grace = DRLD_GRPC_AGE_GRACE_DEFAULT, idle = 0;
	int64_t tls_refresh = DRLD_GRPC_TLS_REFRESH_DEFAULT;
	int64_t connmem = 32768;
	int c, st = -1;

	o->listen = "127.0.0.1:8080";
	o->max_specs = 256;
	/* 250,000 keys a store, two stores (rules, ad-hoc limits): at
	 * 200-450 bytes a key, 0.1-0.23 GB when both are full, inside the
	 * 512 MiB deploy/kubernetes.yaml gives the pod (1,000,000 was up
	 * to 0.9 GB: an OOM kill at the bound). docs/security.md 5. */
	o->memory_max_keys = 250000;
	o->drain_s = -1;
	while (st < 0 && (c = getopt_long(argc, argv, ":l:s:c:t:hV", longopts,
					  NULL)) != -1) {
		switch (c) {
		case 'l':
			o->listen = optarg;
			break;
		case 's':
			o->store = optarg;
			break;
		case 'c':
			o->config = optarg;
			break;
		case 't':
			st = number("--threads", optarg, 1, 64, &threads);
			break;
		case O_MAXCONN:
			st = number("--max-connections", optarg, 1, 100000,
				    &maxconn);
			break;
		case O_PERIP:
			st = number("--max-connections-per-ip", optarg, 0,
				    100000, &perip);
			break;
		case O_TIMEOUT:
			st = number("--timeout-s", optarg, 1, 3600, &timeout);
			break;
		case O_DRAIN:
			st = number("--drain-s", optarg, 0, 3600, &o->drain_s);
			break;
		case O_MAXBODY:
			st = number("--max-body", optarg, 64, 64 << 20,
				    &maxbody);
			break;
		case O_CONNMEM:
			st = number("--conn-memory", optarg, 4096, 1 << 20,
				    &connmem);
			break;
		case O_MAXSPECS:
			st = number("--max-specs", optarg, 0, 65536,
				    &o->max_specs);
			break;
		case O_MEMKEYS:
			st = number("--memory-max-keys", optarg, 1, 1000000000,
				    &o->memory_max_keys);
			break;
		case O_LIMITKEYS:
			st = number("--memory-max-keys-per-limit", optarg, 1,
				    1000000000, &o->memory_limit_keys);
			break;
		case O_GRPC:
			o->grpc_listen = optarg;
			break;
		case O_ENVOY:
			o->envoy_config = optarg;
			break;
		case O_SHADOW:
			o->shadow = true;
			break;
		case O_HEADERS:
			o->grpc_headers = true;
			break;
		case O_STOP_INCREMENT:
			o->stop_increment = true;
			break;
		case O_MERGE_DOMAINS:
			o->merge_domains = true;
			break;
		case O_WATCH:
			o->watch_config = true;
			break;
		case O_GRPC_THREADS:
			st = number("--grpc-threads", optarg, 1,
				    DRLD_GRPC_DECIDERS_MAX, &deciders);
			break;
		case O_GRPC_POLLERS:
			st = number("--grpc-pollers", optarg, 1,
				    DRLD_GRPC_POLLERS_MAX, &pollers);
			break;
		case O_GRPC_QUEUE:
			st = number("--grpc-queue", optarg, 1,
				    DRLD_GRPC_QUEUE_MAX, &queue);
			break;
		case O_GRPC_AGE:
			st = number("--grpc-max-connection-age", optarg, 0,
				    DRLD_GRPC_AGE_MAX, &age);
			break;
		case O_GRPC_IDLE:
			st = number("--grpc-max-connection-idle", optarg, 0,
				    DRLD_GRPC_AGE_MAX, &idle);
			break;
		case O_GRPC_AGE_GRACE:
			st = number("--grpc-max-connection-age-grace", optarg,
				    0, DRLD_GRPC_AGE_MAX, &age_grace);
			break;
		case O_TLS_CERT:
			o->grpc.tls_cert = optarg;
			break;
		case O_TLS_KEY:
			o->grpc.tls_key = optarg;
			break;
		case O_TLS_CA:
			o->grpc.tls_client_ca = optarg;
			break;
		case O_TLS_SAN:
			o->grpc.tls_client_san = optarg;
			break;
		case O_TLS_REFRESH:
			st = number("--grpc-tls-refresh", optarg, 1,
				    DRLD_GRPC_TLS_REFRESH_MAX, &tls_refresh);
			break;
		case 'h':
			fputs(synopsis, stdout);
			fputs(details, stdout);
			fputs(details_grpc, stdout);
			return EXIT_OK;
		case 'V':
			printf("drld %s\n", drl_version());
			return EXIT_OK;
		case ':':
			return usage_error("option '%s' needs a value",
					   argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'",
					   argv[optind - 1]);
		}
	}
	if (st >= 0)
		return st;
	if ((st = env_bool("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
			   &o->stop_increment)) >= 0 ||
	    (st = env_bool("MERGE_DOMAIN_CONFIG", &o->merge_domains)) >= 0 ||
	    (st = env_bool("RUNTIME_WATCH_ROOT", &o->watch_config)) >= 0)
		return st;
	if (!DRLD_HAVE_ENVOY && (o->grpc_listen || o->envoy_config))
		return usage_error("this drld was built without gRPC "
				   "(meson -Dgrpc=enabled)");
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
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
	o->grpc.deciders = (unsigned)deciders;
	o->grpc.pollers = (unsigned)pollers;
	o->grpc.queue = (unsigned)queue;
	o->grpc.max_connection_age_s = (unsigned)age;
	o->grpc.max_connection_age_grace_s = (unsigned)age_grace;
	o->grpc.max_connection_idle_s = (unsigned)idle;
	o->grpc.tls_refresh_s = (unsigned)tls_refresh;
	o->http.threads = (unsigned)threads;
	o->http.max_connections = (unsigned)maxconn;
	o->http.max_per_ip = (unsigned)perip;
	o->http.timeout_s = (unsigned)timeout;
	o->http.max_body = (size_t)maxbody;
	o->http.conn_memory = (size_t)connmem;
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
