/* drld's libmicrohttpd glue: see http.h. */
#include "http.h"

#include "async_loop.h"
#include "deadline.h"
#include "common/args.h"
#include "common/json.h"
#include "common/result.h"
#include "list.h"
#include "path.h"

#include <arpa/inet.h>
#include <drl/drl.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* A body drld does not use (sent to another path than /v1/check or
 * /v1/reset) is read and dropped up to this many bytes, then the
 * connection is closed without an answer. A /v1/check body whose
 * Content-Length says it is over --max-body is answered 413 at once,
 * unread, and the connection closed; a chunked one that passes the bound
 * is read to its end and dropped, however long (libmicrohttpd 0.9.75
 * cannot answer in the middle of an upload), then answered 413: the
 * whole-request deadline (--timeout-s, deadline.h) bounds how long that
 * takes. */
#define DISCARD_MAX (1024 * 1024)

struct drld_http {
	struct MHD_Daemon *daemon;
	struct drld *d;
	/* /v1/check decided without a thread waiting (async_loop.h), when
	 * the store allows it; NULL: on the MHD thread, blocking */
	struct drld_async_loop *loop;
	size_t max_body;
	/* every connection's whole-request deadline (--timeout-s) */
	struct drld_deadlines *deadlines;
	/* open connections past which a new one pushes out the one that
	 * waited longest for its request (on_accept) */
	size_t soft_connections;
	atomic_long active; /* requests begun and not yet completed */
	unsigned port;
	/* requests whose decision blocks their HTTP thread in the store
	 * (the blocking path: tx=watch, pipelines=0, memcached, Cluster;
	 * rules of several limits, protected paths, resets), so that a stop
	 * past --drain-s can answer them without that thread */
	pthread_mutex_t blocked_lock;
	struct req *blocked;
};

/* What a request will be answered with once its body is in (answering
 * before that would make libmicrohttpd close the connection). */
enum req_kind {
	REQ_CHECK,   /* POST /v1/check or /v1/reset: answered when the body
			is complete */
	REQ_METRICS, /* GET /metrics */
	REQ_REPLY,   /* decided at the headers: a protected path, 404, 405 */
};

/* One request's state (MHD's per-request pointer). */
struct req {
	enum req_kind kind;
	char *path; /* the URL's path, normalized (path.h): what routes and
		       keys see */
	struct drld_config *cfg;  /* the snapshot it uses, or NULL */
	struct drld_reply *reply; /* REQ_REPLY: the answer */
	char *body;               /* REQ_CHECK: the body so far */
	bool reset;               /* REQ_CHECK: POST /v1/reset */
	size_t len, cap;
	size_t expect;    /* REQ_CHECK: Content-Length, 0 when unknown */
	size_t discarded; /* bytes dropped (over max_body, or unused) */
	/* a /v1/check decided through the async loop: the connection is
	 * suspended until `decided`, then the access handler is called
	 * again and sends `answer` */
	struct MHD_Connection *conn;
	struct drld_reply *answer;
	atomic_bool decided;
	bool answered; /* `answer` was queued to libmicrohttpd */
	/* while in h->blocked: its socket, and the list; `stopped`: the
	 * stop answered it (503) while its thread waited for the store */
	int fd;
	struct req *bprev, *bnext;
	atomic_bool stopped;
};

/* ---- responses -------------------------------------------------------- */

/* Send `reply` and count it. */
static enum MHD_Result send_reply(struct drld_http *h,
				  struct MHD_Connection *conn,
				  const struct drld_reply *reply)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(
		reply->len, (void *)reply->body, MHD_RESPMEM_MUST_COPY);

	if (resp == NULL)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				reply->type);
	if (reply->policy[0])
		MHD_add_response_header(resp, "RateLimit-Policy",
					reply->policy);
	if (reply->ratelimit[0])
		MHD_add_response_header(resp, "RateLimit", reply->ratelimit);
	if (reply->retry_after[0])
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER,
					reply->retry_after);
	if (reply->allow != NULL)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
					reply->allow);
	enum MHD_Result ret = MHD_queue_response(conn, reply->status, resp);
	MHD_destroy_response(resp);
	drld_metrics_http(h->d->metrics, reply->status);
	return ret;
}

