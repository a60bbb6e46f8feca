/*
 * libdrl — the store interface, for people who write a store.
 *
 * Applications need only <drl/drl.h>. A store fills a drl_backend (embed it
 * as the first member of your own struct, start from DRL_BACKEND_INIT(N))
 * and either hands it to drl_store_from_backend() or registers an opener
 * for a URI scheme of its own with drl_store_open_with(). Algorithms are
 * written once against these primitives; a store never learns which
 * algorithm calls it. The stores this library ships (backends/) are built
 * against this header and nothing else of the core, and the conformance
 * suite (tests/fixtures/store_contract.h, docs/stores.md) checks every promise
 * below on each of them and on examples/store_sqlite.
 *
 * Versioning (as SQLite's sqlite3_vfs): `version` is the first field, new
 * slots are appended, and the core checks version and capability bits
 * before calling an optional slot. A store built against version N keeps
 * working with a core that knows N+1; a core refuses a store written for a
 * version newer than its own. Version 8 broke that rule once, for the
 * started calls (see DRL_BACKEND_VERSION): a store written for 5 to 7 that
 * starts calls is refused with a message to rebuild it. A store writes the number it was
 * written for (DRL_BACKEND_INIT(4)), never DRL_BACKEND_VERSION: raising
 * the header must not silently raise what an unchanged store promises.
 *
 * Threads. A store is shared by every thread of the process that decides
 * through it, and by threads the library owns (the near cache's sync
 * thread, the async API's workers). Every method but destroy() may be
 * called from any thread, concurrently with any other method, on the same
 * or different keys; a store serialises what it must itself. One thread's
 * optimistic step is load() then, at most once, cas() of the same key,
 * with no other call of that thread on this store in between (it may end
 * after load() without a cas()): a store may tie per-thread state to that
 * pair (Redis tx=watch keeps the connection that WATCHed the key for the
 * cas), and must not depend on the cas() coming. destroy() is called once,
 * after every other call has returned, never concurrently. A method blocks
 * its caller until it is done and must return within the store's own
 * timeout (DRL_ETIMEDOUT): the core has no way to interrupt it. A store
 * with no server (a file, an embedded database) still has one: whatever
 * it may wait for (a lock another thread or process holds, a busy
 * database) it waits for at most a bound of its own (a timeout_ms option,
 * as the built-in stores take), then returns DRL_ETIMEDOUT; a call that
 * cannot wait at all needs none.
 *
 * Opening. open() may be called again for a URI while a backend of it is
 * open, in this process and in others: each call returns an independent
 * backend, and all of them read and write the same data (two limiters on
 * one database; the conformance suite opens a second backend beside its
 * first). A store whose library allows one handle per file and process
 * (LMDB's environment) shares that handle between its backends. A
 * process may fork() while a backend is open: the child never calls the
 * inherited backend (nor destroys it; it may leave with _exit()), and
 * must be able to open and use backends of its own from the same URI, as
 * the suite's cross-process check does; the parent's backend keeps
 * working.
 *
 * Keys are byte strings (not NUL-terminated; may hold any byte, NUL
 * included) of 1 to DRL_STORE_KEY_MAX bytes: the core hashes long user
 * keys, so no key it sends is longer. The conformance suite also sends the
 * empty key (length 0), which a store holds as a key like any other, and
 * keys of up to DRL_STORE_KEY_MAX bytes. A store that cannot hold a key as
 * given (memcached: no spaces, 250 bytes) maps it one-to-one itself.
 *
 * Counters (incr, get_many, add_read) and blobs (load, cas, update) are
 * never stored under the same key by the core (every algorithm's keys
 * carry its own tag), and the suite keeps them apart too: a store may keep
 * the two in one key space or in two. In one space, a call of one kind on
 * a key that holds the other (incr on a blob, load on a counter) fails
 * with DRL_ESTORE (the memory store's "wrong kind of value") or
 * DRL_ECORRUPT, and changes nothing; it never reads the bytes as the
 * other kind.
 *
 * TTLs. Every primitive that writes also sets a TTL: the store may forget
 * the key after ttl_us microseconds without changing any decision (window
 * identity lives in the key, the TTL only cleans up). The core sends the
 * time its state still matters plus a second of grace, so ttl_us is
 * normally above 1000000; ttl_us <= 0 means the value written matters no
 * longer: the call succeeds and answers as with a positive TTL (incr
 * returns the new value), and the key may be gone at once (the memory
 * store deletes it; Redis's PEXPIRE does the same).
 *
 * Errors. Every method returns 0 or a negative DRL_E* code and, on
 * failure, may fill `err` (which may be NULL) through drl_error_set().
 * The codes mean, to the core:
 *   DRL_ETIMEDOUT, DRL_EUNAVAILABLE  the server could not be reached or did
 *                          not answer in time: the limiter's on_error policy
 *                          decides, and these count towards the breaker;
 *   DRL_ESTORE             the server answered with an error (on_error
 *                          decides; it answered, so like a success it
 *                          ends the breaker's run of failures);
 *   DRL_ECORRUPT           the key holds something this library did not
 *                          write (returned to the application as is);
 *   DRL_ECONFLICT          cas(): the version moved (the core loads again);
 *   DRL_ERANGE             load(): the buffer is too small (the core asks
 *                          again with *len bytes); incr(): the counter
 *                          would leave int64 (returned as is);
 *   DRL_EINVAL, DRL_ENOMEM as everywhere.
 * Any other negative value is returned to the application unchanged.
 */
