/*
 * The reply fuzzers' fake peer and their checks (see fuzz_peer.h).
 */
#include "fuzz_peer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_INPUT 65536
#define PIECE_WAIT_MS 5 /* a client stuck in a reply gets the next piece */
#define NOW_US INT64_C(1795351356440964) /* decisions at a fixed time */

const char *const fuzz_specs[8] = {
	"fixed_window:5/1s",
	"sliding_window:5/1s",
	"subwindow:6/1200ms,subwindows=3",
	"token_bucket:5/1s,burst=3",
	"gcra:5/1s",
	"sliding_log:3/1s",
	"fixed_window:5/1s;token_bucket:10/1m",
	"gcra:1000000000/1ms",
};

static fake_server *peer;
static char dir[128];
static char path[sizeof dir + 16];
static unsigned char buf[MAX_INPUT]; /* the input less its markers */

static void stop_peer(void)
{
	fake_server_stop(peer);
	peer = NULL;
	rmdir(dir);
}

/* FUZZ_PEER_SOCKET names another peer (fuzz/capture_seeds.py: a proxy
 * to a real server that records its replies): use it, start none. */
static const char *upstream(void)
{
	const char *up = getenv("FUZZ_PEER_SOCKET");
	return up != NULL && up[0] != '\0' ? up : NULL;
}

const char *fuzz_peer_path(void)
{
	static const fake_plan closed = {.end = FAKE_END_CLOSE};
	if (upstream() != NULL)
		return upstream();
	if (peer != NULL)
		return path;
	const char *tmp = getenv("TMPDIR");
	if (tmp == NULL || tmp[0] == '\0' || strlen(tmp) > 64)
		tmp = "/tmp";
	snprintf(dir, sizeof dir, "%s/drl-fuzz-XXXXXX", tmp);
	if (mkdtemp(dir) == NULL) {
		perror("fuzz_peer: mkdtemp");
		abort();
	}
	snprintf(path, sizeof path, "%s/peer.sock", dir);
	if (fake_server_start_unix(&peer, path, &closed, 1) != 0)
		abort();
	atexit(stop_peer);
	return path;
}

int fuzz_peer_serve(const fake_plan *fixed, size_t n, const uint8_t *data,
		    size_t size, fuzz_skip_fn skip)
{
	static const size_t mlen = sizeof FUZZ_PEER_NEXT - 1;
	fake_plan plans[FAKE_SERVER_PLANS];
	fake_plan *p;
	size_t len = 0, cuts = 0;

	if (upstream() != NULL)
		return 0;
	(void)fuzz_peer_path();
	if (n + 2 > FAKE_SERVER_PLANS || size > MAX_INPUT)
		abort();
	for (size_t i = 0; i < n; i++)
		plans[i] = fixed[i];
	p = &plans[n];
	memset(p, 0, sizeof *p);
	for (size_t i = 0; i < size;) {
		if (cuts < FAKE_PLAN_SPLITS && i + mlen <= size &&
		    memcmp(data + i, FUZZ_PEER_NEXT, mlen) == 0) {
			/* A cut at 0 or at the end would mean nothing. */
			if (len > 0)
				p->split[cuts++] = len;
			i += mlen;
			continue;
		}
		buf[len++] = data[i++];
	}
	if (cuts > 0 && p->split[cuts - 1] >= len)
		p->split[--cuts] = 0;
	if (skip != NULL && skip(buf, len))
		return -1;
	p->reply = buf;
	p->len = len;
	p->wait_request = 1;
	p->settle_ms = -1; /* one read is one request: fast, and the unix
			      socket delivers each request in one piece */
	p->piece_wait_ms = PIECE_WAIT_MS;
	p->end = FAKE_END_CLOSE;
	memset(&plans[n + 1], 0, sizeof plans[n + 1]); /* closed at once */
	if (fake_server_set_plans(peer, plans, n + 2) != 0)
		abort();
	return 0;
}

void fuzz_check_error(int rc, const drl_error *err)
{
	if (rc >= 0 || rc < DRL_EUNAVAILABLE) {
		fprintf(stderr, "fuzz: rc %d is no DRL_E* code\n", rc);
		abort();
	}
	if (err->code != rc || err->message[0] == '\0' ||
	    memchr(err->message, '\0', sizeof err->message) == NULL) {
		fprintf(stderr, "fuzz: %s with code %d, message \"%.256s\"\n",
			drl_err_name(rc), err->code, err->message);
		abort();
	}
}

void fuzz_check_call(int rc, const drl_result *r, const drl_error *err)
{
	if (rc == 0) {
		if (r->allowed != 0 && r->allowed != 1) {
			fprintf(stderr, "fuzz: allowed = %d\n", r->allowed);
			abort();
		}
		return;
	}
	if (err != NULL) {
		fuzz_check_error(rc, err);
	} else if (rc > 0 || rc < DRL_EUNAVAILABLE) {
		fprintf(stderr, "fuzz: rc %d is no DRL_E* code\n", rc);
		abort();
	}
	if (r->allowed != 0) {
		fprintf(stderr, "fuzz: %s (%s) but allowed = %d\n",
			drl_err_name(rc), err ? err->message : "", r->allowed);
		abort();
	}
}

void fuzz_decide(drl_limiter *lim, int store_clock, int batch, int64_t cost)
{
	drl_result r;
	drl_error err;
	int rc;
	if (batch) {
		drl_batch_item items[3] = {
			{.key = "a", .keylen = 1, .cost = cost},
			{.key = "b", .keylen = 1, .cost = cost},
			{.key = "a", .keylen = 1, .cost = cost},
		};
		memset(&err, 0, sizeof err);
		rc = store_clock
			     ? drl_allow_batch(lim, items, 3, &err)
			     : drl_allow_batch_at(lim, items, 3, NOW_US, &err);
		if (rc != 0)
			fuzz_check_error(rc, &err);
		for (int i = 0; i < 3; i++)
			fuzz_check_call(items[i].rc, &items[i].result, NULL);
		/* err describes the first item that failed. */
		if (items[0].rc || items[1].rc || items[2].rc)
			fuzz_check_error(err.code, &err);
		return;
	}
	memset(&err, 0, sizeof err);
	memset(&r, 0, sizeof r);
	r.allowed = 1; /* a failure must overwrite it */
	rc = store_clock ? drl_allow(lim, "k1", 2, cost, &r, &err)
			 : drl_allow_at(lim, "k1", 2, cost, NOW_US, &r, &err);
	fuzz_check_call(rc, &r, &err);
}

void fuzz_run(const char *uri, const char *spec, int store_clock, int batch,
	      int64_t cost)
{
	drl_store *store = NULL;
	drl_limiter *lim = NULL;
	drl_error err;
	memset(&err, 0, sizeof err);
	int rc = drl_store_open(&store, uri, &err);
	if (rc != 0) {
		fuzz_check_error(rc, &err);
		return;
	}
	rc = drl_limiter_new(&lim, store, spec, NULL, &err);
	if (rc != 0) {
		fprintf(stderr, "fuzz: spec %s: %s\n", spec, err.message);
		abort();
	}
	fuzz_decide(lim, store_clock, batch, cost);
	drl_limiter_free(lim);
	drl_store_free(store);
}
