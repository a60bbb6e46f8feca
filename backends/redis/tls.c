/*
 * A TLS client transport over a connected socket, with OpenSSL; declared
 * in backends/redis/tls.h.
 *
 * Why by hand: the Redis store talks through hiredis, and Debian 12's
 * hiredis (0.14) has no TLS; hiredis_ssl arrived with hiredis 1.0, which
 * Debian 12 does not ship. hiredis 0.14 does its own read() and write()
 * on the socket, with no hook for another transport, so the store keeps
 * hiredis's command formatter and reply reader and moves the bytes
 * itself: through read()/write() in plaintext, through here on TLS.
 *
 * Every socket here is non-blocking: a handshake, a read and a write
 * each wait in poll() for what OpenSSL asks (readable or writable) and
 * never past the caller's deadline, so a server that stalls the
 * handshake or trickles a record cannot hold a caller beyond timeout_ms.
 *
 * Errors are said in words an operator can act on: which check failed
 * (an unknown CA, a name mismatch, an expired certificate), a plaintext
 * server on a TLS port or the reverse; never a byte of a key. The
 * thread's OpenSSL error queue is emptied before each call and after
 * each failure, so one connection's error is never reported by another.
 */
#include "tls.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RECORD_MAX 16384 /* a TLS record's plaintext: one write's most */

struct drl__tls {
	_Atomic int refs;
	SSL_CTX *ctx;
	char *server_name; /* NULL: the host connected to */
	bool verify;
};

/* The reason of the thread's last OpenSSL error ("wrong version
 * number"), the queue emptied; `none` when there is none. */
static const char *last_reason(const char *none)
{
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;
	ERR_clear_error();
	return r ? r : none;
}

/* A file option OpenSSL refused: why, in words (the file is missing or
 * unreadable, is no PEM, or the key is not the certificate's). */
static int bad_file(const char *opt, const char *path, drl_error *err)
{
	const char *why;
	if (access(path, R_OK) != 0) {
		why = strerror(errno);
		ERR_clear_error();
	} else if (ERR_GET_REASON(ERR_peek_last_error()) ==
		   X509_R_KEY_VALUES_MISMATCH) {
		why = "not the key of tls_cert";
		ERR_clear_error();
	} else {
		why = last_reason("cannot be read");
	}
	return drl_error_set(err, DRL_EINVAL, "URI option %s=\"%.200s\": %s",
			     opt, path, why);
}