#ifndef DRL_BACKEND_H
#define DRL_BACKEND_H

#include <drl/drl.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The longest key the core sends a store, in bytes: a key prefix (at most
 * 128), the limit's tag (at most 95), the user key as it is named (at most
 * 132 bytes: longer user keys are hashed), the braces and a window suffix
 * (at most 21). */
#define DRL_STORE_KEY_MAX 384

/* 1: destroy .. now. 2: DRL_CAP_BATCH (no new slot: a promise about
 * eval(), which the core trusts only from stores of version >= 2).
 * 3: DRL_CAP_DECLARED_KEYS (a demand about eval(), heeded from any
 * version: a store of version < 3 does not set the bit).
 * 4: del (optional; read only from stores of version >= 4: drl_reset()
 * on a store of an older version is DRL_ENOTSUP).
 * 5: eval_start (optional, DRL_CAP_EVAL_START; read only from stores of
 * version >= 5: the async API decides on its workers otherwise).
 * 6: add_read and add_read_start (optional, DRL_CAP_ADD_READ; read only
 * from stores of version >= 6: the counter algorithms use incr and
 * get_many, or a script, otherwise).
 * 7: chan_open .. chan_close (optional, DRL_CAP_CHANNEL; read only from
 * stores of version >= 7: the async API's started calls go to the
 * store's own I/O thread otherwise); trim and trim_start (optional,
 * DRL_CAP_COUNTER_GROUPS; read only from stores of version >= 7: the
 * core sends no grouped counter key to any other store).
 * 8: one slot per started operation. eval_start, add_read_start and
 * trim_start name the channel they go out on (NULL: the store's own I/O),
 * and version 7's three separate channel slots for them are gone (a store
 * implemented each pair as one function, and the core folded them back
 * into one with a stand-in backend). Not binary compatible with 5 to 7: drl_store_from_backend()
 * takes a store written for 5 to 7 only when it starts no calls (no
 * eval_start, add_read_start, DRL_CAP_CHANNEL or DRL_CAP_COUNTER_GROUPS),
 * and uses nothing of it past del() and add_read(), whose places did not
 * move; one that does is refused, naming the version to rebuild for.
 * 9: eval_policy (optional, DRL_CAP_POLICY, blocking or started:
 * DRL_CAP_POLICY_START; read only from stores of version >= 9: the core
 * decides a policy limit by limit otherwise), and chan_poll in the place
 * of version 8's chan_fd and chan_deadline (one question: what to wait
 * for). Versions 5 to 9 came after the last release (0.3.0: version 4),
 * so a store written for 8 that has channels is refused as 5 to 7 are
 * (rebuild it for 9); one without channels keeps working. */
#define DRL_BACKEND_VERSION 9

typedef struct drl_bytes {
	const void *data;
	size_t len;
} drl_bytes;

