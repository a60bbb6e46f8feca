/*
 * TLS to Redis (rediss://, backends/redis/tls.c) against real TLS-only
 * redis-servers (--port 0 --tls-port), with a CA and certificates made by
 * `openssl` at test time (tests/fixtures/tls_fixture.h):
 *
 * - Every path decides exactly over TLS: the cross-process hot key on
 *   pooled connections (pipelines=0; tx=lua and tx=watch) and on the
 *   shared, pipelined ones (tx=auto, tx=lua), and hundreds of async
 *   requests in flight on the direct path (no worker thread at all).
 * - Mutual TLS: the main server asks every client for a certificate.
 * - Every hostile case ends in its own clear error naming the server,
 *   never a password: an unknown CA (the system store, a wrong tls_ca),
 *   a name mismatch, an expired certificate, no client certificate, a
 *   plaintext server on a TLS URI (bounded by timeout_ms) and a TLS server
 *   on a plaintext URI; bad TLS options fail at open (DRL_EINVAL).
 * - on_error= answers for a store whose certificate fails, as for any
 *   unreachable store; tls_verify=no connects regardless.
 * - rediss-cluster:// on a one-node TLS cluster decides exactly.
 * - rediss-sentinel:// on a TLS-only master, replica (tls-replication)
 *   and sentinel decides exactly, and after SENTINEL FAILOVER moves to
 *   the new master on the sentinel's +switch-master, heard over TLS (no
 *   periodic check, an old master that cannot be demoted), and decides
 *   exactly there.
 * - An idle pooled TLS connection is reused, not reconnected (the pool's
 *   check for a connection the server closed reads TLS records).
 */
#include "async_check.h"
#include "hot_key.h"
#include "server_fixture.h"
#include "testutil.h"
#include "tls_fixture.h"

#include <drl/async.h>

#include <unistd.h>

static drl_tls_pki pki;
static drl_server tls_srv, expired_srv, plain_srv;
static int have; /* servers and openssl present */
static const char *tls_args[9], *expired_args[9];
static char client_opts[1024]; /* tls_ca, tls_cert, tls_key for tls_srv */

static int setup(void **state)
{
	(void)state;
	int rc = drl_tls_pki_make(&pki);
	if (rc == 1)
		return 0; /* skip */
	if (rc)
		return -1;
	drl_tls_pki_redis_args(&pki, pki.server, pki.server_key, "yes",
			       tls_args);
	drl_tls_pki_redis_args(&pki, pki.expired, pki.server_key, "no",
			       expired_args);
	rc = drl_fixture_redis_tls_start(&tls_srv, tls_args);
	if (rc == 1)
		return 0;
	if (rc || drl_fixture_redis_tls_start(&expired_srv, expired_args) ||
	    drl_fixture_redis_start(&plain_srv, NULL))
		return -1;
	snprintf(client_opts, sizeof client_opts,
		 "tls_ca=%s&tls_cert=%s&tls_key=%s&timeout_ms=%lld", pki.ca,
		 pki.client, pki.client_key, (long long)tu_bound_ms(2000));
	have = 1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	drl_fixture_stop(&tls_srv);
	drl_fixture_stop(&expired_srv);
	drl_fixture_stop(&plain_srv);
	drl_tls_pki_free(&pki);
	return 0;
}

/* rediss://host:port of the main server with the client's options and
 * `more` ("" or "&..."). */
static const char *main_uri(char *buf, size_t cap, const char *host,
			    const char *more)
{
	snprintf(buf, cap, "rediss://%s:%d?%s%s", host, tls_srv.port,
		 client_opts, more);
	return buf;
}

/* ---- every path decides exactly over TLS -------------------------------- */

/* Under valgrind (DRL_VALGRIND: 20-50x slower, for memory errors) no
 * hot-key run: three processes of memcheck cost a minute and more, and
 * the TLS code they run is the one the other tests run there (the async
 * test on the direct path included); ASan and TSan run them. */
static bool slow(void)
{
	return getenv("DRL_VALGRIND") != NULL;
}

/* The cross-process hot key (hot_key_run) on the TLS server named host,
 * with the URI options opts. */
static void exact_on(const char *host, const char *opts, const char *spec,
		     int run)
{
	char uri[1200];
	hot_key_run(main_uri(uri, sizeof uri, host, opts), spec, run);
}

static void test_pooled_exact(void **state)
{
	(void)state;
	if (!have || slow())
		skip();
	exact_on("127.0.0.1", "&pipelines=0&tx=lua", "gcra:200/1h", 1);
	exact_on("localhost", "&pipelines=0&tx=watch", "sliding_window:200/1m",
		 2);
}

