/*
 * The ceiling of one event-loop client on one connection (a benchmark's
 * tool, built by scripts/bench_client.sh): what a fixed-window decision
 * sends with tx=auto, INCRBY and PEXPIRE of one key of 10,000, with
 * INFLIGHT decisions in flight, nothing else done per decision (the
 * commands formatted before the clock starts, no decision made): each
 * round reads what came, counts the decisions whose two replies are in,
 * sends as many new ones, and writes them in one write (what libdrl's
 * loop does, minus the library). Prints "decisions seconds".
 *
 *   hiredis_ceiling PORT SECONDS INFLIGHT
 */
#include "ceiling_cmds.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void send_one(redisContext *c, unsigned *seed)
{
	int k = (int)(rand_r(seed) % KEYS);
	redisAppendFormattedCommand(c, cmds[k], lens[k]);
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	double secs = atof(argv[2]);
	int inflight = atoi(argv[3]);
	redisContext *c = redisConnect("127.0.0.1", atoi(argv[1]));
	if (c == NULL || c->err)
		return 1;
	format_all();
	unsigned seed = 1;
	long done = 0, replies = 0;
	for (int i = 0; i < inflight; i++)
		send_one(c, &seed);
	double t0 = now_s(), end = t0 + secs;
	int wdone = 0;
	while (now_s() < end) {
		do {
			if (redisBufferWrite(c, &wdone) != REDIS_OK)
				return 1;
		} while (!wdone);
		if (redisBufferRead(c) != REDIS_OK)
			return 1;
		void *r;
		int fresh = 0;
		while (redisGetReplyFromReader(c, &r) == REDIS_OK && r) {
			freeReplyObject(r);
			if (++replies % 2 == 0) {
				done++;
				fresh++;
			}
		}
		for (int i = 0; i < fresh; i++)
			send_one(c, &seed);
	}
	printf("%ld %f\n", done, now_s() - t0);
	redisFree(c);
	return 0;
}
