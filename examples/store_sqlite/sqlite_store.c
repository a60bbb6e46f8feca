/*
 * The SQLite store, "sqlite:///path/to/file.db": every key is a row of one
 * table in one file, shared by every thread and process that opens it.
 *
 * Schema (created in an empty file, checked in one that has it):
 *   drl_meta(name, value)   'format' = FORMAT, 'vclock' = last version
 *   drl_kv(key BLOB PRIMARY KEY, counter, blob, version, expires_at)
 * A counter row has version 0 and an integer counter; a state blob row has
 * a blob and a version from drl_meta's vclock, which only grows, so a key
 * that expires or is deleted and written again never repeats a version a
 * caller may still hold (no ABA). expires_at is µs since the Unix epoch on
 * the real-time clock (the only clock processes share): a row whose
 * expires_at has passed reads as absent and is overwritten as absent.
 * Both tables are STRICT: a value of the wrong type cannot be stored (an
 * overflowing sum would otherwise become a REAL).
 *
 * Atomicity. incr is one UPSERT ... RETURNING (one statement: one write
 * transaction). cas, update and del run between BEGIN IMMEDIATE and
 * COMMIT, which takes SQLite's write lock first: no other connection, in
 * this process or another, writes in between, so the version check and
 * the write (or the update step and its write) are one atomic step across
 * processes. Reads (get_many of several keys) run in one read transaction:
 * one snapshot. The file is in WAL mode, so readers never wait for the
 * writer; synchronous=NORMAL: a commit survives the process crashing, not
 * the machine losing power (a limiter's state is worth less than an fsync
 * per decision).
 *
 * Threads: a small pool of connections behind a mutex (pool=N, default 4).
 * A call borrows one connection for its whole duration and gives it back,
 * so a connection is used by one thread at a time (it is opened
 * SQLITE_OPEN_NOMUTEX: SQLite's own per-connection mutex would only be
 * taken for nothing) and a BEGIN ... COMMIT never mixes with another
 * thread's statements. A pool rather than a connection per thread: the
 * library's own threads (near cache, async workers) and the application's
 * come and go, and a per-thread connection would have to be found and
 * closed from destroy() and from thread exit; a pool is bounded (at most
 * pool=N open files and prepared statement sets) and needs neither. More
 * connections than a few buy nothing for writes: SQLite has one writer
 * lock per file.
 *
 * Writes of one process take turns on a mutex before they take a
 * connection (acquire() says why), so at most one connection per process
 * asks SQLite for its write lock at a time.
 *
 * Blocking is bounded by timeout_ms per call: waiting for the turn to
 * write, for a connection and for SQLite's write lock (busy_timeout, set
 * to what is left of the call's time) share it. SQLITE_BUSY past it is
 * DRL_ETIMEDOUT.
 *
 * Expired rows are deleted lazily: every SWEEP_EVERY-th write of a store
 * (counted per process) also deletes up to SWEEP_ROWS expired rows, in the
 * same write transaction, oldest first (an index on expires_at finds
 * them). A write creates at most one row and sweeps delete up to
 * SWEEP_ROWS / SWEEP_EVERY = 2 expired rows per write, so expired rows
 * never pile up faster than they are removed while anyone writes. SQLite
 * reuses the freed pages; the file does not shrink (no VACUUM).
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* POSIX 2008 in a strict -std=c11 build */
#endif
#include "sqlite_store.h"

#include <drl/drl.h>
#include <drl/sys/backend.h>
#include <sqlite3.h> /* Debian: libsqlite3-dev; SQLite >= 3.37 (STRICT) */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FORMAT "libdrl-sqlite 1" /* drl_meta 'format': this schema */
#define TIMEOUT_MS_DEFAULT 1000
#define TIMEOUT_MS_MAX 600000
#define POOL_DEFAULT 4
#define POOL_MAX 64
#define SWEEP_EVERY 32 /* writes of this process between two sweeps */
#define SWEEP_ROWS 64  /* expired rows one sweep deletes at most */

/* The prepared statements of a connection. */
enum {
	S_BEGIN,       /* a read transaction: one snapshot */
	S_BEGIN_WRITE, /* takes the write lock now */
	S_COMMIT,
	S_ROLLBACK,
	S_INCR,
	S_GET,
	S_LOAD,
	S_NEXT_VERSION,
	S_PUT,
	S_DEL,
	S_SWEEP,
	S_COUNT
};

static const char *const stmt_sql[S_COUNT] = {
	[S_BEGIN] = "BEGIN",
	[S_BEGIN_WRITE] = "BEGIN IMMEDIATE",
	[S_COMMIT] = "COMMIT",
	[S_ROLLBACK] = "ROLLBACK",
	/* ?1 key, ?2 delta, ?3 new expires_at, ?4 now, ?5..?6 the range the
	 * old counter must be in for the sum not to overflow. An unexpired
	 * blob or an out-of-range counter matches no row: nothing changes
	 * and nothing is returned. */
	[S_INCR] = "INSERT INTO drl_kv(key, counter, blob, version, "
		   "expires_at) VALUES(?1, ?2, NULL, 0, ?3) "
		   "ON CONFLICT(key) DO UPDATE SET "
		   "counter = CASE WHEN expires_at <= ?4 THEN ?2 "
		   "ELSE counter + ?2 END, "
		   "blob = NULL, version = 0, expires_at = ?3 "
		   "WHERE expires_at <= ?4 OR "
		   "(version = 0 AND counter BETWEEN ?5 AND ?6) "
		   "RETURNING counter",
	/* ?1 key, ?2 now */
	[S_GET] = "SELECT counter, version FROM drl_kv "
		  "WHERE key = ?1 AND expires_at > ?2",
	[S_LOAD] = "SELECT blob, version FROM drl_kv "
		   "WHERE key = ?1 AND expires_at > ?2",
	[S_NEXT_VERSION] = "UPDATE drl_meta SET value = value + 1 "
			   "WHERE name = 'vclock' RETURNING value",
	/* ?1 key, ?2 blob, ?3 version, ?4 expires_at */
	[S_PUT] = "INSERT INTO drl_kv(key, counter, blob, version, "
		  "expires_at) VALUES(?1, NULL, ?2, ?3, ?4) "
		  "ON CONFLICT(key) DO UPDATE SET counter = NULL, "
		  "blob = excluded.blob, version = excluded.version, "
		  "expires_at = excluded.expires_at",
	[S_DEL] = "DELETE FROM drl_kv WHERE key = ?1",
	/* ?1 now, ?2 how many */
	[S_SWEEP] = "DELETE FROM drl_kv WHERE key IN (SELECT key FROM drl_kv "
		    "WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2)",
};