static void test_pipelined_exact(void **state)
{
	(void)state;
	if (!have || slow())
		skip();
	exact_on("127.0.0.1", "", "fixed_window:200/1m", 3);
	exact_on("127.0.0.1", "&tx=lua&pipelines=2", "token_bucket:200/1h", 4);
}

/* The async API with no worker thread: a request that needed one would
 * be refused, so every decision here went on the direct path (a store
 * call started on the pipes, finished by their I/O thread). */
static void test_async_direct_exact(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have);
	static const char *const opts[] = {"&tx=lua", ""};
	drl_async *a = NULL;
	drl_error err = {0};
	drl_async_opts o = {.threads = DRL_ASYNC_THREADS_NONE};
	assert_int_equal(drl_async_new(&a, &o, &err), 0);
	for (size_t i = 0; i < 2; i++) {
		char uri[1200], prefix[32];
		drl_store *s = tu_store(
			main_uri(uri, sizeof uri, "127.0.0.1", opts[i]));
		snprintf(prefix, sizeof prefix,
			 "tlsasync:%d:%zu:", (int)getpid(), i);
		drl_limiter *l = tu_limiter(
			s, i == 0 ? "gcra:100/1h" : "fixed_window:100/1h",
			prefix);
		async_check_hot(a, l,
				opts[i][0] ? "rediss tx=lua" : "rediss tx=auto",
				false);
		drl_limiter_free(l);
		drl_store_free(s);
	}
	drl_async_free(a);
}

/* ---- hostile cases ------------------------------------------------------ */

/* Opening uri fails with `code` (or `code2`, when not 0), a message
 * naming the server at `port` and saying `says`, and never the password
 * "s3cret". */
static void open_fails2(const char *uri, int code, int code2, int port,
			const char *says)
{
	drl_store *s = NULL;
	drl_error err = {0};
	int rc = drl_store_open(&s, uri, &err);
	if (rc != code && (code2 == 0 || rc != code2))
		fail_msg("%s: rc %s, expected %s (%s)", uri, drl_err_name(rc),
			 drl_err_name(code), err.message);
	char where[32];
	snprintf(where, sizeof where, "127.0.0.1:%d", port);
	if (port && strstr(err.message, where) == NULL)
		fail_msg("%s: the message does not name %s: %s", uri, where,
			 err.message);
	if (strstr(err.message, says) == NULL)
		fail_msg("%s: the message does not say \"%s\": %s", uri, says,
			 err.message);
	if (strstr(err.message, "s3cret") || strstr(err.message, "BEGIN"))
		fail_msg("%s: a secret in the message: %s", uri, err.message);
	assert_null(s);
}

static void open_fails(const char *uri, int code, int port, const char *says)
{
	open_fails2(uri, code, 0, port, says);
}

static void test_certificate_failures(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have);
	char uri[1400];
	int port = tls_srv.port;
	/* No tls_ca: the system store does not know the test CA. */
	snprintf(uri, sizeof uri,
		 "rediss://:s3cret@127.0.0.1:%d?tls_cert=%s&tls_key=%s", port,
		 pki.client, pki.client_key);
	open_fails(uri, DRL_ESTORE, port, "certificate");
	/* A CA that did not sign the server's certificate. */
	snprintf(uri, sizeof uri,
		 "rediss://:s3cret@127.0.0.1:%d?tls_ca=%s&tls_cert=%s&"
		 "tls_key=%s",
		 port, pki.other_ca, pki.client, pki.client_key);
	open_fails(uri, DRL_ESTORE, port, "tls_ca=");
	/* A name the certificate is not for. */
	snprintf(uri, sizeof uri, "rediss://127.0.0.1:%d?%s&tls_server_name=%s",
		 port, client_opts, "redis.example.com");
	open_fails(uri, DRL_ESTORE, port, "hostname mismatch");
	/* An expired certificate (the expired server asks no client
	 * certificate). */
	snprintf(uri, sizeof uri, "rediss://:s3cret@localhost:%d?tls_ca=%s",
		 expired_srv.port, pki.ca);
	open_fails(uri, DRL_ESTORE, 0, "expired");
	/* The main server wants a client certificate: its alert
	 * (DRL_ESTORE), or the reset our first request meets when the
	 * server closed first (DRL_EUNAVAILABLE), both say so. */
	snprintf(uri, sizeof uri, "rediss://:s3cret@127.0.0.1:%d?tls_ca=%s",
		 port, pki.ca);
	open_fails2(uri, DRL_ESTORE, DRL_EUNAVAILABLE, port,
		    "client certificate");
}