static enum MHD_Result send_error(struct drld_http *h,
				  struct MHD_Connection *conn, unsigned status,
				  const char *allow, const char *msg)
{
	struct drld_reply reply;

	drld_reply_error(&reply, status, "%s", msg);
	reply.allow = allow;
	return send_reply(h, conn, &reply);
}

/* How long send_raw() waits for room in the socket's buffer, at most,
 * on an HTTP thread. */
#define RAW_SEND_MS 200

/* Write `reply` on the socket of conn directly, as a whole response
 * ending the connection (Connection: close), and count it; best effort,
 * the socket non-blocking. For a decided request whose connection
 * libmicrohttpd is closing unanswered: libmicrohttpd 0.9.75 reads the
 * socket of a resumed connection before it calls the access handler
 * again, and a client that half-closed after its request (shutdown
 * SHUT_WR, `nc -N`) shows it end of file there, which it takes for an
 * aborted request: the answer would be lost, its decision counted. The
 * request-completed callback runs before the socket is shut down, so the
 * answer still goes out; a client that half-closes still reads (RFC 9112
 * 9.6). */
static void send_raw(struct drld_http *h, int fd,
		     const struct drld_reply *reply, int wait_ms)
{
	char head[1024 + DRLD_POLICY_HEADER_MAX + DRLD_RATELIMIT_HEADER_MAX];
	const char *reason = MHD_get_reason_phrase_for(reply->status);

	int n = snprintf(
		head, sizeof head,
		"HTTP/1.1 %u %s\r\nConnection: close\r\n"
		"Content-Type: %s\r\nContent-Length: %zu\r\n"
		"%s%s%s%s%s%s%s%s%s\r\n",
		reply->status, reason[0] ? reason : "Unknown", reply->type,
		reply->len, reply->policy[0] ? "RateLimit-Policy: " : "",
		reply->policy, reply->policy[0] ? "\r\n" : "",
		reply->ratelimit[0] ? "RateLimit: " : "", reply->ratelimit,
		reply->ratelimit[0] ? "\r\n" : "",
		reply->retry_after[0] ? "Retry-After: " : "",
		reply->retry_after, reply->retry_after[0] ? "\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof head)
		return;
	struct iovec part[2] = {{head, (size_t)n},
				{(void *)reply->body, reply->len}};
	int64_t end = drl_mono_us() + (int64_t)wait_ms * 1000;
	for (int i = 0; i < 2;) {
		ssize_t w = send(fd, part[i].iov_base, part[i].iov_len,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int64_t left = end - drl_mono_us();
			struct pollfd p = {fd, POLLOUT, 0};
			if (left <= 0 ||
			    poll(&p, 1, (int)(left / 1000) + 1) <= 0)
				return;
			continue;
		}
		if (w < 0)
			return;
		part[i].iov_base = (char *)part[i].iov_base + w;
		part[i].iov_len -= (size_t)w;
		if (part[i].iov_len == 0)
			i++;
	}
	drld_metrics_http(h->d->metrics, reply->status);
}

/* GET /metrics: the Prometheus text. */
static enum MHD_Result send_metrics(struct drld_http *h,
				    struct MHD_Connection *conn)
{
	struct drld_gauges g;
	size_t len;

	drld_adhoc_gauges(h->d->adhoc, &g);
	g.requests_in_flight = atomic_load(&h->active);
	char *text = drld_metrics_render(h->d->metrics, h->d->store, &g, &len);
	if (text == NULL)
		return send_error(h, conn, 500, NULL, "out of memory");
	struct MHD_Response *resp = MHD_create_response_from_buffer(
		len, text, MHD_RESPMEM_MUST_FREE);
	if (resp == NULL) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"text/plain; version=0.0.4; charset=utf-8");
	enum MHD_Result ret = MHD_queue_response(conn, 200, resp);
	MHD_destroy_response(resp);
	drld_metrics_http(h->d->metrics, 200);
	return ret;
}

/* ---- request parts for key templates ---------------------------------- */

