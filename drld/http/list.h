/*
 * Intrusive doubly linked lists of drld's HTTP front: the requests
 * blocked in the store (http.c) and the connections' deadlines
 * (deadline.c). A list is a pointer to its first element (NULL: empty);
 * an element carries two pointers to its neighbours, `prev` and `next`,
 * whose field names the caller gives. Not locked: the caller holds the
 * list's lock. head and x are evaluated more than once.
 */
#ifndef DRLD_LIST_H
#define DRLD_LIST_H

#include <stddef.h>

/* Put x first in the list head. */
#define DRLD_LIST_PUSH(head, x, prev, next)                                    \
	do {                                                                   \
		(x)->prev = NULL;                                              \
		(x)->next = (head);                                            \
		if ((head) != NULL)                                            \
			(head)->prev = (x);                                    \
		(head) = (x);                                                  \
	} while (0)

/* Take x, an element of the list head, out of it; its links are left
 * NULL. */
#define DRLD_LIST_UNLINK(head, x, prev, next)                                  \
	do {                                                                   \
		if ((x)->prev != NULL)                                         \
			(x)->prev->next = (x)->next;                           \
		else                                                           \
			(head) = (x)->next;                                    \
		if ((x)->next != NULL)                                         \
			(x)->next->prev = (x)->prev;                           \
		(x)->prev = (x)->next = NULL;                                  \
	} while (0)

#endif
