/*
 * Running an algorithm's pure step atomically against one key.
 *
 * Stores that can run code in place (the memory store's update()) run the
 * step under their own lock: one lookup, no retries. The others get the
 * optimistic loop DESIGN.md describes: load -> step -> cas, retried on
 * conflict with full-jitter exponential backoff, and DRL_ECONFLICT (never a
 * silent allow) when the budget is spent.
 */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define ATTEMPTS 64         /* load/cas rounds before DRL_ECONFLICT */
#define BACKOFF_MIN_US 2    /* first backoff ceiling */
#define BACKOFF_MAX_US 2000 /* largest backoff ceiling */
#define STACK_STATE 1024    /* room up to this size needs no malloc */

typedef struct step_ctx {
	const drl__limit *lim;
	const drl__call *call;
	drl__step_fn step;
	unsigned char
		*out; /* the stack's, or malloc'd (outcap > STACK_STATE) */
	size_t outcap;
	size_t size;   /* the largest state the step writes from no state */
	size_t stored; /* the largest state read (larger: not ours) */
	drl_result *res;
	drl__undo *undo;
} step_ctx;

/* Room in c->out for what the step may write after reading oldlen bytes:
 * the algorithm's size, or that beyond the state read (a state written
 * under other parameters, e.g. a log kept from a higher LIMIT, is written
 * back whole). 0, or DRL_ENOMEM (in the call's error). */
static int out_room(step_ctx *c, size_t oldlen)
{
	size_t need = c->size + oldlen;
	if (need <= c->outcap)
		return 0;
	unsigned char *nb = malloc(need);
	if (!nb)
		return drl_error_set(c->call->err, DRL_ENOMEM, "out of memory");
	if (c->outcap > STACK_STATE)
		free(c->out);
	c->out = nb;
	c->outcap = need;
	return 0;
}

/* drl_update_fn adapter: the store hands us the current blob. */
static int run_in_place(void *arg, const void *old, size_t oldlen,
			const void **newblob, size_t *newlen, int64_t *ttl_us)
{
	step_ctx *c = arg;
	int rc = out_room(c, oldlen);
	if (rc)
		return rc;
	rc = c->step(c->lim, c->call, old, oldlen, c->out, c->outcap, newlen,
		     ttl_us, c->res, c->undo);
	if (rc == 1)
		*newblob = c->out;
	return rc;
}

/* xorshift64*, one per thread; jitter only, no decision depends on it. */
static uint64_t jitter(void)
{
	static _Thread_local uint64_t s;
	if (s == 0) {
		struct timespec ts; /* a seed: the ns bits, not a time */
		clock_gettime(CLOCK_MONOTONIC, &ts);
		s = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)(uintptr_t)&s ^
		    (uint64_t)ts.tv_sec;
		s |= 1;
	}
	s ^= s >> 12;
	s ^= s << 25;
	s ^= s >> 27;
	return s * UINT64_C(2685821657736338717);
}

static void backoff(int attempt)
{
	int64_t ceiling = BACKOFF_MIN_US << (attempt < 10 ? attempt : 10);
	if (ceiling > BACKOFF_MAX_US)
		ceiling = BACKOFF_MAX_US;
	int64_t us = (int64_t)(jitter() % (uint64_t)(ceiling + 1));
	struct timespec ts = {0, (long)(us * 1000)};
	nanosleep(&ts, NULL);
}

/* Load the state at key into *buf (growing it past the stack buffer when
 * needed); *heap is set when *buf was malloc'd. A blob larger than `max`
 * (the largest state this limit reads) is not ours: DRL_ECORRUPT before
 * it is read, so a foreign value cannot make us allocate its size. */