static const char *header_of(void *cls, const char *name)
{
	return MHD_lookup_connection_value(cls, MHD_HEADER_KIND, name);
}

static void ip_of(void *cls, char *buf, size_t n)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		cls, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci != NULL ? ci->client_addr : NULL;

	buf[0] = '\0';
	if (sa != NULL && sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr,
			  buf, (socklen_t)n);
	else if (sa != NULL && sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6,
			  &((const struct sockaddr_in6 *)sa)->sin6_addr, buf,
			  (socklen_t)n);
}

static struct drld_request_parts parts_of(struct MHD_Connection *conn,
					  const char *url, const char *method)
{
	return (struct drld_request_parts){
		url,       /* path */
		method,    /* method */
		NULL,      /* key */
		0,         /* keylen */
		header_of, /* header */
		ip_of,     /* ip */
		conn,      /* cls */
	};
}

/* ---- routing ---------------------------------------------------------- */

/* The length Content-Length announces, or -1 (none, or not a number). */
static int64_t announced(struct MHD_Connection *conn)
{
	const char *cl = MHD_lookup_connection_value(
		conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	int64_t v;

	return cl != NULL && tl_parse_uint(cl, 0, INT64_MAX, &v) ? v : -1;
}

/* Whether Content-Length announces more than max bytes. */
static bool announced_too_big(struct MHD_Connection *conn, size_t max)
{
	int64_t v = announced(conn);

	return v >= 0 && (uint64_t)v > max;
}

/* What the framing headers of a request say (MHD_KeyValueIterator). */
struct framing {
	const char *length; /* the first Content-Length */
	bool conflict;      /* another Content-Length differs from it */
	bool chunked;       /* a Transfer-Encoding too */
};

static enum MHD_Result each_header(void *cls, enum MHD_ValueKind kind,
				   const char *key, const char *value)
{
	struct framing *f = cls;

	(void)kind;
	if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
		if (f->length != NULL && strcmp(f->length, value) != 0)
			f->conflict = true;
		if (f->length == NULL)
			f->length = value;
	} else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
		f->chunked = true;
	}
	return MHD_YES;
}

/* Whether the request's length is ambiguous: two different
 * Content-Length headers (libmicrohttpd reads the first), or one beside
 * Transfer-Encoding. A proxy in front that reads the other would see
 * another request boundary than drld (request smuggling); RFC 9110 8.6
 * and RFC 9112 6.3 say to refuse it. */
static bool ambiguous_length(struct MHD_Connection *conn)
{
	struct framing f = {NULL, false, false};

	MHD_get_connection_values(conn, MHD_HEADER_KIND, each_header, &f);
	return f.conflict || (f.length != NULL && f.chunked);
}

/* rq's decision is about to block this HTTP thread in the store: list
 * it, so that a stop past --drain-s can answer it (drld_http_stop). */
static void blocking_begin(struct drld_http *h, struct MHD_Connection *conn,
			   struct req *rq)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		conn, MHD_CONNECTION_INFO_CONNECTION_FD);

	rq->fd = ci != NULL ? ci->connect_fd : -1;
	pthread_mutex_lock(&h->blocked_lock);
	DRLD_LIST_PUSH(h->blocked, rq, bprev, bnext);
	pthread_mutex_unlock(&h->blocked_lock);
}

/* The store answered: unlist rq. Returns false when the stop answered
 * it meanwhile (then the connection is to be closed, unanswered again).
 * Under the lock, so the stop's write on the socket is over first. */
static bool blocking_end(struct drld_http *h, struct req *rq)
{
	pthread_mutex_lock(&h->blocked_lock);
	DRLD_LIST_UNLINK(h->blocked, rq, bprev, bnext);
	pthread_mutex_unlock(&h->blocked_lock);
	return !atomic_load(&rq->stopped);
}

/* Decide a request that is not a /v1/check POST nor a GET /metrics at
 * its headers, into rq->reply: /healthz, a protected path, 404, 405. */
