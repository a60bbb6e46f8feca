/*
 * Test fixture: a real Redis Cluster on loopback (see cluster_fixture.h for
 * the contract).
 *
 * Nodes are started with drl_fixture_redis_cluster_node_start
 * (server_fixture.c: free port whose bus port is free too, private dir,
 * PID tracking and cleanup at exit). They are then joined over hiredis with
 * the commands redis-cli --cluster create would send, rather than by
 * running redis-cli:
 *  - no second binary to find (redis-cli), so the skip/CI rule is only the
 *    one of redis-server;
 *  - redis-cli places replicas with its own anti-affinity shuffle (all our
 *    nodes share one IP), so node[masters + k] would not reliably be the
 *    replica of node[k];
 *  - redis-cli polls the join once a second; polling ourselves every 20 ms
 *    saves about a second a start;
 *  - a failing step gives the server's own error reply, which we print.
 * The steps: CLUSTER MYID; CLUSTER SET-CONFIG-EPOCH i+1 (distinct epochs, no
 * collision round); CLUSTER ADDSLOTS of an even share on each master;
 * CLUSTER MEET node[0] from every other node; wait until every node knows
 * every other one; CLUSTER REPLICATE on the replicas; wait until every node
 * reports cluster_state:ok and the expected slot map with its replicas, and
 * every replica's link is up (so a failover test has a synced replica).
 *
 * Nodes announce 127.0.0.1 (--cluster-announce-ip), so CLUSTER SLOTS and
 * -MOVED/-ASK replies name 127.0.0.1 from the first moment. Every command
 * opens a fresh connection: no state to go stale when a node is killed.
 */
#include "cluster_fixture.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <hiredis/hiredis.h>

#define START_TIMEOUT_MS 30000
#define CONVERGE_TIMEOUT_MS 15000
#define KEYS_TIMEOUT_MS 30000
#define POLL_MS 20
#define CONNECT_TIMEOUT_MS 2000
#define COMMAND_TIMEOUT_MS 5000
#define MIGRATE_TIMEOUT_MS "5000"
#define MIGRATE_BATCH "100"

/* Arguments every node gets on top of server_fixture's (port, bind
 * 127.0.0.1, no persistence, cluster-enabled, its nodes.conf). Static: the
 * fixture keeps the pointer for drl_fixture_restart. */
static const char *const node_args[] = {
	/* PFAIL after 1 s without a pong: failover in about 2 s. */
	"--cluster-node-timeout", "1000",
	/* A replica always may stand for election, however long its link
	 * was down (the default, 10, refuses after node-timeout * 10 plus
	 * the ping period: a paused or slow test must not make a failover
	 * test flaky). */
	"--cluster-replica-validity-factor", "0",
	/* Our addresses are loopback ones: announce that, from the start. */
	"--cluster-announce-ip", "127.0.0.1",
	/* Replicas sync at once (7.0 waits 5 s for more replicas). */
	"--repl-diskless-sync-delay", "0",
	/* A master pings its replicas every second, not every 10: until
	 * the first ping (or write) a fresh replica's replication offset is
	 * 0, and CLUSTER SLOTS leaves such a replica out. */
	"--repl-ping-replica-period", "1", NULL};

/* A slot map: node index serving each slot as master, -1 unserved, -2 a
 * node that is not ours or not on 127.0.0.1. */
typedef signed char slot_map[DRL_CLUSTER_SLOTS];

/* ---- small helpers ------------------------------------------------------- */

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int valid_node(const drl_cluster *c, int i)
{
	return c != NULL && i >= 0 && i < c->nodes;
}

static int live_node(const drl_cluster *c, int i)
{
	return valid_node(c, i) && c->alive[i] && c->node[i].pid > 0;
}

int drl_fixture_cluster_node_of_port(const drl_cluster *c, int port)
{
	for (int i = 0; c != NULL && i < c->nodes; i++)
		if (c->node[i].port == port)
			return i;
	return -1;
}

/* Connect to node i; NULL (message on stderr unless quiet) on failure. */
static redisContext *connect_node(const drl_cluster *c, int i, int quiet)
{
	struct timeval ct = {CONNECT_TIMEOUT_MS / 1000,
			     (CONNECT_TIMEOUT_MS % 1000) * 1000};
	struct timeval rt = {COMMAND_TIMEOUT_MS / 1000,
			     (COMMAND_TIMEOUT_MS % 1000) * 1000};
	redisContext *ctx;

	if (!live_node(c, i)) {
		if (!quiet)
			fprintf(stderr,
				"cluster fixture: node %d is not "
				"running\n",
				i);
		return NULL;
	}
	ctx = redisConnectWithTimeout("127.0.0.1", c->node[i].port, ct);
	if (ctx == NULL || ctx->err || redisSetTimeout(ctx, rt) != REDIS_OK) {
		if (!quiet)
			fprintf(stderr,
				"cluster fixture: connect to node %d "
				"(port %d): %s\n",
				i, c->node[i].port,
				ctx ? ctx->errstr : "out of memory");
		if (ctx != NULL)
			redisFree(ctx);
		return NULL;
	}
	return ctx;
}