int drl__tls_new(drl__tls **out, const drl__tls_opts *o, drl_error *err)
{
	*out = NULL;
	if ((o->cert_file == NULL) != (o->key_file == NULL))
		return drl_error_set(err, DRL_EINVAL,
				     "URI options tls_cert and tls_key go "
				     "together (a client certificate and "
				     "its key)");
	drl__tls *t = calloc(1, sizeof *t);
	if (t == NULL)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	atomic_init(&t->refs, 1);
	t->verify = o->verify;
	ERR_clear_error();
	t->ctx = SSL_CTX_new(TLS_client_method());
	if (t->ctx == NULL ||
	    (o->server_name &&
	     (t->server_name = strdup(o->server_name)) == NULL)) {
		drl__tls_unref(t);
		return drl_error_set(err, DRL_ENOMEM, "out of memory for TLS");
	}
	SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
	/* Non-blocking sockets: a write may be partial and is retried from
	 * a buffer that may have moved (drl__tls_writev coalesces anew). */
	SSL_CTX_set_mode(t->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
					 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_clear_mode(t->ctx, SSL_MODE_AUTO_RETRY);
	SSL_CTX_set_verify(t->ctx,
			   o->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
	int rc = 0;
	if (o->ca_file || o->ca_dir) {
		if (SSL_CTX_load_verify_locations(t->ctx, o->ca_file,
						  o->ca_dir) != 1)
			rc = o->ca_file
				     ? bad_file("tls_ca", o->ca_file, err)
				     : bad_file("tls_ca_dir", o->ca_dir, err);
	} else if (SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
		rc = drl_error_set(err, DRL_EINVAL,
				   "TLS: the system's CA store cannot be read "
				   "(%s); give tls_ca",
				   last_reason("unknown error"));
	}
	if (rc == 0 && o->cert_file &&
	    SSL_CTX_use_certificate_chain_file(t->ctx, o->cert_file) != 1)
		rc = bad_file("tls_cert", o->cert_file, err);
	if (rc == 0 && o->key_file &&
	    SSL_CTX_use_PrivateKey_file(t->ctx, o->key_file,
					SSL_FILETYPE_PEM) != 1)
		rc = bad_file("tls_key", o->key_file, err);
	if (rc == 0 && o->key_file && SSL_CTX_check_private_key(t->ctx) != 1)
		rc = drl_error_set(err, DRL_EINVAL,
				   "URI options tls_cert and tls_key: the key "
				   "does not match the certificate");
	ERR_clear_error();
	if (rc) {
		drl__tls_unref(t);
		return rc;
	}
	*out = t;
	return 0;
}

drl__tls *drl__tls_ref(drl__tls *t)
{
	if (t)
		atomic_fetch_add(&t->refs, 1);
	return t;
}

void drl__tls_unref(drl__tls *t)
{
	if (t == NULL || atomic_fetch_sub(&t->refs, 1) != 1)
		return;
	SSL_CTX_free(t->ctx);
	free(t->server_name);
	free(t);
}

int64_t drl__ms_until(const struct timespec *dl)
{
	struct timespec now; /* to the ns, as dl */
	clock_gettime(CLOCK_MONOTONIC, &now);
	int64_t ns = (int64_t)(dl->tv_sec - now.tv_sec) * 1000000000 +
		     (dl->tv_nsec - now.tv_nsec);
	return ns <= 0 ? 0 : (ns + 999999) / 1000000;
}

int drl__poll_until(int fd, short events, const struct timespec *dl)
{
	for (;;) {
		int64_t left = drl__ms_until(dl);
		if (left == 0)
			return 0;
		struct pollfd p = {.fd = fd, .events = events};
		int n = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (n > 0)
			return 1;
		if (n < 0 && errno != EINTR)
			return -1;
	}
}

/* What a failed handshake's verification says, with what to do. */
static void verify_failure(long v, const char *name, char *msg, size_t cap)
{
	const char *hint = "";
	switch (v) {
	case X509_V_ERR_HOSTNAME_MISMATCH:
	case X509_V_ERR_IP_ADDRESS_MISMATCH:
		hint = " (the certificate is not for the name verified; "
		       "tls_server_name= names the one it is for)";
		break;
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
	case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
	case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
	case X509_V_ERR_CERT_SIGNATURE_FAILURE:
		hint = " (not signed by a CA this client trusts: tls_ca= "
		       "names the CA that signed it)";
		break;
	case X509_V_ERR_CERT_HAS_EXPIRED:
	case X509_V_ERR_CERT_NOT_YET_VALID:
		hint = " (check the certificate's dates and this machine's "
		       "clock)";
		break;
	}
	snprintf(msg, cap,
		 "TLS: the server's certificate failed verification for "
		 "\"%.64s\": %s%s",
		 name, X509_verify_cert_error_string(v), hint);
}

/* Why an SSL call that returned ret (SSL_get_error() e) failed, in msg;
 * the code to report: DRL_EUNAVAILABLE (closed, reset) or DRL_ESTORE. */
static int describe(SSL *ssl, int ret, int e, const char *during, char *msg,
		    size_t cap)
{
	int saved = errno;
	if (e == SSL_ERROR_ZERO_RETURN) {
		ERR_clear_error();
		snprintf(msg, cap, "TLS: the server closed the connection%s",
			 during);
		return DRL_EUNAVAILABLE;
	}
	if (e == SSL_ERROR_SYSCALL && ERR_peek_last_error() == 0) {
		snprintf(msg, cap, "TLS: %s%s",
			 ret == 0 || saved == 0
				 ? "the server closed the connection"
				 : strerror(saved),
			 during);
		return DRL_EUNAVAILABLE;
	}
	unsigned long le = ERR_peek_last_error();
	int reason = ERR_GET_REASON(le);
	const char *hint = "";
	if (reason == SSL_R_WRONG_VERSION_NUMBER ||
	    reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
	    reason == SSL_R_HTTP_REQUEST)
		hint = " (is the server speaking TLS on this port? a "
		       "plaintext port takes redis://)";
	else if (reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED ||
		 reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE)
		hint = " (the server may want a client certificate: "
		       "tls_cert= and tls_key=)";
	else if (reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA ||
		 reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
		 reason == SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED)
		hint = " (the server refused this client's certificate)";
	else if (reason == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
		ERR_clear_error();
		snprintf(msg, cap, "TLS: the server closed the connection%s",
			 during);
		return DRL_EUNAVAILABLE;
	}
	snprintf(msg, cap, "TLS: %s%s%s", last_reason("protocol error"), during,
		 hint);
	(void)ssl;
	return DRL_ESTORE;
}

/* Set the name to verify (and send as SNI) on ssl: an IP address is
 * verified against the certificate's IP entries and sent as no SNI (RFC
 * 6066 allows only host names there). 0, or -1. */
static int set_name(SSL *ssl, const char *name, bool verify)
{
	unsigned char ip[16];
	bool is_ip = inet_pton(AF_INET, name, ip) == 1 ||
		     inet_pton(AF_INET6, name, ip) == 1;
	if (!is_ip && SSL_set_tlsext_host_name(ssl, name) != 1)
		return -1;
	if (!verify)
		return 0;
	if (is_ip)
		return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl),
						     name) == 1
			       ? 0
			       : -1;
	return SSL_set1_host(ssl, name) == 1 ? 0 : -1;
}

