/*
 * Test fixture: start a real server process (redis-server, memcached) on a
 * free loopback port, wait until it accepts connections, stop it after.
 *
 * When the server binary is missing: under CI=true the start fails (the
 * test must fail); otherwise drl_fixture_start returns 1 and the test skips.
 */
#ifndef DRL_SERVER_FIXTURE_H
#define DRL_SERVER_FIXTURE_H

#include <sys/types.h>

typedef struct drl_server {
	pid_t pid;
	int port;
	char dir[256];            /* private temp dir (unix sockets, logs) */
	int kind;                 /* which server: for a restart */
	const char *const *extra; /* its extra arguments: kept by the caller */
} drl_server;

/* Start redis-server with persistence off on 127.0.0.1:<free port>.
 * Extra "--opt value" arguments may follow in extra_argv (NULL-terminated,
 * may be NULL). Returns 0 started, 1 binary missing and not under CI
 * (skip), -1 failure (message on stderr). */
int drl_fixture_redis_start(drl_server *s, const char *const *extra_argv);

/* Start redis-server as above with the plaintext port off (--port 0)
 * and TLS on the free port (--tls-port): extra_argv must give the
 * certificates (--tls-cert-file, --tls-key-file, --tls-ca-cert-file;
 * tests/tls_fixture.h makes them). Ready means the port accepts TCP
 * connections. Same return values. */
int drl_fixture_redis_tls_start(drl_server *s, const char *const *extra_argv);

/* drl_fixture_redis_tls_start for a cluster node (as
 * drl_fixture_redis_cluster_node_start, with --tls-cluster yes: its bus
 * and its slot map speak TLS). Same return values. */
int drl_fixture_redis_tls_cluster_node_start(drl_server *s,
					     const char *const *extra_argv);

/* Start redis-server as above with --cluster-enabled yes and
 * --cluster-config-file <dir>/nodes.conf, on a free port whose cluster bus
 * port (port + 10000) is free too; ready means both ports are listening.
 * The node is empty and alone: tests/cluster_fixture.h joins nodes into a
 * cluster. drl_fixture_restart brings it back with its nodes.conf (same
 * node ID). Same return values. */
int drl_fixture_redis_cluster_node_start(drl_server *s,
					 const char *const *extra_argv);

/* Start redis-sentinel on 127.0.0.1:<free port> with a config file of
 * its own in s->dir (port, bind, dir, then conf_lines, one line each,
 * e.g. "sentinel monitor m 127.0.0.1 6379 1"; NULL-terminated, kept by
 * the caller for a restart). Same return values; under CI=true a missing
 * redis-sentinel binary (package redis-sentinel) fails. */
int drl_fixture_redis_sentinel_start(drl_server *s,
				     const char *const *conf_lines);
/* The same, TLS only: "port 0" and "tls-port <port>" (the certificates
 * and tls-replication are the caller's config lines). */
int drl_fixture_redis_sentinel_tls_start(drl_server *s,
					 const char *const *conf_lines);

/* Start memcached on 127.0.0.1:<free port>; same return values. */
int drl_fixture_memcached_start(drl_server *s, const char *const *extra_argv);

/* Stop (SIGTERM, then SIGKILL after 2 s) and reap; remove the temp dir. */
void drl_fixture_stop(drl_server *s);

/* SIGKILL the server and reap it; port and dir stay for a restart. */
void drl_fixture_kill(drl_server *s);

/* Start the server again on the same port, with the same arguments (the
 * caller keeps extra_argv alive), after killing it if it still runs:
 * the state is gone, as after a crash. 0 ready, -1 failure. */
int drl_fixture_restart(drl_server *s);

/* SIGSTOP / SIGCONT the server (fault tests). */
int drl_fixture_pause(drl_server *s);
int drl_fixture_resume(drl_server *s);

/* 1 when the environment variable CI is "true". */
int drl_fixture_under_ci(void);

/* A test group's setup with both servers: start redis-server into *redis
 * and memcached into *mc; *have_redis and *have_mc say which run (a
 * missing binary is 0: its tests skip). 0, or -1 when a start failed.
 * drl_fixture_stop_pair stops the ones that run. */
int drl_fixture_start_pair(drl_server *redis, int *have_redis, drl_server *mc,
			   int *have_mc);
/* The same for a group with redis-server alone: 0 (*have says whether it
 * runs), or -1; drl_fixture_stop_redis stops it when it runs. */
int drl_fixture_start_redis(drl_server *redis, int *have);
void drl_fixture_stop_redis(drl_server *redis, int have);
void drl_fixture_stop_pair(drl_server *redis, int have_redis, drl_server *mc,
			   int have_mc);

#endif
