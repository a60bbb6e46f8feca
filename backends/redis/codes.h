/*
 * What a Redis node store's calls return besides the drl codes, set by
 * its connection layer (backends/redis/conn.c) and read by the Cluster
 * and Sentinel stores (through backends/redis/redis.h). A header of its own so
 * that the connection layer needs nothing of the store above it.
 */
#ifndef DRL_BACKENDS_REDIS_CODES_H
#define DRL_BACKENDS_REDIS_CODES_H

#include <stdbool.h>

/* What a cluster node's store returns, instead of DRL_ESTORE, for a reply
 * the cluster store acts on (MOVED, ASK, TRYAGAIN, CLUSTERDOWN); the
 * calling thread's drl__redis_last_redirect() says which, and err holds
 * Redis's text. Never leaves the cluster store. */
#define DRL__EREDIRECT (-1000)

/*
 * What a watched node (drl__redis_watch: a Redis Sentinel's master)
 * returns, instead of `code`, for a failure after which nothing of the
 * call ran on the server, so the call may run again elsewhere: no
 * connection could be opened for it (refused, reset or refused at setup,
 * the TLS handshake), or the server refused its write with READONLY (it
 * is a replica now). err->code stays `code`. Never leaves the sentinel
 * store: drl__redis_code() gives `code` back.
 */
#define DRL__UNSENT_BASE (-2000)
#define DRL__UNSENT(code) (DRL__UNSENT_BASE + (code))
static inline bool drl__redis_unsent(int rc)
{
	return rc < DRL__UNSENT_BASE && rc > DRL__UNSENT_BASE - 1000;
}
/* The code a caller outside the sentinel store may see. */
static inline int drl__redis_code(int rc)
{
	return drl__redis_unsent(rc) ? rc - DRL__UNSENT_BASE : rc;
}

enum {
	DRL__REDIS_MOVED = 1,    /* the slot lives on host:port now */
	DRL__REDIS_ASK = 2,      /* this key: ask host:port, with ASKING */
	DRL__REDIS_TRYAGAIN = 3, /* a multi-key call met half a migration */
	DRL__REDIS_CLUSTERDOWN = 4
};

typedef struct drl__redis_redirect {
	int kind; /* DRL__REDIS_* */
	int slot;
	char host[256];
	int port;
} drl__redis_redirect;

const drl__redis_redirect *drl__redis_last_redirect(void);

#endif /* DRL_BACKENDS_REDIS_CODES_H */