static const char schema_sql[] =
	"CREATE TABLE drl_meta(name TEXT PRIMARY KEY NOT NULL, "
	"value ANY) STRICT;"
	"INSERT INTO drl_meta VALUES('format', '" FORMAT "'), ('vclock', 0);"
	"CREATE TABLE drl_kv(key BLOB PRIMARY KEY NOT NULL, "
	"counter INTEGER, blob BLOB, version INTEGER NOT NULL, "
	"expires_at INTEGER NOT NULL) STRICT, WITHOUT ROWID;"
	"CREATE INDEX drl_kv_expires ON drl_kv(expires_at);";

typedef struct conn {
	sqlite3 *db;
	sqlite3_stmt *st[S_COUNT];
	struct conn *next; /* in the pool's idle list */
	char msg[192];     /* the last failed step's message */
} conn;

typedef struct store {
	drl_backend parent;
	char *path;
	int64_t timeout_ms;
	int pool;
	pthread_mutex_t writer; /* this process's turn to write */
	pthread_mutex_t lock;   /* guards idle and nconns */
	pthread_cond_t freed;   /* a connection came back, or a slot freed */
	conn *idle;
	int nconns; /* open or being opened */
	atomic_uint writes;
} store;

/* ---- helpers ---------------------------------------------------------- */

/* Monotonic now, for the pool's deadline. */
static struct timespec mono_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts;
}

static int64_t ms_until(struct timespec dl)
{
	struct timespec now = mono_now();
	return (int64_t)(dl.tv_sec - now.tv_sec) * 1000 +
	       (dl.tv_nsec - now.tv_nsec) / 1000000;
}

/* expires_at for a TTL starting now; saturates. A TTL <= 0 gives a row
 * already expired: written and gone at once, as the contract allows. */
static int64_t deadline(int64_t now, int64_t ttl_us)
{
	return ttl_us > INT64_MAX - now ? INT64_MAX : now + ttl_us;
}

/* DRL_ESTORE for a counter method on a blob or the reverse. */
static int wrong_kind(drl_error *err, drl_bytes key, bool want_counter)
{
	char k[DRL_KEY_SHOW_BUF];
	return drl_error_set(err, DRL_ESTORE,
			     "sqlite store: wrong kind of value at key \"%s\": "
			     "found %s, expected %s",
			     drl_key_show(k, sizeof k, key),
			     want_counter ? "a state blob" : "a counter",
			     want_counter ? "a counter" : "a state blob");
}

/* DRL_ECORRUPT: a row this store did not write. */
static int corrupt(drl_error *err, drl_bytes key, const char *what)
{
	char k[DRL_KEY_SHOW_BUF];
	return drl_error_set(err, DRL_ECORRUPT,
			     "sqlite store: key \"%s\" holds %s, not written "
			     "by this store",
			     drl_key_show(k, sizeof k, key), what);
}

/* DRL_EINVAL for a method's bad arguments: keys[0..n) must be byte
 * strings, and `ok` true (else the message names `what` as NULL). */
static int check_args(size_t n, const drl_bytes *keys, bool ok,
		      const char *what, drl_error *err)
{
	if (n > 0 && keys == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "sqlite store: NULL keys");
	if (!ok)
		return drl_error_set(err, DRL_EINVAL, "sqlite store: NULL %s",
				     what);
	for (size_t i = 0; i < n; i++)
		if (keys[i].data == NULL && keys[i].len > 0)
			return drl_error_set(err, DRL_EINVAL,
					     "sqlite store: NULL key");
	return 0;
}

/* Bind bytes as a BLOB, an empty one too (a NULL pointer would bind SQL
 * NULL). The bytes must stay put until the statement is reset. */
static int bind_bytes(sqlite3_stmt *s, int i, const void *p, size_t len)
{
	if (len == 0)
		return sqlite3_bind_zeroblob(s, i, 0);
	return sqlite3_bind_blob64(s, i, p, (sqlite3_uint64)len, SQLITE_STATIC);
}

/* Keep a failed step's message (reset and rollback would replace it),
 * reset s and return rc. */
static int failed(conn *c, sqlite3_stmt *s, int rc)
{
	snprintf(c->msg, sizeof c->msg, "%s", sqlite3_errmsg(c->db));
	if (s)
		sqlite3_reset(s);
	return rc;
}

/* Run statement `id` (no result rows) to its end and reset it; an SQLite
 * code (SQLITE_OK when done) with the message kept on failure. */
static int run(conn *c, int id)
{
	sqlite3_stmt *s = c->st[id];
	int rc = sqlite3_step(s);
	if (rc != SQLITE_DONE)
		return failed(c, s, rc == SQLITE_ROW ? SQLITE_MISUSE : rc);
	sqlite3_reset(s);
	return SQLITE_OK;
}

