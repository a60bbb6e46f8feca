/*
 * fuzz_memcached_reply: what the memcached store makes of any byte stream
 * a server sends back over the binary protocol. Input: one configuration
 * byte, then the stream the call's connection gets (fuzz_peer.h: pieces
 * cut at "#NEXT#", each answering one request). The probe connection
 * drl_store_open makes first is answered with a fixed, valid version reply.
 *
 * Each input opens a fresh store on memcached+unix:// (the fake peer),
 * makes one decision (or a batch of three) and frees everything. Nothing
 * may crash, hang or leak, and every call must pass fuzz_check_call().
 *
 * Configuration byte: bits 0-2 the spec (fuzz_specs[]); bit 3 cost 0 (a
 * peek); bit 4 a batch of three keys; bit 5 on_error=allow.
 *
 * Not the ASCII protocol (binary=0): there libmemcached 1.1 asserts, and
 * so aborts the process, on some replies to a storage command (`add`
 * answered with "END"); fuzz/README.md, "Known issues".
 */
#include "fuzz_peer.h"

#include <drl/drl.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* memcached 1.6's answer to `version`. */
static const char version[] =
	"\x81\x0b\x00\x00\x00\x00\x00\x00\x00\x00\x00\x06\x00\x01\x00\x00"
	"\x00\x00\x00\x00\x00\x00\x00\x00"
	"1.6.18";

#define BODY_MAX 1048576

/* KNOWN ISSUE (reported; remove when fixed): libmemcached 1.1 allocates a
 * value's buffer from a response header before reading the body, for a
 * length of body - key - extras, unchecked: a body length of 0xffffffff,
 * or one shorter than key and extras (it wraps), costs 4 GiB (libFuzzer's
 * malloc limit). Streams holding such a header anywhere are skipped. */
static int known_issue(const uint8_t *d, size_t n)
{
	for (size_t i = 0; i + 12 <= n; i++) {
		if (d[i] != 0x81)
			continue;
		uint32_t key = (uint32_t)d[i + 2] << 8 | d[i + 3];
		uint32_t body = (uint32_t)d[i + 8] << 24 |
				(uint32_t)d[i + 9] << 16 |
				(uint32_t)d[i + 10] << 8 | d[i + 11];
		if (body > BODY_MAX || key + d[i + 4] > body)
			return 1;
		/* Also (reported): a key longer than 250 bytes overflows the
		 * result's key buffer (libmemcached copies all of it). */
		if (key > 250)
			return 1;
		/* And (reported): statuses 0x20, 0x21 (auth) and 0x82 (out
		 * of memory, as a full memcached -M answers an increment)
		 * fail an assert in libmemcached's auto.cc; a STAT reply
		 * (opcode 0x10) with a key longer than its body overflows a
		 * stack buffer, and to an increment fails the same assert. */
		if (d[i + 6] == 0 &&
		    (d[i + 7] == 0x20 || d[i + 7] == 0x21 || d[i + 7] == 0x82))
			return 1;
		if (d[i + 1] == 0x10)
			return 1;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char uri[256], spec[128];
	fake_plan probe = {.reply = version,
			   .len = sizeof version - 1,
			   .wait_request = 1,
			   .end = FAKE_END_CLOSE};
	if (size < 1 || size > 65536)
		return 0;
	unsigned cfg = data[0];
	snprintf(uri, sizeof uri, "memcached+unix://%s?timeout_ms=1000",
		 fuzz_peer_path());
	snprintf(spec, sizeof spec, "%s%s", fuzz_specs[cfg & 7],
		 cfg & 0x20 ? ";on_error=allow" : "");
	if (fuzz_peer_serve(&probe, 1, data + 1, size - 1, known_issue) != 0)
		return -1;

	fuzz_run(uri, spec, 0, (cfg >> 4) & 1, (cfg >> 3) & 1 ? 0 : 1);
	return 0;
}