/* Run argv on node i: the reply (caller frees), or NULL when the node does
 * not answer (message on stderr unless quiet). */
static redisReply *node_argv(const drl_cluster *c, int i, int quiet, int argc,
			     const char **argv, const size_t *argvlen)
{
	redisContext *ctx = connect_node(c, i, quiet);
	redisReply *r;

	if (ctx == NULL)
		return NULL;
	r = redisCommandArgv(ctx, argc, argv, argvlen);
	if (r == NULL && !quiet)
		fprintf(stderr, "cluster fixture: node %d (port %d): %s: %s\n",
			i, c->node[i].port, argv[0], ctx->errstr);
	redisFree(ctx);
	return r;
}

/* Run a hiredis format command on node i (see node_argv). */
static redisReply *node_cmd(const drl_cluster *c, int i, int quiet,
			    const char *fmt, ...)
{
	redisContext *ctx = connect_node(c, i, quiet);
	redisReply *r;
	va_list ap;

	if (ctx == NULL)
		return NULL;
	va_start(ap, fmt);
	r = redisvCommand(ctx, fmt, ap);
	va_end(ap);
	if (r == NULL && !quiet)
		fprintf(stderr, "cluster fixture: node %d (port %d): %s: %s\n",
			i, c->node[i].port, fmt, ctx->errstr);
	redisFree(ctx);
	return r;
}

/* Consume reply r of `what` on node i: 0 when it is a status reply (+OK,
 * +NOKEY...), -1 otherwise (message on stderr). Frees r. */
static int expect_status(const drl_cluster *c, int i, redisReply *r,
			 const char *what)
{
	int ok = r != NULL && r->type == REDIS_REPLY_STATUS;

	if (r != NULL && !ok)
		fprintf(stderr, "cluster fixture: node %d (port %d): %s: %s\n",
			i, c->node[i].port, what,
			r->type == REDIS_REPLY_ERROR ? r->str
						     : "unexpected reply type");
	if (r != NULL)
		freeReplyObject(r);
	return ok ? 0 : -1;
}

/* The value of "field:" in an INFO-style text (field:value\r\n lines),
 * compared with want: 1 equal, 0 not. */
static int info_is(const char *text, const char *field, const char *want)
{
	size_t fl = strlen(field), wl = strlen(want);
	const char *p = text;

	while (p != NULL && *p != '\0') {
		if (strncmp(p, field, fl) == 0 && p[fl] == ':')
			return strncmp(p + fl + 1, want, wl) == 0 &&
			       (p[fl + 1 + wl] == '\r' ||
				p[fl + 1 + wl] == '\n' ||
				p[fl + 1 + wl] == '\0');
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return 0;
}

/* 1 when node i answers CLUSTER INFO with cluster_state:ok. */
static int state_ok(const drl_cluster *c, int i)
{
	redisReply *r = node_cmd(c, i, 1, "CLUSTER INFO");
	int ok = r != NULL && r->type == REDIS_REPLY_STRING &&
		 info_is(r->str, "cluster_state", "ok");

	if (r != NULL)
		freeReplyObject(r);
	return ok;
}

/* Node i's view of the slot map (CLUSTER SLOTS), into map; nrep[k], when
 * not NULL, gets how many replicas node k is listed with (the least over
 * its ranges; -1 for a node serving no slot). 0, or -1 when the node does
 * not answer as expected. */
static int read_slots(const drl_cluster *c, int i, slot_map map, int *nrep)
{
	redisReply *r = node_cmd(c, i, 1, "CLUSTER SLOTS");

	if (r == NULL)
		return -1;
	if (r->type != REDIS_REPLY_ARRAY) {
		freeReplyObject(r);
		return -1;
	}
	memset(map, -1, sizeof(slot_map));
	for (int k = 0; nrep != NULL && k < DRL_CLUSTER_NODES_MAX; k++)
		nrep[k] = -1;
	for (size_t e = 0; e < r->elements; e++) {
		redisReply *range = r->element[e], *m;
		long long first, last;
		int owner;

		if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
		    range->element[0]->type != REDIS_REPLY_INTEGER ||
		    range->element[1]->type != REDIS_REPLY_INTEGER)
			continue;
		first = range->element[0]->integer;
		last = range->element[1]->integer;
		m = range->element[2];
		if (first < 0 || last >= DRL_CLUSTER_SLOTS || first > last ||
		    m->type != REDIS_REPLY_ARRAY || m->elements < 2 ||
		    m->element[0]->type != REDIS_REPLY_STRING ||
		    m->element[1]->type != REDIS_REPLY_INTEGER)
			continue;
		owner = drl_fixture_cluster_node_of_port(
			c, (int)m->element[1]->integer);
		if (strcmp(m->element[0]->str, "127.0.0.1") != 0 || owner < 0)
			owner = -2;
		for (long long s = first; s <= last; s++)
			map[s] = (signed char)owner;
		if (nrep != NULL && owner >= 0) {
			int n = (int)range->elements - 3;
			if (nrep[owner] < 0 || n < nrep[owner])
				nrep[owner] = n;
		}
	}
	freeReplyObject(r);
	return 0;
}

