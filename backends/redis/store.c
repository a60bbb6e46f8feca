/*
 * The Redis store: open and destroy (a URI into a store, its methods
 * chosen once), and the nodes the Redis Cluster and Sentinel stores make
 * of it (cluster.c, sentinel.c). The layers under it are drawn in
 * backends/redis/internal.h.
 */
#include "redis.h"
#include "uri.h"
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

/* ---- open, destroy ------------------------------------------------------ */

/* Zero and free a secret. */
static void free_secret(char *p)
{
	if (p == NULL)
		return;
	volatile char *v = p;
	while (*v)
		*v++ = '\0';
	free(p);
}

/* Free s's pipes, its settings and s, not its mutexes: all a store that
 * never made it to the registry holds, and r_destroy's last step. */
static void free_unregistered(rstore *s)
{
	drl__redis_pipes_free(s);
	drl__tls_unref(s->tls);
	free(s->host);
	free(s->user);
	free_secret(s->password);
	free(s->prefix);
	free(s);
}

/* Free the connections of a list (linked by next). */
static void free_conns(conn *c)
{
	while (c) {
		conn *next = c->next;
		drl__redis_conn_free(c);
		c = next;
	}
}

/* Free everything; safe on a half-opened store (registered or not). */
static void r_destroy(drl_backend *b)
{
	rstore *s = (rstore *)b;
	if (s == NULL)
		return;
	drl__redis_unregister(s); /* no hold can reach s now */
	free_conns(s->free);
	free_conns(s->held);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->script_mu);
	free_unregistered(s);
}

/* What the URI says (drl__redis_parse_uri), and the methods that go with
 * it: everything checked before any connection is made. */
/* eval_policy (tx=module; tx=auto, blocking only): a blocking call by
 * module.c's round trip, a started one (DRL_CAP_POLICY_START) by
 * script.c's started call, both sending DRL.POLICY. */
static int eval_policy(drl_backend *b, drl_channel *ch, size_t n,
		       const drl_script_call *calls, int64_t *out, size_t nout,
		       size_t *nret, drl_eval_done_fn done, void *arg,
		       drl_error *err)
{
	if (done == NULL)
		return drl__redis_module_policy(b, n, calls, out, nout, nret,
						err);
	if (!(b->caps & DRL_CAP_POLICY_START))
		return drl_error_set(err, DRL_ENOTSUP,
				     "redis: a started policy needs tx=module "
				     "and pipelines >= 1");
	return drl__redis_policy_start(b, ch, n, calls, nout, done, arg, err);
}

static int parse_uri(rstore *s, drl_uri *u, drl_error *err)
{
	bool server_clock;
	int rc = drl__redis_parse_uri(s, u, &server_clock, err);
	if (rc)
		return rc;
	s->parent.version = 9; /* the vtable version this file fills */
	/* Every strategy keeps counters in groups (one hash per limit and
	 * user key), so processes of any tx count the same counters. */
	s->parent.caps = DRL_CAP_COUNTER | DRL_CAP_CAS | DRL_CAP_COUNTER_GROUPS;
	s->parent.trim = drl__redis_trim;
	s->parent.name = s->cluster ? "redis-cluster" : "redis";
	s->parent.destroy = r_destroy;
	s->parent.incr = drl__redis_incr;
	s->parent.get_many = drl__redis_get_many;
	s->parent.load = drl__redis_load;
	s->parent.cas = drl__redis_cas;
	s->parent.update = NULL; /* no in-process atomic step */
	s->parent.del = drl__redis_del;
	bool lua = !s->watch_tx && !s->module_tx;
	if (lua) {
		s->parent.caps |= DRL_CAP_SCRIPT | DRL_CAP_BATCH;
		s->parent.eval = drl__redis_eval;
	}
	/* tx=auto: DRL.TWIN where the connection's server has the module,
	 * EVALSHA elsewhere (script.c, drl__redis_auto_eval) */
	if (s->auto_twin)
		s->parent.eval = drl__redis_auto_eval;
	/* tx=module: every decision by the module's DRL.TWIN, blocking or
	 * started (no batches: a batch twin runs many items in one script,
	 * DRL.TWIN one) */
	if (s->module_tx) {
		s->parent.caps |= DRL_CAP_SCRIPT;
		s->parent.eval = drl__redis_module_eval;
	}
	/* a policy as one DRL.POLICY: tx=module, and tx=auto where the
	 * connection's server has the module (module.c) */
	if (s->module_tx || s->auto_twin) {
		s->parent.caps |= DRL_CAP_POLICY;
		s->parent.eval_policy = eval_policy;
	}
	/* A started script needs a shared connection to travel on; a
	 * Cluster node's calls may need ASKING, which the pipes never send. */
	if ((lua || s->module_tx) && !s->cluster && s->npipes > 0) {
		s->parent.caps |= DRL_CAP_EVAL_START;
		s->parent.eval_start = drl__redis_eval_start;
	}
	/* a policy started as one DRL.POLICY: tx=module only (tx=auto's
	 * connections may lack the module, and a started policy has no
	 * script to fall back on) */
	if (s->module_tx && !s->cluster && s->npipes > 0)
		s->parent.caps |= DRL_CAP_POLICY_START;
	/* Channels a loop drives: plaintext single-node stores (TLS and a
	 * Sentinel's master keep the pipes' I/O thread, docs/threading.md). */
	if ((lua || s->module_tx) && !s->cluster && s->npipes > 0 && !s->tls &&
	    !s->sentinel)
		drl__redis_chan_methods(s);
	/* tx=auto: the counters by plain commands (a Redis Cluster store
	 * routes every command itself and offers none of this). */
	if (s->plain_counters && !s->cluster) {
		s->parent.caps |= DRL_CAP_ADD_READ;
		s->parent.add_read = drl__redis_add_read;
		if (s->npipes > 0) {
			s->parent.add_read_start = drl__redis_add_read_start;
			s->parent.trim_start = drl__redis_trim_start;
		}
	}
	if (server_clock) {
		s->parent.caps |= DRL_CAP_CLOCK;
		s->parent.now = drl__redis_now;
	}
	return 0;
}