/* Capability bits: what a store can do. */
enum {
	DRL_CAP_COUNTER = 1u << 0, /* incr, get_many (required) */
	DRL_CAP_CAS = 1u << 1,     /* load, cas (required) */
	DRL_CAP_UPDATE = 1u << 2,  /* update: in-process atomic step */
	DRL_CAP_SCRIPT = 1u << 3,  /* eval: server-side script */
	DRL_CAP_CLOCK = 1u << 4,   /* now: the store's own clock */
	DRL_CAP_BATCH = 1u << 5,   /* eval: many keys of any slot at once */
	/* eval() must be handed every key a script touches (version >= 3):
	 * a store that routes and migrates by key (Redis Cluster) cannot
	 * see keys a script derives. The core then knows the time before
	 * a script runs (reading the store's clock first under a store
	 * clock) and names each key. */
	DRL_CAP_DECLARED_KEYS = 1u << 6,
	/* eval_start (version >= 5, needs DRL_CAP_SCRIPT): a script call
	 * started without waiting for its reply. */
	DRL_CAP_EVAL_START = 1u << 7,
	/* add_read, add_read_start (version >= 6): a counter's increment
	 * and the reads of its neighbours sent together, without a script.
	 * A store that sets it says that this is the cheapest exact way to
	 * decide the counter algorithms on it: the core then prefers it to
	 * eval() for them. */
	DRL_CAP_ADD_READ = 1u << 8,
	/* version >= 6: every method returns without waiting for I/O or
	 * for another process (a store inside this process, memory://):
	 * the async API decides its requests at start, on the starting
	 * thread, instead of on a worker. */
	DRL_CAP_INPROC = 1u << 9,
	/* chan_open .. chan_close (version >= 7, needs DRL_CAP_EVAL_START,
	 * or from version 8 DRL_CAP_ADD_READ with add_read_start): started
	 * calls on a connection a caller's thread drives (the async API's
	 * event loop), with no thread of the store's. A store with
	 * channels and no DRL_CAP_EVAL_START (memcached: no scripts) starts
	 * calls only on a channel: its add_read_start() with ch NULL may
	 * fail (DRL_ENOTSUP), and the core never sends it one; the core
	 * starts only the counter algorithms' calls on it (an increment by
	 * 0 reads, for a decision that consumes nothing) and decides the
	 * rest on the async API's workers. */
	DRL_CAP_CHANNEL = 1u << 10,

	/* trim, trim_start (version >= 7): the store keeps the counters of
	 * one group in one record (Redis: one hash). See "Counter groups"
	 * above struct drl_backend. */
	DRL_CAP_COUNTER_GROUPS = 1u << 11,

	/* eval_policy (version >= 9, needs DRL_CAP_SCRIPT): a policy's
	 * script calls run as one atomic step on a server that decides
	 * them itself (Redis with libdrl's module: DRL.POLICY). */
	DRL_CAP_POLICY = 1u << 12,
	/* eval_policy started (version >= 9, needs DRL_CAP_POLICY and
	 * DRL_CAP_EVAL_START): every started policy call goes to a server
	 * that decides policies (Redis tx=module; not tx=auto, whose
	 * connections may lack the module). */
	DRL_CAP_POLICY_START = 1u << 13
};

/* A channel (version >= 7, DRL_CAP_CHANNEL): a connection of the store's
 * own, opened for one caller, whose started calls the caller's thread
 * drives (as hiredis's async adapters do): it watches what chan_poll()
 * names in its event loop and calls chan_process() when the descriptor
 * is ready, and at the deadline chan_poll() gives. The async API opens one per store and context, for
 * its requests started in fd mode (drl_async_fd()). Opaque: the store's. */
typedef struct drl_channel drl_channel;

/*
 * Counter groups (DRL_CAP_COUNTER_GROUPS, version >= 7). A grouped
 * counter key is `group "#" index`: the group's bytes, '#', then the
 * index in decimal, '-' first when negative (the core's
 * drl__key_grouped). The core sends such keys only to a store with this
 * bit, in the counter methods (incr, get_many, add_read,
 * add_read_start) and in trim, never in del(); a store parses a key from
 * its end (the group may hold '#'). A key not of that form is an
 * ordinary one.
 * What the store promises: the counters of one group live in one record
 * (the counter `index` of record `group`), each changed and read as an
 * ordinary counter is. What the core promises in return, so no TTL per
 * counter is needed:
 *  - the record's TTL is the group's: incr() sets it, as for an ordinary
 *    key; add_read() and add_read_start() of grouped keys may leave it
 *    as it is; trim() sets it. A grouped counter is never removed by a
 *    TTL of its own, only with its record or by trim();
 *  - after every write (incr, add_read, add_read_start) of a grouped key
 *    that found its counter at 0 or below (new value - delta <= 0:
 *    absent, so the record may be new and without a TTL), the core calls
 *    trim() for the group, which sets the record's TTL;
 *  - the core trims the counters of a group that no decision reads any
 *    longer itself (it names them in trim()): the store never guesses.
 * del() of the group's own key (the bytes before '#', an ordinary key)
 * removes the whole record.
 */

