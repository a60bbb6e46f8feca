/*
 * A TLS client transport over a connected, non-blocking socket
 * (backends/redis/tls.c): what a store needs to speak TLS on a socket it owns,
 * with OpenSSL. Written here because the store's client library cannot:
 * Debian 12's hiredis is 0.14, which has no TLS (hiredis_ssl came with
 * 1.0); its reply reader and command formatter stay in use, only the
 * bytes go through here. Internal: nothing here is part of the API.
 *
 * A drl__tls is one store's settings (trust, client certificate, the
 * name to verify), made once at open and shared by every connection of
 * the store (and of a Redis Cluster's nodes): reference-counted,
 * immutable after drl__tls_new, usable from any number of threads. An
 * SSL (one connection) is used by one thread at a time.
 */
#ifndef DRL_TLS_H
#define DRL_TLS_H

#include <drl/sys/backend.h>

#include <openssl/ssl.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

typedef struct drl__tls drl__tls;

/* What a URI says about TLS; NULL strings: not given. */
typedef struct drl__tls_opts {
	const char *ca_file;     /* PEM CA bundle; none: the system store */
	const char *ca_dir;      /* hashed CA directory (c_rehash) */
	const char *cert_file;   /* client certificate chain (mutual TLS) */
	const char *key_file;    /* its private key */
	const char *server_name; /* SNI and the name verified; none: host */
	bool verify;             /* verify the server's certificate */
} drl__tls_opts;

/* Settings from o. DRL_EINVAL naming the option and the file when a file
 * cannot be read or the key does not match the certificate (never any
 * of the key's bytes); DRL_ENOMEM. */
int drl__tls_new(drl__tls **out, const drl__tls_opts *o, drl_error *err);
/* Another reference to t (t may be NULL). */
drl__tls *drl__tls_ref(drl__tls *t);
/* Drop a reference; the last one frees t. NULL: no-op. */
void drl__tls_unref(drl__tls *t);

/* Milliseconds until dl (CLOCK_MONOTONIC), rounded up; 0 once it has
 * passed. */
int64_t drl__ms_until(const struct timespec *dl);
/* Wait until fd is ready for `events` (poll) or dl (CLOCK_MONOTONIC)
 * passes: 1 ready (or in error), 0 out of time, -1 poll failed
 * (errno). */
int drl__poll_until(int fd, short events, const struct timespec *dl);

/* The TLS handshake on connected socket fd (made non-blocking here) with
 * t's settings, verifying the certificate against t's server name or
 * `host` (a DNS name or an IP address), all by dl. 0 and *out, or:
 * DRL_ETIMEDOUT (no handshake by dl), DRL_EUNAVAILABLE (the server closed
 * or reset the connection), DRL_ESTORE (the handshake failed: the
 * certificate, the protocol, a plaintext server), DRL_ENOMEM; then msg
 * (cap bytes) says why, in words for an operator. fd stays the
 * caller's. */
int drl__tls_connect(const drl__tls *t, int fd, const char *host,
		     const struct timespec *dl, SSL **out, char *msg,
		     size_t cap);

/* One read of at most cap bytes: > 0 bytes read; 0: nothing yet, wait
 * for *events on the socket and call again; -1: the connection is over
 * (*code DRL_EUNAVAILABLE: closed or reset; DRL_ESTORE: a TLS error; msg
 * says which). Bytes OpenSSL already
 * decrypted are returned without touching the socket, so call this
 * before waiting, never poll first. */
ssize_t drl__tls_read(SSL *ssl, void *buf, size_t cap, short *events, int *code,
		      char *msg, size_t msgcap);
/* One write of iov[0..n) (n > 1: coalesced, up to 16 KiB, one TLS
 * record; never 0 bytes in all):
 * > 0 bytes taken; 0: wait for *events and call again with the same
 * bytes first; -1: failed (*code and msg, as drl__tls_read). */
ssize_t drl__tls_writev(SSL *ssl, const struct iovec *iov, int n, short *events,
			int *code, char *msg, size_t msgcap);
/* Whether an idle connection is still good: what the socket holds is
 * read; TLS records with no data (session tickets, key updates) are
 * fine, data or a close is not. */
bool drl__tls_idle_ok(SSL *ssl);
/* Free ssl, after a close_notify when `clean` (no error met on it) and
 * the socket takes it now; the socket stays the caller's. NULL: no-op. */
void drl__tls_close(SSL *ssl, bool clean);

#endif /* DRL_TLS_H */