static void decide_now(struct drld_http *h, struct MHD_Connection *conn,
		       const char *url, const char *method, struct req *rq)
{
	struct drld_reply *reply = rq->reply;

	if (strcmp(url, "/v1/check") == 0 || strcmp(url, "/v1/reset") == 0) {
		drld_reply_error(reply, 405, "%s takes POST", url);
		reply->allow = "POST";
		return;
	}
	if (strcmp(url, "/metrics") == 0) {
		drld_reply_error(reply, 405, "/metrics takes GET");
		reply->allow = "GET, HEAD";
		return;
	}
	if (strcmp(url, "/healthz") == 0) { /* liveness: drld serves */
		if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0) {
			drld_reply_text(reply, 200, "ok\n");
		} else {
			drld_reply_error(reply, 405, "/healthz takes GET");
			reply->allow = "GET, HEAD";
		}
		return;
	}
	rq->cfg = drld_config_acquire(&h->d->config);
	const struct drld_rule *rule = drld_config_protects(rq->cfg, url);
	if (rule == NULL) {
		drld_reply_error(reply, 404, "not found");
		return;
	}
	struct drld_request_parts parts = parts_of(conn, url, method);
	blocking_begin(h, conn, rq);
	drld_protect(h->d, rule, &parts, reply);
	(void)blocking_end(h, rq); /* answered later: on_request checks */
}

/* The first call for a request (headers read): route it. Requests are
 * answered when complete, so the connection stays open for the next one
 * (answering earlier makes libmicrohttpd close it), except when the body
 * announced is too large to read: then at once. A protected path is
 * decided here, before its body (which it does not use) is read. */
static enum MHD_Result first_call(struct drld_http *h,
				  struct MHD_Connection *conn, const char *url,
				  const char *method, struct req *rq)
{
	bool reset = strcmp(url, "/v1/reset") == 0;
	if (ambiguous_length(conn))
		return send_error(h, conn, 400, NULL,
				  "conflicting Content-Length headers, or "
				  "Content-Length with Transfer-Encoding");
	if ((reset || strcmp(url, "/v1/check") == 0) &&
	    strcmp(method, "POST") == 0) {
		if (announced_too_big(conn, h->max_body))
			return send_error(h, conn, 413, NULL,
					  "the body is larger than --max-body");
		rq->kind = REQ_CHECK;
		rq->reset = reset;
		/* the buffer is made that size at once: doubling up to it
		 * left a large body's buffer up to twice its size */
		int64_t v = announced(conn);
		rq->expect = v > 0 ? (size_t)v : 0;
		rq->cfg = drld_config_acquire(&h->d->config);
		return MHD_YES;
	}
	if (strcmp(url, "/metrics") == 0 &&
	    (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)) {
		rq->kind = REQ_METRICS;
		return MHD_YES;
	}
	rq->kind = REQ_REPLY;
	if ((rq->reply = malloc(sizeof *rq->reply)) == NULL)
		return MHD_NO;
	decide_now(h, conn, url, method, rq);
	if (announced_too_big(conn, DISCARD_MAX))
		return send_reply(h, conn, rq->reply);
	return MHD_YES;
}

/* Take n bytes of a request body. Returns false when the connection
 * should be closed (an unused body far over DISCARD_MAX). */
static bool absorb(struct drld_http *h, struct req *rq, const char *data,
		   size_t n)
{
	if (rq->kind != REQ_CHECK || rq->discarded != 0 ||
	    n > h->max_body - rq->len) {
		rq->discarded = rq->discarded + n < rq->discarded
					? SIZE_MAX
					: rq->discarded + n;
		return rq->kind == REQ_CHECK || rq->discarded <= DISCARD_MAX;
	}
	if (rq->len + n > rq->cap) {
		size_t cap = rq->cap ? rq->cap * 2
				     : (rq->expect ? rq->expect : 1024);
		if (cap < rq->len + n)
			cap = rq->len + n;
		if (cap > h->max_body)
			cap = h->max_body;
		char *p = realloc(rq->body, cap);
		if (p == NULL)
			return false;
		rq->body = p;
		rq->cap = cap;
	}
	memcpy(rq->body + rq->len, data, n);
	rq->len += n;
	return true;
}

