/*
 * A fake Redis Sentinel (tests/fake_sentinel.c): a server on
 * 127.0.0.1:<free port> that names whatever master address the test sets,
 * so a test can move a redis-sentinel:// store through more master
 * addresses than real failovers could make in its time (a new pod IP at
 * each failover). It speaks just enough RESP: SENTINEL (any subcommand:
 * GET-MASTER-ADDR-BY-NAME is the one the store asks) gets [host, port],
 * PING gets PONG, SUBSCRIBE an error (no +switch-master: the store finds
 * moves by its periodic check), anything else +OK.
 *
 * Threading: one server thread; fake_sentinel_set() from any thread.
 */
#ifndef DRL_FAKE_SENTINEL_H
#define DRL_FAKE_SENTINEL_H

typedef struct fake_sentinel fake_sentinel;

/* Start it: 0, or -1 with a message on stderr. */
int fake_sentinel_start(fake_sentinel **out);

int fake_sentinel_port(const fake_sentinel *fs);

/* The master named from now on (host: at most 255 bytes). */
void fake_sentinel_set(fake_sentinel *fs, const char *host, int port);

/* Stop the thread, close everything, free fs (NULL: nothing). */
void fake_sentinel_stop(fake_sentinel *fs);

#endif /* DRL_FAKE_SENTINEL_H */
