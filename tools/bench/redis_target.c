/*
 * The Redis server of a store URI (bench/redis_target.h), read with the
 * library's own URI parser and host grammar (drl_uri_parse,
 * drl_hostport_parse): the bench drives and asks the server the library
 * would. The connection (hiredis) only when the build has it.
 */
#include "redis_target.h"
#include "shared.h"

#include <drl/sys/backend.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#if DRL_HAVE_REDIS
#include <hiredis/hiredis.h>
#endif

bool bench_is_single_redis_uri(const char *uri)
{
	return strncmp(uri, "redis://", 8) == 0 ||
	       strncmp(uri, "redis+unix://", 13) == 0;
}

/* Copy src (may be NULL: "") into dst; false when it does not fit. */
static bool copy_part(char *dst, size_t cap, const char *src)
{
	return (size_t)snprintf(dst, cap, "%s", src ? src : "") < cap;
}

bool bench_redis_target_parse(const char *uri, redis_target *t, char *why,
			      size_t whycap)
{
	memset(t, 0, sizeof *t);
	drl_uri *u = NULL;
	if (!bench_uri_parse(&u, uri, why, whycap))
		return false;
	drl_error err = {0};
	bool ok = false;
	const char *scheme = drl_uri_scheme(u), *path = drl_uri_path(u);
	const char *db = drl_uri_option(u, "db");
	int64_t dbn = 0;
	if (db && drl_parse_int(db, strlen(db), 0, INT32_MAX, &dbn) != 0) {
		snprintf(why, whycap, "bad db=");
		goto out;
	}
	if (!copy_part(t->user, sizeof t->user, drl_uri_user(u)) ||
	    !copy_part(t->pass, sizeof t->pass, drl_uri_password(u))) {
		snprintf(why, whycap, "user or password too long");
		goto out;
	}
	if (strcmp(scheme, "redis+unix") == 0) {
		if (!copy_part(t->sock, sizeof t->sock, path)) {
			snprintf(why, whycap, "socket path too long");
			goto out;
		}
	} else if (strcmp(scheme, "redis") == 0) {
		const char *hosts = drl_uri_hosts(u);
		drl_hostport hp;
		if (hosts == NULL ||
		    drl_hostport_parse(hosts, strlen(hosts), 6379, "redis URI",
				       &hp, &err) != 0) {
			bench_copy_msg(why, whycap,
				       hosts ? err.message : "no host");
			goto out;
		}
		copy_part(t->host, sizeof t->host, hp.host);
		t->port = hp.port;
		if (path && path[0] != '\0' &&
		    drl_parse_int(path, strlen(path), 0, INT32_MAX, &dbn) !=
			    0) {
			snprintf(why, whycap, "bad database \"%.32s\"", path);
			goto out;
		}
	} else {
		snprintf(why, whycap, "not a redis:// URI");
		goto out;
	}
	t->db = (int)dbn;
	ok = true;
out:
	drl_uri_free(u);
	return ok;
}

#if DRL_HAVE_REDIS
redisContext *bench_redis_connect(const redis_target *t, int timeout_ms,
				  char *why, size_t whycap)
{
	struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
	redisContext *c =
		t->sock[0] ? redisConnectUnixWithTimeout(t->sock, tv)
			   : redisConnectWithTimeout(t->host, t->port, tv);

	if (c == NULL || c->err) {
		snprintf(why, whycap, "cannot connect: %s",
			 c ? c->errstr : "out of memory");
		goto fail;
	}
	/* not handed to redis-benchmark or the processes of a cell */
	(void)fcntl(c->fd, F_SETFD, FD_CLOEXEC);
	if (redisSetTimeout(c, tv) != REDIS_OK) {
		snprintf(why, whycap, "cannot set a timeout");
		goto fail;
	}
	if (t->pass[0]) {
		redisReply *r = t->user[0]
					? redisCommand(c, "AUTH %s %s", t->user,
						       t->pass)
					: redisCommand(c, "AUTH %s", t->pass);
		bool ok = r != NULL && r->type != REDIS_REPLY_ERROR;
		/* as the library: the error's code only (WRONGPASS), never
		 * the server's text, which may quote what was sent */
		if (r && r->type == REDIS_REPLY_ERROR)
			snprintf(why, whycap, "AUTH refused (%.*s)",
				 (int)strcspn(r->str, " "), r->str);
		else if (!ok)
			snprintf(why, whycap, "AUTH failed: %.120s",
				 c->err ? c->errstr : "no reply");
		if (r)
			freeReplyObject(r);
		if (!ok)
			goto fail;
	}
	return c;
fail:
	if (c)
		redisFree(c);
	return NULL;
}
#endif /* DRL_HAVE_REDIS */