/* Step S_GET or S_LOAD (`id`) for the row of key live at `now`:
 * SQLITE_ROW with the row in c->st[id] (reset it after reading),
 * SQLITE_DONE when absent (c->st[id] reset), or an error. */
static int lookup(conn *c, int id, drl_bytes key, int64_t now)
{
	sqlite3_stmt *s = c->st[id];
	bind_bytes(s, 1, key.data, key.len);
	sqlite3_bind_int64(s, 2, now);
	int rc = sqlite3_step(s);
	if (rc == SQLITE_DONE)
		sqlite3_reset(s);
	return rc;
}

/* The DRL_E* code and message for SQLite code rc (kept in c->msg):
 * the lock still held by others when the time was up is DRL_ETIMEDOUT,
 * anything else DRL_ESTORE with SQLite's text. */
static int db_error(const store *st, conn *c, int rc, const char *what,
		    drl_error *err)
{
	int primary = rc & 0xff;
	if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED)
		return drl_error_set(
			err, DRL_ETIMEDOUT,
			"sqlite store %s: %s: still locked by "
			"another connection after timeout_ms=%" PRId64 " (%s)",
			st->path, what, st->timeout_ms, c->msg);
	if (primary == SQLITE_NOMEM)
		return drl_error_set(err, DRL_ENOMEM,
				     "sqlite store: %s: out of memory", what);
	return drl_error_set(err, DRL_ESTORE, "sqlite store %s: %s: %s (%d)",
			     st->path, what, c->msg, rc);
}

/* End the transaction, if one is open, writing nothing; keeps c->msg.
 * Before the statements are prepared (checking the schema at open) it
 * runs the SQL text instead. */
static void rollback(conn *c)
{
	if (!sqlite3_get_autocommit(c->db)) {
		char keep[sizeof c->msg];
		memcpy(keep, c->msg, sizeof keep);
		if (c->st[S_ROLLBACK])
			run(c, S_ROLLBACK);
		else
			sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
		memcpy(c->msg, keep, sizeof keep);
	}
}

/* db_error() for a failure inside a transaction, which is rolled back. */
static int abort_tx(const store *st, conn *c, int rc, const char *what,
		    drl_error *err)
{
	int code = db_error(st, c, rc, what, err);
	rollback(c);
	return code;
}

/* Whether this write should sweep (every SWEEP_EVERY-th of the store). */
static bool sweep_due(store *st)
{
	unsigned n =
		atomic_fetch_add_explicit(&st->writes, 1, memory_order_relaxed);
	return n % SWEEP_EVERY == SWEEP_EVERY - 1;
}

/* Delete up to SWEEP_ROWS expired rows; inside a write transaction. */
static int sweep(conn *c, int64_t now)
{
	sqlite3_stmt *s = c->st[S_SWEEP];
	sqlite3_bind_int64(s, 1, now);
	sqlite3_bind_int(s, 2, SWEEP_ROWS);
	return run(c, S_SWEEP);
}

/* BEGIN IMMEDIATE (waiting for the write lock up to the call's time),
 * then a sweep when one is due. */
static int begin_write(store *st, conn *c, int64_t now, bool do_sweep,
		       drl_error *err)
{
	int rc = run(c, S_BEGIN_WRITE);
	if (rc)
		return db_error(st, c, rc, "BEGIN IMMEDIATE", err);
	if (do_sweep && (rc = sweep(c, now)) != SQLITE_OK)
		return abort_tx(st, c, rc, "deleting expired rows", err);
	return 0;
}

static int commit(store *st, conn *c, drl_error *err)
{
	int rc = run(c, S_COMMIT);
	return rc ? abort_tx(st, c, rc, "COMMIT", err) : 0;
}

/* ---- connections ------------------------------------------------------ */

static void conn_close(conn *c)
{
	if (!c)
		return;
	for (int i = 0; i < S_COUNT; i++)
		sqlite3_finalize(c->st[i]);
	sqlite3_close(c->db);
	free(c);
}

/* One integer or text answer of a query (or PRAGMA) without parameters:
 * *found (when found is not NULL) says whether a row came back; its text
 * into out[cap] when out is not NULL. */
