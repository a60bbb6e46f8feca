/*
 * ShouldRateLimit, the call of Envoy's rate limit service, decided in C
 * (docs/envoy.md): grpc_service.cc turns the protobuf request into a
 * drld_envoy_request and the answer back; everything that decides is here,
 * so it is the same whatever carries it.
 *
 * Semantics are envoyproxy/ratelimit's (its src/service/ratelimit.go):
 * each descriptor is matched in the request's domain (envoy_config.h) or
 * takes the request's limit override; a limit that another matched
 * limit `replaces` is skipped; an unlimited one answers OK with
 * limit_remaining 2^32-1; every other limit is decided by its libdrl
 * limiter with cost = the descriptor's hits_addend when set (0 checks
 * without consuming), else the request's, 0 counting as 1. overall_code is
 * OVER_LIMIT when any descriptor is, after shadow_mode (per descriptor:
 * its status says OK) and --shadow (the overall code says OK). A domain
 * drld does not know answers OK for every descriptor.
 *
 * A malformed request is refused whole before anything is counted. A
 * store failure is what the limit's on_error says, or UNAVAILABLE.
 *
 * Thread-safe: called from any gRPC thread at once.
 */
#ifndef DRLD_ENVOY_SERVICE_H
#define DRLD_ENVOY_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Most descriptors in one request. */
#define DRLD_ENVOY_DESCRIPTORS_MAX 256

struct drld;
struct drld_envoy_config;

/* How a call ended (counted in /metrics, drld_grpc_calls_total). */
enum drld_envoy_outcome {
	DRLD_ENVOY_OK,
	DRLD_ENVOY_OVER_LIMIT,
	DRLD_ENVOY_INVALID,     /* INVALID_ARGUMENT */
	DRLD_ENVOY_UNAVAILABLE, /* the store failed, no on_error */
	DRLD_ENVOY_INTERNAL,    /* out of memory */
	/* never decided (drld_envoy_not_decided() counts these): */
	DRLD_ENVOY_CANCELLED, /* the caller gave up (its deadline, a
				   reset) before a decider took the call */
	DRLD_ENVOY_EXHAUSTED, /* RESOURCE_EXHAUSTED: too many calls were
				   waiting for a decider */
	DRLD_ENVOY_OUTCOMES
};

/* One entry of a request's descriptor (bytes, not NUL-terminated). */
struct drld_envoy_entry {
	const char *key;
	size_t keylen;
	const char *value;
	size_t valuelen;
};

/* One descriptor of a request. */
struct drld_envoy_descriptor {
	const struct drld_envoy_entry *entries;
	size_t nentries;
	bool has_override; /* the request's `limit` */
	uint32_t override_rpu;
	int override_unit; /* envoy.type.v3.RateLimitUnit */
	bool has_hits;     /* the descriptor's own hits_addend */
	uint64_t hits;
};

struct drld_envoy_request {
	const char *domain;
	size_t domainlen;
	const struct drld_envoy_descriptor *descriptors;
	size_t ndescriptors;
	uint32_t hits_addend; /* 0 counts as 1 */
};

enum { DRLD_ENVOY_CODE_OK = 1, DRLD_ENVOY_CODE_OVER_LIMIT = 2 };

/* One DescriptorStatus. */
struct drld_envoy_status {
	int code; /* DRLD_ENVOY_CODE_* */
	bool has_limit;
	uint32_t requests_per_unit;
	int unit;         /* enum drld_envoy_unit */
	const char *name; /* rate_limit.name or NULL; valid until
			     drld_envoy_answer_release() */
	uint32_t remaining;
	bool has_reset;
	int64_t reset_us; /* until the limit allows again (denied) or is
			     full again (allowed) */
};

/* The whole answer: statuses[i] for descriptor i (the caller's array of
 * ndescriptors), overall code, and the RateLimit-* header values when
 * --grpc-headers is on and a limit applied. */
struct drld_envoy_answer {
	int overall;
	struct drld_envoy_status *statuses;
	bool headers;
	uint32_t header_limit, header_remaining;
	int64_t header_reset_s;
	struct drld_envoy_config *hold; /* released by
					   drld_envoy_answer_release() */
};

/* Decide request q on drld d. Returns DRLD_ENVOY_OK or _OVER_LIMIT with
 * a filled, or _INVALID / _UNAVAILABLE / _INTERNAL with a message in msg
 * (n bytes) and nothing else to send. Counts the outcome in d's envoy
 * stats. */
enum drld_envoy_outcome drld_envoy_decide(struct drld *d,
					  const struct drld_envoy_request *q,
					  struct drld_envoy_answer *a,
					  char *msg, size_t n);

/* ---- deciding without blocking (the async API) ---------------------------
 * For a store whose single decisions the async API sends without a worker
 * (drl_async_direct(): Redis tx=lua with shared connections), a call is
 * started on the thread that read it and ended by the async context's
 * callbacks: no thread waits for the store. The decisions are those of
 * drld_envoy_decide(), but for one thing: every descriptor's store call is
 * started at once, so when one fails the others (started already) count,
 * where the blocking path stops at the first failure. */

/* How a started call ends: its outcome and, for an error outcome, the
 * message (both as drld_envoy_decide() returns and writes them). Runs
 * once, on the thread running drl_async_process() (or, when no store call
 * was started, inside drld_envoy_start()); *a is filled by then, and q and
 * a may be freed from here on. */
typedef void (*drld_envoy_done_fn)(void *arg, enum drld_envoy_outcome o,
				   const char *msg);
struct drl_async;

/* 1 when d's store decides a one-limit policy without a worker
 * (drl_async_direct() of such a limiter): worth an async context. */
int drld_envoy_store_direct(struct drld *d);

/* Start deciding q into a through context `as`: 0, and done(arg, ...)
 * follows exactly once (q and a must stay valid until it runs); 1 when a
 * limit q matches would need a worker of the context (not
 * drl_async_direct()): nothing started or counted, decide q with
 * drld_envoy_decide() instead; -1 when out of memory (nothing started, no
 * done). The call's outcome is counted as drld_envoy_decide() counts it;
 * a full context (its queue) is DRLD_ENVOY_EXHAUSTED. */
int drld_envoy_start(struct drld *d, struct drl_async *as,
		     const struct drld_envoy_request *q,
		     struct drld_envoy_answer *a, drld_envoy_done_fn done,
		     void *arg);

/* Count a call the server answered without deciding it
 * (DRLD_ENVOY_CANCELLED, DRLD_ENVOY_EXHAUSTED). */
void drld_envoy_not_decided(struct drld *d, enum drld_envoy_outcome o);

/* The server's shards (at most DRLD_GRPC_POLLERS_MAX), for
 * drld_grpc_connections_total; 0 (the default): drld's own listener deals
 * none (TLS: the kernel deals them). */
void drld_envoy_shards(struct drld *d, unsigned n);

/* Count a connection dealt to shard i (< the shards set). */
void drld_envoy_connection_dealt(struct drld *d, unsigned i);

/* Count a connection drld's listener closed without dealing it, for
 * drld_grpc_connections_closed_total: why is an enum drld_closed_reason
 * (acceptor.h). */
void drld_envoy_connection_closed(struct drld *d, unsigned why);

/* Let go of what a's statuses point to (every outcome; once). */
void drld_envoy_answer_release(struct drld_envoy_answer *a);

#ifdef __cplusplus
}
#endif

#endif /* DRLD_ENVOY_SERVICE_H */