static void test_protocol_mismatch(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have);
	char uri[1400];
	/* A plaintext server on a TLS URI: it never answers the handshake
	 * (timeout_ms bounds it). */
	snprintf(uri, sizeof uri,
		 "rediss://127.0.0.1:%d?tls_verify=no&timeout_ms=%lld",
		 plain_srv.port, (long long)tu_bound_ms(300));
	drl_store *s = NULL;
	drl_error err = {0};
	int rc = drl_store_open(&s, uri, &err);
	if ((rc != DRL_ETIMEDOUT && rc != DRL_ESTORE) ||
	    strstr(err.message, "TLS") == NULL)
		fail_msg("plaintext server on rediss: %s: %s", drl_err_name(rc),
			 err.message);
	/* A TLS server on a plaintext URI: it drops the connection. */
	snprintf(uri, sizeof uri, "redis://:s3cret@127.0.0.1:%d", tls_srv.port);
	open_fails(uri, DRL_EUNAVAILABLE, tls_srv.port, "rediss://");
}

static void test_bad_options(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have);
	char uri[1400];
	snprintf(uri, sizeof uri, "rediss://127.0.0.1:%d?tls_ca=%s.missing",
		 tls_srv.port, pki.ca);
	open_fails(uri, DRL_EINVAL, 0, "No such file");
	snprintf(uri, sizeof uri, "rediss://127.0.0.1:%d?tls_cert=%s",
		 tls_srv.port, pki.client);
	open_fails(uri, DRL_EINVAL, 0, "together");
	/* The server's key is not the client certificate's. */
	snprintf(uri, sizeof uri,
		 "rediss://127.0.0.1:%d?tls_cert=%s&tls_key=%s", tls_srv.port,
		 pki.client, pki.server_key);
	open_fails(uri, DRL_EINVAL, 0, "not the key");
	snprintf(uri, sizeof uri, "rediss://127.0.0.1:%d?tls_verify=maybe",
		 tls_srv.port);
	open_fails(uri, DRL_EINVAL, 0, "tls_verify");
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d?tls_ca=%s",
		 tls_srv.port, pki.ca);
	open_fails(uri, DRL_EINVAL, 0, "rediss://");
}

/* ---- policies, tls_verify=no, idle connections --------------------------- */

static void test_on_error_applies(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have);
	char uri[1400];
	snprintf(uri, sizeof uri,
		 "rediss://127.0.0.1:%d?tls_ca=%s&connect=lazy&breaker_"
		 "failures=0",
		 expired_srv.port, pki.ca);
	tu_on_error_paths(tu_store(uri), DRL_ESTORE, "expired");
}

static void test_verify_off(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have);
	char uri[1400];
	/* The expired certificate, and a CA that signed nothing here. */
	snprintf(uri, sizeof uri, "rediss://127.0.0.1:%d?tls_verify=no",
		 expired_srv.port);
	tu t = tu_open(uri, "gcra:2/1h");
	assert_true(tu_at(t.lim, "v", 1, 1000 * SEC).allowed);
	tu_free(&t);
	snprintf(uri, sizeof uri,
		 "rediss://127.0.0.1:%d?tls_verify=no&tls_ca=%s&tls_cert=%s&"
		 "tls_key=%s",
		 tls_srv.port, pki.other_ca, pki.client, pki.client_key);
	t = tu_open(uri, "gcra:2/1h");
	assert_true(tu_at(t.lim, "v2", 1, 1000 * SEC).allowed);
	tu_free(&t);
}

/* redis-cli over TLS (the client certificate) to 127.0.0.1:port with
 * `args`: the first line of its output that holds `want` into line (cap
 * bytes); 0 found, -1 not. */
static int cli(int port, const char *args, const char *want, char *line,
	       size_t cap)
{
	char cmd[1400];
	snprintf(cmd, sizeof cmd,
		 "redis-cli --tls --cacert %s --cert %s --key %s -h 127.0.0.1 "
		 "-p %d %s 2>&1",
		 pki.ca, pki.client, pki.client_key, port, args);
	FILE *f = popen(cmd, "r");
	int rc = -1;
	while (f && rc != 0 && fgets(line, (int)cap, f))
		if (strstr(line, want) != NULL)
			rc = 0;
	if (f)
		pclose(f);
	return rc;
}

