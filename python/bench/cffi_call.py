"""The alternative the binding did not take: drl_allow() through cffi's ABI
mode (Debian's python3-cffi; no compiler), ns per decision on memory://,
the same loop as bench_decisions.py's memory mode. For docs/python.md.

usage: cffi_call.py LIBDRL_SO
"""
import sys
import time

import cffi

ffi = cffi.FFI()
ffi.cdef("""
typedef struct drl_error { int code; char message[256]; } drl_error;
typedef struct drl_result { int allowed; int64_t limit; int64_t remaining;
  int64_t reset_after_us; int64_t retry_after_us; int limit_index; int path;
  int would_allow; } drl_result;
typedef struct drl_store drl_store;
typedef struct drl_limiter drl_limiter;
int drl_store_open(drl_store **out, const char *uri, drl_error *err);
int drl_limiter_new(drl_limiter **out, drl_store *store, const char *spec,
                    const char *prefix, drl_error *err);
int drl_allow(drl_limiter *limiter, const void *key, size_t keylen,
              int64_t cost, drl_result *result, drl_error *err);
""")
lib = ffi.dlopen(sys.argv[1])
store, lim = ffi.new("drl_store **"), ffi.new("drl_limiter **")
err = ffi.new("drl_error *")
assert lib.drl_store_open(store, b"memory://", err) == 0
assert lib.drl_limiter_new(lim, store[0], b"fixed_window:1000000000/1h",
                           ffi.NULL, err) == 0


def allow(key, cost=1):
    """What a cffi binding's allow() would do at the least: encode the key,
    a result struct per call, the call, the error check."""
    k = key.encode() if isinstance(key, str) else key
    r = ffi.new("drl_result *")
    if lib.drl_allow(lim[0], k, len(k), cost, r, err) != 0:
        raise RuntimeError(ffi.string(err.message))
    return r


n, runs = 200_000, []
for _ in range(9):
    t0 = time.perf_counter_ns()
    for _ in range(n):
        allow("k")
    runs.append((time.perf_counter_ns() - t0) / n)
print("cffi python %.0f ns/decision" % sorted(runs)[4])