static int query_one(conn *c, const char *sql, bool *found, char *out,
		     size_t cap)
{
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_prepare_v2(c->db, sql, -1, &s, NULL);
	if (rc != SQLITE_OK)
		return failed(c, NULL, rc);
	rc = sqlite3_step(s);
	if (found)
		*found = rc == SQLITE_ROW;
	if (rc == SQLITE_ROW) {
		if (out) {
			const unsigned char *t = sqlite3_column_text(s, 0);
			snprintf(out, cap, "%s", t ? (const char *)t : "");
		}
		rc = SQLITE_DONE;
	}
	if (rc != SQLITE_DONE)
		failed(c, NULL, rc);
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/*
 * Read, in the transaction the caller opened, whether the file is ours:
 * 0 with *empty set when it holds no table at all; 0 when drl_meta says
 * FORMAT; DRL_ESTORE when it holds another program's tables or another
 * format. The transaction is left open.
 */
static int check_schema(store *st, conn *c, bool *empty, drl_error *err)
{
	bool found = false;
	char text[128] = "";
	*empty = false;
	int rc = query_one(c,
			   "SELECT 1 FROM sqlite_schema WHERE type = 'table' "
			   "AND name = 'drl_meta'",
			   &found, NULL, 0);
	if (rc)
		return db_error(st, c, rc, "reading the schema", err);
	if (found) {
		rc = query_one(c,
			       "SELECT CAST(value AS TEXT) FROM drl_meta "
			       "WHERE name = 'format'",
			       &found, text, sizeof text);
		if (rc)
			return db_error(st, c, rc, "reading drl_meta", err);
		if (!found || strcmp(text, FORMAT) != 0)
			return drl_error_set(
				err, DRL_ESTORE,
				"sqlite store %s: not a libdrl store of this "
				"version (drl_meta format \"%.64s\", expected "
				"\"%s\")",
				st->path, found ? text : "(none)", FORMAT);
		return 0;
	}
	rc = query_one(c,
		       "SELECT name FROM sqlite_schema WHERE name NOT LIKE "
		       "'sqlite\\_%' ESCAPE '\\' LIMIT 1",
		       &found, text, sizeof text);
	if (rc)
		return db_error(st, c, rc, "reading the schema", err);
	if (found)
		return drl_error_set(err, DRL_ESTORE,
				     "sqlite store %s: the file holds other "
				     "data (\"%.64s\") and no libdrl store; "
				     "give the store a file of its own",
				     st->path, text);
	*empty = true;
	return 0;
}

/* Run one statement of SQL text (no rows); an SQLite code, c->msg set. */
static int exec(conn *c, const char *sql)
{
	int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
	return rc == SQLITE_OK ? rc : failed(c, NULL, rc);
}

/*
 * Make the file ours. A store's file is checked in a read transaction,
 * which waits for nobody (WAL): opening does not need the write lock that
 * deciding processes hold in turn. An empty file gets the schema in a
 * write transaction that checks again first (two processes creating the
 * same new file: the second finds the first one's tables).
 */
static int ensure_schema(store *st, conn *c, drl_error *err)
{
	bool empty = false;
	int rc = exec(c, "BEGIN");
	if (rc)
		return db_error(st, c, rc, "opening (BEGIN)", err);
	rc = check_schema(st, c, &empty, err);
	rollback(c);
	if (rc || !empty)
		return rc;
	if ((rc = exec(c, "BEGIN IMMEDIATE")) != SQLITE_OK)
		return db_error(st, c, rc, "opening (BEGIN IMMEDIATE)", err);
	rc = check_schema(st, c, &empty, err);
	if (rc == 0 && empty && (rc = exec(c, schema_sql)) != SQLITE_OK)
		rc = db_error(st, c, rc, "creating the tables", err);
	if (rc == 0 && (rc = exec(c, "COMMIT")) != SQLITE_OK)
		rc = db_error(st, c, rc, "COMMIT", err);
	rollback(c);
	return rc;
}

/*
 * Open one connection: WAL (the first one switches the file to it, which
 * is then persistent), synchronous=NORMAL, the schema checked (the first)
 * and every statement prepared, which also checks the tables' columns.
 */
static int conn_open(store *st, bool first, conn **out, drl_error *err)
{
	*out = NULL;
	conn *c = calloc(1, sizeof *c);
	if (!c)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	int rc = sqlite3_open_v2(st->path, &c->db,
				 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
					 SQLITE_OPEN_NOMUTEX,
				 NULL);
	if (rc != SQLITE_OK) {
		if (c->db)
			failed(c, NULL, rc);
		else
			snprintf(c->msg, sizeof c->msg, "%s",
				 sqlite3_errstr(rc));
		rc = db_error(st, c, rc, "opening the file", err);
		conn_close(c);
		return rc;
	}
	sqlite3_extended_result_codes(c->db, 1);
	sqlite3_busy_timeout(c->db, (int)st->timeout_ms);
	char mode[32] = "";
	rc = query_one(c, "PRAGMA journal_mode=WAL", NULL, mode, sizeof mode);
	if (rc == SQLITE_OK && strcmp(mode, "wal") != 0) {
		rc = drl_error_set(err, DRL_ESTORE,
				   "sqlite store %s: cannot use WAL mode "
				   "(journal_mode is \"%s\")",
				   st->path, mode);
		conn_close(c);
		return rc;
	}
	if (rc == SQLITE_OK)
		rc = query_one(c, "PRAGMA synchronous=NORMAL", NULL, NULL, 0);
	if (rc != SQLITE_OK) {
		/* a file that is not SQLite fails here: SQLITE_NOTADB */
		rc = db_error(st, c, rc, "opening the file", err);
		conn_close(c);
		return rc;
	}
	if (first && (rc = ensure_schema(st, c, err)) != 0) {
		conn_close(c);
		return rc;
	}
	for (int i = 0; i < S_COUNT; i++) {
		rc = sqlite3_prepare_v3(c->db, stmt_sql[i], -1,
					SQLITE_PREPARE_PERSISTENT, &c->st[i],
					NULL);
		if (rc != SQLITE_OK) {
			failed(c, NULL, rc);
			rc = drl_error_set(err, DRL_ESTORE,
					   "sqlite store %s: not a libdrl "
					   "store's tables: %s",
					   st->path, c->msg);
			conn_close(c);
			return rc;
		}
	}
	*out = c;
	return 0;
}

/* t plus ms >= 0 milliseconds. */
static struct timespec ts_add_ms(struct timespec t, int64_t ms)
{
	t.tv_sec += (time_t)(ms / 1000);
	t.tv_nsec += (long)(ms % 1000) * 1000000;
	if (t.tv_nsec >= 1000000000) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000;
	}
	return t;
}

/* Take st->writer by the monotonic deadline dl (pthread_mutex_timedlock
 * counts on CLOCK_REALTIME: the time left is carried over). */
static int writer_lock(store *st, struct timespec dl, drl_error *err)
{
	int64_t left = ms_until(dl);
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	rt = ts_add_ms(rt, left > 0 ? left : 0);
	if (pthread_mutex_timedlock(&st->writer, &rt) == 0)
		return 0;
	return drl_error_set(err, DRL_ETIMEDOUT,
			     "sqlite store %s: another thread's write held "
			     "this process's turn for timeout_ms=%" PRId64,
			     st->path, st->timeout_ms);
}

