/* Pointer chase over a random cycle: ns per dependent load. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv)
{
	size_t n = (size_t)atol(argv[1]) / sizeof(size_t);
	size_t *a = malloc(n * sizeof *a), *p = malloc(n * sizeof *p);
	for (size_t i = 0; i < n; i++)
		p[i] = i;
	srand(1);
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = ((size_t)rand() << 16 ^ rand()) % (i + 1), t = p[i];
		p[i] = p[j];
		p[j] = t;
	}
	for (size_t i = 0; i < n; i++)
		a[p[i]] = p[(i + 1) % n];
	size_t x = p[0], steps = 20000000;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (size_t i = 0; i < steps; i++)
		x = a[x];
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%zu MB: %.1f ns per dependent load (x=%zu)\n",
	       n * sizeof *a >> 20,
	       ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) /
		       steps,
	       x);
}