/* Node i's role from ROLE: 1 master, 0 replica (*master_port gets its
 * master's port when not NULL), -1 no answer. */
static int read_role(const drl_cluster *c, int i, int *master_port)
{
	redisReply *r = node_cmd(c, i, 1, "ROLE");
	int role = -1;

	if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
	    r->element[0]->type == REDIS_REPLY_STRING) {
		if (strcmp(r->element[0]->str, "master") == 0) {
			role = 1;
		} else if (strcmp(r->element[0]->str, "slave") == 0 &&
			   r->elements >= 3 &&
			   r->element[2]->type == REDIS_REPLY_INTEGER) {
			role = 0;
			if (master_port != NULL)
				*master_port = (int)r->element[2]->integer;
		}
	}
	if (r != NULL)
		freeReplyObject(r);
	return role;
}

/* Why the last wait did not end (for the timeout message). */
typedef struct why {
	char text[256];
} why;

static void because(why *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void because(why *w, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->text, sizeof w->text, fmt, ap);
	va_end(ap);
}

/* Print each live node's CLUSTER NODES and the tail of every node's log:
 * what a failed wait leaves to read. */
static void dump_cluster(const drl_cluster *c)
{
	for (int i = 0; i < c->nodes; i++) {
		char path[300], buf[2048];
		size_t n;
		long size;
		FILE *f;

		fprintf(stderr,
			"---- cluster node %d (port %d, pid %d, %s) ----\n", i,
			c->node[i].port, (int)c->node[i].pid,
			c->alive[i] ? "alive" : "killed");
		if (live_node(c, i)) {
			redisReply *r = node_cmd(c, i, 1, "CLUSTER NODES");
			if (r != NULL && r->type == REDIS_REPLY_STRING)
				fprintf(stderr, "CLUSTER NODES:\n%s", r->str);
			if (r != NULL)
				freeReplyObject(r);
		}
		if (c->node[i].dir[0] == '\0')
			continue;
		snprintf(path, sizeof path, "%s/server.log", c->node[i].dir);
		f = fopen(path, "r");
		if (f == NULL)
			continue;
		fseek(f, 0, SEEK_END);
		size = ftell(f);
		fseek(f, size > (long)sizeof buf ? size - (long)sizeof buf : 0,
		      SEEK_SET);
		n = fread(buf, 1, sizeof buf, f);
		fclose(f);
		fprintf(stderr, "log tail (%s):\n%.*s", path, (int)n, buf);
	}
	fprintf(stderr, "---- end of cluster state ----\n");
}

/* Every live node reports cluster_state:ok and the same slot map, with
 * every slot served by a live node of ours; map gets it. With want_slot >=
 * 0, that slot must be served by want_owner. 1 yes, 0 not (yet: w says
 * why). */
static int converged(const drl_cluster *c, slot_map map, int want_slot,
		     int want_owner, why *w)
{
	slot_map other;
	int first = -1;

	for (int i = 0; i < c->nodes; i++) {
		if (!live_node(c, i))
			continue;
		if (!state_ok(c, i)) {
			because(w, "node %d does not report cluster_state:ok",
				i);
			return 0;
		}
		if (read_slots(c, i, first < 0 ? map : other, NULL) != 0) {
			because(w, "node %d does not answer CLUSTER SLOTS", i);
			return 0;
		}
		if (first < 0) {
			first = i;
		} else if (memcmp(map, other, sizeof(slot_map)) != 0) {
			because(w, "nodes %d and %d disagree on the slot map",
				first, i);
			return 0;
		}
	}
	if (first < 0) {
		because(w, "no live node");
		return 0;
	}
	for (int s = 0; s < DRL_CLUSTER_SLOTS; s++) {
		if (map[s] < 0 || !live_node(c, map[s])) {
			because(w, "slot %d is served by %d (not a live node)",
				s, map[s]);
			return 0;
		}
	}
	if (want_slot >= 0 && map[want_slot] != want_owner) {
		because(w, "slot %d is served by node %d, not %d", want_slot,
			map[want_slot], want_owner);
		return 0;
	}
	return 1;
}