/* Whether key is a grouped counter's, `group "#" index` as above (parsed
 * from its end): true, and *glen the group's length (the index is the
 * bytes after it and the '#'); false for an ordinary key. */
DRL_EXPORT bool drl_key_group_split(drl_bytes key, size_t *glen);

/* A key's bytes for an error message, into buf (cap bytes) as a C
 * string: printable ASCII as is (but '"' and '\\'), every other byte as
 * \xNN, and "..." after DRL_KEY_SHOW_MAX bytes of the key (earlier when
 * cap is short; a cap of DRL_KEY_SHOW_BUF holds any key's). Returns buf
 * ("" when cap < 4). The core's stores quote keys this way. */
#define DRL_KEY_SHOW_MAX 64
#define DRL_KEY_SHOW_BUF (DRL_KEY_SHOW_MAX * 4 + 4)
DRL_EXPORT const char *drl_key_show(char *buf, size_t cap, drl_bytes key);

/* What eval() of a store with DRL_CAP_DECLARED_KEYS may return when it
 * cannot run a script now because its keys are split (Redis Cluster's
 * TRYAGAIN: a slot in migration holds some of them). Nothing ran; the
 * core decides with the other primitives instead (one key per command,
 * which a migration does not stop). Never returned to applications. */
#define DRL_BACKEND_ESPLIT (-100)

/* A step run by update(): given the current blob (old == NULL, oldlen == 0
 * when absent), either leave it (return 0), or point *newblob and *newlen at the
 * replacement, which stays valid until the step's caller returns, set
 * *ttl_us (see "TTLs" above), and return 1. A negative return aborts with
 * that error. The core's steps write the replacement into a buffer of
 * their own, never into old: a store may overwrite or free old before it
 * copies the new blob (a step of another author may not promise that: the
 * memory store copies with memmove). */
typedef int (*drl_update_fn)(void *arg, const void *old, size_t oldlen,
			     const void **newblob, size_t *newlen,
			     int64_t *ttl_us);

/* A server-side script handed over by an algorithm (its Lua twin). The
 * store may cache whatever it needs (e.g. the SHA1) itself. */
typedef struct drl_script {
	const char *name;   /* for messages */
	const char *source; /* Lua source */
} drl_script;

/* How eval_start() hands back a script call's outcome: rc, out[0..nret)
 * and *err (NULL when rc is 0) exactly as eval() would have returned and
 * written them; out and err are valid only during the call. add_read_start()
 * hands back add_read()'s outcome the same way (out: its values, nret: n). */
typedef void (*drl_eval_done_fn)(void *arg, int rc, const int64_t *out,
				 size_t nret, const drl_error *err);

/* One script call as eval() takes it (eval_policy hands several). */
typedef struct drl_script_call {
	const drl_script *script;
	size_t nkeys;
	const drl_bytes *keys;
	size_t nargs;
	const int64_t *args;
} drl_script_call;

typedef struct drl_backend drl_backend;
struct drl_backend {
	int version;      /* DRL_BACKEND_VERSION the store was written for */
	unsigned caps;    /* DRL_CAP_* */
	const char *name; /* "memory", "redis", ... */

	/* Free everything the store owns, including `b` itself. */
	void (*destroy)(drl_backend *b);

	/* Atomically add `delta` (may be negative) to the integer at `key`
	 * (absent counts as 0), set its TTL to ttl_us, and return the new
	 * value in *value. */
	int (*incr)(drl_backend *b, drl_bytes key, int64_t delta,
		    int64_t ttl_us, int64_t *value, drl_error *err);

	/* Read n counters in one go; absent keys read as 0. */
	int (*get_many)(drl_backend *b, size_t n, const drl_bytes *keys,
			int64_t *values, drl_error *err);

	/* Copy the blob at `key` into buf (cap bytes), its length into *len
	 * and its version into *version (nonzero). Absent: *version = 0 and
	 * *len = 0. When cap is too small: DRL_ERANGE with *len = the size
	 * needed, nothing else changed. */
	int (*load)(drl_backend *b, drl_bytes key, void *buf, size_t cap,
		    size_t *len, uint64_t *version, drl_error *err);

	/* Store `blob` at `key` with ttl_us only if the key still has
	 * `version` (0: only if absent). DRL_ECONFLICT when it changed. */
	int (*cas)(drl_backend *b, drl_bytes key, const void *blob, size_t len,
		   uint64_t version, int64_t ttl_us, drl_error *err);

