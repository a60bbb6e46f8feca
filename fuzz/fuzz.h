/* The entry point libFuzzer calls for each input (one per fuzz_*.c), and
 * what the text targets share. */
#ifndef DRL_FUZZ_H
#define DRL_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as a C string of its own (malloc'd to the byte, so ASan sees
 * any read past it), or NULL when it is over `max` bytes or memory ran
 * out. */
static inline char *fuzz_text(const uint8_t *data, size_t size, size_t max)
{
	char *s = size <= max ? malloc(size + 1) : NULL;
	if (s != NULL) {
		memcpy(s, data, size);
		s[size] = '\0';
	}
	return s;
}

#endif
