/*
 * A connection that listens: SUBSCRIBE to one channel of a server (a
 * Redis Sentinel's "+switch-master"), then its messages read as they come
 * by a thread that polls the connection's socket among others
 * (backends/redis/sentinel.c's resolver). Declared in backends/redis/redis.h.
 *
 * The connection is the connection layer's (backends/redis/conn.c: TLS,
 * AUTH, the reader's limits), opened on its own, outside the node's pool,
 * and never used for a call. A dead peer is found by TCP keepalive
 * (hiredis's: about half a minute) or by the peer closing; the caller
 * then opens another.
 *
 * Threading: a subscription is used by one thread at a time.
 */
#include "internal.h"
#include "redis.h"

#include <hiredis/hiredis.h>

#include <stdlib.h>
#include <string.h>

struct drl__redis_sub {
	rstore *s; /* the node: where and how to connect */
	conn *c;
	char channel[64];
};

/* Whether r is a pub/sub push of `kind` ("message", "subscribe") on
 * `channel`: [kind, channel, payload]. */
static bool is_push(const redisReply *r, const char *kind, const char *channel)
{
	return r && r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
	       r->element[0]->type == REDIS_REPLY_STRING &&
	       strcmp(r->element[0]->str, kind) == 0 &&
	       r->element[1]->type == REDIS_REPLY_STRING &&
	       strcmp(r->element[1]->str, channel) == 0;
}

int drl__redis_sub_open(drl__redis_sub **out, drl_backend *node,
			const char *channel, drl_error *err)
{
	rstore *s = (rstore *)node;
	*out = NULL;
	if (strlen(channel) >= sizeof((drl__redis_sub *)0)->channel)
		return drl_error_set(err, DRL_EINVAL,
				     "redis %s: channel name too long",
				     s->where);
	drl__redis_sub *sub = calloc(1, sizeof *sub);
	if (sub == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	sub->s = s;
	strcpy(sub->channel, channel);
	struct timespec dl = drl__redis_deadline_in(s->timeout_ms);
	int rc = drl__redis_conn_open(s, &sub->c, &dl, err);
	redisReply *r[1] = {NULL};
	if (rc == 0) {
		const char *argv[2] = {"SUBSCRIBE", channel};
		size_t lens[2] = {9, strlen(channel)};
		rc = drl__redis_conn_append(s, sub->c, 2, argv, lens, err);
	}
	if (rc == 0)
		rc = drl__redis_conn_collect(s, sub->c, 1, r, "SUBSCRIBE", err);
	if (rc == 0 && !is_push(r[0], "subscribe", channel))
		rc = drl__redis_reply_error(s, "SUBSCRIBE", r[0], false, err);
	/* also a refusal's reply (an error: a fake or locked-down
	 * sentinel); none is left after a failed collect */
	drl__redis_free_replies(r, 1);
	if (rc) {
		drl__redis_sub_close(sub);
		return rc;
	}
	*out = sub;
	return 0;
}

int drl__redis_sub_fd(const drl__redis_sub *sub)
{
	return sub->c->ctx->fd;
}

/* Hand the replies c's reader holds to fn (messages on the channel; the
 * rest dropped). */
static int deliver(drl__redis_sub *sub,
		   void (*fn)(void *arg, const char *msg, size_t len),
		   void *arg, drl_error *err)
{
	for (;;) {
		void *p = NULL;
		if (redisReaderGetReply(sub->c->ctx->reader, &p) != REDIS_OK) {
			sub->c->broken = true;
			return drl_error_set(err, DRL_EUNAVAILABLE,
					     "redis %s: subscription: "
					     "unreadable reply",
					     sub->s->where);
		}
		if (p == NULL)
			return 0;
		redisReply *r = p;
		if (is_push(r, "message", sub->channel))
			fn(arg, r->element[2]->str, r->element[2]->len);
		freeReplyObject(r);
	}
}

/* What the reader already holds first (a message that came with the
 * SUBSCRIBE's reply), then what the socket holds. */
int drl__redis_sub_read(drl__redis_sub *sub,
			void (*fn)(void *arg, const char *msg, size_t len),
			void *arg, drl_error *err)
{
	int rc = deliver(sub, fn, arg, err);
	if (rc == 0)
		rc = drl__redis_read_now(sub->s, sub->c, "subscription", err);
	if (rc == 0)
		rc = deliver(sub, fn, arg, err);
	return rc;
}

void drl__redis_sub_close(drl__redis_sub *sub)
{
	if (sub == NULL)
		return;
	drl__redis_conn_free(sub->c);
	free(sub);
}