static void suspend_request(void *arg)
{
	struct req *rq = arg;
	MHD_suspend_connection(rq->conn);
}

/* On the async loop's thread: the answer is in, let MHD call the access
 * handler again (which sends it). */
static void resume_request(void *arg)
{
	struct req *rq = arg;
	atomic_store(&rq->decided, true);
	MHD_resume_connection(rq->conn);
}

/* POST /v1/check through the async loop: the first time, start the
 * decision (the connection suspended while it is in flight), or answer
 * at once what needs no store call; once resumed, send the answer. */
static enum MHD_Result check_async(struct drld_http *h,
				   struct MHD_Connection *conn, struct req *rq,
				   const struct drld_request_parts *parts)
{
	if (atomic_load(&rq->decided)) {
		rq->answered = true;
		return send_reply(h, conn, rq->answer);
	}
	rq->answer = malloc(sizeof *rq->answer);
	if (rq->answer == NULL)
		return send_error(h, conn, 500, NULL, "out of memory");
	rq->conn = conn;
	/* blocks when the limit does not decide without a worker */
	blocking_begin(h, conn, rq);
	int started =
		drld_check_start(h->d, drld_async_loop_context(h->loop),
				 rq->cfg, rq->body, rq->len, parts, rq->answer,
				 suspend_request, resume_request, rq);
	if (!blocking_end(h, rq))
		return MHD_NO;
	if (started)
		return MHD_YES; /* resumed when decided */
	return send_reply(h, conn, rq->answer);
}

/* The deadline of connection conn (NULL: not tracked). */
static struct drld_deadline *deadline_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci != NULL ? ci->socket_context : NULL;
}

/* The request is complete: answer it. */
static enum MHD_Result answer(struct drld_http *h, struct MHD_Connection *conn,
			      const char *url, const char *method,
			      struct req *rq)
{
	struct drld_request_parts parts = parts_of(conn, url, method);
	struct drld_reply reply;

	/* in whole: what remains is drld's to answer */
	drld_deadline_disarm(deadline_of(conn));
	switch (rq->kind) {
	case REQ_METRICS:
		return send_metrics(h, conn);
	case REQ_REPLY:
		return send_reply(h, conn, rq->reply);
	case REQ_CHECK:
		break;
	}
	if (rq->discarded != 0)
		return send_error(h, conn, 413, NULL,
				  "the body is larger than --max-body");
	if (h->loop != NULL && !rq->reset)
		return check_async(h, conn, rq, &parts);
	blocking_begin(h, conn, rq);
	if (rq->reset)
		drld_reset(h->d, rq->cfg, rq->body, rq->len, &parts, &reply);
	else
		drld_check(h->d, rq->cfg, rq->body, rq->len, &parts, &reply);
	if (!blocking_end(h, rq))
		return MHD_NO;
	return send_reply(h, conn, &reply);
}

/* libmicrohttpd's access handler: called with the headers, then with
 * each piece of the body, then once more when the body is complete. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
				  const char *url, const char *method,
				  const char *version, const char *data,
				  size_t *size, void **state)
{
	struct drld_http *h = cls;
	struct req *rq = *state;

	if (rq == NULL) {
		rq = calloc(1, sizeof *rq);
		if (rq == NULL)
			return MHD_NO;
		*state = rq;
		atomic_fetch_add(&h->active, 1);
		if ((rq->path = drld_path_normalize(url)) == NULL)
			return MHD_NO;
		enum MHD_Result r = first_call(h, conn, rq->path, method, rq);
		return atomic_load(&rq->stopped) ? MHD_NO : r;
	}
	if (atomic_load(&rq->stopped)) /* answered by the stop (503) */
		return MHD_NO;
	if (*size != 0) {
		bool ok = absorb(h, rq, data, *size);
		*size = 0;
		return ok ? MHD_YES : MHD_NO;
	}
	return answer(h, conn, rq->path, method, rq);
}

