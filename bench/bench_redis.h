/*
 * A redis-server for the benchmarks: started on a free loopback port with
 * persistence off, stopped after (bench_batch, bench_near).
 */
#ifndef DRL_BENCH_REDIS_H
#define DRL_BENCH_REDIS_H

#include <drl/drl.h>

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Start redis-server and wait until a store opens on it; writes its URI
 * ("redis://127.0.0.1:PORT?tx=lua") into uri. Its pid, or -1. */
pid_t bench_redis_start(char *uri, size_t cap);

/* The store a benchmark runs on, and the redis-server it started for it. */
typedef struct bench_target {
	drl_store *store;
	pid_t server; /* -1: none (a URI was given) */
	char uri[256];
} bench_target;

/* Open t's store on `given` when not NULL, else on a redis-server of its
 * own (bench_redis_start). false, said on stderr, when the server cannot
 * be started or the store opened. */
bool bench_target_open(bench_target *t, const char *given);

/* Free t's store and stop its redis-server. */
void bench_target_close(bench_target *t);

/* SIGTERM it and reap it (pid <= 0: nothing). */
void bench_redis_stop(pid_t pid);

/* CLOCK_MONOTONIC in seconds. */
double bench_mono(void);

#endif
