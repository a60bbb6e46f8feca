/* Config files opened without blocking, regular files only: see
 * regular.h. */
#include "regular.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

FILE *drld_open_regular(int dir, const char *path, long long max,
			struct stat *out, char *why, size_t n)
{
	struct stat st;
	FILE *f;
	int fd =
		openat(dir, path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);

	if (fd < 0) {
		snprintf(why, n, "%s", strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0) {
		snprintf(why, n, "%s", strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, n, "not a regular file");
		goto fail;
	}
	if ((long long)st.st_size > max) {
		snprintf(why, n, "larger than %lld bytes", max);
		goto fail;
	}
	if (out != NULL)
		*out = st;
	if ((f = fdopen(fd, "rb")) == NULL) {
		snprintf(why, n, "%s", strerror(errno));
		goto fail;
	}
	return f;
fail:
	close(fd);
	return NULL;
}
