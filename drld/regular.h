/*
 * Opening the files an operator names (--config, the *.yaml files of
 * --envoy-config) so that no file can hang drld: opened without blocking
 * (a FIFO would wait for a writer forever, at start or on the signal
 * thread's SIGHUP reload, after which SIGTERM went unheard) and read only
 * when it is a regular file.
 */
#ifndef DRLD_REGULAR_H
#define DRLD_REGULAR_H

#include <stdio.h>
#include <sys/stat.h>

/* Open path (relative to directory descriptor dir, or AT_FDCWD) for
 * reading, and only when it is a regular file (after following symbolic
 * links) of at most max bytes; *st (when st is not NULL) gets what fstat
 * says of it. NULL with errno-style words in why (n bytes: "No such file
 * or directory", "not a regular file", "larger than N bytes")
 * otherwise. */
FILE *drld_open_regular(int dir, const char *path, long long max,
			struct stat *st, char *why, size_t n);

#endif /* DRLD_REGULAR_H */
