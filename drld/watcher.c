/* Reload on change: see watcher.h. inotify(7) directly: Debian's
 * libraries for it (libinotifytools) add nothing a dozen lines of
 * read() and a table of watches do not. */
#include "watcher.h"
#include "stopper.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define WATCHED_MAX 8 /* paths */

/* Changes of a name in a directory. */
#define DIR_EVENTS                                                             \
	(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |                 \
	 IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)

/* One path and its watches. */
struct watched {
	char path[PATH_MAX];
	char dir[PATH_MAX];      /* the directory watched for it */
	char name[NAME_MAX + 1]; /* its own name in its parent */
	bool is_dir;
	int wd;        /* on dir */
	int parent_wd; /* on dir's parent (a directory only), or -1 */
};

struct drld_watcher {
	int ifd;
	struct drld_stopper stop;
	void (*fn)(void *arg);
	void *arg;
	struct watched w[WATCHED_MAX];
	size_t n;
};

/* dirname and basename of path into dir and name (no allocation). */
static void split(const char *path, char *dir, size_t dn, char *name, size_t nn)
{
	char tmp[PATH_MAX];
	size_t len;

	snprintf(tmp, sizeof tmp, "%s", path);
	len = strlen(tmp);
	while (len > 1 && tmp[len - 1] == '/')
		tmp[--len] = '\0';
	char *slash = strrchr(tmp, '/');
	if (slash == NULL) {
		snprintf(dir, dn, ".");
		snprintf(name, nn, "%s", tmp);
	} else {
		snprintf(name, nn, "%s", slash + 1);
		if (slash == tmp)
			snprintf(dir, dn, "/");
		else
			snprintf(dir, dn, "%.*s", (int)(slash - tmp), tmp);
	}
}

/* (Re)add the watches of x. Returns 0, or -1 (errno set). Every watch
 * adds to the mask of one the directory already has (IN_MASK_ADD): paths
 * share directories (two files in one, a directory watched as another
 * path's parent), and a directory has one watch whose mask the last
 * inotify_add_watch() sets; a directory's parent watched for its name
 * alone once took the in-place edits of a file beside it (issue 45,
 * hole 10). */
static int watch(struct drld_watcher *wt, struct watched *x)
{
	struct stat st;

	if (stat(x->path, &st) != 0)
		return -1;
	x->is_dir = S_ISDIR(st.st_mode);
	char parent[PATH_MAX];
	split(x->path, parent, sizeof parent, x->name, sizeof x->name);
	if (x->is_dir) {
		snprintf(x->dir, sizeof x->dir, "%s", x->path);
		x->parent_wd = inotify_add_watch(
			wt->ifd, parent,
			IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
				IN_MASK_ADD);
	} else {
		snprintf(x->dir, sizeof x->dir, "%s", parent);
		x->parent_wd = -1;
	}
	x->wd = inotify_add_watch(wt->ifd, x->dir, DIR_EVENTS | IN_MASK_ADD);
	return x->wd < 0 ? -1 : 0;
}

static bool holds(const int *wds, size_t n, int wd)
{
	for (size_t i = 0; i < n; i++)
		if (wds[i] == wd)
			return true;
	return false;
}

/* Watch again what every path names now (a symbolic link swapped, a
 * directory replaced, events lost), then drop the watches no path uses
 * any more. All paths at once: paths share watches, and moving one
 * path's would take another's. A path gone for now keeps -1 until the
 * next event of its parent brings it back. */
static void rewatch_all(struct drld_watcher *wt)
{
	int old[2 * WATCHED_MAX], now[2 * WATCHED_MAX];
	size_t nold = 0, nnow = 0;

	for (size_t i = 0; i < wt->n; i++) {
		old[nold++] = wt->w[i].wd;
		old[nold++] = wt->w[i].parent_wd;
	}
	for (size_t i = 0; i < wt->n; i++) {
		struct watched *x = &wt->w[i];
		if (watch(wt, x) != 0 && x->is_dir)
			x->wd = -1; /* the directory is gone for now */
		now[nnow++] = x->wd;
		now[nnow++] = x->parent_wd;
	}
	for (size_t i = 0; i < nold; i++)
		if (old[i] >= 0 && !holds(now, nnow, old[i]) &&
		    !holds(old, i, old[i]))
			inotify_rm_watch(wt->ifd, old[i]);
}