int drl__tls_connect(const drl__tls *t, int fd, const char *host,
		     const struct timespec *dl, SSL **out, char *msg,
		     size_t cap)
{
	*out = NULL;
	const char *name = t->server_name ? t->server_name : host;
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		snprintf(msg, cap,
			 "TLS: cannot make the socket non-blocking: %s",
			 strerror(errno));
		return DRL_EUNAVAILABLE;
	}
	ERR_clear_error();
	SSL *ssl = SSL_new(t->ctx);
	if (ssl == NULL || SSL_set_fd(ssl, fd) != 1 ||
	    set_name(ssl, name, t->verify) != 0) {
		SSL_free(ssl);
		ERR_clear_error();
		snprintf(msg, cap,
			 "TLS: out of memory (or a bad name \"%.64s\")", name);
		return DRL_ENOMEM;
	}
	for (;;) {
		ERR_clear_error();
		int r = SSL_connect(ssl);
		if (r == 1)
			break;
		int e = SSL_get_error(ssl, r);
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
			int w = drl__poll_until(
				fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
				dl);
			if (w > 0)
				continue;
			if (w == 0)
				snprintf(msg, cap,
					 "TLS: no handshake within timeout_ms "
					 "(is the server speaking TLS on this "
					 "port?)");
			else
				snprintf(msg, cap, "TLS: poll: %s",
					 strerror(errno));
			SSL_free(ssl);
			return w == 0 ? DRL_ETIMEDOUT : DRL_EUNAVAILABLE;
		}
		long v = SSL_get_verify_result(ssl);
		int code;
		if (t->verify && v != X509_V_OK) {
			ERR_clear_error();
			verify_failure(v, name, msg, cap);
			code = DRL_ESTORE;
		} else {
			code = describe(ssl, r, e, " during the handshake", msg,
					cap);
		}
		SSL_free(ssl);
		return code;
	}
	*out = ssl;
	return 0;
}

/* What SSL_read or SSL_write returning r means: r bytes; 0 and the
 * events to wait for; -1 and why. */
static ssize_t io_result(SSL *ssl, int r, short *events, int *code, char *msg,
			 size_t msgcap)
{
	if (r > 0)
		return r;
	int e = SSL_get_error(ssl, r);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		*events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
		return 0;
	}
	*code = describe(ssl, r, e, "", msg, msgcap);
	return -1;
}

ssize_t drl__tls_read(SSL *ssl, void *buf, size_t cap, short *events, int *code,
		      char *msg, size_t msgcap)
{
	ERR_clear_error();
	int r = SSL_read(ssl, buf, cap > INT_MAX ? INT_MAX : (int)cap);
	return io_result(ssl, r, events, code, msg, msgcap);
}

ssize_t drl__tls_writev(SSL *ssl, const struct iovec *iov, int n, short *events,
			int *code, char *msg, size_t msgcap)
{
	char stack[RECORD_MAX];
	const void *p = iov[0].iov_base;
	size_t len = iov[0].iov_len;
	if (n > 1) {
		/* One record's worth, in order: a retry after WANT_WRITE
		 * coalesces the same bytes first (the caller's contract),
		 * and small requests share a record. */
		len = 0;
		for (int i = 0; i < n && len < RECORD_MAX; i++) {
			size_t k = iov[i].iov_len;
			if (k > RECORD_MAX - len)
				k = RECORD_MAX - len;
			memcpy(stack + len, iov[i].iov_base, k);
			len += k;
		}
		p = stack;
	}
	ERR_clear_error();
	int r = SSL_write(ssl, p, len > INT_MAX ? INT_MAX : (int)len);
	return io_result(ssl, r, events, code, msg, msgcap);
}

#define IDLE_RECORDS_MAX 8 /* records without data an idle check reads */
bool drl__tls_idle_ok(SSL *ssl)
{
	int fd = SSL_get_fd(ssl);
	for (int i = 0; i < IDLE_RECORDS_MAX; i++) {
		if (SSL_pending(ssl) > 0)
			return false; /* data nobody asked for */
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int n = poll(&p, 1, 0);
		if (n == 0)
			return true;
		if (n < 0 || (p.revents & (POLLHUP | POLLERR)))
			return false;
		char b;
		ERR_clear_error();
		int r = SSL_read(ssl, &b, 1);
		if (r > 0)
			return false;
		if (SSL_get_error(ssl, r) != SSL_ERROR_WANT_READ) {
			ERR_clear_error();
			return false;
		}
	}
	return false;
}

void drl__tls_close(SSL *ssl, bool clean)
{
	if (ssl == NULL)
		return;
	if (clean && SSL_is_init_finished(ssl))
		(void)SSL_shutdown(ssl); /* non-blocking: best effort */
	SSL_free(ssl);
	ERR_clear_error();
}
