/*
 * fuzz_redis_reply: what the Redis store makes of any byte stream a server
 * sends back. Input: one configuration byte, then the stream (fuzz_peer.h:
 * pieces cut at "#NEXT#", each answering one request, the connection setup
 * PING first).
 *
 * Each input opens a fresh store on redis+unix:// (the fake peer), makes
 * one decision (or a batch of three) and frees everything. Nothing may
 * crash, hang or leak, and every call must pass fuzz_check_call(): an
 * error is a DRL_E* code with a message and a denial, never an allow.
 *
 * Configuration byte: bit 0 tx=watch (else lua); bit 1 clock=server; bits
 * 2-4 the spec (fuzz_specs[]); bit 5 cost 0 (a peek); bit 6 a batch of three
 * keys; bit 7 on_error=allow (a failure then decides: allowed, rc 0).
 */
#include "fuzz_peer.h"

#include <drl/drl.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char uri[256], spec[128];
	if (size < 1 || size > 65536)
		return 0;
	unsigned cfg = data[0];
	int server_clock = (cfg >> 1) & 1;
	snprintf(uri, sizeof uri,
		 "redis+unix://%s?tx=%s&clock=%s&timeout_ms=1000&pool=2",
		 fuzz_peer_path(), cfg & 1 ? "watch" : "lua",
		 server_clock ? "server" : "client");
	snprintf(spec, sizeof spec, "%s%s", fuzz_specs[(cfg >> 2) & 7],
		 cfg & 0x80 ? ";on_error=allow" : "");
	if (fuzz_peer_serve(NULL, 0, data + 1, size - 1, NULL) != 0)
		return -1;

	fuzz_run(uri, spec, server_clock, (cfg >> 6) & 1,
		 (cfg >> 5) & 1 ? 0 : 1);
	return 0;
}
