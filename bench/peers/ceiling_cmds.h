/*
 * What the ceiling clients (hiredis_ceiling.c, threads_ceiling.c) send per
 * decision: a fixed-window decision's INCRBY and PEXPIRE (tx=auto), of one
 * key of 10,000 as long as libdrl's (about 70 bytes), formatted once at
 * start (a client's own formatting is not what is measured); and the
 * clock they time with. Header-only: each is one file built by
 * scripts/bench_client.sh.
 */
#ifndef CEILING_CMDS_H
#define CEILING_CMDS_H

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

#define KEYS 10000
static char *cmds[KEYS];
static size_t lens[KEYS];

static void format_all(void)
{
	for (int i = 0; i < KEYS; i++) {
		char key[96], *a = NULL, *b = NULL;
		snprintf(key, sizeof key,
			 "drl:fixed_window:1000000/1m:ceiling-user-key-%05d:"
			 "{29603620}",
			 i);
		int la = redisFormatCommand(&a, "INCRBY %s 1", key);
		int lb = redisFormatCommand(&b, "PEXPIRE %s 61000", key);
		cmds[i] = malloc((size_t)(la + lb));
		memcpy(cmds[i], a, (size_t)la);
		memcpy(cmds[i] + la, b, (size_t)lb);
		lens[i] = (size_t)(la + lb);
		free(a);
		free(b);
	}
}

#endif
