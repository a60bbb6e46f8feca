/*
 * Test fixture: a throw-away PKI made by the `openssl` command (see
 * tls_fixture.h). Each step is one openssl run (fork/exec, no shell),
 * its output into <dir>/openssl.log, copied to stderr when a step fails.
 */
#include "tls_fixture.h"

#include "server_fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run openssl with argv (argv[0] "openssl"), output to <dir>/openssl.log:
 * 0 ok, 127 not found, else failed. */
static int run_openssl(const char *dir, const char *const *argv)
{
	char log[300];
	snprintf(log, sizeof log, "%s/openssl.log", dir);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		execvp("openssl", (char *const *)argv);
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void path(char *out, const drl_tls_pki *p, const char *name)
{
	snprintf(out, 300, "%s/%s", p->dir, name);
}

/* A self-signed CA (cert, key) named cn. */
static int make_ca(const drl_tls_pki *p, const char *cert, const char *key,
		   const char *cn)
{
	const char *argv[] = {"openssl",
			      "req",
			      "-x509",
			      "-newkey",
			      "ec",
			      "-pkeyopt",
			      "ec_paramgen_curve:P-256",
			      "-nodes",
			      "-keyout",
			      key,
			      "-out",
			      cert,
			      "-days",
			      "1",
			      "-subj",
			      cn,
			      NULL};
	return run_openssl(p->dir, argv);
}

/* A key and a signing request for cn. */
static int make_csr(const drl_tls_pki *p, const char *key, const char *csr,
		    const char *cn)
{
	const char *argv[] = {"openssl", "req",      "-newkey",
			      "ec",      "-pkeyopt", "ec_paramgen_curve:P-256",
			      "-nodes",  "-keyout",  key,
			      "-out",    csr,        "-subj",
			      cn,        NULL};
	return run_openssl(p->dir, argv);
}

/* csr signed by p's CA, valid for `days` (-1: it ended yesterday), with
 * the extensions in ext (or none), serial `serial`. */
static int sign(const drl_tls_pki *p, const char *csr, const char *out,
		const char *days, const char *ext, const char *serial)
{
	const char *argv[20] = {"openssl", "x509",        "-req", "-in",
				csr,       "-CA",         p->ca,  "-CAkey",
				p->ca_key, "-set_serial", serial, "-out",
				out,       "-days",       days};
	size_t n = 15;
	if (ext) {
		argv[n++] = "-extfile";
		argv[n++] = ext;
	}
	argv[n] = NULL;
	return run_openssl(p->dir, argv);
}

int drl_tls_pki_make(drl_tls_pki *p)
{
	memset(p, 0, sizeof *p);
	const char *tmp = getenv("TMPDIR");
	if (tmp == NULL || tmp[0] == '\0' || strlen(tmp) > 100)
		tmp = "/tmp";
	snprintf(p->dir, sizeof p->dir, "%s/drl-pki-XXXXXX", tmp);
	if (mkdtemp(p->dir) == NULL) {
		fprintf(stderr, "tls fixture: mkdtemp: %s\n", strerror(errno));
		p->dir[0] = '\0';
		return -1;
	}
	path(p->ca, p, "ca.crt");
	path(p->ca_key, p, "ca.key");
	path(p->other_ca, p, "other_ca.crt");
	path(p->other_ca_key, p, "other_ca.key");
	path(p->server, p, "server.crt");
	path(p->server_key, p, "server.key");
	path(p->expired, p, "expired.crt");
	path(p->client, p, "client.crt");
	path(p->client_key, p, "client.key");
	char server_csr[300], client_csr[300], ext[300];
	path(server_csr, p, "server.csr");
	path(client_csr, p, "client.csr");
	path(ext, p, "server.ext");
	FILE *f = fopen(ext, "w");
	if (f == NULL ||
	    fputs("subjectAltName=DNS:localhost,IP:127.0.0.1\n", f) < 0 ||
	    fclose(f) != 0) {
		fprintf(stderr, "tls fixture: cannot write %s\n", ext);
		drl_tls_pki_free(p);
		return -1;
	}
	int rc = make_ca(p, p->ca, p->ca_key, "/CN=drl test CA");
	if (rc == 127) {
		drl_tls_pki_free(p);
		if (drl_fixture_under_ci()) {
			fprintf(stderr, "tls fixture: openssl not found and "
					"CI=true: failing\n");
			return -1;
		}
		fprintf(stderr, "tls fixture: openssl not found: skipping\n");
		return 1;
	}
	if (rc == 0)
		rc = make_ca(p, p->other_ca, p->other_ca_key,
			     "/CN=drl other CA");
	if (rc == 0)
		rc = make_csr(p, p->server_key, server_csr, "/CN=localhost");
	if (rc == 0)
		rc = sign(p, server_csr, p->server, "1", ext, "1");
	if (rc == 0) /* -days -1: notAfter a day before notBefore (now) */
		rc = sign(p, server_csr, p->expired, "-1", ext, "2");
	if (rc == 0)
		rc = make_csr(p, p->client_key, client_csr, "/CN=drl client");
	if (rc == 0)
		rc = sign(p, client_csr, p->client, "1", NULL, "3");
	if (rc != 0) {
		char log[300], buf[4096];
		path(log, p, "openssl.log");
		fprintf(stderr, "tls fixture: openssl failed (%d):\n", rc);
		FILE *l = fopen(log, "r");
		size_t n;
		while (l && (n = fread(buf, 1, sizeof buf, l)) > 0)
			fwrite(buf, 1, n, stderr);
		if (l)
			fclose(l);
		drl_tls_pki_free(p);
		return -1;
	}
	return 0;
}

void drl_tls_pki_free(drl_tls_pki *p)
{
	static const char *const names[] = {
		"ca.crt",      "ca.key",     "other_ca.crt", "other_ca.key",
		"server.crt",  "server.key", "server.csr",   "server.ext",
		"expired.crt", "client.crt", "client.key",   "client.csr",
		"openssl.log", "ca.srl"};
	if (p == NULL || p->dir[0] == '\0')
		return;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		char f[300];
		path(f, p, names[i]);
		unlink(f);
	}
	rmdir(p->dir);
	p->dir[0] = '\0';
}

void drl_tls_pki_redis_args(const drl_tls_pki *p, const char *cert,
			    const char *key, const char *clients,
			    const char *argv[9])
{
	argv[0] = "--tls-cert-file";
	argv[1] = cert;
	argv[2] = "--tls-key-file";
	argv[3] = key;
	argv[4] = "--tls-ca-cert-file";
	argv[5] = p->ca;
	argv[6] = "--tls-auth-clients";
	argv[7] = clients;
	argv[8] = NULL;
}
