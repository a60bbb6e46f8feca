/*
 * Request paths as drld routes and keys them: one spelling per resource.
 *
 * A client chooses how it spells a path, and a rate limit keyed by or
 * guarding a path must not depend on that: "/api//orders", "/api/./orders"
 * and "/x/../api/orders" are all "/api/orders", and none of them may slip
 * past a protected prefix "/api/" or count in a bucket of its own.
 * libmicrohttpd has already decoded %XX escapes (so "%2e%2e" is ".." by
 * now); what is left is RFC 3986's dot segments (5.2.4) and repeated
 * slashes, which reverse proxies (nginx's merge_slashes) also fold.
 */
#ifndef DRLD_PATH_H
#define DRLD_PATH_H

/* The normalized form of `path` in a malloc'd string (the caller frees
 * it), or NULL when out of memory: "." segments dropped, ".." removing the
 * segment before it (never above the root), runs of '/' made one, a
 * trailing '/' kept (and one where the path ended in "/." or "/.."). A
 * path not starting with '/' ("*", an absolute URI) is copied unchanged:
 * it names no path drld serves. */
char *drld_path_normalize(const char *path);

#endif /* DRLD_PATH_H */
