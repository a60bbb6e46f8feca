/*
 * The PEM files of drld's TLS on the gRPC port (--grpc-tls-cert,
 * --grpc-tls-key, --grpc-tls-client-ca), checked at start so a bad file
 * is a message naming it, not a server that cannot start. grpc reads
 * them itself, at start and every --grpc-tls-refresh seconds after
 * (envoy/grpc_service.cc).
 */
#ifndef DRLD_TLS_H
#define DRLD_TLS_H

#include <stddef.h>

/* Most bytes of one PEM file. */
#define DRLD_TLS_FILE_MAX (1 << 20)

/* Check cert and key (both given) and client_ca (NULL: no client
 * certificates asked for): each can be read, the chain's first
 * certificate and the unencrypted key parse and belong together, and
 * client_ca holds at least one certificate. Returns 0, or -1 with a
 * message naming the file in msg (n bytes). */
int drld_tls_check(const char *cert, const char *key, const char *client_ca,
		   char *msg, size_t n);

#endif /* DRLD_TLS_H */
