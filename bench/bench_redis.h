/*
 * A redis-server for the benchmarks: started on a free loopback port with
 * persistence off, stopped after (bench_batch, bench_near).
 */
#ifndef DRL_BENCH_REDIS_H
#define DRL_BENCH_REDIS_H

#include <drl/drl.h>

#include <stddef.h>
#include <sys/types.h>

/* Start redis-server and wait until a store opens on it; writes its URI
 * ("redis://127.0.0.1:PORT?tx=lua") into uri. Its pid, or -1. */
pid_t bench_redis_start(char *uri, size_t cap);

/* The store a benchmark runs on, its URI written into uri: `given` when
 * not NULL, else a redis-server of its own (bench_redis_start; *server
 * its pid, else left as it is). NULL, said on stderr, when the server
 * cannot be started or the store opened. */
drl_store *bench_redis_store(const char *given, char *uri, size_t cap,
			     pid_t *server);

/* SIGTERM it and reap it (pid <= 0: nothing). */
void bench_redis_stop(pid_t pid);

/* CLOCK_MONOTONIC in seconds. */
double bench_mono(void);

#endif
