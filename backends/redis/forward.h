/*
 * One call of a store method with its arguments packed, to forward it to
 * another store: what the stores over many servers (cluster.c, sentinel.c)
 * do with every call, each choosing the node its own way (by a key's
 * slot; the current master). Internal.
 */
#ifndef DRL_REDIS_FORWARD_H
#define DRL_REDIS_FORWARD_H

#include <drl/sys/backend.h>

/* The arguments of one method call: each method reads its own fields
 * (named as its parameters in drl/sys/backend.h). */
typedef struct drl__redis_fwd {
	size_t n; /* keys; eval: nkeys */
	const drl_bytes *keys;
	drl_bytes key;
	int64_t delta, ttl_us;
	int64_t *values; /* incr: value; now: now_us */
	void *buf;
	const void *blob;
	size_t cap, len, *lenp;
	uint64_t version, *versionp;
	const drl_script *script;
	size_t nargs, nout, *nret;
	const int64_t *args;
	int64_t *out;
	const drl_script_call *calls; /* eval_policy: n of them */
} drl__redis_fwd;

/* Run the method on `node` with the arguments in fwd (a drl__redis_fwd *):
 * the shape both forwarding stores call a node with. */
typedef int (*drl__redis_fwd_fn)(drl_backend *node, void *fwd, drl_error *err);

int drl__redis_fwd_incr(drl_backend *node, void *fwd, drl_error *err);
int drl__redis_fwd_get_many(drl_backend *node, void *fwd, drl_error *err);
int drl__redis_fwd_load(drl_backend *node, void *fwd, drl_error *err);
int drl__redis_fwd_cas(drl_backend *node, void *fwd, drl_error *err);
int drl__redis_fwd_eval(drl_backend *node, void *fwd, drl_error *err);
int drl__redis_fwd_policy(drl_backend *node, void *fwd, drl_error *err);
int drl__redis_fwd_now(drl_backend *node, void *fwd, drl_error *err);
int drl__redis_fwd_del(drl_backend *node, void *fwd, drl_error *err);
int drl__redis_fwd_add_read(drl_backend *node, void *fwd, drl_error *err);
int drl__redis_fwd_trim(drl_backend *node, void *fwd, drl_error *err);

/* The arguments of a load or an eval call packed (the method's
 * parameters, in their order), as both forwarding stores send them:
 * what drl__redis_fwd_load and drl__redis_fwd_eval unpack. */
drl__redis_fwd drl__redis_fwd_load_args(drl_bytes key, void *buf, size_t cap,
					size_t *len, uint64_t *version);
drl__redis_fwd drl__redis_fwd_eval_args(const drl_script *script, size_t nkeys,
					const drl_bytes *keys, size_t nargs,
					const int64_t *args, int64_t *out,
					size_t nout, size_t *nret);

/* Fill the method slots of parent, a forwarding store, with own's: each
 * one where tmpl (the store its nodes are) offers it (every store offers
 * the five it must have) and own has it; update never (a forwarding store
 * has no atomic update of its own). The slots it does not name (channels)
 * are left as they are. */
void drl__redis_fwd_methods(drl_backend *parent, const drl_backend *tmpl,
			    const drl_backend *own);

#endif /* DRL_REDIS_FORWARD_H */