/* Mutexes and the condition variable (on CLOCK_MONOTONIC). */
static int init_sync(rstore *s)
{
	pthread_condattr_t ca;
	if (pthread_condattr_init(&ca) != 0)
		return -1;
	int rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (rc == 0)
		rc = pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (rc != 0)
		return -1;
	if (pthread_mutex_init(&s->mu, NULL) != 0) {
		pthread_cond_destroy(&s->cv);
		return -1;
	}
	if (pthread_mutex_init(&s->script_mu, NULL) != 0) {
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->cv);
		return -1;
	}
	return 0;
}

/* A new store of uri, registered: a store of its own (redis://,
 * rediss://) with its pipes, or the template of a redis-cluster or
 * redis-sentinel URI (never called, only copied into nodes). */
static int new_store(rstore **out, drl_uri *uri, bool template, drl_error *err)
{
	*out = NULL;
	if (!drl__redis_holds_ready())
		return drl_error_set(err, DRL_ENOMEM,
				     "redis: no thread-specific key left");
	rstore *s = calloc(1, sizeof *s);
	if (s == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	int rc = parse_uri(s, uri, err);
	if (rc == 0 && template && !s->cluster && !s->sentinel)
		rc = drl_error_set(err, DRL_EINVAL,
				   "drl__redis_template: not a redis-cluster "
				   "or redis-sentinel URI");
	else if (rc == 0 && !template && s->cluster)
		rc = drl_error_set(err, DRL_EINVAL,
				   "drl__redis_open: a redis-cluster URI");
	if (rc == 0 && init_sync(s) != 0)
		rc = drl_error_set(err, DRL_ENOMEM,
				   "redis: cannot make a mutex");
	else if (rc == 0 && !template && drl__redis_pipes_init(s) != 0)
		rc = drl_error_set(err, DRL_ENOMEM,
				   "redis: out of memory for pipelines");
	if (rc) {
		free_unregistered(s);
		return rc;
	}
	drl__redis_register(s);
	*out = s;
	return 0;
}

int drl__redis_open(drl_backend **out, drl_uri *uri, drl_error *err)
{
	if (out == NULL || uri == NULL || drl_uri_scheme(uri) == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl__redis_open: NULL argument");
	*out = NULL;
	rstore *s;
	int rc = new_store(&s, uri, false, err);
	if (rc)
		return rc;
	/* Connect now, so a wrong address or password fails at open
	 * (unless connect=lazy). */
	if (s->lazy) {
		*out = &s->parent;
		return 0;
	}
	conn *c;
	struct timespec dl = drl__redis_deadline_in(s->timeout_ms);
	rc = drl__redis_checkout(s, &c, &dl, err);
	if (rc) {
		r_destroy(&s->parent);
		return rc;
	}
	drl__redis_release(s, c);
	*out = &s->parent;
	return 0;
}

/* ---- Redis Cluster nodes (backends/redis/cluster.c) --------------------- */

int drl__redis_template(drl_backend **out, drl_uri *uri, drl_error *err)
{
	rstore *s;
	int rc = new_store(&s, uri, true, err);
	*out = rc ? NULL : &s->parent;
	return rc;
}

bool drl__redis_template_lazy(const drl_backend *tmpl)
{
	return ((const rstore *)tmpl)->lazy;
}

int64_t drl__redis_timeout_ms(const drl_backend *tmpl)
{
	return ((const rstore *)tmpl)->timeout_ms;
}

const char *drl__redis_prefix(const drl_backend *tmpl, size_t *len)
{
	const rstore *t = (const rstore *)tmpl;
	*len = t->prefixlen;
	return t->prefix ? t->prefix : "";
}

/* A store for host:port with tmpl's options and the credentials user,
 * password (copied; NULL password: no AUTH), not connected yet. */
static int make_node(drl_backend **out, const rstore *t, const char *host,
		     int port, const char *user, const char *password,
		     drl_error *err)
{
	*out = NULL;
	rstore *s = calloc(1, sizeof *s);
	if (s == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	s->parent = t->parent;
	s->cluster = t->cluster;
	s->tls = drl__tls_ref(t->tls); /* redirections stay on TLS */
	s->host = drl__redis_dup_n(host, strlen(host));
	s->port = port;
	s->user = user ? drl__redis_dup_n(user, strlen(user)) : NULL;
	s->password =
		password ? drl__redis_dup_n(password, strlen(password)) : NULL;
	s->prefix =
		t->prefix ? drl__redis_dup_n(t->prefix, t->prefixlen) : NULL;
	s->prefixlen = t->prefixlen;
	s->db = t->db;
	s->timeout_ms = t->timeout_ms;
	s->timeout = t->timeout;
	s->watch_tx = t->watch_tx;
	s->plain_counters = t->plain_counters;
	s->module_tx = t->module_tx;
	s->auto_twin = t->auto_twin;
	s->lazy = true;
	s->cap = t->cap;
	s->npipes = t->npipes;
	snprintf(s->where, sizeof s->where, "%s%.96s%s:%d",
		 strchr(host, ':') ? "[" : "", host,
		 strchr(host, ':') ? "]" : "", port);
	if (s->host == NULL || (user && s->user == NULL) ||
	    (password && s->password == NULL) ||
	    (t->prefix && s->prefix == NULL) || init_sync(s) != 0) {
		free_unregistered(s);
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	}
	if (drl__redis_pipes_init(s) != 0) {
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->cv);
		pthread_mutex_destroy(&s->script_mu);
		free_unregistered(s);
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	}
	drl__redis_register(s);
	*out = &s->parent;
	return 0;
}

int drl__redis_node(drl_backend **out, const drl_backend *tmpl,
		    const char *host, int port, drl_error *err)
{
	const rstore *t = (const rstore *)tmpl;
	return make_node(out, t, host, port, t->user, t->password, err);
}

int drl__redis_sentinel_node(drl_backend **out, const drl_backend *tmpl,
			     const char *host, int port, const char *user,
			     const char *password, drl_error *err)
{
	/* A sentinel has no database, no keys and no scripts: one pooled
	 * connection, no pipes, the template's TLS and timeout. */
	rstore t = *(const rstore *)tmpl;
	t.db = 0;
	t.cap = 1;
	t.npipes = 0;
	t.prefix = NULL;
	t.prefixlen = 0;
	t.cluster = false;
	return make_node(out, &t, host, port, user, password, err);
}

void drl__redis_watch(drl_backend *node, void (*trouble)(void *arg), void *arg)
{
	rstore *s = (rstore *)node;
	s->trouble_arg = arg;
	s->trouble = trouble;
	s->mark_unsent = true;
}

/* Where drl__redis_sentinel_master writes its answer. */
typedef struct master_addr {
	char *host; /* 256 bytes */
	int *port;
	bool *known;
} master_addr;

/* GET-MASTER-ADDR-BY-NAME's reply: ["host", "port"], or nil. */
static int read_master(rstore *s, const redisReply *t, void *arg,
		       drl_error *err)
{
	master_addr *m = arg;
	int64_t p;
	if (t->type == REDIS_REPLY_NIL)
		return 0;
	if (t->type == REDIS_REPLY_ARRAY && t->elements == 2 &&
	    t->element[0]->type == REDIS_REPLY_STRING &&
	    t->element[1]->type == REDIS_REPLY_STRING &&
	    t->element[0]->len > 0 && t->element[0]->len < 256 &&
	    strlen(t->element[0]->str) == t->element[0]->len &&
	    drl_parse_int(t->element[1]->str, t->element[1]->len, 1, 65535,
			  &p) == 0) {
		memcpy(m->host, t->element[0]->str, t->element[0]->len + 1);
		*m->port = (int)p;
		*m->known = true;
		return 0;
	}
	if (t->type == REDIS_REPLY_ERROR)
		return drl__redis_reply_error(
			s, "SENTINEL GET-MASTER-ADDR-BY-NAME", t, false, err);
	return drl_error_set(err, DRL_ESTORE,
			     "redis %s: SENTINEL GET-MASTER-ADDR-BY-NAME: "
			     "malformed reply (is this a sentinel?)",
			     s->where);
}

/* SENTINEL GET-MASTER-ADDR-BY-NAME name: ["host", "port"], or nil. */
int drl__redis_sentinel_master(drl_backend *sentinel, const char *name,
			       char host[256], int *port, bool *known,
			       drl_error *err)
{
	const char *argv[3] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", name};
	size_t lens[3] = {8, 23, strlen(name)};
	master_addr m = {host, port, known};
	*known = false;
	return drl__redis_ask((rstore *)sentinel, 3, argv, lens, read_master,
			      &m, err);
}

/* ROLE's reply: its first element into arg (16 bytes). */
static int read_role(rstore *s, const redisReply *t, void *arg, drl_error *err)
{
	if (t->type == REDIS_REPLY_ARRAY && t->elements > 0 &&
	    t->element[0]->type == REDIS_REPLY_STRING &&
	    t->element[0]->len < 16) {
		memcpy(arg, t->element[0]->str, t->element[0]->len);
		((char *)arg)[t->element[0]->len] = '\0';
		return 0;
	}
	return drl__redis_reply_error(s, "ROLE", t, false, err);
}

/* ROLE: its first element, "master", "slave" or "sentinel". */
int drl__redis_role(drl_backend *node, char role[16], drl_error *err)
{
	const char *argv[1] = {"ROLE"};
	size_t lens[1] = {4};
	int rc = drl__redis_ask((rstore *)node, 1, argv, lens, read_role, role,
				err);
	return drl__redis_code(rc); /* never run again */
}

/* One "host, port, id..." entry of a CLUSTER SLOTS range. */
static bool slots_endpoint(const redisReply *e, const char *asked,
			   const char **host, int *port)
{
	if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 ||
	    e->element[0]->type != REDIS_REPLY_STRING ||
	    e->element[1]->type != REDIS_REPLY_INTEGER ||
	    e->element[1]->integer < 1 || e->element[1]->integer > 65535)
		return false;
	/* An empty or "?" endpoint: the node we asked. */
	const char *h = e->element[0]->str;
	*host = (h[0] == '\0' || strcmp(h, "?") == 0) ? asked : h;
	*port = (int)e->element[1]->integer;
	return strlen(*host) < 256;
}

/* What drl__redis_cluster_slots calls for each range's node. */
typedef struct slots_call {
	drl__redis_slots_fn fn;
	void *arg;
} slots_call;

/* CLUSTER SLOTS' reply: each range's nodes to the caller's fn. */
static int read_slots(rstore *s, const redisReply *t, void *arg, drl_error *err)
{
	const slots_call *sc = arg;
	int rc = 0;
	if (t->type != REDIS_REPLY_ARRAY)
		rc = drl__redis_reply_error(s, "CLUSTER SLOTS", t, false, err);
	for (size_t i = 0; rc == 0 && i < t->elements; i++) {
		const redisReply *e = t->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
		    e->element[0]->type != REDIS_REPLY_INTEGER ||
		    e->element[1]->type != REDIS_REPLY_INTEGER ||
		    e->element[0]->integer < 0 ||
		    e->element[1]->integer > 16383 ||
		    e->element[0]->integer > e->element[1]->integer) {
			rc = drl_error_set(err, DRL_ESTORE,
					   "redis %s: CLUSTER SLOTS: malformed "
					   "range %zu",
					   s->where, i);
			break;
		}
		for (size_t j = 2; rc == 0 && j < e->elements; j++) {
			const char *host;
			int port;
			if (!slots_endpoint(e->element[j], s->host, &host,
					    &port)) {
				rc = drl_error_set(err, DRL_ESTORE,
						   "redis %s: CLUSTER SLOTS: "
						   "malformed node in range "
						   "%zu",
						   s->where, i);
				break;
			}
			rc = sc->fn(sc->arg, (int)e->element[0]->integer,
				    (int)e->element[1]->integer, host, port,
				    j == 2);
		}
	}
	return rc;
}

int drl__redis_cluster_slots(drl_backend *node, drl__redis_slots_fn fn,
			     void *arg, drl_error *err)
{
	const char *argv[2] = {"CLUSTER", "SLOTS"};
	size_t lens[2] = {7, 5};
	slots_call sc = {fn, arg};
	return drl__redis_ask((rstore *)node, 2, argv, lens, read_slots, &sc,
			      err);
}