/* ---- start / stop -------------------------------------------------------- */

/* Slots of master k of n: [k * 16384 / n, (k + 1) * 16384 / n). */
static int share_first(int k, int n)
{
	return k * DRL_CLUSTER_SLOTS / n;
}

/* CLUSTER ADDSLOTS first..last on node i (one command; ADDSLOTSRANGE would
 * need 7.0). 0 or -1. */
static int add_slots(const drl_cluster *c, int i, int first, int last)
{
	int n = last - first + 1;
	const char **argv = calloc((size_t)n + 2, sizeof *argv);
	char *nums = calloc((size_t)n, 12); /* "16383" at most */
	int rc = -1;

	if (argv != NULL && nums != NULL) {
		argv[0] = "CLUSTER";
		argv[1] = "ADDSLOTS";
		for (int s = 0; s < n; s++) {
			snprintf(nums + 12 * s, 12, "%d", first + s);
			argv[2 + s] = nums + 12 * s;
		}
		rc = expect_status(c, i, node_argv(c, i, 0, n + 2, argv, NULL),
				   "CLUSTER ADDSLOTS");
	} else {
		fprintf(stderr, "cluster fixture: out of memory\n");
	}
	free(argv);
	free(nums);
	return rc;
}

/* Every node knows every other one, its handshake done and bus link up
 * (CLUSTER NODES: c->nodes lines, no handshake/noaddr/fail flag, all
 * "connected"). 1 yes, 0 not yet (w says why). */
static int all_met(const drl_cluster *c, why *w)
{
	for (int i = 0; i < c->nodes; i++) {
		redisReply *r = node_cmd(c, i, 1, "CLUSTER NODES");
		int lines = 0, bad = 0;

		if (r == NULL || r->type != REDIS_REPLY_STRING) {
			because(w, "node %d does not answer CLUSTER NODES", i);
			if (r != NULL)
				freeReplyObject(r);
			return 0;
		}
		for (char *p = r->str; *p != '\0';) {
			char *eol = strchr(p, '\n');
			if (eol != NULL)
				*eol = '\0';
			if (*p != '\0') {
				lines++;
				if (strstr(p, "handshake") != NULL ||
				    strstr(p, "noaddr") != NULL ||
				    strstr(p, "fail") != NULL ||
				    strstr(p, " connected") == NULL)
					bad++;
			}
			if (eol == NULL)
				break;
			p = eol + 1;
		}
		freeReplyObject(r);
		if (lines != c->nodes || bad != 0) {
			because(w,
				"node %d knows %d of %d nodes, %d not yet "
				"connected",
				i, lines, c->nodes, bad);
			return 0;
		}
	}
	return 1;
}

/* The end of a start: cluster converged on the expected map (slot s on
 * master s * masters / 16384), each master listed with its replica by
 * every node, every replica's link to its master up. 1 yes, 0 not yet. */
static int started(const drl_cluster *c, int replicas, why *w)
{
	slot_map map;
	int nrep[DRL_CLUSTER_NODES_MAX];

	if (!converged(c, map, -1, -1, w))
		return 0;
	for (int k = 0; k < c->masters; k++) {
		for (int s = share_first(k, c->masters);
		     s < share_first(k + 1, c->masters); s++) {
			if (map[s] != k) {
				because(w, "slot %d is on node %d, not %d", s,
					map[s], k);
				return 0;
			}
		}
	}
	for (int i = 0; i < c->nodes; i++) {
		if (read_slots(c, i, map, nrep) != 0) {
			because(w, "node %d does not answer CLUSTER SLOTS", i);
			return 0;
		}
		for (int k = 0; k < c->masters; k++) {
			if (nrep[k] != replicas) {
				because(w,
					"node %d lists master %d with %d "
					"replicas, not %d",
					i, k, nrep[k], replicas);
				return 0;
			}
		}
	}
	for (int i = c->masters; i < c->nodes; i++) {
		redisReply *r = node_cmd(c, i, 1, "INFO replication");
		int up = r != NULL && r->type == REDIS_REPLY_STRING &&
			 info_is(r->str, "master_link_status", "up");
		if (r != NULL)
			freeReplyObject(r);
		if (!up) {
			because(w, "replica %d: master link not up yet", i);
			return 0;
		}
	}
	return 1;
}