	/* Optional (DRL_CAP_UPDATE): run `fn` on the blob at `key` atomically
	 * with respect to every other method on that key. */
	int (*update)(drl_backend *b, drl_bytes key, drl_update_fn fn,
		      void *arg, drl_error *err);

	/* Optional (DRL_CAP_SCRIPT): run `script` atomically on the server
	 * with `nkeys` keys and `nargs` integer arguments; up to `nout` integer
	 * results go to out[] (*nret gets how many came back). A store that
	 * caches scripts on the server (Redis's EVALSHA) loads one the server
	 * lost (NOSCRIPT) and sends it again: a call runs at most once.
	 *
	 * The dialect is Redis's EVAL (Redis 6.2 and later, and servers that
	 * speak it: Valkey, KeyDB, Dragonfly): Lua 5.1 with KEYS[] and ARGV[]
	 * (the integers as decimal strings), redis.call() on GET, SET, INCRBY,
	 * PEXPIRE, MGET and TIME (with DRL_CAP_COUNTER_GROUPS also HMGET,
	 * HINCRBY and HDEL: the counter twin is then told, ARGV[7] + 2, that
	 * its counters are the fields of the hash KEYS[1]), Redis's bundled
	 * `struct` library for blobs, and redis.error_reply(). A script answers an array of integers, or
	 * an error whose text starts with "ECORRUPT " when the state it finds
	 * is malformed: the store returns DRL_ECORRUPT for that one, and
	 * DRL_ESTORE with the server's text for any other error reply. A store
	 * that runs anything else sets no DRL_CAP_SCRIPT: the core decides
	 * with incr/get_many/load/cas (or update) instead, with the same
	 * decisions.
	 *
	 * DRL_CAP_BATCH (version >= 2, needs DRL_CAP_SCRIPT) promises that
	 * eval() takes many keys in one call whatever they are: every key
	 * lives on the one server that runs the script (a single Redis, not
	 * a Cluster, where a script's keys must share a hash slot). The core
	 * then decides up to hundreds of requests in one call (a twin's batch
	 * variant, nkeys = the number of requests; see docs/algorithms.md). */
	int (*eval)(drl_backend *b, const drl_script *script, size_t nkeys,
		    const drl_bytes *keys, size_t nargs, const int64_t *args,
		    int64_t *out, size_t nout, size_t *nret, drl_error *err);

	/* Optional (DRL_CAP_CLOCK): the store's clock, µs since the epoch. */
	int (*now)(drl_backend *b, int64_t *now_us, drl_error *err);

	/* Optional (version >= 4; NULL: drl_reset() is DRL_ENOTSUP): delete
	 * the n keys (absent ones are no error), as one atomic step where
	 * the store can, so a decision sees all of them or none gone; a
	 * store that cannot (memcached: one delete per key) says so in its
	 * documentation. On an error some keys may be gone. */
	int (*del)(drl_backend *b, size_t n, const drl_bytes *keys,
		   drl_error *err);

	/* Optional (version >= 5, DRL_CAP_EVAL_START): eval() without
	 * waiting, for callers that must not block (the async API). ch: the
	 * channel to queue it on (version >= 8; see "Started calls on a
	 * channel" at chan_open), or NULL: the store's own I/O. keys,
	 * args and what they point at are copied before it returns. 0:
	 * started, and done(arg, ...) is called exactly once with eval()'s
	 * outcome (its timeout_ms counted from this start), on a thread of
	 * the store's or of another caller of this store that happens to do
	 * its I/O, possibly before eval_start() returns, never inside it on
	 * the calling thread. done must not block: it may start calls, never
	 * wait for one. Any other return: nothing started, done never runs.
	 * destroy() may be called only once every done has returned. */
	int (*eval_start)(drl_backend *b, drl_channel *ch,
			  const drl_script *script, size_t nkeys,
			  const drl_bytes *keys, size_t nargs,
			  const int64_t *args, size_t nout,
			  drl_eval_done_fn done, void *arg, drl_error *err);

	/* Optional (version >= 6, DRL_CAP_ADD_READ): incr() of keys[0] by
	 * `delta` with ttl_us, and get_many() of keys[1..n), sent together
	 * (one round trip, no script): values[0] gets keys[0]'s new value,
	 * values[j] keys[j]'s value (absent: 0). Each counter is changed or
	 * read atomically, the whole is not one atomic step: another caller
	 * may change keys[1..n) meanwhile (the counter algorithms increment
	 * first and give back an increment that went over the limit, so a
	 * concurrent change can only deny, never admit beyond the limit).
	 * n >= 1; on an error keys[0] may or may not have been changed.
	 * Errors as incr() and get_many(). */
	int (*add_read)(drl_backend *b, size_t n, const drl_bytes *keys,
			int64_t delta, int64_t ttl_us, int64_t *values,
			drl_error *err);

