/*
 * The ceiling of one event-loop client (a benchmark's tool, built by
 * scripts/bench_client.sh): what a fixed-window decision sends with
 * tx=auto, INCRBY and PEXPIRE of one key of 10,000, with INFLIGHT
 * decisions in flight over CONNS connections (default 1; INFLIGHT/CONNS
 * on each, the rest on the first ones), nothing else done per decision
 * (the commands formatted before the clock starts, no decision made):
 * each round reads what came on a connection, counts the decisions whose
 * two replies are in, sends as many new ones on that connection, and
 * writes them in one write (what libdrl's loop did before it wrote a
 * round in parts, minus the library: the two processes take turns, and
 * libdrl's loop now passes this figure; docs/performance.md).
 * With one connection the read blocks; with several, poll() says which
 * are readable. Prints "decisions seconds".
 *
 *   hiredis_ceiling PORT SECONDS INFLIGHT [CONNS]
 */
#include "ceiling_cmds.h"

#include <hiredis/hiredis.h>

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void send_one(redisContext *c, unsigned *seed)
{
	int k = (int)(rand_r(seed) % KEYS);
	redisAppendFormattedCommand(c, cmds[k], lens[k]);
}

#define CONNS_MAX 16

/* Write what c holds; 0, or -1 (a failed connection). */
static int flush(redisContext *c)
{
	int wdone = 0;
	do {
		if (redisBufferWrite(c, &wdone) != REDIS_OK)
			return -1;
	} while (!wdone);
	return 0;
}

/* Read once from c (the socket is readable, or one connection blocks),
 * send a new decision for each one whose replies are all in: their
 * number, or -1. *replies counts c's replies (two per decision). */
static long round_on(redisContext *c, long *replies, unsigned *seed)
{
	if (redisBufferRead(c) != REDIS_OK)
		return -1;
	void *r;
	long fresh = 0;
	while (redisGetReplyFromReader(c, &r) == REDIS_OK && r) {
		freeReplyObject(r);
		if (++*replies % 2 == 0)
			fresh++;
	}
	for (long i = 0; i < fresh; i++)
		send_one(c, seed);
	return fresh;
}

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 5)
		return 2;
	double secs = atof(argv[2]);
	int inflight = atoi(argv[3]);
	int nconn = argc == 5 ? atoi(argv[4]) : 1;
	if (inflight < 1 || nconn < 1 || nconn > CONNS_MAX || nconn > inflight)
		return 2;
	redisContext *c[CONNS_MAX];
	struct pollfd pfd[CONNS_MAX];
	long replies[CONNS_MAX] = {0};
	for (int k = 0; k < nconn; k++) {
		c[k] = redisConnect("127.0.0.1", atoi(argv[1]));
		if (c[k] == NULL || c[k]->err)
			return 1;
		pfd[k] = (struct pollfd){.fd = c[k]->fd, .events = POLLIN};
	}
	format_all();
	unsigned seed = 1;
	long done = 0;
	for (int i = 0; i < inflight; i++)
		send_one(c[i % nconn], &seed);
	double t0 = now_s(), end = t0 + secs;
	for (int k = 0; k < nconn; k++)
		if (flush(c[k]) != 0)
			return 1;
	while (now_s() < end) {
		if (nconn > 1 && poll(pfd, (nfds_t)nconn, 100) < 0)
			return 1;
		for (int k = 0; k < nconn; k++) {
			if (nconn > 1 && !(pfd[k].revents & POLLIN))
				continue;
			long fresh = round_on(c[k], &replies[k], &seed);
			if (fresh < 0 || flush(c[k]) != 0)
				return 1;
			done += fresh;
		}
	}
	printf("%ld %f\n", done, now_s() - t0);
	for (int k = 0; k < nconn; k++)
		redisFree(c[k]);
	return 0;
}
