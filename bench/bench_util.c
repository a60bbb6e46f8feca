/* Arguments, key names and sorting for the benchmarks (bench_util.h). */
#include "bench_util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* argv[i] refused: said once on stderr, *ok false, dflt kept. */
static void refuse(char **argv, int i, const char *what, bool *ok)
{
	fprintf(stderr, "%s: argument %d (\"%s\") is not %s\n", argv[0], i,
		argv[i], what);
	*ok = false;
}

long bench_arg_int(int argc, char **argv, int i, long dflt, long lo, long hi,
		   bool *ok)
{
	char *end, what[96];
	if (i >= argc)
		return dflt;
	errno = 0;
	long v = strtol(argv[i], &end, 10);
	if (end != argv[i] && *end == '\0' && errno == 0 && v >= lo && v <= hi)
		return v;
	snprintf(what, sizeof what, "a whole number in %ld..%ld", lo, hi);
	refuse(argv, i, what, ok);
	return dflt;
}

double bench_arg_num(int argc, char **argv, int i, double dflt, double lo,
		     double hi, bool *ok)
{
	char *end, what[96];
	if (i >= argc)
		return dflt;
	errno = 0;
	double v = strtod(argv[i], &end);
	if (end != argv[i] && *end == '\0' && errno == 0 && isfinite(v) &&
	    v >= lo && v <= hi)
		return v;
	snprintf(what, sizeof what, "a number in %g..%g", lo, hi);
	refuse(argv, i, what, ok);
	return dflt;
}

void bench_name_keys(char *names, size_t width, int n, const char *prefix,
		     int digits)
{
	for (int k = 0; k < n; k++)
		snprintf(names + (size_t)k * width, width, "%s%0*d", prefix,
			 digits, k);
}

int bench_usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("usage: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return 2;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

void bench_sort(double *v, size_t n)
{
	qsort(v, n, sizeof *v, cmp);
}
