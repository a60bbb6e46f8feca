/*
 * The store conformance suite (tests/fixtures/store_contract.h) on the SQLite
 * store: each check opens a new database file in a temporary directory of
 * this run's own; the cross-process hot-key test has its processes open
 * one shared file there through the sqlite:// opener. The directory is
 * removed at the end. Exit status: 0 when every check passed.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* POSIX 2008 in a strict -std=c11 build */
#endif
#include "sqlite_store.h"
#include "store_contract.h"
#include "testutil.h" /* tests/: tu_bound_ms() */

#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];
static atomic_int opened;

/* A new file per open: no check sees another's keys; and a timeout a
 * slow machine (valgrind, sanitizers, a busy core) does not reach, as
 * the suite's other runners use (the hot-key test scales its URI's). */
static int open_fresh(void *arg, drl_backend **out, drl_error *err)
{
	(void)arg;
	char path[128];
	snprintf(path, sizeof path, "%s/store-%d.db", dir,
		 atomic_fetch_add(&opened, 1));
	return sqlite_store_open_file(out, path, tu_bound_ms(1000), 0, err);
}

/* Remove dir and the files in it (databases, their -wal and -shm). */
static void remove_dir(void)
{
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *e;
		char path[512];
		while ((e = readdir(d)) != NULL) {
			if (strcmp(e->d_name, ".") == 0 ||
			    strcmp(e->d_name, "..") == 0)
				continue;
			snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
			unlink(path);
		}
		closedir(d);
	}
	rmdir(dir);
}

int main(void)
{
	/* /tmp rather than $TMPDIR: the path goes into a URI unencoded */
	snprintf(dir, sizeof dir, "/tmp/drl-contract-sqlite-XXXXXX");
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	char uri[128];
	/* the hot-key test adds no timeout_ms to a URI of a scheme it does
	 * not know: name the scaled one here */
	snprintf(uri, sizeof uri, "sqlite://%s/hot.db?timeout_ms=%lld", dir,
		 (long long)tu_bound_ms(1000));
	store_contract_target t = {
		.name = "sqlite",
		.open = open_fresh,
		.arg = NULL,
		.uri = uri,
		.openers = &sqlite_store_opener,
		.nopeners = 1,
		.ttl_min_us = 0,    /* TTLs kept to the µs: 100 ms */
		.may_evict = false, /* rows go only when expired */
		/* once: a write is a transaction on a file (~0.1 ms) */
		.threads_rounds = 1,
	};
	int failed = store_contract_run(&t);
	remove_dir();
	if (failed)
		fprintf(stderr, "contract_sqlite: %d checks failed\n", failed);
	return failed ? 1 : 0;
}
