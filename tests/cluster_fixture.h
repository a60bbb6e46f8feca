/*
 * Test fixture: a real Redis Cluster of redis-server processes on free
 * loopback ports (built on server_fixture.h), with the operations a cluster
 * test needs: where a slot lives, slot migration in steps (to act in the
 * ASK window), and a master's failover.
 *
 * Return values follow drl_fixture_redis_start: 0 done, 1 skip (only from
 * drl_fixture_cluster_start: redis-server missing and not under CI=true),
 * -1 failure with a message on stderr. Every wait is bounded.
 *
 * Node indexes: node[0..masters) are the initial masters, node[masters + k]
 * the replica of node[k]. Roles change on a failover: ask
 * drl_fixture_cluster_master_of, not the index. A node index is the same
 * for the life of the cluster; alive[i] is 0 after a kill.
 *
 * Threads: the functions are not thread-safe on one drl_cluster; call them
 * from the thread that started the cluster (see server_fixture.h).
 */
#ifndef DRL_CLUSTER_FIXTURE_H
#define DRL_CLUSTER_FIXTURE_H

#include <stddef.h>

#include "server_fixture.h"

#define DRL_CLUSTER_NODES_MAX 8
#define DRL_CLUSTER_SLOTS 16384

typedef struct drl_cluster {
	int nodes;   /* started: masters + replicas */
	int masters; /* initial masters */
	drl_server node[DRL_CLUSTER_NODES_MAX]; /* [0..masters): masters */
	char id[DRL_CLUSTER_NODES_MAX][41];     /* CLUSTER MYID of each */
	int alive[DRL_CLUSTER_NODES_MAX];       /* 0 after a kill */
	/* The slot migration under way (one at a time): begin sets it,
	 * finish clears it (mig_slot -1). */
	int mig_slot, mig_from, mig_to;
} drl_cluster;

/* Start `masters` (1..3) masters and `replicas` (0 or 1) replicas per
 * master: redis-server --cluster-enabled yes, --cluster-node-timeout 1000,
 * persistence off, each in its private dir, on 127.0.0.1 ports whose bus
 * ports (port + 10000) are free too. Slots are split evenly over the
 * masters in order (node[0] has slot 0). Returns once every node reports
 * cluster_state:ok, all agree on the slot map (all 16384 slots served by
 * the expected masters, each with its replica) and every replica's link to
 * its master is up; within 30 s. 0 ready, 1 skip, -1 failure (message and
 * node logs on stderr; everything started is stopped). */
int drl_fixture_cluster_start(drl_cluster *c, int masters, int replicas);

/* Stop every node (by PID, as drl_fixture_stop) and remove their dirs.
 * Safe on a zeroed, failed or already stopped cluster. */
void drl_fixture_cluster_stop(drl_cluster *c);

/* "127.0.0.1:p1,127.0.0.1:p2,..." of the initial masters (dead or not),
 * into buf. Returns buf, or NULL when cap is too small. */
const char *drl_fixture_cluster_hosts(const drl_cluster *c, char *buf,
				      size_t cap);

/* A test group's setup: drl_fixture_cluster_start(c, masters, replicas),
 * then its hosts into hosts (cap bytes); *have says whether it runs (0:
 * skip its tests). 0, or -1 when the start (or the hosts) failed.
 * Stop it with drl_fixture_cluster_stop. */
int drl_fixture_cluster_setup(drl_cluster *c, int masters, int replicas,
			      char *hosts, size_t cap, int *have);

/* The cluster slot (0..16383) of a key: CRC16-XMODEM mod 16384 of the key,
 * or of the part between the first '{' and the first '}' after it when
 * that part is not empty (hash tag). */
int drl_fixture_cluster_slot(const void *key, size_t len);

/* Index into node[] of the node serving `slot` as master, as the first
 * live node that answers CLUSTER SLOTS sees it; -1 when no live node
 * answers or the slot is not served. */
int drl_fixture_cluster_master_of(drl_cluster *c, int slot);

/* Slot migration in three steps, so a test can act in the ASK window; one
 * migration at a time.
 * begin: CLUSTER SETSLOT slot IMPORTING on node `to` (a live master other
 * than the owner), then MIGRATING on the current owner. From now on the
 * owner answers -ASK for keys of the slot it no longer has.
 * move_keys: MIGRATE every key of the slot from the owner to `to`
 * (CLUSTER GETKEYSINSLOT loop, no REPLACE: a key already on the target is
 * a failure, as a client wrote it there while the owner still had it).
 * finish: CLUSTER SETSLOT slot NODE <to> on the target, the source, then
 * every other live master, and wait (15 s) until every live node maps the
 * slot to `to`. Fails when the source still holds keys of the slot.
 * 0 done, -1 failure. */
int drl_fixture_cluster_migrate_begin(drl_cluster *c, int slot, int to);
int drl_fixture_cluster_migrate_keys(drl_cluster *c, int slot);
int drl_fixture_cluster_migrate_finish(drl_cluster *c, int slot);

/* SIGKILL master node[i] (alive[i] becomes 0; its dir stays until
 * drl_fixture_cluster_stop) and wait, at most 15 s, until one of its
 * replicas is promoted and every live node reports cluster_state:ok with
 * all slots served by live masters, the same map on every node.
 * *promoted (may be NULL) gets the new master's index. Fails at once,
 * killing nothing, when node i is not a live master serving slots, has no
 * live replica, or the other live masters are no majority of the masters
 * (a failover needs their votes: use 3 masters). 0 done, -1 failure. */
int drl_fixture_cluster_kill_master(drl_cluster *c, int i, int *promoted);

/* Start killed node i again (drl_fixture_restart: same port and dir, so
 * its nodes.conf and node ID) and wait, at most 15 s, until every live
 * node, i included, reports cluster_state:ok and the same map with every
 * slot served by a live node, and node i, if a replica, has its link to
 * its master up. A killed master comes back as a replica of the node
 * promoted in its place. 0 done, -1 failure. */
int drl_fixture_cluster_restart_node(drl_cluster *c, int i);

/* Run one command on node i (a fresh connection, 2 s connect and 5 s
 * command timeouts), argv style (NUL-terminated strings). Returns the
 * hiredis redisReply * (free it with freeReplyObject; it may be an error
 * reply, such as -MOVED or -ASK), or NULL when the node is dead or does not
 * answer (message on stderr). */
void *drl_fixture_cluster_command(drl_cluster *c, int i, int argc,
				  const char **argv);

/* Index of the node listening on `port`, or -1. */
int drl_fixture_cluster_node_of_port(const drl_cluster *c, int port);

#endif
