/* A store method called with its arguments packed (forward.h). */
#include "forward.h"

int drl__redis_fwd_incr(drl_backend *node, void *fwd, drl_error *err)
{
	drl__redis_fwd *a = fwd;
	return node->incr(node, a->key, a->delta, a->ttl_us, a->values, err);
}

int drl__redis_fwd_get_many(drl_backend *node, void *fwd, drl_error *err)
{
	drl__redis_fwd *a = fwd;
	return node->get_many(node, a->n, a->keys, a->values, err);
}

int drl__redis_fwd_load(drl_backend *node, void *fwd, drl_error *err)
{
	drl__redis_fwd *a = fwd;
	return node->load(node, a->key, a->buf, a->cap, a->lenp, a->versionp,
			  err);
}

int drl__redis_fwd_cas(drl_backend *node, void *fwd, drl_error *err)
{
	drl__redis_fwd *a = fwd;
	return node->cas(node, a->key, a->blob, a->len, a->version, a->ttl_us,
			 err);
}

int drl__redis_fwd_eval(drl_backend *node, void *fwd, drl_error *err)
{
	drl__redis_fwd *a = fwd;
	return node->eval(node, a->script, a->n, a->keys, a->nargs, a->args,
			  a->out, a->nout, a->nret, err);
}

int drl__redis_fwd_policy(drl_backend *node, void *fwd, drl_error *err)
{
	drl__redis_fwd *a = fwd;
	return node->eval_policy(node, NULL, a->n, a->calls, a->out, a->nout,
				 a->nret, NULL, NULL, err);
}

int drl__redis_fwd_now(drl_backend *node, void *fwd, drl_error *err)
{
	drl__redis_fwd *a = fwd;
	return node->now(node, a->values, err);
}

int drl__redis_fwd_del(drl_backend *node, void *fwd, drl_error *err)
{
	drl__redis_fwd *a = fwd;
	return node->del(node, a->n, a->keys, err);
}

int drl__redis_fwd_add_read(drl_backend *node, void *fwd, drl_error *err)
{
	drl__redis_fwd *a = fwd;
	return node->add_read(node, a->n, a->keys, a->delta, a->ttl_us,
			      a->values, err);
}

int drl__redis_fwd_trim(drl_backend *node, void *fwd, drl_error *err)
{
	drl__redis_fwd *a = fwd;
	return node->trim(node, a->n, a->keys, a->ttl_us, err);
}

drl__redis_fwd drl__redis_fwd_load_args(drl_bytes key, void *buf, size_t cap,
					size_t *len, uint64_t *version)
{
	return (drl__redis_fwd){.key = key,
				.buf = buf,
				.cap = cap,
				.lenp = len,
				.versionp = version};
}

drl__redis_fwd drl__redis_fwd_eval_args(const drl_script *script, size_t nkeys,
					const drl_bytes *keys, size_t nargs,
					const int64_t *args, int64_t *out,
					size_t nout, size_t *nret)
{
	return (drl__redis_fwd){.script = script,
				.n = nkeys,
				.keys = keys,
				.nargs = nargs,
				.args = args,
				.out = out,
				.nout = nout,
				.nret = nret};
}

#define OFFER(slot) parent->slot = tmpl->slot ? own->slot : NULL

void drl__redis_fwd_methods(drl_backend *parent, const drl_backend *tmpl,
			    const drl_backend *own)
{
	OFFER(destroy);
	OFFER(incr);
	OFFER(get_many);
	OFFER(load);
	OFFER(cas);
	parent->update = NULL;
	OFFER(eval);
	OFFER(now);
	OFFER(del);
	OFFER(add_read);
	OFFER(eval_start);
	OFFER(add_read_start);
	OFFER(trim);
	OFFER(trim_start);
	OFFER(eval_policy);
	if (parent->eval_policy == NULL) /* not forwarded: not offered */
		parent->caps &= ~(unsigned)DRL_CAP_POLICY;
	/* forwarded policies are blocking ones (fwd_policy) */
	parent->caps &= ~(unsigned)DRL_CAP_POLICY_START;
}