int drl_fixture_cluster_start(drl_cluster *c, int masters, int replicas)
{
	why w = {"?"};
	long long deadline = now_ms() + START_TIMEOUT_MS;
	int held;

	memset(c, 0, sizeof *c);
	c->mig_slot = c->mig_from = c->mig_to = -1;
	if (masters < 1 || replicas < 0 || replicas > 1 ||
	    masters * (1 + replicas) > DRL_CLUSTER_NODES_MAX) {
		fprintf(stderr,
			"cluster fixture: %d masters with %d replicas each: "
			"unsupported (replicas 0 or 1, at most %d nodes)\n",
			masters, replicas, DRL_CLUSTER_NODES_MAX);
		return -1;
	}
	c->masters = masters;

	/* Start the nodes: empty, each alone. */
	for (int i = 0; i < masters * (1 + replicas); i++) {
		int r = drl_fixture_redis_cluster_node_start(&c->node[i],
							     node_args);
		if (r != 0) {
			drl_fixture_cluster_stop(c);
			return r;
		}
		c->nodes = i + 1;
		c->alive[i] = 1;
	}

	/* Identify them; give each a distinct config epoch while it knows
	 * no other node (the command refuses otherwise). */
	for (int i = 0; i < c->nodes; i++) {
		redisReply *r = node_cmd(c, i, 0, "CLUSTER MYID");
		int ok = r != NULL && r->type == REDIS_REPLY_STRING &&
			 r->len == 40;
		if (ok)
			memcpy(c->id[i], r->str, 41);
		else if (r != NULL)
			fprintf(stderr,
				"cluster fixture: node %d: CLUSTER MYID: "
				"%s\n",
				i,
				r->type == REDIS_REPLY_ERROR ? r->str
							     : "bad reply");
		if (r != NULL)
			freeReplyObject(r);
		if (!ok || expect_status(c, i,
					 node_cmd(c, i, 0,
						  "CLUSTER SET-CONFIG-EPOCH %d",
						  i + 1),
					 "CLUSTER SET-CONFIG-EPOCH") != 0)
			goto fail;
	}
	for (int k = 0; k < masters; k++)
		if (add_slots(c, k, share_first(k, masters),
			      share_first(k + 1, masters) - 1) != 0)
			goto fail;
	for (int i = 1; i < c->nodes; i++)
		if (expect_status(c, i,
				  node_cmd(c, i, 0, "CLUSTER MEET 127.0.0.1 %d",
					   c->node[0].port),
				  "CLUSTER MEET") != 0)
			goto fail;

	held = 0;
	while (!(held = all_met(c, &w)) && now_ms() < deadline)
		sleep_ms(POLL_MS);
	if (!held)
		goto timeout;
	for (int k = 0; k < masters && replicas > 0; k++)
		if (expect_status(c, masters + k,
				  node_cmd(c, masters + k, 0,
					   "CLUSTER REPLICATE %s", c->id[k]),
				  "CLUSTER REPLICATE") != 0)
			goto fail;
	while (!(held = started(c, replicas, &w)) && now_ms() < deadline)
		sleep_ms(POLL_MS);
	if (!held)
		goto timeout;
	return 0;

timeout:
	fprintf(stderr,
		"cluster fixture: %d masters + %d replicas not ready "
		"within %d s: %s\n",
		masters, masters * replicas, START_TIMEOUT_MS / 1000, w.text);
fail:
	dump_cluster(c);
	drl_fixture_cluster_stop(c);
	return -1;
}

void drl_fixture_cluster_stop(drl_cluster *c)
{
	if (c == NULL)
		return;
	for (int i = 0; i < c->nodes && i < DRL_CLUSTER_NODES_MAX; i++) {
		drl_fixture_stop(&c->node[i]);
		c->alive[i] = 0;
	}
	c->nodes = 0;
	c->mig_slot = c->mig_from = c->mig_to = -1;
}

/* ---- queries --------------------------------------------------------------- */

const char *drl_fixture_cluster_hosts(const drl_cluster *c, char *buf,
				      size_t cap)
{
	size_t used = 0;

	if (buf == NULL || cap == 0)
		return NULL;
	buf[0] = '\0';
	for (int k = 0; c != NULL && k < c->masters && k < c->nodes; k++) {
		int n = snprintf(buf + used, cap - used, "%s127.0.0.1:%d",
				 k > 0 ? "," : "", c->node[k].port);
		if (n < 0 || (size_t)n >= cap - used)
			return NULL;
		used += (size_t)n;
	}
	return buf;
}

