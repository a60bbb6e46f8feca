/*
 * The peer the reply fuzzers talk to: one fake server
 * (tests/fixtures/fake_server.h) per fuzzing process, on a unix socket in a
 * private temporary directory, fed from the fuzz input.
 *
 * Input format: the bytes the server sends back, cut into pieces at every
 * FUZZ_PEER_NEXT marker (the marker itself is not sent): the first piece
 * answers the first request bytes of the connection, each later piece the
 * next request, or goes after 5 ms without one (a client waiting for the
 * rest of a reply). Up to FAKE_PLAN_SPLITS cuts are made; later markers
 * are sent as they are. After the last piece the server closes its side,
 * so no input makes a call wait for its timeout.
 */
#ifndef DRL_FUZZ_PEER_H
#define DRL_FUZZ_PEER_H

#include "fake_server.h"
#include "fuzz.h"

#include <drl/drl.h>

#include <stddef.h>
#include <stdint.h>

#define FUZZ_PEER_NEXT "#NEXT#"

/* The specs a configuration byte chooses from: every algorithm, a policy
 * of two, and numbers too large for the Lua twins (the C step then runs
 * over load/cas even with tx=lua). */
extern const char *const fuzz_specs[8];

/* The socket path (the server is started on first use; stopped and the
 * directory removed at exit). Aborts when the server cannot start. When
 * the environment names a socket in FUZZ_PEER_SOCKET, that one is used
 * instead and fuzz_peer_serve() does nothing (seed capture). */
const char *fuzz_peer_path(void);

/* Bytes a target will not send (a known issue it steps around): 1 to skip
 * the input. */
typedef int (*fuzz_skip_fn)(const uint8_t *bytes, size_t len);

/* Serve the next connections: first `fixed` (n of them, each a plan of its
 * own, e.g. a probe's fixed answer), then one that answers with `data` as
 * described above; any later connection is closed at once. Returns -1,
 * serving nothing, when skip (may be NULL) refuses the bytes to be sent
 * (markers taken out), else 0. */
int fuzz_peer_serve(const fake_plan *fixed, size_t n, const uint8_t *data,
		    size_t size, fuzz_skip_fn skip);

/* What every call must satisfy, whatever the server said; abort() (a
 * crash for libFuzzer) when it does not: rc is 0 or a DRL_E* code; a
 * failure comes with a denial in *r and (unless err is NULL: a batch item)
 * its code and a message in err; a success with allowed 0 or 1. */
void fuzz_check_call(int rc, const drl_result *r, const drl_error *err);

/* The same for an open or a limiter that failed (no result). */
void fuzz_check_error(int rc, const drl_error *err);

/* One decision for key "k1" (or a batch of three: "a", "b", "a") at a
 * fixed time, or at the store's (store_clock), every result checked as
 * above. */
void fuzz_decide(drl_limiter *lim, int store_clock, int batch, int64_t cost);

/* Open the store at uri (a failure is checked and ends it), make a limiter
 * of spec, fuzz_decide() once, free both. */
void fuzz_run(const char *uri, const char *spec, int store_clock, int batch,
	      int64_t cost);

#endif
