/*
 * drl_adjust (penalty +delta, reward -delta) judged on one store, at
 * explicit times (no wall-clock window is counted): the checks that
 * tests/test_adjust.c runs on memory, Redis tx=auto, tx=lua, tx=watch and
 * memcached, and tests/test_ops_cluster.c on Redis Cluster. Each fails
 * the running cmocka test with a message naming the spec, the store and
 * the step.
 */
#ifndef DRL_TESTS_ADJUST_CHECK_H
#define DRL_TESTS_ADJUST_CHECK_H

/* Every algorithm: a penalty then decisions are denied exactly when the
 * usage says; a reward admits exactly that many more; the bound (2 x the
 * capacity used at most) and the floor (a full quota) hold; delta 0
 * changes nothing; after a penalty retry_after is the first µs a request
 * is admitted; a reward takes the newest units (sliding_log, subwindow). */
void adjust_check_exact(const char *uri);
/* A policy: every limit moves; the answer is the limit that denies. */
void adjust_check_policy(const char *uri);
/* Random decisions and adjustments on every spec of ops_specs (times
 * forward, sometimes back) answer field for field what memory:// does:
 * the twins' adjust mode and the counter commands against the C steps. */
void adjust_check_agrees(const char *uri);
/* Threads deciding, penalizing and rewarding one key at once: nothing is
 * lost or made up (admitted = usage - penalties + rewards, every reward
 * finding units used, no penalty at the bound), on every algorithm. */
void adjust_check_hot_key(const char *uri);
/* Bad input (key, delta, time, NULL result or limiter) is DRL_EINVAL with
 * a message, a denial in *result, and changes nothing. */
void adjust_check_bad_input(const char *uri);
/* The policy options: a reward lifts the near cache's block of the key
 * (block_on_exceed); under shadow=1 the answer is allowed, would_allow
 * the real one. */
void adjust_check_options(const char *uri);
/* drl_async_adjust_at answers what drl_adjust_at does, step by step, on
 * every spec of ops_specs; bad input is refused at start (no callback);
 * drl_async_adjust at the real clock. */
void adjust_check_async(const char *uri);
/* drl_adjust at the clock drl_allow uses (the real-time clock, or the
 * store's with clock=server): a penalty denies, a reward of one admits
 * exactly one. */
void adjust_check_real_clock(const char *uri);

#endif