	/* Optional (version >= 6, DRL_CAP_ADD_READ): add_read() without
	 * waiting, as eval_start() is eval() without waiting (the same
	 * rules: keys copied before it returns; 0: done(arg, rc, values, n,
	 * err) runs exactly once, on a thread of the store's or of another
	 * caller doing its I/O, never inside this call on the calling
	 * thread; done may start calls, never wait for one), and the same
	 * `ch`. A store that cannot start calls leaves it NULL: the async
	 * API then decides on its workers. */
	int (*add_read_start)(drl_backend *b, drl_channel *ch, size_t n,
			      const drl_bytes *keys, int64_t delta,
			      int64_t ttl_us, drl_eval_done_fn done, void *arg,
			      drl_error *err);

	/* Optional (version >= 7, DRL_CAP_CHANNEL): channels. A channel is
	 * used by one thread at a time (its caller serialises every chan_*
	 * call on it, done callbacks included: they run inside
	 * chan_process()); different channels of one store, and the store's
	 * other methods, may be used concurrently. No thread of the store's
	 * ever touches a channel.
	 *
	 * chan_open: a new channel of b, *out (0), or an error (nothing
	 * made). It may connect later: a channel (re)connects when calls
	 * are queued on it without a connection, inside chan_process(), by
	 * the first such call's deadline (a connection lost fails the calls
	 * sent on it; the next call connects afresh). */
	int (*chan_open)(drl_backend *b, drl_channel **out, drl_error *err);
	/* What to wait for: returns the descriptor to watch (-1: none now),
	 * the poll events it waits for (POLLIN, POLLOUT) in *events, and in
	 * *deadline the earliest deadline of a call on the channel, in µs on
	 * CLOCK_MONOTONIC (INT64_MAX: none; chan_process() at that time
	 * fails the call if its reply has not come). All three may change
	 * after any other chan_* call: ask again after each. A number it
	 * gives names one connection until chan_poll() gives another number
	 * or -1 (the store keeps a dropped connection's descriptor open
	 * until then, so a caller's epoll registration of it never silently
	 * goes). */
	int (*chan_poll)(drl_channel *ch, short *events, int64_t *deadline);
	/* Started calls on a channel: eval_start(), add_read_start(),
	 * trim_start() and a started eval_policy() with a channel `ch` of b
	 * keep their rules, but the call is only queued (nothing is written
	 * before the next chan_process()), and done runs inside
	 * chan_process() on the channel's thread, never inside the start.
	 * done may start calls on the same channel (they go out at the end
	 * of that chan_process()). A store with channels takes every started
	 * slot it has on them. */
	/* Do what the channel can without waiting: read what revents (poll
	 * events of chan_poll(), 0: none) say is there, run the done of every
	 * call whose reply is in, fail the calls whose deadline passed
	 * (DRL_ETIMEDOUT), then write every queued call (connecting first
	 * when needed, the one wait a channel makes, bounded by the calls'
	 * deadline), as one write where the socket takes it. */
	void (*chan_process)(drl_channel *ch, short revents);
	/* Close ch: a call still on it ends with DRL_ECANCELED (its done
	 * runs here); the caller normally drives every call to its end
	 * first (chan_process() until chan_poll()'s deadline is INT64_MAX). */
	void (*chan_close)(drl_channel *ch);

	/* Optional (version >= 7, DRL_CAP_COUNTER_GROUPS; required with
	 * it): remove the n grouped counters keys[0..n), all of one group
	 * (absent ones are no error; n may be 0), and set the group's
	 * record to live ttl_us more (nothing when the record is gone), in
	 * one round trip. */
	int (*trim)(drl_backend *b, size_t n, const drl_bytes *keys,
		    int64_t ttl_us, drl_error *err);

	/* Optional (version >= 7, DRL_CAP_COUNTER_GROUPS): trim() without
	 * waiting, as add_read_start() is add_read() (the same rules and
	 * `ch`; done gets no values). Required with the bit when
	 * add_read_start is set (a started decision may have to trim, on
	 * the channel it decided on). */
	int (*trim_start)(drl_backend *b, drl_channel *ch, size_t n,
			  const drl_bytes *keys, int64_t ttl_us,
			  drl_eval_done_fn done, void *arg, drl_error *err);

