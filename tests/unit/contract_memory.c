/*
 * The store conformance suite (tests/fixtures/store_contract.h) on memory://: a
 * new in-process store per check, opened through the public API
 * (drl_backend_open_with). No hot-key check: processes share nothing.
 */
#include "store_contract.h"

/* A new memory store: it shares no key with any opened before. */
static int open_memory(void *arg, drl_backend **out, drl_error *err)
{
	(void)arg;
	return drl_backend_open_with(out, "memory://", NULL, 0, err);
}

int main(void)
{
	const store_contract_target t = {
		.name = "memory",
		.open = open_memory,
		.uri = NULL, /* state lives in the process */
		.threads_rounds = 100,
	};
	return store_contract_run(&t) ? 1 : 0;
}
