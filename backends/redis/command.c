/*
 * The Redis store's single commands: DEL (drl_reset) and TIME
 * (clock=server), each one round trip through the call layer (call.c).
 */
#include "internal.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- single commands: DEL (drl_reset), TIME (clock=server) -------------- */

/* DEL's reply: how many keys it removed. */
static int read_del(rstore *s, const redisReply *r, void *arg, drl_error *err)
{
	(void)arg;
	if (r->type == REDIS_REPLY_INTEGER)
		return 0;
	return drl__redis_refused(
		s, r, drl__redis_reply_error(s, "DEL", r, false, err));
}

/* One DEL of every key: atomic on the server (a script or a transaction
 * sees all of them or none gone). On a cluster node the keys must share a
 * slot (backends/redis/cluster.c groups them). */
int drl__redis_del(drl_backend *b, size_t n, const drl_bytes *keys,
		   drl_error *err)
{
	rstore *s = (rstore *)b;
	if (n == 0)
		return 0;
	if (keys == NULL || n > ARGS_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "redis %s: DEL of %zu keys", s->where, n);
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += s->prefixlen + keys[i].len;
	const char **argv = malloc((n + 1) * sizeof *argv);
	size_t *lens = malloc((n + 1) * sizeof *lens);
	char *buf = malloc(total ? total : 1);
	int rc = 0;
	if (argv == NULL || lens == NULL || buf == NULL)
		rc = drl_error_set(err, DRL_ENOMEM, "redis %s: out of memory",
				   s->where);
	if (rc == 0) {
		char *p = buf;
		argv[0] = "DEL";
		lens[0] = 3;
		for (size_t i = 0; i < n; i++) {
			if (s->prefixlen)
				memcpy(p, s->prefix, s->prefixlen);
			if (keys[i].len)
				memcpy(p + s->prefixlen, keys[i].data,
				       keys[i].len);
			argv[i + 1] = p;
			lens[i + 1] = s->prefixlen + keys[i].len;
			p += lens[i + 1];
		}
		rc = drl__redis_ask(s, (int)(n + 1), argv, lens, read_del, NULL,
				    err);
	}
	free(argv);
	free(lens);
	free(buf);
	return rc;
}

/* TIME's reply: ["seconds", "microseconds"] into *arg (int64_t). */
static int read_time(rstore *s, const redisReply *t, void *arg, drl_error *err)
{
	int64_t sec, usec;
	if (t->type == REDIS_REPLY_ARRAY && t->elements == 2 &&
	    t->element[0]->type == REDIS_REPLY_STRING &&
	    t->element[1]->type == REDIS_REPLY_STRING &&
	    drl_parse_int(t->element[0]->str, t->element[0]->len, 0,
			  INT64_C(9000000000), &sec) == 0 &&
	    drl_parse_int(t->element[1]->str, t->element[1]->len, 0, 999999,
			  &usec) == 0) {
		*(int64_t *)arg = sec * 1000000 + usec;
		return 0;
	}
	if (t->type == REDIS_REPLY_ERROR)
		return drl__redis_reply_error(s, "TIME", t, false, err);
	return drl_error_set(err, DRL_ECORRUPT,
			     "redis %s: TIME: malformed reply", s->where);
}

/* Redis TIME, in microseconds since the epoch. */
int drl__redis_now(drl_backend *b, int64_t *now_us, drl_error *err)
{
	const char *argv[1] = {"TIME"};
	size_t lens[1] = {4};
	return drl__redis_ask((rstore *)b, 1, argv, lens, read_time, now_us,
			      err);
}
