/*
 * The resolver's Redis source (include/drl/resolver.h,
 * drl_resolver_redis_new): a key's spec is HGET HASH KEY on a Redis store
 * of backends/redis/store.c (its pool, credentials, TLS, timeouts), and a
 * thread of its own listens on "drl:resolver:HASH" (backends/redis/sub.c)
 * and drops the answers a message names.
 *
 * The protocol a writer follows: HSET HASH KEY SPEC (or HDEL), then
 * PUBLISH drl:resolver:HASH KEY; "*" as the message drops every answer.
 * A message lost while the subscription was down is made up for: every
 * answer is dropped whenever the subscription is (re)made.
 *
 * This file knows hiredis's replies and the Redis store's headers; the
 * cache is core/resolver.c's, reached through the public API only.
 */
#include "drl_config.h"

#include <drl/resolver.h>
#include <drl/sys/backend.h>

#if DRL_HAVE_REDIS
#include "redis.h"
#include "internal.h"
#include "thread.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHANNEL_PREFIX "drl:resolver:"
/* A subscription that fails is made again after RETRY_MIN_MS, doubling
 * to RETRY_MAX_MS. */
#define RETRY_MIN_MS 100
#define RETRY_MAX_MS 2000

struct source {
	drl_backend *node; /* the Redis store: HGET, and where to subscribe */
	char *hash;
	char channel[64];
	drl_resolver *r; /* set before the thread starts */
	int wake[2];     /* a byte on wake[1] stops the thread */
	pthread_t thread;
	bool started;
	drl__redis_sub *sub; /* the thread's */
};

/* Where hget writes the spec, and the hash it asked. */
typedef struct spec_out {
	char *spec;
	size_t cap;
	const char *hash;
} spec_out;

/* HGET's reply: the spec, NUL-terminated, into arg's spec. */
static int read_spec(rstore *s, const redisReply *t, void *arg, drl_error *err)
{
	const spec_out *o = arg;
	if (t->type == REDIS_REPLY_STRING && t->len > 0 && t->len < o->cap) {
		memcpy(o->spec, t->str, t->len);
		o->spec[t->len] = '\0';
		return 0;
	}
	if (t->type == REDIS_REPLY_NIL)
		return drl_error_set(
			err, DRL_EINVAL,
			"redis %s: hash %s has no spec for the key", s->where,
			o->hash);
	if (t->type == REDIS_REPLY_STRING)
		return drl_error_set(err, DRL_ERANGE,
				     "redis %s: hash %s: the key's spec is "
				     "empty or too long",
				     s->where, o->hash);
	return drl__redis_reply_error(s, "HGET", t, false, err);
}

/* HGET hash key into spec: 0, or DRL_EINVAL (no such field), or the
 * store's failure. */
static int hget(void *arg, const void *key, size_t keylen, char *spec,
		size_t cap, drl_error *err)
{
	struct source *src = arg;
	const char *argv[3] = {"HGET", src->hash, key};
	size_t lens[3] = {4, strlen(src->hash), keylen};
	spec_out o = {spec, cap, src->hash};
	int rc = drl__redis_ask((rstore *)src->node, 3, argv, lens, read_spec,
				&o, err);
	return drl__redis_code(rc);
}

static void on_message(void *arg, const char *msg, size_t len)
{
	struct source *src = arg;

	if (len == 1 && msg[0] == '*')
		drl_resolver_invalidate(src->r, NULL, 0);
	else if (len > 0)
		drl_resolver_invalidate(src->r, msg, len);
}

/* Subscribe (src->sub), dropping every answer once subscribed. */
static int subscribe(struct source *src, drl_error *err)
{
	int rc = drl__redis_sub_open(&src->sub, src->node, src->channel, err);
	if (rc == 0 && src->r != NULL)
		drl_resolver_invalidate(src->r, NULL, 0);
	return rc;
}

/* Wait up to ms (-1: no end) for the wake pipe or the subscription:
 * 1 stop, 2 the subscription is readable (or broken), 0 neither. */
static int wait_for(struct source *src, int ms)
{
	struct pollfd p[2] = {{.fd = src->wake[0], .events = POLLIN}};
	nfds_t n = 1;
	if (src->sub != NULL)
		p[n++] = (struct pollfd){.fd = drl__redis_sub_fd(src->sub),
					 .events = POLLIN};
	if (poll(p, n, ms) <= 0)
		return 0; /* out of time, or EINTR: look again */
	if (p[0].revents & POLLIN)
		return 1;
	return n > 1 && p[1].revents != 0 ? 2 : 0;
}