/* A request is over (answered, or its connection failed): free it. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **state,
			 enum MHD_RequestTerminationCode toe)
{
	struct drld_http *h = cls;
	struct req *rq = *state;

	/* the next request on this connection must arrive whole in time */
	drld_deadline_arm(h->deadlines, deadline_of(conn));
	if (rq == NULL)
		return;
	/* decided, but closed before the answer was queued: a client that
	 * half-closed (send_raw) */
	if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK &&
	    atomic_load(&rq->decided) && !rq->answered &&
	    !atomic_load(&rq->stopped)) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
			conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (ci != NULL)
			send_raw(h, ci->connect_fd, rq->answer, RAW_SEND_MS);
	}
	drld_config_release(rq->cfg);
	free(rq->path);
	free(rq->reply);
	free(rq->answer);
	free(rq->body);
	free(rq);
	*state = NULL;
	atomic_fetch_sub(&h->active, 1);
}

/* A connection opens or closes: track its whole-request deadline (the
 * tracking ends before libmicrohttpd closes the socket). */
static void on_connection(void *cls, struct MHD_Connection *conn,
			  void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct drld_http *h = cls;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
			conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		*socket_context = ci != NULL ? drld_deadline_add(h->deadlines,
								 ci->connect_fd)
					     : NULL;
		return;
	}
	drld_deadline_remove(h->deadlines, *socket_context);
	*socket_context = NULL;
}

/* A connection was accepted: make room for it, while libmicrohttpd
 * still has some, by shutting down the connection that has waited
 * longest for its request (deadline.h). libmicrohttpd stops accepting at
 * --max-connections: without this, --max-connections clients trickling
 * header bytes held every slot until --timeout-s, and held it again by
 * reconnecting (issue 45). nginx does the like when it runs out of
 * connections (it closes idle keep-alive ones, ngx_drain_connections);
 * here connections whose request is still on its way go too. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr,
				 socklen_t addrlen)
{
	struct drld_http *h = cls;

	(void)addr;
	(void)addrlen;
	(void)drld_deadlines_make_room(h->deadlines, h->soft_connections);
	return MHD_YES;
}

/* libmicrohttpd's own messages, on stderr with drld's prefix. */
static void on_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];

	vsnprintf(line, sizeof line, fmt, ap);
	size_t n = strlen(line);
	while (n > 0 && line[n - 1] == '\n')
		line[--n] = '\0';
	fprintf(stderr, "drld: http: %s\n", line);
}

/* ---- start and stop --------------------------------------------------- */

