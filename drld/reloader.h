/*
 * The reload thread: SIGHUP's work (reading config files, building the
 * limits) runs here, never on the thread that reads signals, so a read
 * that blocks (a hung NFS or FUSE mount under the config) cannot keep
 * drld from stopping on SIGTERM (issue 33, hole 6).
 *
 * Threading: drld_reloader_kick() may be called from any thread (the
 * signal thread, the config watcher's); drld_reloader_stop() by the one
 * that started it; fn runs on the reloader's own thread, one call at a
 * time.
 */
#ifndef DRLD_RELOADER_H
#define DRLD_RELOADER_H

#include <stdbool.h>

struct drld_reloader;

/* Start the thread that calls fn(arg) once per kick. Returns 0, or an
 * errno value (*out NULL). The thread blocks the signals its creator
 * blocks (it inherits the mask). */
int drld_reloader_start(struct drld_reloader **out, void (*fn)(void *arg),
			void *arg);

/* Ask for one more call of fn. Never waits for fn: kicks that arrive
 * while fn runs, or before it starts, are one more call after it. */
void drld_reloader_kick(struct drld_reloader *r);

/* Stop the thread. When fn is not running, no call is pending any more
 * and the thread is joined and freed: returns true. When fn is running
 * (blocked in a read, say), returns false at once and detaches the
 * thread: the caller must then not free anything fn uses, and ends the
 * process instead (exit ends the thread with it). r NULL: true. */
bool drld_reloader_stop(struct drld_reloader *r);

#endif /* DRLD_RELOADER_H */
