/*
 * The PEM files of drld's TLS on the gRPC port (--grpc-tls-cert,
 * --grpc-tls-key, --grpc-tls-client-ca), read and checked at start so a
 * bad file is a message naming it, not a server that cannot start.
 */
#ifndef DRLD_TLS_H
#define DRLD_TLS_H

#include <stddef.h>

/* Most bytes of one PEM file. */
#define DRLD_TLS_FILE_MAX (1 << 20)

/* The files' contents (NUL-terminated, malloc'd; NULL when not given). */
struct drld_tls {
	char *cert;      /* the server's certificate chain */
	char *key;       /* its private key */
	char *client_ca; /* CAs that client certificates must chain to */
};

/* Read cert and key (both given) and client_ca (NULL: no client
 * certificates asked for) into t and check them: the chain's first
 * certificate and the key parse and belong together, and client_ca holds
 * at least one certificate. Returns 0, or -1 with a message naming the
 * file in msg (n bytes) and t freed. */
int drld_tls_load(struct drld_tls *t, const char *cert, const char *key,
		  const char *client_ca, char *msg, size_t n);

/* Free t's contents (zeroing the key's bytes first). */
void drld_tls_free(struct drld_tls *t);

#endif /* DRLD_TLS_H */