int drld_http_start(struct drld_http **out, struct drld *d,
		    const struct drld_http_opts *o, char *msg, size_t n)
{
	struct drld_http *h = calloc(1, sizeof *h);
	unsigned flags =
		MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG;

	if (h == NULL) {
		snprintf(msg, n, "out of memory");
		return -1;
	}
	if (o->addr.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	h->d = d;
	h->max_body = o->max_body;
	/* a margin of slots kept free: libmicrohttpd divides
	 * --max-connections among its threads and each stops accepting
	 * when full, so with fewer open in all, one of them still accepts
	 * (and calls on_accept) */
	size_t margin = o->max_connections / 16;
	if (margin < o->threads)
		margin = o->threads;
	h->soft_connections =
		o->max_connections > margin ? o->max_connections - margin : 1;
	atomic_init(&h->active, 0);
	pthread_mutex_init(&h->blocked_lock, NULL);
	if (drld_deadlines_start(&h->deadlines, o->timeout_s) != 0) {
		snprintf(msg, n, "out of memory");
		pthread_mutex_destroy(&h->blocked_lock);
		free(h);
		return -1;
	}
	if (d->store_direct) {
		/* a connection has one request at a time: the loop never
		 * holds more decisions than there are connections */
		size_t queue = o->max_connections < DRL_ASYNC_QUEUE_MAX
				       ? o->max_connections
				       : DRL_ASYNC_QUEUE_MAX;
		if (drld_async_loop_start(&h->loop, queue ? queue : 1, msg,
					  n) != 0) {
			drld_deadlines_stop(h->deadlines);
			free(h);
			return -1;
		}
		flags |= MHD_ALLOW_SUSPEND_RESUME;
	}
	h->daemon = MHD_start_daemon(
		flags, 0, on_accept, h, on_request, h,
		MHD_OPTION_EXTERNAL_LOGGER, on_log, NULL, MHD_OPTION_SOCK_ADDR,
		(const struct sockaddr *)&o->addr, MHD_OPTION_THREAD_POOL_SIZE,
		o->threads, MHD_OPTION_CONNECTION_LIMIT, o->max_connections,
		MHD_OPTION_CONNECTION_TIMEOUT, o->timeout_s,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, o->conn_memory,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, o->max_per_ip,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_END);
	if (h->daemon == NULL) {
		snprintf(msg, n,
			 "cannot listen (address in use or not local? see "
			 "the line above)");
		drld_async_loop_stop(h->loop);
		drld_deadlines_stop(h->deadlines);
		pthread_mutex_destroy(&h->blocked_lock);
		free(h);
		return -1;
	}
	const union MHD_DaemonInfo *di =
		MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
	h->port = di != NULL ? di->port : 0;
	*out = h;
	return 0;
}

unsigned drld_http_port(const struct drld_http *h)
{
	return h->port;
}

/* Wait up to grace_s seconds for the requests begun to be over. */
static void wait_idle(struct drld_http *h, unsigned grace_s)
{
	for (unsigned i = 0; i < grace_s * 100 && atomic_load(&h->active) > 0;
	     i++)
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
}

/* Answer 503 every request whose thread still waits for the store, on
 * its socket (the thread cannot), and mark it so that the thread, once
 * the store answers, closes the connection instead of answering again.
 * Returns how many. */
static unsigned answer_blocked(struct drld_http *h)
{
	struct drld_reply reply;
	unsigned n = 0;

	drld_reply_error(&reply, 503,
			 "drld is stopping: the store did not answer within "
			 "--drain-s");
	pthread_mutex_lock(&h->blocked_lock);
	for (struct req *rq = h->blocked; rq != NULL; rq = rq->bnext) {
		atomic_store(&rq->stopped, true);
		if (rq->fd >= 0)
			send_raw(h, rq->fd, &reply, 0);
		n++;
	}
	pthread_mutex_unlock(&h->blocked_lock);
	return n;
}

bool drld_http_stop(struct drld_http *h, unsigned grace_s)
{
	if (h == NULL)
		return true;
	/* Stop accepting. The listen socket is ours now, but it may be
	 * closed only once MHD_stop_daemon() has joined the threads: they
	 * take it out of their epoll sets after quiescing returns (closing
	 * it at once raced with their epoll_ctl, found by TSan). shutdown()
	 * stops the listening now, so a new client is refused at once (and
	 * can go elsewhere) instead of waiting in the backlog, and keeps
	 * the descriptor, which no other socket can take over meanwhile. */
	MHD_socket ls = MHD_quiesce_daemon(h->daemon);
	if (ls != MHD_INVALID_SOCKET)
		shutdown(ls, SHUT_RDWR);
	/* in-flight requests end within their store's timeout_ms; idle
	 * keep-alive connections are closed by MHD_stop_daemon() */
	wait_idle(h, grace_s);
	if (h->loop != NULL) {
		/* decisions still in flight end by their store's timeout_ms
		 * and resume their connections; those are then answered */
		drld_async_loop_stop(h->loop);
		wait_idle(h, grace_s);
	}
	/* a thread still in a store call would hold MHD_stop_daemon() (and
	 * the requests read behind it) until the store's timeout_ms, once
	 * per request: answer those now and leave the rest to the exit */
	unsigned blocked = answer_blocked(h);
	if (blocked != 0) {
		fprintf(stderr,
			"drld: %u request%s still waiting for the store after "
			"--drain-s: answered 503; exiting without waiting for "
			"%s\n",
			blocked, blocked == 1 ? "" : "s",
			blocked == 1 ? "it" : "them");
		return false;
	}
	MHD_stop_daemon(h->daemon);
	drld_deadlines_stop(h->deadlines);
	if (ls != MHD_INVALID_SOCKET)
		close(ls);
	pthread_mutex_destroy(&h->blocked_lock);
	free(h);
	return true;
}