/*
 * Get ready for one call: for a call that writes, this process's turn to
 * write (st->writer); then a connection: an idle one, a new one while
 * fewer than pool are open, or the next one given back. All of it, and
 * then SQLite's write lock (the connection's busy_timeout is set to what
 * is left), within timeout_ms.
 *
 * Why a turn: SQLite's busy handler polls, sleeping up to 100 ms between
 * tries, so threads contending for the write lock through their own
 * connections are served in no order and one can wait for seconds while
 * others keep winning (it did, in the conformance suite's thread checks
 * under valgrind). Writers of one process queue on a mutex instead, woken
 * as soon as the previous write ends, and only one connection per
 * process contends for SQLite's lock. Readers take no turn (WAL: they
 * never wait for the writer).
 */
static int acquire(store *st, bool write, conn **out, drl_error *err)
{
	struct timespec dl = ts_add_ms(mono_now(), st->timeout_ms);
	if (write) {
		int rc = writer_lock(st, dl, err);
		if (rc)
			return rc;
	}
	conn *c = NULL;
	int rc = 0;
	pthread_mutex_lock(&st->lock);
	while (!st->idle && st->nconns >= st->pool) {
		if (pthread_cond_timedwait(&st->freed, &st->lock, &dl) ==
			    ETIMEDOUT &&
		    !st->idle && st->nconns >= st->pool) {
			rc = drl_error_set(err, DRL_ETIMEDOUT,
					   "sqlite store %s: all pool=%d "
					   "connections busy for "
					   "timeout_ms=%" PRId64,
					   st->path, st->pool, st->timeout_ms);
			break;
		}
	}
	if (rc == 0 && st->idle) {
		c = st->idle;
		st->idle = c->next;
	} else if (rc == 0) {
		st->nconns++;
		pthread_mutex_unlock(&st->lock);
		rc = conn_open(st, false, &c, err);
		pthread_mutex_lock(&st->lock);
		if (rc) {
			st->nconns--;
			pthread_cond_signal(&st->freed);
		}
	}
	pthread_mutex_unlock(&st->lock);
	if (rc) {
		if (write)
			pthread_mutex_unlock(&st->writer);
		return rc;
	}
	int64_t left = ms_until(dl);
	sqlite3_busy_timeout(c->db, left > 0 ? (int)left : 1);
	*out = c;
	return 0;
}

/* Give a connection back (every statement reset, no transaction open),
 * and the turn to write when the call had it. */
static void release(store *st, bool write, conn *c)
{
	pthread_mutex_lock(&st->lock);
	c->next = st->idle;
	st->idle = c;
	pthread_cond_signal(&st->freed);
	pthread_mutex_unlock(&st->lock);
	if (write)
		pthread_mutex_unlock(&st->writer);
}

/* ---- the methods, on a borrowed connection ---------------------------- */

/* Why S_INCR changed nothing: a blob (DRL_ESTORE), a counter the sum
 * would overflow (DRL_ERANGE), a counter of another type (DRL_ECORRUPT),
 * or nothing any more (1: the row changed since; try again). */
static int incr_refused(store *st, conn *c, drl_bytes key, int64_t now,
			int64_t lo, int64_t hi, drl_error *err)
{
	sqlite3_stmt *s = c->st[S_GET];
	int rc = lookup(c, S_GET, key, now);
	if (rc == SQLITE_DONE)
		return 1;
	if (rc != SQLITE_ROW)
		return db_error(st, c, failed(c, s, rc), "incr", err);
	int64_t version = sqlite3_column_int64(s, 1);
	int type = sqlite3_column_type(s, 0);
	int64_t v = sqlite3_column_int64(s, 0);
	sqlite3_reset(s);
	if (version != 0)
		return wrong_kind(err, key, true);
	if (type != SQLITE_INTEGER)
		return corrupt(err, key, "a counter that is not an integer");
	if (v < lo || v > hi) {
		char k[DRL_KEY_SHOW_BUF];
		return drl_error_set(err, DRL_ERANGE,
				     "sqlite store: counter at key \"%s\" "
				     "would overflow",
				     drl_key_show(k, sizeof k, key));
	}
	return 1;
}

static int do_incr(store *st, conn *c, drl_bytes key, int64_t delta,
		   int64_t ttl_us, int64_t *value, drl_error *err)
{
	int64_t now = drl_now_us();
	bool tx = sweep_due(st);
	int rc;
	if (tx && (rc = begin_write(st, c, now, true, err)) != 0)
		return rc;
	/* the old counter must lie in [lo, hi] for old + delta to fit */
	int64_t lo = delta < 0 ? INT64_MIN - delta : INT64_MIN;
	int64_t hi = delta > 0 ? INT64_MAX - delta : INT64_MAX;
	sqlite3_stmt *s = c->st[S_INCR];
	for (int attempt = 0;; attempt++) {
		bind_bytes(s, 1, key.data, key.len);
		sqlite3_bind_int64(s, 2, delta);
		sqlite3_bind_int64(s, 3, deadline(now, ttl_us));
		sqlite3_bind_int64(s, 4, now);
		sqlite3_bind_int64(s, 5, lo);
		sqlite3_bind_int64(s, 6, hi);
		rc = sqlite3_step(s);
		if (rc == SQLITE_ROW) {
			*value = sqlite3_column_int64(s, 0);
			rc = sqlite3_step(s); /* the end: commits */
			if (rc != SQLITE_DONE)
				return abort_tx(st, c, failed(c, s, rc), "incr",
						err);
			sqlite3_reset(s);
			return tx ? commit(st, c, err) : 0;
		}
		if (rc != SQLITE_DONE)
			return abort_tx(st, c, failed(c, s, rc), "incr", err);
		sqlite3_reset(s);
		/* Refused. Outside a transaction the row may have changed
		 * between the two statements: look, and try again if so. */
		rc = incr_refused(st, c, key, now, lo, hi, err);
		if (rc != 1 || attempt == 8) {
			rollback(c);
			if (rc == 1)
				rc = drl_error_set(
					err, DRL_ESTORE,
					"sqlite store: incr refused "
					"and the row keeps changing");
			return rc;
		}
	}
}

