/*
 * The public headers compile as C++ (extern "C", no C-only constructs),
 * and a C++ program links against the library through them.
 */
#include <drl/drl.h>
#include <drl/backend.h>
#include <drl/sys/backend.h>
#include <drl/async.h>
#include <drl/resolver.h>

#include <cstdio>

/* A store author's struct in C++: the base embedded as the first member. */
struct cxx_backend {
	drl_backend parent;
	int extra;
};

int main()
{
	const char *text = drl_strerror(DRL_EINVAL);
	const char *name = drl_err_name(DRL_ESTORE);
	const char *version = drl_version();
	drl_error err = {};
	drl_result res = {};
	drl_bytes bytes = {"k", 1};
	cxx_backend b = {};
	drl_async_opts opts = {};
	drl_async *a = nullptr;

	static const drl_backend proto = DRL_BACKEND_INIT(4);
	b.parent = proto;
	b.parent.caps = DRL_CAP_COUNTER | DRL_CAP_CAS;
	res.retry_after_us = DRL_NEVER;
	opts.threads = 1;
	if (drl_async_new(&a, &opts, &err) != 0 || drl_async_fd(a) < 0 ||
	    drl_async_pending(a) != 0 || drl_async_process(a) != 0) {
		std::fprintf(stderr, "async context: %s\n", err.message);
		return 1;
	}
	drl_async_free(a);
	if (b.parent.version != 4 || b.parent.incr != nullptr) {
		std::fprintf(stderr, "DRL_BACKEND_INIT(4) gave version %d\n",
			     b.parent.version);
		return 1;
	}
	if (text == nullptr || name == nullptr || version == nullptr) {
		std::fprintf(stderr, "NULL text from the library\n");
		return 1;
	}
	if (drl_error_set(&err, DRL_EINVAL, "bad %s", "part") != DRL_EINVAL ||
	    err.code != DRL_EINVAL) {
		std::fprintf(stderr, "drl_error_set did not fill the code\n");
		return 1;
	}
	std::printf("%s (%s), drl %s, key %zu byte, never=%lld, error \"%s\"\n",
		    text, name, version, bytes.len,
		    static_cast<long long>(res.retry_after_us), err.message);
	/* a store written for version 4 is one this header still knows */
	return b.parent.version <= DRL_BACKEND_VERSION ? 0 : 1;
}