/* Whether event e (on watch wd) changes what x names; *rewatch: x's own
 * directory was replaced or went away (its watch must move). */
static bool relevant(const struct watched *x, const struct inotify_event *e,
		     bool *rewatch)
{
	const char *nm = e->len ? e->name : "";

	if (e->mask & IN_Q_OVERFLOW) /* events were lost: any of them */
		return (*rewatch = true);
	if (e->wd == x->parent_wd)
		return (*rewatch = strcmp(nm, x->name) == 0);
	if (e->wd != x->wd)
		return false;
	if (e->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
		*rewatch = true;
		return true;
	}
	if (x->is_dir)
		return nm[0] != '.' || nm[1] == '.';
	return strcmp(nm, x->name) == 0 || strncmp(nm, "..", 2) == 0;
}

/* Read the events waiting; true when one matters. */
static bool read_events(struct drld_watcher *wt)
{
	_Alignas(struct inotify_event) char buf[16384];
	bool any = false, rewatch_needed = false;
	ssize_t got;

	while ((got = read(wt->ifd, buf, sizeof buf)) > 0) {
		for (char *p = buf; p < buf + got;) {
			const struct inotify_event *e = (const void *)p;
			for (size_t i = 0; i < wt->n; i++) {
				bool rewatch = false;
				if (!relevant(&wt->w[i], e, &rewatch))
					continue;
				any = true;
				rewatch_needed |= rewatch;
			}
			p += sizeof *e + e->len;
		}
		if (rewatch_needed)
			rewatch_all(wt);
		rewatch_needed = false;
	}
	return any;
}

static void *run(void *arg)
{
	struct drld_watcher *wt = arg;
	struct pollfd pf[2] = {{wt->ifd, POLLIN, 0}, {wt->stop.fd, POLLIN, 0}};

	(void)pthread_setname_np(pthread_self(), "drld-watch");
	for (;;) {
		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			break;
		if (pf[1].revents)
			break;
		if ((pf[0].revents & POLLIN) && read_events(wt))
			wt->fn(wt->arg);
	}
	return NULL;
}

int drld_watcher_start(struct drld_watcher **out, const char *const *paths,
		       size_t npaths, void (*fn)(void *arg), void *arg,
		       char *msg, size_t msglen)
{
	struct drld_watcher *wt = calloc(1, sizeof *wt);

	*out = NULL;
	if (wt == NULL) {
		snprintf(msg, msglen, "out of memory");
		return -1;
	}
	wt->fn = fn;
	wt->arg = arg;
	wt->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (wt->ifd < 0) {
		snprintf(msg, msglen, "inotify: %s", strerror(errno));
		goto fail;
	}
	for (size_t i = 0; i < npaths && wt->n < WATCHED_MAX; i++) {
		if (paths[i] == NULL)
			continue;
		struct watched *x = &wt->w[wt->n++];
		snprintf(x->path, sizeof x->path, "%s", paths[i]);
		x->wd = x->parent_wd = -1;
		if (watch(wt, x) != 0) {
			snprintf(msg, msglen, "cannot watch %s: %s", paths[i],
				 strerror(errno));
			goto fail;
		}
	}
	int rc = drld_stopper_start(&wt->stop, run, wt);
	if (rc != 0) {
		snprintf(msg, msglen, "watcher thread: %s", strerror(rc));
		goto fail;
	}
	*out = wt;
	return 0;
fail:
	if (wt->ifd >= 0)
		close(wt->ifd);
	free(wt);
	return -1;
}

void drld_watcher_stop(struct drld_watcher *wt)
{
	if (wt == NULL)
		return;
	drld_stopper_stop(&wt->stop, "the config watcher");
	close(wt->ifd);
	free(wt);
}
