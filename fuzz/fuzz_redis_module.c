/*
 * fuzz_redis_module: the argument parsers of the Redis module's commands
 * (redis_module/decide.h): DRL.DECIDE's (key, spec, now_us, cost) and
 * DRL.TWIN's (key, twin, integers), as any Redis client may send them.
 * Input: the arguments separated by '\n' (each may hold any other byte,
 * NUL included); the first byte picks the command (even: DRL.DECIDE).
 *
 * Each argument is copied to a buffer of its own length, so ASan sees a
 * read past it. A call that does not parse must be DRL_EINVAL with a
 * message. One that parses is decided on a fresh memory:// store, as the
 * module decides it on the server's keys: rc 0, allowed 0 or 1,
 * remaining >= 0, retry_after 0 when allowed.
 */
#include "fuzz.h"

#include "decide.h"

#include <stdio.h>

#define ARGS_MAX 12

static void fail(const char *what, int rc, const drl_error *err)
{
	fprintf(stderr, "fuzz_redis_module: %s: rc %s: %s\n", what,
		drl_err_name(rc), err->message);
	abort();
}

static void decide(const drl__rm_request *q)
{
	drl_backend *b = NULL;
	drl_error err = {0, {0}};
	if (drl_backend_open_with(&b, "memory://", NULL, 0, &err) != 0)
		abort();
	drl_result res;
	int64_t undo = 0;
	int rc = drl__rm_decide(q, b, &res, &undo, &err);
	if (rc != 0)
		fail("decide on memory://", rc, &err);
	if ((res.allowed != 0 && res.allowed != 1) || res.remaining < 0 ||
	    (res.allowed && res.retry_after_us != 0))
		fail("not a decision", rc, &err);
	b->destroy(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 4096)
		return 0;
	bool twin = data[0] & 1;
	char *arg[ARGS_MAX];
	size_t len[ARGS_MAX], n = 0;
	const uint8_t *p = data + 1, *end = data + size;
	while (n < ARGS_MAX) {
		const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = (size_t)((nl ? nl : end) - p);
		arg[n] = malloc(l ? l : 1);
		if (arg[n] == NULL)
			abort();
		memcpy(arg[n], p, l);
		len[n++] = l;
		if (nl == NULL)
			break;
		p = nl + 1;
	}
	drl__rm_request q;
	drl_error err = {0, {0}};
	int rc = 0;
	if (twin && n >= 2)
		rc = drl__rm_parse_twin(&q, arg[0], len[0], arg[1], len[1],
					n - 2, (const char *const *)arg + 2,
					len + 2, &err);
	else if (!twin && n == 4)
		rc = drl__rm_parse(&q, (const char *const *)arg, len, &err);
	else
		rc = 1; /* Redis's arity check: the parser is not called */
	if (rc == 0)
		decide(&q);
	else if (rc != 1 && (rc != DRL_EINVAL || !err.message[0]))
		fail("parse", rc, &err);
	for (size_t i = 0; i < n; i++)
		free(arg[i]);
	return 0;
}
