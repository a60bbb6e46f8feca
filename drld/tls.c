/*
 * drld's TLS files: read whole and checked with OpenSSL's PEM parsers
 * (the library's own libcrypto). grpc would refuse a bad pair too, but
 * only by failing its handshakes with a log line of its own; checking
 * here names the file and the problem, before drld serves.
 */
#include "tls.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

/* Write a message into msg (n bytes); returns -1. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int
say(char *msg, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, n, fmt, ap);
	va_end(ap);
	return -1;
}

/* Read path whole into *out (NUL-terminated). */
static int read_file(const char *what, const char *path, char **out, char *msg,
		     size_t n)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		snprintf(msg, n, "%s %s: %s", what, path, strerror(errno));
		return -1;
	}
	char *buf = malloc(DRLD_TLS_FILE_MAX + 1);
	size_t len = buf ? fread(buf, 1, DRLD_TLS_FILE_MAX + 1, f) : 0;
	int bad = buf == NULL || ferror(f) || len > DRLD_TLS_FILE_MAX;
	fclose(f);
	if (bad) {
		snprintf(msg, n, "%s %s: %s", what, path,
			 buf == NULL               ? "out of memory"
			 : len > DRLD_TLS_FILE_MAX ? "larger than 1 MiB"
						   : "cannot be read");
		free(buf);
		return -1;
	}
	buf[len] = '\0';
	*out = buf;
	return 0;
}

/* The first certificate of PEM text s, or NULL. */
static X509 *first_cert(const char *s)
{
	BIO *b = BIO_new_mem_buf(s, -1);
	X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
	BIO_free(b);
	return x;
}

/* The private key of PEM text s (unencrypted), or NULL. */
static EVP_PKEY *private_key(const char *s)
{
	BIO *b = BIO_new_mem_buf(s, -1);
	/* an empty passphrase: drld cannot ask for one */
	EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, "") : NULL;
	BIO_free(b);
	return k;
}

int drld_tls_check(const char *cert, const char *key, const char *client_ca,
		   char *msg, size_t n)
{
	char *cert_pem = NULL, *key_pem = NULL, *ca_pem = NULL;
	int rc = -1;

	if (read_file("--grpc-tls-cert", cert, &cert_pem, msg, n) ||
	    read_file("--grpc-tls-key", key, &key_pem, msg, n) ||
	    (client_ca != NULL &&
	     read_file("--grpc-tls-client-ca", client_ca, &ca_pem, msg, n)))
		goto out;

	X509 *x = first_cert(cert_pem);
	EVP_PKEY *k = private_key(key_pem);
	X509 *ca = ca_pem ? first_cert(ca_pem) : NULL;
	if (x == NULL)
		say(msg, n, "--grpc-tls-cert %s: no PEM certificate", cert);
	else if (k == NULL)
		say(msg, n, "--grpc-tls-key %s: no unencrypted PEM private key",
		    key);
	else if (X509_check_private_key(x, k) != 1)
		say(msg, n,
		    "--grpc-tls-key %s: not the key of --grpc-tls-cert %s", key,
		    cert);
	else if (client_ca != NULL && ca == NULL)
		say(msg, n, "--grpc-tls-client-ca %s: no PEM certificate",
		    client_ca);
	else
		rc = 0;
	X509_free(x);
	EVP_PKEY_free(k);
	X509_free(ca);
	ERR_clear_error(); /* what the parsers queued is told above */
out:
	if (key_pem != NULL)
		OPENSSL_cleanse(key_pem, strlen(key_pem));
	free(cert_pem);
	free(key_pem);
	free(ca_pem);
	return rc;
}
