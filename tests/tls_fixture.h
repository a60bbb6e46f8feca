/*
 * Test fixture: a throw-away PKI made with the `openssl` command at test
 * time, for TLS servers the suite starts (tests/server_fixture.h,
 * drl_fixture_redis_tls_start). Everything is valid for one day at most,
 * EC P-256 keys (fast to make), in a private temp dir removed by
 * drl_tls_pki_free.
 *
 * When `openssl` is missing: under CI=true the make fails (the test must
 * fail); otherwise it returns 1 and the test skips.
 */
#ifndef DRL_TLS_FIXTURE_H
#define DRL_TLS_FIXTURE_H

#include <stddef.h>

typedef struct drl_tls_pki {
	char dir[256];
	/* Paths in dir, PEM. */
	char ca[300], ca_key[300];             /* the CA the servers use */
	char other_ca[300], other_ca_key[300]; /* a CA nobody uses */
	/* Signed by ca, for DNS:localhost and IP:127.0.0.1. */
	char server[300], server_key[300];
	/* The same name and key, but its validity ended yesterday. */
	char expired[300];
	/* A client certificate signed by ca (mutual TLS), and its key. */
	char client[300], client_key[300];
} drl_tls_pki;

/* Make the PKI: 0 made, 1 openssl missing and not under CI (skip), -1
 * failure (message on stderr). */
int drl_tls_pki_make(drl_tls_pki *p);

/* Remove the dir and everything in it. NULL or never made: no-op. */
void drl_tls_pki_free(drl_tls_pki *p);

/* The redis-server arguments for a TLS server with p's CA and cert
 * (`cert` and `key`: p->server/p->server_key, or p->expired), asking
 * client certificates (`clients`: "yes", "no", "optional"), into argv
 * (room for 9 pointers, NULL-terminated; the strings are p's). */
void drl_tls_pki_redis_args(const drl_tls_pki *p, const char *cert,
			    const char *key, const char *clients,
			    const char *argv[9]);

#endif
