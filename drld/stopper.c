/* A thread stopped through an eventfd (stopper.h). */
#include "stopper.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

int drld_stopper_start(struct drld_stopper *s, void *(*run)(void *), void *arg)
{
	s->fd = eventfd(0, EFD_CLOEXEC);
	if (s->fd < 0)
		return errno;
	int rc = pthread_create(&s->thread, NULL, run, arg);
	if (rc != 0) {
		close(s->fd);
		s->fd = -1;
	}
	return rc;
}

void drld_stopper_stop(struct drld_stopper *s, const char *what)
{
	uint64_t one = 1;
	while (write(s->fd, &one, sizeof one) < 0)
		if (errno != EINTR) {
			fprintf(stderr, "drld: stopping %s: %s\n", what,
				strerror(errno));
			break;
		}
	pthread_join(s->thread, NULL);
	close(s->fd);
	s->fd = -1;
}
