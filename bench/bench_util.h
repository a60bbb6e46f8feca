/*
 * What the benchmarks share besides a redis-server (bench_redis.h): their
 * positional arguments read strictly, the names of their keys and the
 * sorting their medians are read from.
 */
#ifndef DRL_BENCH_UTIL_H
#define DRL_BENCH_UTIL_H

#include <stdbool.h>
#include <stddef.h>

/* Positional argument i (argv[i]) as a whole decimal number in [lo, hi]:
 * dflt when there is no argv[i]; when argv[i] is not such a number (the
 * whole string as strtol reads it: no suffix, not empty), a message on
 * stderr, *ok false, and dflt. *ok is only ever set false, so a main reads all its
 * arguments and checks once. Not atoi(): "3x" or "" is an error, not 3
 * or 0. */
long bench_arg_int(int argc, char **argv, int i, long dflt, long lo, long hi,
		   bool *ok);

/* The same for a finite decimal number (strtod's syntax) in [lo, hi]. */
double bench_arg_num(int argc, char **argv, int i, double dflt, double lo,
		     double hi, bool *ok);

/* "usage: " and the printf-formatted rest, a line on stderr; returns 2,
 * a benchmark's exit status for bad arguments. */
int bench_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Name n keys in names, a char[n][width] array (pass it cast to char *):
 * key k is prefix followed by k in decimal, zero-padded to at least
 * `digits` digits (0: no padding), cut to width - 1 bytes. */
void bench_name_keys(char *names, size_t width, int n, const char *prefix,
		     int digits);

/* Sort v[0..n) ascending: the median of an odd n is then v[n / 2]. */
void bench_sort(double *v, size_t n);

#endif