	/* Optional (version >= 9, DRL_CAP_POLICY): the n script calls of
	 * one request's limits (calls[i] is what eval() would be handed
	 * for limit i: its twin, its key, all DRL__SCRIPT_NARGS integers;
	 * one time and cost for all), decided as one atomic step by a
	 * server that runs the limits' steps itself: every limit decided
	 * in order, the earlier ones given back when one denies, the later
	 * ones then asked. The answer is the policy's decision in the
	 * twins' common form (allowed, remaining, reset_after_us,
	 * retry_after_us, consumed) and the index of the limit it reports:
	 * six integers. A store that runs scripts only (Lua) leaves it
	 * NULL: no script can call another.
	 *
	 * done NULL: blocking, as eval(): the answer into out[0..nout),
	 * *nret how many; ch is NULL. DRL_ENOTSUP with nothing run when the
	 * store cannot take this call now (its server lacks the command,
	 * keys of several slots): the core then decides limit by limit.
	 * Errors as eval().
	 *
	 * done set (DRL_CAP_POLICY_START, with DRL_CAP_EVAL_START): started,
	 * as eval_start() is eval() (the same rules and `ch`; calls and
	 * what they point at copied before it returns; out and nret unused,
	 * NULL): done gets the answer. The core starts a policy only on a
	 * store with DRL_CAP_POLICY_START, and only when the blocking call
	 * could take it (the limits' twins run, the time is known). */
	int (*eval_policy)(drl_backend *b, drl_channel *ch, size_t n,
			   const drl_script_call *calls, int64_t *out,
			   size_t nout, size_t *nret, drl_eval_done_fn done,
			   void *arg, drl_error *err);
};

/* The start of every store's drl_backend: the version the store was
 * written for (a literal, e.g. DRL_BACKEND_INIT(4)), everything else zero.
 *   static const drl_backend proto = DRL_BACKEND_INIT(4);
 *   *(drl_backend *)mine = proto;  then set name, caps and the methods. */
/* clang-format off */
#ifdef __cplusplus
/* C++ has designated initializers only from C++20: a function instead. */
static inline drl_backend drl_backend_init_cxx_(int written_for)
{
	drl_backend b = {};
	b.version = written_for;
	return b;
}
#define DRL_BACKEND_INIT(written_for) drl_backend_init_cxx_(written_for)
#else
#define DRL_BACKEND_INIT(written_for) {.version = (written_for)}
#endif
/* clang-format on */

/* ---- opening a store from a URI ------------------------------------------
 * scheme://[user[:password]@]hosts[/path][?key=value&key=value]
 * A store's opener gets the parsed URI, reads what it understands through
 * the accessors below (every string percent-decoded, NUL-terminated, owned
 * by the URI, valid during the opener's call, NULL when absent), and ends
 * with drl_uri_check_all_used(), so a misspelt option is an error rather
 * than a silent default. Options the core reads itself (breaker_*) are
 * already taken when the opener runs. */
typedef struct drl_uri drl_uri;

/* Parse `text` into a new *out (free it with drl_uri_free), for a store's
 * own tests and tools; openers get theirs parsed. DRL_EINVAL naming the
 * bad part (never quoting the password), DRL_ENOMEM; *out NULL then. */
DRL_EXPORT int drl_uri_parse(drl_uri **out, const char *text, drl_error *err);
DRL_EXPORT void drl_uri_free(drl_uri *u);

DRL_EXPORT const char *drl_uri_scheme(const drl_uri *u);
DRL_EXPORT const char *drl_uri_user(const drl_uri *u);
DRL_EXPORT const char *drl_uri_password(const drl_uri *u);
/* The authority's host list as written ("a:1,b:2", "[::1]:6379"). */
DRL_EXPORT const char *drl_uri_hosts(const drl_uri *u);
/* After the '/' that ends the authority: "0" for redis://h/0,
 * "/run/x.sock" for redis+unix:///run/x.sock. */
DRL_EXPORT const char *drl_uri_path(const drl_uri *u);
/* The value of option `key`, marking it used; NULL when absent. */
DRL_EXPORT const char *drl_uri_option(drl_uri *u, const char *key);
/* An integer option in [min, max] into *out, `def` when absent;
 * DRL_EINVAL naming the option, its value and the range otherwise. */