static void *listen_thread(void *arg)
{
	struct source *src = arg;
	int retry = RETRY_MIN_MS;

	for (;;) {
		if (src->sub == NULL) {
			drl_error e = {0};
			if (subscribe(src, &e) != 0) {
				if (wait_for(src, retry) == 1)
					break;
				retry = retry * 2 > RETRY_MAX_MS ? RETRY_MAX_MS
								 : retry * 2;
				continue;
			}
			retry = RETRY_MIN_MS;
		}
		int w = wait_for(src, -1);
		if (w == 1)
			break;
		if (w == 0)
			continue;
		drl_error e = {0};
		if (drl__redis_sub_read(src->sub, on_message, src, &e) != 0) {
			/* what came meanwhile is lost: dropped whole when
			 * subscribed again */
			drl__redis_sub_close(src->sub);
			src->sub = NULL;
			drl_resolver_invalidate(src->r, NULL, 0);
		}
	}
	return NULL;
}

static void source_free(void *arg)
{
	struct source *src = arg;
	if (src == NULL)
		return;
	if (src->started) {
		char b = 1;
		while (write(src->wake[1], &b, 1) < 0 && errno == EINTR)
			;
		pthread_join(src->thread, NULL);
	}
	drl__redis_sub_close(src->sub);
	if (src->wake[0] >= 0) {
		close(src->wake[0]);
		close(src->wake[1]);
	}
	if (src->node != NULL)
		src->node->destroy(src->node);
	free(src->hash);
	free(src);
}

int drl_resolver_redis_new(drl_resolver **out, const char *uri,
			   const char *hash, const drl_resolver_options *opts,
			   drl_error *err)
{
	if (out == NULL || uri == NULL || hash == NULL || opts == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_resolver_redis_new: out, uri, hash "
				     "and opts are required");
	*out = NULL;
	if (hash[0] == '\0' || strlen(hash) + sizeof CHANNEL_PREFIX >
				       sizeof(((struct source *)0)->channel))
		return drl_error_set(err, DRL_EINVAL,
				     "drl_resolver_redis_new: a hash name is "
				     "1 .. %zu bytes",
				     sizeof(((struct source *)0)->channel) -
					     sizeof CHANNEL_PREFIX);
	drl_uri *u = NULL;
	int rc = drl_uri_parse(&u, uri, err);
	if (rc != 0)
		return rc;
	const char *scheme = drl_uri_scheme(u);
	if (strcmp(scheme, "redis") != 0 && strcmp(scheme, "redis+unix") != 0) {
		drl_uri_free(u);
		return drl_error_set(err, DRL_EINVAL,
				     "drl_resolver_redis_new: a redis:// or "
				     "redis+unix:// URI");
	}

	struct source *src = calloc(1, sizeof *src);
	if (src == NULL || (src->hash = strdup(hash)) == NULL) {
		free(src);
		drl_uri_free(u);
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	}
	src->wake[0] = src->wake[1] = -1;
	snprintf(src->channel, sizeof src->channel, "%s%s", CHANNEL_PREFIX,
		 hash);
	rc = drl__redis_open(&src->node, u, err);
	if (rc == 0)
		rc = drl_uri_check_all_used(u, err);
	drl_uri_free(u);
	if (rc == 0 && pipe(src->wake) != 0) {
		src->wake[0] = src->wake[1] = -1;
		rc = drl_error_set(err, DRL_ENOMEM, "pipe: %s",
				   strerror(errno));
	}
	if (rc == 0) {
		fcntl(src->wake[0], F_SETFD, FD_CLOEXEC);
		fcntl(src->wake[1], F_SETFD, FD_CLOEXEC);
		/* subscribed before a change can be missed: a writer that
		 * publishes after this returns is heard */
		rc = subscribe(src, err);
	}
	/* the resolver frees src, stopping the thread first */
	drl_resolver_options o = *opts;
	o.resolve = hget;
	o.arg = src;
	o.arg_free = source_free;
	if (rc == 0)
		rc = drl_resolver_new(&src->r, &o, err);
	if (rc != 0) {
		source_free(src);
		return rc;
	}
	if (drl__redis_thread_start(&src->thread, listen_thread, src) != 0) {
		drl_resolver_free(src->r);
		return drl_error_set(err, DRL_ENOMEM,
				     "drl_resolver_redis_new: no thread");
	}
	src->started = true;
	*out = src->r;
	return 0;
}

#else /* no hiredis */

int drl_resolver_redis_new(drl_resolver **out, const char *uri,
			   const char *hash, const drl_resolver_options *opts,
			   drl_error *err)
{
	(void)uri, (void)hash, (void)opts;
	if (out != NULL)
		*out = NULL;
	return drl_error_set(err, DRL_ENOTSUP,
			     "drl_resolver_redis_new: libdrl was built "
			     "without Redis");
}

#endif
