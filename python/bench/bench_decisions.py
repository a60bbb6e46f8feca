"""Decisions per second through the binding and through limits' own Redis
storage, for scripts/bench_python.sh. Bounded loops: each mode makes a
fixed number of decisions and prints one line "MODE value unit".

usage: bench_decisions.py MODE [REDIS_URL]
  memory          ns per limiter.allow("k") on memory:// (one thread)
  drl-threads     decisions/s, 16 threads, drl on Redis (SPEC env)
  drl-asyncio     decisions/s, one loop with 64 in flight, drl on Redis
  limits-threads  decisions/s, 16 threads, limits' RedisStorage (STRATEGY env)
"""
import asyncio
import os
import re
import resource
import socket
import sys
import threading
import time

import drl

THREADS, IN_FLIGHT, KEYS = 16, 64, 1000
N = int(os.environ.get("N", "40000"))  # decisions per Redis run
SPEC = os.environ.get("SPEC", "sliding_log:100/1m")
LIMIT = os.environ.get("LIMIT", "100/minute")


def server_cpu(url):
    """redis-server's own CPU seconds (INFO cpu: user + sys, all threads)."""
    host, port = re.match(r"redis://([^:/]+):(\d+)", url).groups()
    with socket.create_connection((host, int(port)), 5) as s:
        s.sendall(b"INFO cpu\r\n")
        data = b""
        while b"used_cpu_user:" not in data or not data.endswith(b"\r\n"):
            data += s.recv(65536)
    text = data.decode()
    return sum(float(re.search(name + r":([\d.]+)", text).group(1))
               for name in ("used_cpu_sys", "used_cpu_user"))


def client_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measured(name, url, run):
    """Print name's decisions/s and the CPU each decision cost this process
    (all its threads) and redis-server, in µs: what the machine's other
    load does not change."""
    c0, s0 = client_cpu(), server_cpu(url)
    rate, n = run()
    c1, s1 = client_cpu(), server_cpu(url)
    print("%s %.0f decisions/s, CPU per decision: client %.1f us, "
          "server %.1f us" % (name, rate, (c1 - c0) * 1e6 / n,
                              (s1 - s0) * 1e6 / n))


def memory():
    """Python's allow("k") against the same C call looped in C, in the same
    process, alternating 9 rounds: the medians and their difference."""
    lim = drl.Limiter(drl.Store(), "fixed_window:1000000000/1h")
    allow, n, py, c = lim.allow, 200_000, [], []
    for _ in range(9):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            allow("k")
        py.append((time.perf_counter_ns() - t0) / n)
        c.append(lim._c_loop("k", n))
    py, c = sorted(py)[4], sorted(c)[4]
    print("memory python %.0f ns, C %.0f ns, binding %.0f ns/decision"
          % (py, c, py - c))


def threads(decide):
    """N decisions by THREADS threads over KEYS keys: decisions/s."""
    per = N // THREADS
    start = threading.Barrier(THREADS + 1)

    def worker(t):
        start.wait()
        for i in range(per):
            decide("bench:%d" % ((t * per + i) % KEYS))

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for t in pool:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in pool:
        t.join()
    n = per * THREADS
    return n / (time.perf_counter() - t0), n


def drl_threads(url):
    lim = drl.Limiter(drl.Store(url), SPEC, "bench:t:")
    measured("drl-threads", url, lambda: threads(lim.allow))


def drl_asyncio(url):
    lim = drl.Limiter(drl.Store(url), SPEC, "bench:a:")

    async def main():
        next_key = iter(range(N))

        async def flight():
            for i in next_key:
                await lim.allow_async("bench:%d" % (i % KEYS))
        await lim.allow_async("warm")
        t0 = time.perf_counter()
        await asyncio.gather(*[flight() for _ in range(IN_FLIGHT)])
        return N / (time.perf_counter() - t0), N
    measured("drl-asyncio", url, lambda: asyncio.run(main()))


def limits_threads(url):
    import limits
    from limits.storage import storage_from_string
    from limits.strategies import STRATEGIES
    storage = storage_from_string(url)
    strategy = STRATEGIES[os.environ.get("STRATEGY", "moving-window")](storage)
    item = limits.parse(LIMIT)
    name = os.environ.get("STRATEGY", "moving-window")  # keys of its own
    measured("limits-threads", url,
             lambda: threads(lambda key: strategy.hit(item, name, key)))


if __name__ == "__main__":
    mode = sys.argv[1]
    url = sys.argv[2] if len(sys.argv) > 2 else None
    {"memory": lambda: memory(), "drl-threads": lambda: drl_threads(url),
     "drl-asyncio": lambda: drl_asyncio(url),
     "limits-threads": lambda: limits_threads(url)}[mode]()
