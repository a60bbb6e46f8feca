/*
 * The cross-process hot-key test, shared by every store's tests: several
 * processes, each with several threads and its own store connections, ask
 * for one key at one fixed instant; the total allowed must equal the limit
 * exactly. Each process opens the store from its URI, so nothing is shared
 * but the server.
 */
#ifndef DRL_HOT_KEY_H
#define DRL_HOT_KEY_H

enum { HOT_PROCS = 3, HOT_THREADS = 4, HOT_CALLS = 60, HOT_LIMIT = 200 };

/* Run spec (allowing HOT_LIMIT at one instant) on uri from HOT_PROCS
 * processes; fail the test unless exactly HOT_LIMIT were allowed. `n`
 * picks the instant and goes into the key prefix, so runs share nothing. */
void hot_key_run(const char *uri, const char *spec, int n);

/* hot_key_run for every algorithm, and a policy of two limits. */
void hot_key_all_specs(const char *uri);

#endif