/* The server's count of connections accepted (INFO stats); -1 when it
 * cannot be read. */
static long connections_received(void)
{
	char line[256];
	long n = -1;
	if (cli(tls_srv.port, "INFO stats", "total_connections_received:", line,
		sizeof line) == 0)
		sscanf(line, "total_connections_received:%ld", &n);
	return n;
}

static void test_idle_connection_reused(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have);
	char uri[1400];
	tu t = tu_open(
		main_uri(uri, sizeof uri, "127.0.0.1", "&pipelines=0&pool=1"),
		"gcra:100/1h");
	tu_at(t.lim, "idle", 1, 1000 * SEC); /* connected (at open) */
	long before = connections_received();
	assert_true(before > 0);
	for (int i = 0; i < 3; i++) {
		/* Idle past the pool's staleness check (10 ms). */
		tu_sleep_ms(30);
		tu_at(t.lim, "idle", 1, 1000 * SEC);
	}
	long after = connections_received();
	/* Only redis-cli's own second connection. */
	assert_int_equal(after, before + 1);
	tu_free(&t);
}

/* rediss-cluster://: a one-node TLS Redis Cluster (tls-cluster yes: the
 * node's slot map names its TLS port) decides exactly, on the scripts and
 * on WATCH/MULTI; a plaintext cluster URI to it fails. */
static void test_cluster_exact(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have);
	drl_server node;
	assert_int_equal(
		drl_fixture_redis_tls_cluster_node_start(&node, tls_args), 0);
	char line[256];
	assert_int_equal(cli(node.port, "CLUSTER ADDSLOTSRANGE 0 16383", "OK",
			     line, sizeof line),
			 0);
	int64_t deadline = tu_mono_ms() + tu_bound_ms(10000);
	while (cli(node.port, "CLUSTER INFO", "cluster_state:ok", line,
		   sizeof line) != 0) {
		if (tu_mono_ms() > deadline)
			fail_msg("the TLS cluster node is not ok");
		tu_sleep_ms(20);
	}
	char uri[1400];
	snprintf(uri, sizeof uri, "rediss-cluster://127.0.0.1:%d?%s&tx=lua",
		 node.port, client_opts);
	if (slow()) {
		/* One decision each way instead of the hot key. */
		tu t = tu_open(uri, "sliding_log:2/1m");
		assert_true(tu_at(t.lim, "c", 1, 1000 * SEC).allowed);
		tu_free(&t);
	} else {
		hot_key_run(uri, "sliding_log:200/1m", 5);
	}
	snprintf(uri, sizeof uri, "rediss-cluster://127.0.0.1:%d?%s&tx=watch",
		 node.port, client_opts);
	if (!slow())
		hot_key_run(uri, "gcra:200/1h", 6);
	snprintf(uri, sizeof uri, "redis-cluster://127.0.0.1:%d", node.port);
	drl_store *s = NULL;
	drl_error err = {0};
	assert_int_equal(drl_store_open(&s, uri, &err), DRL_EUNAVAILABLE);
	assert_non_null(strstr(err.message, "rediss://"));
	drl_fixture_stop(&node);
}

/* ---- rediss-sentinel:// ------------------------------------------------- */

/* 60 decisions at one instant on key `key` of gcra:50/1h: 50 allowed. */
static void fifty_of_sixty(drl_limiter *l, const char *key)
{
	int allowed = 0;
	for (int i = 0; i < 60; i++)
		allowed += tu_at(l, key, 1, 2000 * SEC).allowed;
	assert_int_equal(allowed, 50);
}

/* Whether cli to port finds `want` (0 lines: no). */
static bool cli_says(int port, const char *args, const char *want)
{
	char line[512];
	return cli(port, args, want, line, sizeof line) == 0;
}