static int load_state(drl_backend *b, drl_bytes key, size_t max,
		      unsigned char **buf, size_t *bufcap, bool *heap,
		      size_t *len, uint64_t *version, drl_error *err)
{
	for (;;) {
		int rc = b->load(b, key, *buf, *bufcap, len, version, err);
		if (rc != DRL_ERANGE)
			return rc;
		if (*len <= *bufcap || *len > max)
			return drl_error_set(err, DRL_ECORRUPT,
					     "stored state of %zu bytes is not "
					     "a libdrl state",
					     *len);
		unsigned char *nb = malloc(*len);
		if (!nb)
			return drl_error_set(err, DRL_ENOMEM, "out of memory");
		if (*heap)
			free(*buf);
		*buf = nb;
		*bufcap = *len;
		*heap = true;
	}
}

static int cas_loop(step_ctx *c, drl_bytes key)
{
	drl_backend *b = c->call->backend;
	drl_error *err = c->call->err;
	unsigned char stackbuf[STACK_STATE];
	unsigned char *in = stackbuf;
	size_t incap = sizeof stackbuf;
	bool heap = false;
	int rc = DRL_ECONFLICT;

	for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
		if (attempt)
			backoff(attempt - 1);
		size_t len = 0, outlen = 0;
		uint64_t version = 0;
		int64_t ttl = 0;
		DRL__COUNT(c->call->stats, cas_attempts);
		rc = load_state(b, key, c->stored, &in, &incap, &heap, &len,
				&version, err);
		if (rc == 0)
			rc = out_room(c, len);
		if (rc)
			break;
		rc = c->step(c->lim, c->call, version ? in : NULL,
			     version ? len : 0, c->out, c->outcap, &outlen,
			     &ttl, c->res, c->undo);
		if (rc <= 0)
			break;
		rc = b->cas(b, key, c->out, outlen, version, ttl, err);
		if (rc != DRL_ECONFLICT)
			break;
		DRL__COUNT(c->call->stats, cas_conflicts);
	}
	if (rc == DRL_ECONFLICT) {
		DRL__COUNT(c->call->stats, cas_exhausted);
		drl_error_set(err, DRL_ECONFLICT,
			      "state changed under us %d times in a row; "
			      "gave up (no decision made)",
			      ATTEMPTS);
	}
	if (heap)
		free(in);
	return rc;
}

/* step against call's key. */
static int run(const drl__limit *lim, const drl__call *call, drl__step_fn step,
	       drl_result *res, drl__undo *undo)
{
	unsigned char stackout[STACK_STATE];
	const drl__algorithm *a = lim->algo;
	size_t size = a->step_room    ? a->step_room(lim)
		      : a->state_size ? a->state_size(lim)
				      : a->state_len;
	size_t stored = a->stored_size ? a->stored_size(lim) : size;
	step_ctx c = {lim,  call,   step, stackout, sizeof stackout,
		      size, stored, res,  undo};
	drl__key k;
	drl_bytes key = drl__key_plain(&k, call->key);
	drl_backend *b = call->backend;
	int rc;
	if ((b->caps & DRL_CAP_UPDATE) && b->update)
		rc = b->update(b, key, run_in_place, &c, call->err);
	else
		rc = cas_loop(&c, key);
	if (rc > 0)
		rc = 0;
	if (c.outcap > STACK_STATE)
		free(c.out);
	return rc;
}

int drl__state_decide(const drl__limit *lim, const drl__call *call,
		      drl_result *res, drl__undo *undo)
{
	if (drl__script_usable(lim, call)) {
		int rc = drl__script_decide(lim, call, 0, NULL, res, undo);
		if (rc != DRL_BACKEND_ESPLIT)
			return rc;
	}
	return run(lim, call, lim->algo->step, res, undo);
}

int drl__state_refund(const drl__limit *lim, const drl__call *call,
		      const drl__undo *undo)
{
	drl_result r;
	drl__undo u = *undo;
	drl__call c = *call;
	int rc = drl__call_now(call, &c.now);
	if (rc)
		return rc;
	return run(lim, &c, lim->algo->unstep, &r, &u);
}

int drl__state_adjust(const drl__limit *lim, const drl__call *call,
		      drl_result *res)
{
	drl__undo undo;
	drl__call c;
	int rc = drl__adjust_twin(lim, call, 0, NULL, res, &c);
	if (rc != 1)
		return rc;
	return run(lim, &c, lim->algo->adjust_step, res, &undo);
}
