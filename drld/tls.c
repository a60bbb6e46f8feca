/*
 * drld's TLS files: read whole, checked with OpenSSL's PEM parsers (the
 * library's own libcrypto), handed to grpc++ as text. grpc would refuse
 * a bad pair too, but only by failing to start its server with a log
 * line of its own; checking here names the file and the problem.
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

int drld_tls_load(struct drld_tls *t, const char *cert, const char *key,
		  const char *client_ca, char *msg, size_t n)
{
	memset(t, 0, sizeof *t);
	if (read_file("--grpc-tls-cert", cert, &t->cert, msg, n) ||
	    read_file("--grpc-tls-key", key, &t->key, msg, n) ||
	    (client_ca != NULL && read_file("--grpc-tls-client-ca", client_ca,
					    &t->client_ca, msg, n)))
		goto fail;

	X509 *x = first_cert(t->cert);
	EVP_PKEY *k = private_key(t->key);
	X509 *ca = t->client_ca ? first_cert(t->client_ca) : NULL;
	int rc = 0;
	if (x == NULL)
		rc = say(msg, n, "--grpc-tls-cert %s: no PEM certificate",
			 cert);
	else if (k == NULL)
		rc = say(msg, n,
			 "--grpc-tls-key %s: no unencrypted PEM private key",
			 key);
	else if (X509_check_private_key(x, k) != 1)
		rc = say(msg, n,
			 "--grpc-tls-key %s: not the key of --grpc-tls-cert %s",
			 key, cert);
	else if (client_ca != NULL && ca == NULL)
		rc = say(msg, n, "--grpc-tls-client-ca %s: no PEM certificate",
			 client_ca);
	X509_free(x);
	EVP_PKEY_free(k);
	X509_free(ca);
	ERR_clear_error(); /* what the parsers queued is told above */
	if (rc == 0)
		return 0;
fail:
	drld_tls_free(t);
	return -1;
}

void drld_tls_free(struct drld_tls *t)
{
	if (t->key != NULL)
		OPENSSL_cleanse(t->key, strlen(t->key));
	free(t->cert);
	free(t->key);
	free(t->client_ca);
	memset(t, 0, sizeof *t);
}
