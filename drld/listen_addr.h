/*
 * The addresses drld listens on: --listen HOST:PORT and --grpc-listen
 * HOST:PORT or unix:/ABSOLUTE/PATH. Numeric addresses only: no name is
 * looked up.
 */
#ifndef DRLD_LISTEN_ADDR_H
#define DRLD_LISTEN_ADDR_H

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/un.h>

/* The longest path of a unix domain socket (sun_path holds its NUL). */
#define DRLD_UNIX_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)

#ifdef __cplusplus
extern "C" {
#endif

/* Whether s is "unix:" and an absolute path a unix domain socket can
 * have (--grpc-listen: gRPC's own syntax for it, as envoyproxy/ratelimit's
 * GRPC_UDS). */
bool drld_is_unix_listen(const char *s);

/* Parse HOST:PORT ("127.0.0.1:8080", "[::1]:0"; port 0 picks one) into
 * *ss. False when s is not one. */
bool drld_parse_listen(const char *s, struct sockaddr_storage *ss);

#ifdef __cplusplus
}
#endif

#endif /* DRLD_LISTEN_ADDR_H */