int drl_fixture_cluster_setup(drl_cluster *c, int masters, int replicas,
			      char *hosts, size_t cap, int *have)
{
	int rc = drl_fixture_cluster_start(c, masters, replicas);
	*have = rc == 0;
	if (rc < 0)
		return -1;
	if (*have && drl_fixture_cluster_hosts(c, hosts, cap) == NULL) {
		fprintf(stderr, "cluster fixture: hosts do not fit %zu bytes\n",
			cap);
		return -1;
	}
	return 0;
}

/* CRC16-CCITT (XMODEM): polynomial 0x1021, initial 0, as redis cluster. */
static unsigned crc16(const unsigned char *p, size_t n)
{
	unsigned crc = 0;

	for (size_t i = 0; i < n; i++) {
		crc ^= (unsigned)p[i] << 8;
		for (int b = 0; b < 8; b++)
			crc = (crc & 0x8000) ? ((crc << 1) ^ 0x1021) & 0xffff
					     : (crc << 1) & 0xffff;
	}
	return crc;
}

int drl_fixture_cluster_slot(const void *key, size_t len)
{
	const unsigned char *k = key;
	size_t open, close;

	for (open = 0; open < len && k[open] != '{'; open++)
		;
	if (open < len) {
		for (close = open + 1; close < len && k[close] != '}'; close++)
			;
		if (close < len && close > open + 1)
			return (int)(crc16(k + open + 1, close - open - 1) &
				     (DRL_CLUSTER_SLOTS - 1));
	}
	return (int)(crc16(k, len) & (DRL_CLUSTER_SLOTS - 1));
}

int drl_fixture_cluster_master_of(drl_cluster *c, int slot)
{
	slot_map map;

	if (c == NULL || slot < 0 || slot >= DRL_CLUSTER_SLOTS)
		return -1;
	for (int i = 0; i < c->nodes; i++) {
		if (live_node(c, i) && read_slots(c, i, map, NULL) == 0)
			return map[slot] >= 0 ? map[slot] : -1;
	}
	return -1;
}

void *drl_fixture_cluster_command(drl_cluster *c, int i, int argc,
				  const char **argv)
{
	if (!valid_node(c, i) || argc < 1 || argv == NULL) {
		fprintf(stderr,
			"cluster fixture: command on node %d: bad "
			"arguments\n",
			i);
		return NULL;
	}
	return node_argv(c, i, 0, argc, argv, NULL);
}

/* ---- slot migration -------------------------------------------------------- */

int drl_fixture_cluster_migrate_begin(drl_cluster *c, int slot, int to)
{
	int from;

	if (c == NULL || slot < 0 || slot >= DRL_CLUSTER_SLOTS ||
	    !live_node(c, to)) {
		fprintf(stderr,
			"cluster fixture: migrate_begin: bad slot %d or "
			"target %d\n",
			slot, to);
		return -1;
	}
	if (c->mig_slot >= 0) {
		fprintf(stderr,
			"cluster fixture: migrate_begin: slot %d is being "
			"migrated already (one at a time)\n",
			c->mig_slot);
		return -1;
	}
	from = drl_fixture_cluster_master_of(c, slot);
	if (from < 0 || from == to || read_role(c, to, NULL) != 1) {
		fprintf(stderr,
			"cluster fixture: migrate_begin: slot %d is on node "
			"%d; target %d must be another live master\n",
			slot, from, to);
		return -1;
	}
	if (expect_status(c, to,
			  node_cmd(c, to, 0, "CLUSTER SETSLOT %d IMPORTING %s",
				   slot, c->id[from]),
			  "CLUSTER SETSLOT IMPORTING") != 0)
		return -1;
	if (expect_status(c, from,
			  node_cmd(c, from, 0,
				   "CLUSTER SETSLOT %d MIGRATING %s", slot,
				   c->id[to]),
			  "CLUSTER SETSLOT MIGRATING") != 0) {
		redisReply *r =
			node_cmd(c, to, 0, "CLUSTER SETSLOT %d STABLE", slot);
		if (r != NULL)
			freeReplyObject(r);
		return -1;
	}
	c->mig_slot = slot;
	c->mig_from = from;
	c->mig_to = to;
	return 0;
}

/* MIGRATE the keys of one GETKEYSINSLOT reply (keys) from the source to
 * the target. 0 or -1. */
