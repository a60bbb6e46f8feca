/*
 * Reload on change: a thread that watches drld's config files and
 * directories with inotify and calls a function when one changes
 * (envoyproxy/ratelimit's RUNTIME_WATCH_ROOT). It sees a Kubernetes
 * ConfigMap update, which swaps a "..data" symbolic link inside the
 * mounted directory, an edit of a file in place, a file renamed over
 * another, and a watched directory that is itself a symbolic link swapped
 * in its parent (the watch moves to the new target).
 *
 * What it watches, for each path:
 *   a directory D: every change of a name in D but for names starting
 *     with one '.' (an editor's ".x.swp"; "..data" and the like count),
 *     and, in D's parent, D's own name being replaced;
 *   a file F: in F's directory, changes of F's name and of names
 *     starting with "..".
 * A burst of changes calls fn at least once after its last change; fn
 * must coalesce calls that come while it runs (reloader.h does).
 *
 * Threading: start and stop from one thread; fn runs on the watcher's.
 */
#ifndef DRLD_WATCHER_H
#define DRLD_WATCHER_H

#include <stddef.h>

struct drld_watcher;

/* Watch the n paths (NULL entries are skipped) and call fn(arg) on each
 * change. Returns 0, or -1 with a message in msg (n bytes) naming the
 * path that cannot be watched. */
int drld_watcher_start(struct drld_watcher **out, const char *const *paths,
		       size_t npaths, void (*fn)(void *arg), void *arg,
		       char *msg, size_t msglen);

/* Stop the thread and free w; NULL is a no-op. fn is not called after
 * this returns. */
void drld_watcher_stop(struct drld_watcher *w);

#endif /* DRLD_WATCHER_H */