/* Read n counters, in one snapshot when n > 1. */
static int do_get_many(store *st, conn *c, size_t n, const drl_bytes *keys,
		       int64_t *values, drl_error *err)
{
	int64_t now = drl_now_us();
	int rc;
	if (n > 1 && (rc = run(c, S_BEGIN)) != SQLITE_OK)
		return db_error(st, c, rc, "BEGIN", err);
	sqlite3_stmt *s = c->st[S_GET];
	for (size_t i = 0; i < n; i++) {
		rc = lookup(c, S_GET, keys[i], now);
		if (rc == SQLITE_DONE) {
			values[i] = 0;
			continue;
		}
		if (rc != SQLITE_ROW)
			return abort_tx(st, c, failed(c, s, rc), "get_many",
					err);
		int64_t version = sqlite3_column_int64(s, 1);
		int type = sqlite3_column_type(s, 0);
		values[i] = sqlite3_column_int64(s, 0);
		sqlite3_reset(s);
		if (version != 0 || type != SQLITE_INTEGER) {
			rollback(c);
			return version != 0
				       ? wrong_kind(err, keys[i], true)
				       : corrupt(err, keys[i],
						 "a counter that is not an "
						 "integer");
		}
	}
	return n > 1 ? commit(st, c, err) : 0;
}

static int do_load(store *st, conn *c, drl_bytes key, void *buf, size_t cap,
		   size_t *len, uint64_t *version, drl_error *err)
{
	sqlite3_stmt *s = c->st[S_LOAD];
	int rc = lookup(c, S_LOAD, key, drl_now_us());
	if (rc == SQLITE_DONE) {
		*len = 0;
		*version = 0;
		return 0;
	}
	if (rc != SQLITE_ROW)
		return db_error(st, c, failed(c, s, rc), "load", err);
	int64_t v = sqlite3_column_int64(s, 1);
	if (v == 0) {
		sqlite3_reset(s);
		return wrong_kind(err, key, false);
	}
	if (v < 0 || sqlite3_column_type(s, 0) != SQLITE_BLOB) {
		sqlite3_reset(s);
		return corrupt(err, key, "a blob row without a blob");
	}
	const void *p = sqlite3_column_blob(s, 0);
	size_t need = (size_t)sqlite3_column_bytes(s, 0);
	if (need > cap) {
		sqlite3_reset(s);
		*len = need;
		return drl_error_set(err, DRL_ERANGE,
				     "sqlite store: state of %zu bytes does "
				     "not fit a buffer of %zu",
				     need, cap);
	}
	if (need)
		memcpy(buf, p, need);
	*len = need;
	*version = (uint64_t)v;
	sqlite3_reset(s);
	return 0;
}

/* Write blob at key with a new version; inside a write transaction. */
static int put_blob(store *st, conn *c, drl_bytes key, const void *blob,
		    size_t len, int64_t expires_at, drl_error *err)
{
	sqlite3_stmt *s = c->st[S_NEXT_VERSION];
	int rc = sqlite3_step(s);
	if (rc == SQLITE_DONE) {
		sqlite3_reset(s);
		rollback(c);
		return drl_error_set(err, DRL_ESTORE,
				     "sqlite store %s: drl_meta lost its "
				     "'vclock' row",
				     st->path);
	}
	if (rc != SQLITE_ROW)
		return abort_tx(st, c, failed(c, s, rc), "new version", err);
	int64_t version = sqlite3_column_int64(s, 0);
	rc = sqlite3_step(s);
	if (rc != SQLITE_DONE)
		return abort_tx(st, c, failed(c, s, rc), "new version", err);
	sqlite3_reset(s);
	s = c->st[S_PUT];
	bind_bytes(s, 1, key.data, key.len);
	bind_bytes(s, 2, blob, len);
	sqlite3_bind_int64(s, 3, version);
	sqlite3_bind_int64(s, 4, expires_at);
	rc = run(c, S_PUT);
	return rc ? abort_tx(st, c, rc, "writing state", err) : 0;
}

/* The version at key now (0: absent), inside a write transaction;
 * DRL_ESTORE on a counter. */
static int current_version(store *st, conn *c, drl_bytes key, int64_t now,
			   uint64_t *version, drl_error *err)
{
	sqlite3_stmt *s = c->st[S_GET];
	int rc = lookup(c, S_GET, key, now);
	*version = 0;
	if (rc == SQLITE_ROW)
		*version = (uint64_t)sqlite3_column_int64(s, 1);
	else if (rc != SQLITE_DONE)
		return abort_tx(st, c, failed(c, s, rc), "cas", err);
	sqlite3_reset(s);
	if (rc == SQLITE_ROW && *version == 0) {
		rollback(c);
		return wrong_kind(err, key, false);
	}
	return 0;
}

static int do_cas(store *st, conn *c, drl_bytes key, const void *blob,
		  size_t len, uint64_t version, int64_t ttl_us, drl_error *err)
{
	int64_t now = drl_now_us();
	int rc = begin_write(st, c, now, sweep_due(st), err);
	if (rc)
		return rc;
	uint64_t cur;
	if ((rc = current_version(st, c, key, now, &cur, err)) != 0)
		return rc;
	if (cur != version) {
		rollback(c);
		return drl_error_set(err, DRL_ECONFLICT,
				     "sqlite store: version changed");
	}
	rc = put_blob(st, c, key, blob, len, deadline(now, ttl_us), err);
	return rc ? rc : commit(st, c, err);
}

