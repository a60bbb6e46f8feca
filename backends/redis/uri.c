/*
 * The Redis store's URI into an rstore, declared in backends/redis/uri.h:
 * redis://, redis+unix://, redis-cluster:// and redis-sentinel:// and
 * their TLS twins (their options in backends/redis/redis.h,
 * backends/redis/cluster.h and backends/redis/sentinel.h), everything checked
 * before any connection is made. The store (backends/redis/store.c) then fills
 * in its methods.
 */
#include "uri.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_PORT 6379
#define DEFAULT_TIMEOUT_MS 1000
#define TIMEOUT_MS_MAX 3600000
#define DEFAULT_POOL 16
#define POOL_MAX 1024
#define DEFAULT_PIPELINES 1
#define PIPELINES_MAX 64
#define PREFIX_MAX 128 /* as memcached.c: keys stay well below Redis's limits */
#define DB_MAX INT32_MAX

/* Copy of s[0..n) as a C string, or NULL. */
char *drl__redis_dup_n(const char *p, size_t n)
{
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, p, n);
		d[n] = '\0';
	}
	return d;
}

/* Parse "host", "host:port", "[v6]" or "[v6]:port" into s->host, s->port. */
static int parse_hosts(rstore *s, const char *hosts, drl_error *err)
{
	if (hosts == NULL || hosts[0] == '\0')
		return drl_error_set(err, DRL_EINVAL,
				     "redis URI has no host (expected "
				     "redis://host[:port][/db])");
	if (strchr(hosts, ','))
		return drl_error_set(err, DRL_EINVAL,
				     "redis URI names several hosts "
				     "(\"%.64s\"); a redis store takes one",
				     hosts);
	drl_hostport hp;
	int rc = drl_hostport_parse(hosts, strlen(hosts), DEFAULT_PORT,
				    "redis URI", &hp, err);
	if (rc)
		return rc;
	s->host = drl__redis_dup_n(hp.host, strlen(hp.host));
	if (s->host == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	s->port = hp.port;
	snprintf(s->where, sizeof s->where, "%s%.96s%s:%d", hp.ipv6 ? "[" : "",
		 s->host, hp.ipv6 ? "]" : "", s->port);
	return 0;
}

/* The TLS options (rediss, rediss-cluster) into s->tls, files read now
 * (a missing CA or key fails at open); on another scheme, DRL_EINVAL
 * for any of them. tls_verify=no is allowed, and the tools say it on
 * stderr (drl_uri_insecure); the library prints nothing. */
static int parse_tls(rstore *s, drl_uri *u, bool tls, drl_error *err)
{
	static const char *const names[] = {"tls_ca",          "tls_ca_dir",
					    "tls_cert",        "tls_key",
					    "tls_server_name", "tls_verify"};
	const char *v[6];
	bool any = false;
	for (size_t i = 0; i < 6; i++) {
		v[i] = drl_uri_option(u, names[i]);
		any = any || v[i];
	}
	if (!tls) {
		if (any)
			return drl_error_set(err, DRL_EINVAL,
					     "URI options tls_* need a TLS "
					     "scheme (rediss://, "
					     "rediss-cluster:// or "
					     "rediss-sentinel://)");
		return 0;
	}
	drl__tls_opts o = {.ca_file = v[0],
			   .ca_dir = v[1],
			   .cert_file = v[2],
			   .key_file = v[3],
			   .server_name = v[4],
			   .verify = true};
	if (v[5] && strcmp(v[5], "no") == 0)
		o.verify = false;
	else if (v[5] && strcmp(v[5], "yes") != 0)
		return drl_error_set(err, DRL_EINVAL,
				     "URI option tls_verify=\"%.32s\": "
				     "expected yes or no",
				     v[5]);
	if (o.server_name &&
	    (o.server_name[0] == '\0' || strlen(o.server_name) > 253))
		return drl_error_set(err, DRL_EINVAL,
				     "URI option tls_server_name: expected "
				     "a host name of 1 to 253 bytes");
	return drl__tls_new(&s->tls, &o, err);
}

/* Everything the URI says, checked before any connection is made. */
int drl__redis_parse_uri(rstore *s, drl_uri *u, bool *server_clock_out,
			 drl_error *err)
{
	int64_t v;
	int rc;
	const char *scheme = drl_uri_scheme(u);
	bool tls = strcmp(scheme, "rediss") == 0 ||
		   strcmp(scheme, "rediss-cluster") == 0 ||
		   strcmp(scheme, "rediss-sentinel") == 0;
	s->is_unix = strcmp(scheme, "redis+unix") == 0;
	s->cluster = strcmp(scheme, "redis-cluster") == 0 ||
		     strcmp(scheme, "rediss-cluster") == 0;
	s->sentinel = strcmp(scheme, "redis-sentinel") == 0 ||
		      strcmp(scheme, "rediss-sentinel") == 0;
	if (!s->is_unix && !s->cluster && !s->sentinel && !tls &&
	    strcmp(scheme, "redis") != 0)
		return drl_error_set(err, DRL_EINVAL,
				     "scheme \"%.32s\" is not redis, rediss, "
				     "redis+unix, redis-cluster, "
				     "rediss-cluster, redis-sentinel or "
				     "rediss-sentinel",
				     scheme);
	rc = parse_tls(s, u, tls, err);
	if (rc)
		return rc;

	/* auto (the default): each algorithm the cheapest exact way, the
	 * counters by plain commands (backends/redis/counter.c), the rest
	 * by their scripts (by the module's DRL.TWIN on a connection whose
	 * server has it); lua: every algorithm by its script; watch:
	 * WATCH/MULTI/EXEC, no script; module: every algorithm by the
	 * Redis module's DRL.TWIN (backends/redis/module.c). */
	const char *tx = drl_uri_option(u, "tx");
	s->watch_tx = false;
	s->module_tx = false;
	s->plain_counters = false;
	s->auto_twin = false;
	if (tx == NULL || strcmp(tx, "auto") == 0)
		s->plain_counters = s->auto_twin = true;
	else if (strcmp(tx, "watch") == 0)
		s->watch_tx = true;
	else if (strcmp(tx, "module") == 0)
		s->module_tx = true;
	else if (strcmp(tx, "lua") != 0)
		return drl_error_set(err, DRL_EINVAL,
				     "URI option tx=\"%.32s\": expected auto, "
				     "lua or watch (or module: the Redis "
				     "module)",
				     tx);

	const char *clock = drl_uri_option(u, "clock");
	bool server_clock = false;
	if (clock == NULL || strcmp(clock, "client") == 0)
		server_clock = false;
	else if (strcmp(clock, "server") == 0)
		server_clock = true;
	else
		return drl_error_set(err, DRL_EINVAL,
				     "URI option clock=\"%.32s\": expected "
				     "client or server",
				     clock);

	/* the module is sent the time; its own clock: not done yet */
	if (s->module_tx && server_clock)
		return drl_error_set(err, DRL_EINVAL,
				     "URI options tx=module and clock=server: "
				     "tx=module takes the client's clock only");

	rc = drl_uri_option_int(u, "timeout_ms", 1, TIMEOUT_MS_MAX,
				DEFAULT_TIMEOUT_MS, &s->timeout_ms, err);
	if (rc)
		return rc;
	s->timeout.tv_sec = (time_t)(s->timeout_ms / 1000);
	s->timeout.tv_usec = (suseconds_t)(s->timeout_ms % 1000) * 1000;

	rc = drl_uri_option_int(u, "pool", 1, POOL_MAX, DEFAULT_POOL, &v, err);
	if (rc == 0)
		rc = drl_uri_option_lazy(u, &s->lazy, err);
	if (rc)
		return rc;
	s->cap = (size_t)v;
	rc = drl_uri_option_int(u, "pipelines", 0, PIPELINES_MAX,
				DEFAULT_PIPELINES, &v, err);
	if (rc)
		return rc;
	s->npipes = (size_t)v;

	const char *prefix = drl_uri_option(u, "prefix");
	if (prefix) {
		s->prefixlen = strlen(prefix);
		if (s->prefixlen > PREFIX_MAX)
			return drl_error_set(err, DRL_EINVAL,
					     "URI option prefix is %zu bytes; "
					     "at most %d",
					     s->prefixlen, PREFIX_MAX);
		s->prefix = drl__redis_dup_n(prefix, s->prefixlen);
		if (s->prefix == NULL)
			return drl_error_set(err, DRL_ENOMEM, "out of memory");
		/* A cluster routes by the key's {hash tag}: a brace in
		 * the prefix would make the prefix the tag. */
		if (s->cluster && strpbrk(s->prefix, "{}"))
			return drl_error_set(err, DRL_EINVAL,
					     "URI option prefix holds '{' or "
					     "'}' (a Redis Cluster routes by "
					     "the key's hash tag)");
	}

	bool db_option = drl_uri_option(u, "db") != NULL;
	rc = drl_uri_option_int(u, "db", 0, DB_MAX, 0, &s->db, err);
	if (rc)
		return rc;

	rc = drl_uri_check_all_used(u, err);
	if (rc)
		return rc;

	if (s->cluster) {
		/* The hosts are the cluster store's (seed nodes). */
		if (s->db != 0 ||
		    (drl_uri_path(u) && drl_uri_path(u)[0] != '\0'))
			return drl_error_set(err, DRL_EINVAL,
					     "redis-cluster URI names a "
					     "database; a Redis Cluster has "
					     "only database 0");
		snprintf(s->where, sizeof s->where, "cluster");
	} else if (s->sentinel) {
		/* The hosts are the sentinels and the path the master's
		 * name: the sentinel store's (backends/redis/sentinel.c);
		 * the database only by db=. */
		snprintf(s->where, sizeof s->where, "sentinel");
	} else if (s->is_unix) {
		if (drl_uri_hosts(u))
			return drl_error_set(err, DRL_EINVAL,
					     "redis+unix URI takes no host "
					     "(expected redis+unix:///path/to/"
					     "redis.sock)");
		if (drl_uri_path(u) == NULL || drl_uri_path(u)[0] != '/' ||
		    drl_uri_path(u)[1] == '\0')
			return drl_error_set(err, DRL_EINVAL,
					     "redis+unix URI needs an absolute "
					     "socket path (redis+unix:///path/"
					     "to/redis.sock)");
		s->host = drl__redis_dup_n(drl_uri_path(u),
					   strlen(drl_uri_path(u)));
		if (s->host == NULL)
			return drl_error_set(err, DRL_ENOMEM, "out of memory");
		snprintf(s->where, sizeof s->where, "%.120s", s->host);
	} else {
		rc = parse_hosts(s, drl_uri_hosts(u), err);
		if (rc)
			return rc;
		if (drl_uri_path(u) && drl_uri_path(u)[0] != '\0') {
			if (db_option)
				return drl_error_set(err, DRL_EINVAL,
						     "redis URI names the "
						     "database twice (path "
						     "and db=)");
			if (drl_parse_int(drl_uri_path(u),
					  strlen(drl_uri_path(u)), 0, DB_MAX,
					  &s->db) != 0)
				return drl_error_set(
					err, DRL_EINVAL,
					"redis URI database \"%.32s\": "
					"expected an integer in [0, %d]",
					drl_uri_path(u), DB_MAX);
		}
	}

	if (drl_uri_user(u) && drl_uri_password(u) == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "redis URI names a user but no password "
				     "(redis://user:password@host)");
	if (drl_uri_password(u)) {
		s->password = drl__redis_dup_n(drl_uri_password(u),
					       strlen(drl_uri_password(u)));
		if (drl_uri_user(u))
			s->user = drl__redis_dup_n(drl_uri_user(u),
						   strlen(drl_uri_user(u)));
		if (s->password == NULL || (drl_uri_user(u) && s->user == NULL))
			return drl_error_set(err, DRL_ENOMEM, "out of memory");
	}
	*server_clock_out = server_clock;
	return 0;
}