DRL_EXPORT int drl_uri_option_int(drl_uri *u, const char *key, int64_t min,
				  int64_t max, int64_t def, int64_t *out,
				  drl_error *err);
/* connect=eager|lazy (default eager): whether the store connects in its
 * opener, so a wrong address or password fails there, or at its first
 * call, so a process can start while the server is away. */
DRL_EXPORT int drl_uri_option_lazy(drl_uri *u, bool *lazy, drl_error *err);
/* DRL_EINVAL naming the first option no accessor asked for. */
DRL_EXPORT int drl_uri_check_all_used(const drl_uri *u, drl_error *err);
/* Over how many independent servers the store spreads keys (0 or 1: one).
 * Above one, the store-wide circuit breaker is off unless the URI asks
 * for it (breaker_failures=): one dead server must not shut out the keys
 * of the live ones. */
DRL_EXPORT void drl_uri_set_servers(drl_uri *u, size_t servers);

/* One server of a host list: "host", "host:port", "[v6]", "[v6]:port".
 * A host is letters, digits and ".-_" (or an IPv6 address in brackets),
 * at most DRL_HOST_MAX bytes; a port is in [1, 65535]. */
#define DRL_HOST_MAX 255
typedef struct drl_hostport {
	char host[DRL_HOST_MAX + 1]; /* without the brackets */
	int port;
	bool ipv6; /* written in brackets */
} drl_hostport;

/* Parse s[0..len) into *out, `default_port` when none is written.
 * DRL_EINVAL otherwise, the message starting with `what` (e.g. "redis
 * URI") and naming the server. */
DRL_EXPORT int drl_hostport_parse(const char *s, size_t len, int default_port,
				  const char *what, drl_hostport *out,
				  drl_error *err);
/* Parse the comma-separated list `hosts` into out[0..cap) (*n servers):
 * DRL_EINVAL for an empty list or entry, a server listed twice (after the
 * default port is applied) or more than `cap` servers. */
DRL_EXPORT int drl_hostport_list(const char *hosts, int default_port,
				 const char *what, drl_hostport *out,
				 size_t cap, size_t *n, drl_error *err);

/* Parse a whole decimal integer in [min, max] from s[0..len) (an optional
 * '-', digits, nothing else): 0, or DRL_EINVAL leaving *out alone. For the
 * numbers in a server's replies. */
DRL_EXPORT int drl_parse_int(const char *s, size_t len, int64_t min,
			     int64_t max, int64_t *out);

/* A store's opener: build the backend for `uri` (whose scheme is one it
 * was registered for) into *out, or fail with err set and *out NULL. */
typedef int (*drl_store_open_fn)(drl_backend **out, drl_uri *uri,
				 drl_error *err);
typedef struct drl_store_opener {
	const char *scheme; /* [a-z][a-z0-9+.-]* */
	drl_store_open_fn open;
} drl_store_opener;

/* drl_store_open(), knowing the schemes of openers[0..n) besides the
 * stores built in (openers first, so one can replace a built-in scheme).
 * The returned store is like any other: its limiters, failure policies
 * (breaker_* options) and near cache work as on a built-in store. */
DRL_EXPORT int drl_store_open_with(drl_store **out, const char *uri,
				   const drl_store_opener *openers, size_t n,
				   drl_error *err);

/* The backend itself, unwrapped, for a store's own tests (the conformance
 * suite) and tools: as drl_store_open_with() (the same URIs, options and
 * errors, breaker_* options accepted and ignored), but *out is the raw
 * backend, called directly and freed with (*out)->destroy(*out). */
DRL_EXPORT int drl_backend_open_with(drl_backend **out, const char *uri,
				     const drl_store_opener *openers, size_t n,
				     drl_error *err);

/* Wrap a backend in a drl_store. On success the store owns `b` and calls
 * b->destroy(b) from drl_store_free(); on failure b is untouched.
 * DRL_EINVAL when b's version is newer than this library's, or b lacks a
 * required method or a method its capability bits promise. */
DRL_EXPORT int drl_store_from_backend(drl_store **out, drl_backend *b,
				      drl_error *err);

/* Fill `err` (may be NULL) with code and a printf-style message; returns
 * `code`, so a store can write `return drl_error_set(err, DRL_ESTORE, ...)`. */
DRL_EXPORT int drl_error_set(drl_error *err, int code, const char *fmt, ...)
#ifdef __GNUC__
	__attribute__((format(printf, 3, 4)))
#endif
	;

#ifdef __cplusplus
}
#endif
#endif /* DRL_BACKEND_H */