/* The step runs between BEGIN IMMEDIATE and COMMIT: no other connection
 * of any process writes meanwhile. */
static int do_update(store *st, conn *c, drl_bytes key, drl_update_fn fn,
		     void *arg, drl_error *err)
{
	static const unsigned char empty[1];
	int64_t now = drl_now_us();
	int rc = begin_write(st, c, now, sweep_due(st), err);
	if (rc)
		return rc;
	sqlite3_stmt *s = c->st[S_LOAD];
	rc = lookup(c, S_LOAD, key, now);
	const void *old = NULL;
	size_t oldlen = 0;
	if (rc == SQLITE_ROW) {
		int64_t v = sqlite3_column_int64(s, 1);
		if (v <= 0 || sqlite3_column_type(s, 0) != SQLITE_BLOB) {
			sqlite3_reset(s);
			rollback(c);
			return v == 0 ? wrong_kind(err, key, false)
				      : corrupt(err, key,
						"a blob row without a blob");
		}
		/* valid until s is reset; a present empty blob is not NULL */
		old = sqlite3_column_blob(s, 0);
		oldlen = (size_t)sqlite3_column_bytes(s, 0);
		if (old == NULL)
			old = empty;
	} else if (rc != SQLITE_DONE) {
		return abort_tx(st, c, failed(c, s, rc), "update", err);
	}
	const void *nb = NULL;
	size_t nlen = 0;
	int64_t ttl_us = 0;
	rc = fn(arg, old, oldlen, &nb, &nlen, &ttl_us);
	sqlite3_reset(s);
	if (rc <= 0) {
		rollback(c);
		return rc;
	}
	if (rc != 1 || (nb == NULL && nlen > 0)) {
		rollback(c);
		return drl_error_set(err, DRL_EINTERNAL,
				     "sqlite store: update step returned %d "
				     "with a %s blob",
				     rc, nb ? "non-NULL" : "NULL");
	}
	rc = put_blob(st, c, key, nb, nlen, deadline(now, ttl_us), err);
	return rc ? rc : commit(st, c, err);
}

/* Delete every key in one write transaction: all or none, for every
 * connection of every process. */
static int do_del(store *st, conn *c, size_t n, const drl_bytes *keys,
		  drl_error *err)
{
	int rc = begin_write(st, c, drl_now_us(), sweep_due(st), err);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		bind_bytes(c->st[S_DEL], 1, keys[i].data, keys[i].len);
		rc = run(c, S_DEL);
		if (rc)
			return abort_tx(st, c, rc, "del", err);
	}
	return commit(st, c, err);
}

/* ---- vtable: check the arguments, borrow a connection, run ----------- */

/* Add delta to the counter at key (absent or expired: 0), set its TTL,
 * return the new value. DRL_ERANGE on int64 overflow and DRL_ESTORE on a
 * blob, both with the row unchanged. */
static int sq_incr(drl_backend *b, drl_bytes key, int64_t delta, int64_t ttl_us,
		   int64_t *value, drl_error *err)
{
	store *st = (store *)b;
	conn *c;
	int rc = check_args(1, &key, value != NULL, "value", err);
	if (rc || (rc = acquire(st, true, &c, err)) != 0)
		return rc;
	rc = do_incr(st, c, key, delta, ttl_us, value, err);
	release(st, true, c);
	return rc;
}

/* Read n counters, absent ones as 0, all from one snapshot. DRL_ESTORE
 * when one is a blob. */
static int sq_get_many(drl_backend *b, size_t n, const drl_bytes *keys,
		       int64_t *values, drl_error *err)
{
	store *st = (store *)b;
	conn *c;
	int rc = check_args(n, keys, n == 0 || values, "values", err);
	if (rc || n == 0 || (rc = acquire(st, false, &c, err)) != 0)
		return rc;
	rc = do_get_many(st, c, n, keys, values, err);
	release(st, false, c);
	return rc;
}

/* Copy the blob at key into buf; absent: version 0, len 0. DRL_ERANGE
 * with *len = the size needed when cap is too small; DRL_ESTORE on a
 * counter. */
static int sq_load(drl_backend *b, drl_bytes key, void *buf, size_t cap,
		   size_t *len, uint64_t *version, drl_error *err)
{
	store *st = (store *)b;
	conn *c;
	int rc = check_args(1, &key, (buf || cap == 0) && len && version,
			    "buf, len or version", err);
	if (rc || (rc = acquire(st, false, &c, err)) != 0)
		return rc;
	rc = do_load(st, c, key, buf, cap, len, version, err);
	release(st, false, c);
	return rc;
}

/* Store blob at key if its version is still `version` (0: absent).
 * DRL_ECONFLICT when it changed, DRL_ESTORE on a counter. */
static int sq_cas(drl_backend *b, drl_bytes key, const void *blob, size_t len,
		  uint64_t version, int64_t ttl_us, drl_error *err)
{
	store *st = (store *)b;
	conn *c;
	int rc = check_args(1, &key, blob || len == 0, "blob", err);
	if (rc || (rc = acquire(st, true, &c, err)) != 0)
		return rc;
	rc = do_cas(st, c, key, blob, len, version, ttl_us, err);
	release(st, true, c);
	return rc;
}

/* Run fn on the blob at key inside one write transaction: atomic with
 * respect to every method of every connection, in any process. fn sees
 * NULL, 0 when absent; returning 1 stores its blob with its TTL and a new
 * version, 0 leaves everything, a negative value is returned as is. fn
 * must not call this store. */