static int migrate_batch(drl_cluster *c, const redisReply *keys)
{
	size_t n = keys->elements;
	const char **argv = calloc(n + 7, sizeof *argv);
	size_t *argvlen = calloc(n + 7, sizeof *argvlen);
	char port[16];
	int rc = -1;

	if (argv == NULL || argvlen == NULL) {
		fprintf(stderr, "cluster fixture: out of memory\n");
		goto out;
	}
	snprintf(port, sizeof port, "%d", c->node[c->mig_to].port);
	argv[0] = "MIGRATE";
	argv[1] = "127.0.0.1";
	argv[2] = port;
	argv[3] = ""; /* key: none, the keys follow KEYS */
	argv[4] = "0";
	argv[5] = MIGRATE_TIMEOUT_MS;
	argv[6] = "KEYS";
	for (size_t k = 0; k < n; k++) {
		if (keys->element[k]->type != REDIS_REPLY_STRING) {
			fprintf(stderr, "cluster fixture: GETKEYSINSLOT: "
					"not a string\n");
			goto out;
		}
		argv[7 + k] = keys->element[k]->str;
		argvlen[7 + k] = keys->element[k]->len;
	}
	for (size_t k = 0; k < 7; k++)
		argvlen[k] = strlen(argv[k]);
	rc = expect_status(
		c, c->mig_from,
		node_argv(c, c->mig_from, 0, (int)(n + 7), argv, argvlen),
		"MIGRATE");
out:
	free(argv);
	free(argvlen);
	return rc;
}

int drl_fixture_cluster_migrate_keys(drl_cluster *c, int slot)
{
	long long t0 = now_ms();

	if (c == NULL || slot < 0 || c->mig_slot != slot) {
		fprintf(stderr,
			"cluster fixture: migrate_keys: slot %d is not being "
			"migrated (call migrate_begin)\n",
			slot);
		return -1;
	}
	while (now_ms() - t0 < KEYS_TIMEOUT_MS) {
		redisReply *r = node_cmd(
			c, c->mig_from, 0,
			"CLUSTER GETKEYSINSLOT %d " MIGRATE_BATCH, slot);
		int rc;

		if (r == NULL)
			return -1;
		if (r->type != REDIS_REPLY_ARRAY) {
			fprintf(stderr,
				"cluster fixture: node %d: CLUSTER "
				"GETKEYSINSLOT: %s\n",
				c->mig_from,
				r->type == REDIS_REPLY_ERROR ? r->str
							     : "bad reply");
			freeReplyObject(r);
			return -1;
		}
		if (r->elements == 0) {
			freeReplyObject(r);
			return 0;
		}
		rc = migrate_batch(c, r);
		freeReplyObject(r);
		if (rc != 0)
			return -1;
	}
	fprintf(stderr,
		"cluster fixture: migrate_keys: slot %d still has keys after "
		"%d s\n",
		slot, KEYS_TIMEOUT_MS / 1000);
	return -1;
}

/* CLUSTER SETSLOT slot NODE <to> on node i. 0 or -1. */
static int setslot_node(drl_cluster *c, int i, int slot, int to)
{
	return expect_status(c, i,
			     node_cmd(c, i, 0, "CLUSTER SETSLOT %d NODE %s",
				      slot, c->id[to]),
			     "CLUSTER SETSLOT NODE");
}

int drl_fixture_cluster_migrate_finish(drl_cluster *c, int slot)
{
	slot_map map;
	why w = {"?"};
	long long t0 = now_ms();
	redisReply *r;
	int held;

	if (c == NULL || slot < 0 || c->mig_slot != slot) {
		fprintf(stderr,
			"cluster fixture: migrate_finish: slot %d is not "
			"being migrated (call migrate_begin)\n",
			slot);
		return -1;
	}
	/* The source refuses SETSLOT NODE while it holds keys of the slot,
	 * but the target, once it owns the slot, broadcasts its new epoch at
	 * once: a source that hears it first takes the slot as lost and
	 * deletes its keys there (redis 7.0). So no keys may be left behind
	 * before the target is told. No new ones can come meanwhile: a
	 * migrating source answers -ASK for keys it does not have. */
	r = node_cmd(c, c->mig_from, 0, "CLUSTER COUNTKEYSINSLOT %d", slot);
	if (r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer != 0) {
		if (r != NULL)
			fprintf(stderr,
				"cluster fixture: migrate_finish: node %d "
				"still holds %lld keys of slot %d (call "
				"migrate_keys first)\n",
				c->mig_from,
				r->type == REDIS_REPLY_INTEGER ? r->integer
							       : -1LL,
				slot);
		if (r != NULL)
			freeReplyObject(r);
		return -1;
	}
	freeReplyObject(r);
	if (setslot_node(c, c->mig_to, slot, c->mig_to) != 0 ||
	    setslot_node(c, c->mig_from, slot, c->mig_to) != 0)
		return -1;
	for (int i = 0; i < c->nodes; i++) {
		if (i == c->mig_to || i == c->mig_from || !live_node(c, i) ||
		    read_role(c, i, NULL) != 1)
			continue;
		if (setslot_node(c, i, slot, c->mig_to) != 0)
			return -1;
	}
	while (!(held = converged(c, map, slot, c->mig_to, &w)) &&
	       now_ms() - t0 < CONVERGE_TIMEOUT_MS)
		sleep_ms(POLL_MS);
	if (!held) {
		fprintf(stderr,
			"cluster fixture: migrate_finish: slot %d: nodes do "
			"not agree within %d s: %s\n",
			slot, CONVERGE_TIMEOUT_MS / 1000, w.text);
		dump_cluster(c);
		return -1;
	}
	c->mig_slot = c->mig_from = c->mig_to = -1;
	return 0;
}

