/*
 * A libdrl store on one SQLite file, written outside the library against
 * its public headers alone (<drl/drl.h>, <drl/sys/backend.h>): the example
 * of "plug in a store of your own". README.md in this directory says what
 * it guarantees and how to build it.
 *
 * URI: sqlite:///absolute/path/to/file.db[?timeout_ms=N&pool=N]
 *   timeout_ms  1..600000, default 1000: how long a call waits for a free
 *               connection and for SQLite's write lock together; past it
 *               the call fails with DRL_ETIMEDOUT.
 *   pool        1..64, default 4: the most SQLite connections this store
 *               opens (one per call in flight; more callers wait).
 * No host, user or password; any other option is DRL_EINVAL.
 *
 * Thread-safe: every method may be called from any number of threads at
 * once, and any number of processes may open the same file; each decision
 * is exact across all of them (SQLite's write lock serialises the writes).
 */
#ifndef SQLITE_STORE_H
#define SQLITE_STORE_H

#include <drl/drl.h>
#include <drl/sys/backend.h>

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Open the store named by a parsed sqlite:// URI (its options are marked
 * used; the caller keeps owning `uri`). The file is created with the
 * store's tables when it does not exist or is empty; a file that holds
 * anything else (another program's tables, not an SQLite file) is refused
 * with DRL_ESTORE. *out is owned by the caller and freed with
 * (*out)->destroy(*out), or handed to drl_store_from_backend(). On failure
 * *out is NULL and err says why. */
int sqlite_store_open(drl_backend **out, drl_uri *uri, drl_error *err);

/* The same without a URI: `path` is the file (any path SQLite accepts),
 * timeout_ms and pool as the URI options (0: the default). */
int sqlite_store_open_file(drl_backend **out, const char *path,
			   int64_t timeout_ms, int64_t pool, drl_error *err);

/* The opener for drl_store_open_with(): scheme "sqlite". */
extern const drl_store_opener sqlite_store_opener;

#ifdef __cplusplus
}
#endif
#endif /* SQLITE_STORE_H */