static int sq_update(drl_backend *b, drl_bytes key, drl_update_fn fn, void *arg,
		     drl_error *err)
{
	store *st = (store *)b;
	conn *c;
	int rc = check_args(1, &key, fn != NULL, "fn", err);
	if (rc || (rc = acquire(st, true, &c, err)) != 0)
		return rc;
	rc = do_update(st, c, key, fn, arg, err);
	release(st, true, c);
	return rc;
}

/* Delete the n keys in one atomic step (absent ones are no error). */
static int sq_del(drl_backend *b, size_t n, const drl_bytes *keys,
		  drl_error *err)
{
	store *st = (store *)b;
	conn *c;
	int rc = check_args(n, keys, true, "", err);
	if (rc || n == 0 || (rc = acquire(st, true, &c, err)) != 0)
		return rc;
	rc = do_del(st, c, n, keys, err);
	release(st, true, c);
	return rc;
}

/* Close every connection (all are idle: no call is running) and free the
 * store. */
static void sq_destroy(drl_backend *b)
{
	store *st = (store *)b;
	if (!st)
		return;
	while (st->idle) {
		conn *c = st->idle;
		st->idle = c->next;
		conn_close(c);
	}
	pthread_cond_destroy(&st->freed);
	pthread_mutex_destroy(&st->lock);
	pthread_mutex_destroy(&st->writer);
	free(st->path);
	free(st);
}

/* ---- opening ----------------------------------------------------------- */

int sqlite_store_open_file(drl_backend **out, const char *path,
			   int64_t timeout_ms, int64_t pool, drl_error *err)
{
	static const drl_backend proto = DRL_BACKEND_INIT(4);
	if (out == NULL || path == NULL || path[0] == '\0')
		return drl_error_set(err, DRL_EINVAL,
				     "sqlite_store_open_file: NULL argument "
				     "or empty path");
	*out = NULL;
	if (timeout_ms < 0 || timeout_ms > TIMEOUT_MS_MAX || pool < 0 ||
	    pool > POOL_MAX)
		return drl_error_set(err, DRL_EINVAL,
				     "sqlite store: timeout_ms %" PRId64
				     " or pool %" PRId64 " out of range",
				     timeout_ms, pool);
	if (sqlite3_threadsafe() == 0)
		return drl_error_set(err, DRL_ESTORE,
				     "sqlite store: SQLite was built without "
				     "thread support (SQLITE_THREADSAFE=0)");
	store *st = calloc(1, sizeof *st);
	if (!st)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	st->parent = proto;
	st->parent.caps = DRL_CAP_COUNTER | DRL_CAP_CAS | DRL_CAP_UPDATE;
	st->parent.name = "sqlite";
	st->parent.destroy = sq_destroy;
	st->parent.incr = sq_incr;
	st->parent.get_many = sq_get_many;
	st->parent.load = sq_load;
	st->parent.cas = sq_cas;
	st->parent.update = sq_update;
	st->parent.del = sq_del; /* no eval (no Lua), no now (no clock) */
	st->timeout_ms = timeout_ms ? timeout_ms : TIMEOUT_MS_DEFAULT;
	st->pool = pool ? (int)pool : POOL_DEFAULT;
	atomic_init(&st->writes, 0);
	st->path = strdup(path);
	pthread_condattr_t ca;
	bool ok = st->path && pthread_condattr_init(&ca) == 0;
	if (ok) {
		ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
		     pthread_cond_init(&st->freed, &ca) == 0;
		pthread_condattr_destroy(&ca);
	}
	if (ok && pthread_mutex_init(&st->lock, NULL) != 0) {
		pthread_cond_destroy(&st->freed);
		ok = false;
	}
	if (ok && pthread_mutex_init(&st->writer, NULL) != 0) {
		pthread_mutex_destroy(&st->lock);
		pthread_cond_destroy(&st->freed);
		ok = false;
	}
	if (!ok) {
		free(st->path);
		free(st);
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	}
	/* The first connection now: a wrong path or someone else's file
	 * fails here, not at the first decision. */
	conn *c;
	int rc = conn_open(st, true, &c, err);
	if (rc) {
		sq_destroy(&st->parent);
		return rc;
	}
	st->idle = c;
	st->nconns = 1;
	*out = &st->parent;
	return 0;
}

int sqlite_store_open(drl_backend **out, drl_uri *uri, drl_error *err)
{
	if (out == NULL || uri == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "sqlite_store_open: NULL argument");
	*out = NULL;
	if (drl_uri_user(uri) || drl_uri_password(uri))
		return drl_error_set(err, DRL_EINVAL,
				     "sqlite:// takes no user or password");
	if (drl_uri_hosts(uri))
		return drl_error_set(err, DRL_EINVAL,
				     "sqlite:// takes no host (got \"%.64s\"); "
				     "write sqlite:///absolute/path/file.db",
				     drl_uri_hosts(uri));
	const char *path = drl_uri_path(uri);
	if (path == NULL || path[0] != '/' || path[1] == '\0')
		return drl_error_set(err, DRL_EINVAL,
				     "sqlite:// needs an absolute file path: "
				     "sqlite:///absolute/path/file.db");
	int64_t timeout_ms, pool;
	int rc = drl_uri_option_int(uri, "timeout_ms", 1, TIMEOUT_MS_MAX,
				    TIMEOUT_MS_DEFAULT, &timeout_ms, err);
	if (rc == 0)
		rc = drl_uri_option_int(uri, "pool", 1, POOL_MAX, POOL_DEFAULT,
					&pool, err);
	if (rc == 0)
		rc = drl_uri_check_all_used(uri, err);
	if (rc)
		return rc;
	return sqlite_store_open_file(out, path, timeout_ms, pool, err);
}

const drl_store_opener sqlite_store_opener = {
	/* scheme */ "sqlite",
	/* open */ sqlite_store_open,
};
