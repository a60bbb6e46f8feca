/*
 * The C side of the binding's overhead: ns per drl_allow() on memory://,
 * one thread, one key, fixed_window (the decision bench_decisions.py
 * times through Python). usage: memory_call N [SPEC]
 */
#include <drl/drl.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	const char *spec = argc > 2 ? argv[2] : "fixed_window:1000000000/1h";
	drl_store *store = NULL;
	drl_limiter *lim = NULL;
	drl_result r;
	drl_error err;
	long allowed = 0;

	if (drl_store_open(&store, "memory://", &err) != 0 ||
	    drl_limiter_new(&lim, store, spec, NULL, &err) != 0) {
		fprintf(stderr, "memory_call: %s\n", err.message);
		return 1;
	}
	int64_t t0 = drl_mono_us();
	for (long i = 0; i < n; i++) {
		drl_allow(lim, "k", 1, 1, &r, &err);
		allowed += r.allowed;
	}
	int64_t t1 = drl_mono_us();
	printf("%.1f\n", (double)(t1 - t0) * 1000.0 / (double)n);
	drl_limiter_free(lim);
	drl_store_free(store);
	return allowed == n ? 0 : 1;
}