static void test_sentinel_exact(void **state)
{
	(void)state;
	DRL_FIXTURE_NEED(have);
	/* The master cannot be demoted (REPLICAOF renamed away): only the
	 * sentinel's message can move a store with no periodic check. The
	 * replica and the sentinel reach the master over TLS, with the
	 * client certificate it asks for. */
	static const char *const renames[] = {
		"--rename-command", "REPLICAOF", "hidden-replicaof",
		"--rename-command", "SLAVEOF",   "hidden-slaveof"};
	drl_server m, r, sen;
	const char *margs[16], *rargs[20];
	char mport[16];
	size_t n = 0;
	for (int i = 0; i < 8; i++)
		margs[n++] = tls_args[i];
	for (int i = 0; i < 6; i++)
		margs[n++] = renames[i];
	margs[n] = NULL;
	assert_int_equal(drl_fixture_redis_tls_start(&m, margs), 0);
	snprintf(mport, sizeof mport, "%d", m.port);
	const char *more[] = {"--tls-replication",
			      "yes",
			      "--tls-client-cert-file",
			      pki.client,
			      "--tls-client-key-file",
			      pki.client_key,
			      "--replicaof",
			      "127.0.0.1",
			      mport};
	n = 0;
	for (int i = 0; i < 8; i++)
		rargs[n++] = tls_args[i];
	for (size_t i = 0; i < sizeof more / sizeof *more; i++)
		rargs[n++] = more[i];
	rargs[n] = NULL;
	assert_int_equal(drl_fixture_redis_tls_start(&r, rargs), 0);
	char conf[10][400];
	const char *confp[11];
	snprintf(conf[0], 400, "tls-cert-file %s", pki.server);
	snprintf(conf[1], 400, "tls-key-file %s", pki.server_key);
	snprintf(conf[2], 400, "tls-ca-cert-file %s", pki.ca);
	snprintf(conf[3], 400, "tls-client-cert-file %s", pki.client);
	snprintf(conf[4], 400, "tls-client-key-file %s", pki.client_key);
	snprintf(conf[5], 400, "tls-replication yes");
	snprintf(conf[6], 400, "tls-auth-clients yes");
	snprintf(conf[7], 400, "sentinel monitor tm 127.0.0.1 %d 1", m.port);
	snprintf(conf[8], 400, "sentinel down-after-milliseconds tm 1000");
	snprintf(conf[9], 400, "sentinel failover-timeout tm 3000");
	for (int i = 0; i < 10; i++)
		confp[i] = conf[i];
	confp[10] = NULL;
	assert_int_equal(drl_fixture_redis_sentinel_tls_start(&sen, confp), 0);

	char uri[1400];
	snprintf(uri, sizeof uri,
		 "rediss-sentinel://127.0.0.1:%d/tm?%s&tx=lua&"
		 "sentinel_check_ms=0",
		 sen.port, client_opts);
	tu t = tu_open(uri, "gcra:50/1h");
	fifty_of_sixty(t.lim, "s1");
	/* A plaintext URI on the TLS sentinel fails, saying so. */
	char plain[300];
	snprintf(plain, sizeof plain, "redis-sentinel://127.0.0.1:%d/tm",
		 sen.port);
	drl_store *s = NULL;
	drl_error err = {0};
	assert_int_not_equal(drl_store_open(&s, plain, &err), 0);
	assert_non_null(strstr(err.message, "rediss://"));

	/* The store's subscription is up, the replica known: fail over. */
	int64_t dl = tu_mono_ms() + tu_bound_ms(15000);
	assert_true(
		TU_WAIT_FOR(cli_says(sen.port, "CLIENT LIST", "cmd=subscribe"),
			    tu_bound_ms(10000)));
	while (!cli_says(sen.port, "SENTINEL FAILOVER tm", "OK")) {
		if (tu_mono_ms() > dl)
			fail_msg("SENTINEL FAILOVER over TLS never accepted");
		tu_sleep_ms(100);
	}
	bool moved = false;
	for (int i = 0; !moved && tu_mono_ms() < dl; i++) {
		char key[16];
		snprintf(key, sizeof key, "mv%d", i);
		tu_at(t.lim, key, 1, 2000 * SEC);
		moved = cli_says(r.port, "CLIENT LIST", "cmd=evalsha");
		if (!moved)
			tu_sleep_ms(20);
	}
	if (!moved)
		fail_msg("rediss-sentinel: the store never reached the new "
			 "master (+switch-master over TLS not heard)");
	assert_true(cli_says(m.port, "ROLE", "master")); /* not demoted */
	fifty_of_sixty(t.lim, "s2");
	tu_free(&t);
	drl_fixture_stop(&sen);
	drl_fixture_stop(&r);
	drl_fixture_stop(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pooled_exact),
		cmocka_unit_test(test_pipelined_exact),
		cmocka_unit_test(test_async_direct_exact),
		cmocka_unit_test(test_certificate_failures),
		cmocka_unit_test(test_protocol_mismatch),
		cmocka_unit_test(test_bad_options),
		cmocka_unit_test(test_on_error_applies),
		cmocka_unit_test(test_verify_off),
		cmocka_unit_test(test_idle_connection_reused),
		cmocka_unit_test(test_cluster_exact),
		cmocka_unit_test(test_sentinel_exact),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