/* ---- failover ---------------------------------------------------------- */

int drl_fixture_cluster_kill_master(drl_cluster *c, int i, int *promoted)
{
	slot_map map;
	why w = {"?"};
	int cand[DRL_CLUSTER_NODES_MAX], ncand = 0;
	int owners = 0, live_owners = 0, served = 0, winner = -1;
	long long t0;

	if (promoted != NULL)
		*promoted = -1;
	if (!live_node(c, i) || read_role(c, i, NULL) != 1 ||
	    read_slots(c, i, map, NULL) != 0) {
		fprintf(stderr,
			"cluster fixture: kill_master: node %d is not a live "
			"master\n",
			i);
		return -1;
	}
	for (int k = 0; k < c->nodes; k++) {
		int port = 0, owns = 0;
		for (int s = 0; s < DRL_CLUSTER_SLOTS && !owns; s++)
			owns = map[s] == k;
		if (owns) {
			owners++;
			live_owners += live_node(c, k) && k != i;
			served += k == i;
		}
		if (k != i && live_node(c, k) && read_role(c, k, &port) == 0 &&
		    port == c->node[i].port)
			cand[ncand++] = k;
	}
	if (!served || ncand == 0 || live_owners < owners / 2 + 1) {
		fprintf(stderr,
			"cluster fixture: kill_master: node %d cannot fail "
			"over: it serves %s slot, has %d live replicas, and "
			"%d of %d masters would be left to vote (%d "
			"needed)\n",
			i, served ? "a" : "no", ncand, live_owners, owners,
			owners / 2 + 1);
		return -1;
	}

	drl_fixture_kill(&c->node[i]);
	c->alive[i] = 0;
	t0 = now_ms();
	while (now_ms() - t0 < CONVERGE_TIMEOUT_MS) {
		for (int k = 0; k < ncand && winner < 0; k++)
			if (read_role(c, cand[k], NULL) == 1)
				winner = cand[k];
		if (winner < 0) {
			because(&w, "no replica of node %d is master yet", i);
		} else if (converged(c, map, -1, -1, &w)) {
			if (promoted != NULL)
				*promoted = winner;
			return 0;
		}
		sleep_ms(POLL_MS);
	}
	fprintf(stderr,
		"cluster fixture: kill_master: node %d: no failover within "
		"%d s: %s\n",
		i, CONVERGE_TIMEOUT_MS / 1000, w.text);
	dump_cluster(c);
	return -1;
}

/* Node i is a master, or a replica whose link to its master is up. 1 yes,
 * 0 not (yet: w says why). */
static int replica_synced(const drl_cluster *c, int i, why *w)
{
	redisReply *r = node_cmd(c, i, 1, "INFO replication");
	int ok = r != NULL && r->type == REDIS_REPLY_STRING &&
		 (info_is(r->str, "role", "master") ||
		  info_is(r->str, "master_link_status", "up"));

	if (r != NULL)
		freeReplyObject(r);
	if (!ok)
		because(w, "node %d: not a master, and no master link up", i);
	return ok;
}

int drl_fixture_cluster_restart_node(drl_cluster *c, int i)
{
	slot_map map;
	why w = {"?"};
	long long t0;

	if (!valid_node(c, i) || c->alive[i]) {
		fprintf(stderr,
			"cluster fixture: restart_node: node %d is not a "
			"killed node\n",
			i);
		return -1;
	}
	if (drl_fixture_restart(&c->node[i]) != 0) {
		fprintf(stderr,
			"cluster fixture: restart_node: node %d (port "
			"%d) did not start\n",
			i, c->node[i].port);
		return -1;
	}
	c->alive[i] = 1;
	t0 = now_ms();
	while (now_ms() - t0 < CONVERGE_TIMEOUT_MS) {
		if (converged(c, map, -1, -1, &w) && replica_synced(c, i, &w))
			return 0;
		sleep_ms(POLL_MS);
	}
	fprintf(stderr,
		"cluster fixture: restart_node: node %d: cluster not ok "
		"within %d s: %s\n",
		i, CONVERGE_TIMEOUT_MS / 1000, w.text);
	dump_cluster(c);
	return -1;
}
