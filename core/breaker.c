/*
 * The circuit breaker of a store: stop sending calls to a server that is
 * down, and find out cheaply when it is back.
 *
 * Closed: every call goes to the store. `failures` consecutive calls that
 * could not reach it (DRL_EUNAVAILABLE, DRL_ETIMEDOUT: refused, reset,
 * timed out; an error *reply* means the server is there) open it for
 * `open_us`. While open, calls are refused at once with DRL_EUNAVAILABLE,
 * unsent. When that time is up, the next call is the probe (half-open):
 * it goes to the store while every other call is still refused. A probe
 * that succeeds closes the breaker; one that fails reopens it for twice
 * as long, up to `max_us`. So a dead server sees one call per open period
 * per store instead of every caller's, and reconnecting backs off
 * exponentially; a server that returns is used again within one open
 * period of the next probe.
 *
 * Lock-free: a call costs one relaxed load when closed, and the state is
 * two atomics (open_until, the monotonic µs the breaker stays open until,
 * 0 when closed or PROBING while a probe is out; and the current open
 * period). Races are benign in the safe direction: a call that started
 * before the breaker opened and succeeds closes it (the server answered).
 */
#include "internal.h"

#include <inttypes.h>

#define PROBING INT64_MAX

#define DEFAULT_FAILURES 5
#define DEFAULT_OPEN_MS 100
#define DEFAULT_MAX_MS 2000
#define OPEN_MS_MAX 3600000 /* an hour */

void drl__breaker_init(drl__breaker *b, int64_t failures, int64_t open_us,
		       int64_t max_us)
{
	b->failures_max = failures;
	b->open_us = open_us;
	b->max_us = max_us < open_us ? open_us : max_us;
	atomic_init(&b->failures, 0);
	atomic_init(&b->open_until, 0);
	atomic_init(&b->period_us, open_us);
}

int drl__breaker_options(drl__breaker *b, drl__uri *u, drl_error *err)
{
	int64_t failures, open_ms, max_ms;
	int rc = drl_uri_option_int(u, "breaker_failures", 0, 1000000,
				    DEFAULT_FAILURES, &failures, err);
	if (rc == 0)
		rc = drl_uri_option_int(u, "breaker_open_ms", 1, OPEN_MS_MAX,
					DEFAULT_OPEN_MS, &open_ms, err);
	if (rc == 0)
		rc = drl_uri_option_int(
			u, "breaker_max_ms", 1, OPEN_MS_MAX,
			open_ms > DEFAULT_MAX_MS ? open_ms : DEFAULT_MAX_MS,
			&max_ms, err);
	if (rc)
		return rc;
	if (max_ms < open_ms)
		return drl_error_set(err, DRL_EINVAL,
				     "breaker_max_ms=%" PRId64
				     " is below breaker_open_ms=%" PRId64,
				     max_ms, open_ms);
	drl__breaker_init(b, failures, open_ms * 1000, max_ms * 1000);
	return 0;
}

void drl__breaker_default(drl__breaker *b)
{
	drl__breaker_init(b, DEFAULT_FAILURES, DEFAULT_OPEN_MS * 1000,
			  DEFAULT_MAX_MS * 1000);
}

static int refuse(drl_store *s, int64_t until, int64_t now, drl_error *err)
{
	DRL__COUNT(&s->stats, breaker_rejects);
	if (until == PROBING)
		return drl_error_set(err, DRL_EUNAVAILABLE,
				     "%s store: circuit open, a probe call is "
				     "out (not sent)",
				     s->backend->name);
	return drl_error_set(err, DRL_EUNAVAILABLE,
			     "%s store: circuit open after %" PRId64
			     " failed calls in a row; next try in %" PRId64
			     " ms (not sent)",
			     s->backend->name, s->breaker.failures_max,
			     (until - now + 999) / 1000);
}

int drl__breaker_enter(drl_store *s, bool *probe, drl_error *err)
{
	drl__breaker *b = &s->breaker;
	*probe = false;
	if (b->failures_max == 0)
		return 0;
	int64_t until =
		atomic_load_explicit(&b->open_until, memory_order_acquire);
	if (until == 0)
		return 0;
	int64_t now = drl_mono_us();
	if (until == PROBING || now < until)
		return refuse(s, until, now, err);
	/* Half-open: one caller becomes the probe. */
	if (!atomic_compare_exchange_strong(&b->open_until, &until, PROBING))
		return refuse(s, until, now, err);
	*probe = true;
	return 0;
}

void drl__breaker_leave(drl_store *s, bool probe, int rc)
{
	drl__breaker *b = &s->breaker;
	bool failed = drl__is_unreachable(rc);
	if (drl__is_store_failure(rc))
		DRL__COUNT(&s->stats, store_failures);
	if (b->failures_max == 0)
		return;
	if (!failed) {
		if (atomic_load_explicit(&b->failures, memory_order_relaxed))
			atomic_store_explicit(&b->failures, 0,
					      memory_order_relaxed);
		if (probe || atomic_load_explicit(&b->open_until,
						  memory_order_relaxed)) {
			atomic_store(&b->period_us, b->open_us);
			atomic_store(&b->open_until, 0);
		}
		return;
	}
	int64_t n = atomic_fetch_add(&b->failures, 1) + 1;
	if (probe) {
		int64_t p = atomic_load(&b->period_us);
		p = p > b->max_us / 2 ? b->max_us : 2 * p;
		atomic_store(&b->period_us, p);
		atomic_store(&b->open_until, drl_mono_us() + p);
		DRL__COUNT(&s->stats, breaker_opens);
		return;
	}
	int64_t closed = 0;
	if (n >= b->failures_max &&
	    atomic_compare_exchange_strong(&b->open_until, &closed,
					   drl_mono_us() +
						   atomic_load(&b->period_us)))
		DRL__COUNT(&s->stats, breaker_opens);
}

int64_t drl__breaker_retry_us(drl_store *s)
{
	drl__breaker *b = &s->breaker;
	int64_t until = atomic_load(&b->open_until);
	int64_t period = atomic_load(&b->period_us);
	if (until == 0 || until == PROBING)
		return period;
	int64_t left = until - drl_mono_us();
	return left > 0 ? left : 0;
}
