"""One process of test_exact: THREADS threads each ask REQUESTS decisions
on KEY at the fixed time NOW_US; prints "admitted errors".

usage: exact_worker.py URI SPEC KEY THREADS REQUESTS NOW_US
"""
import sys
import threading

import drl

uri, spec, key = sys.argv[1:4]
threads, requests, now_us = map(int, sys.argv[4:7])
limiter = drl.Limiter(drl.Store(uri), spec)
admitted, errors = [], []
start = threading.Barrier(threads)


def worker():
    start.wait()
    n = 0
    for _ in range(requests):
        try:
            n += limiter.allow_at(key, 1, now_us).allowed
        except drl.Error as e:
            errors.append(repr(e))
    admitted.append(n)


pool = [threading.Thread(target=worker) for _ in range(threads)]
for t in pool:
    t.start()
for t in pool:
    t.join()
print(sum(admitted), len(errors), *errors[:3])
