"""Exactness across processes and threads: 4 processes x 8 threads on one
key admit exactly the limit, on every shared store. Every decision is at
one fixed time (allow_at), so the answer does not depend on how fast the
machine runs: no window edge, no refill, can fall inside the test."""
import os
import subprocess
import sys
import uuid

import pytest

LIMIT = 100
PROCS, THREADS, REQUESTS = 4, 8, 10  # 320 requests for 100 places
NOW_US = 1_800_000_000_000_000
WORKER = os.path.join(os.path.dirname(__file__), "exact_worker.py")
SPECS = ["fixed_window:%d/1h" % LIMIT, "gcra:%d/1h" % LIMIT,
         "sliding_log:%d/1h" % LIMIT]


def run(uri, spec):
    key = "exact-" + uuid.uuid4().hex
    procs = [subprocess.Popen(
        [sys.executable, WORKER, uri, spec, key, str(THREADS), str(REQUESTS),
         str(NOW_US)], stdout=subprocess.PIPE, text=True)
        for _ in range(PROCS)]
    outs = [p.communicate(timeout=120)[0].split(maxsplit=2) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    errors = [o for o in outs if o[1] != "0"]
    assert not errors, errors
    return sum(int(o[0]) for o in outs)


@pytest.mark.parametrize("tx", ["auto", "lua", "watch"])
@pytest.mark.parametrize("spec", SPECS)
def test_redis(redis_server, tx, spec):
    uri = "redis://127.0.0.1:%d?tx=%s" % (redis_server.port, tx)
    assert run(uri, spec) == LIMIT


@pytest.mark.parametrize("spec", SPECS)
def test_memcached(memcached_server, spec):
    assert run("memcached://127.0.0.1:%d" % memcached_server.port,
               spec) == LIMIT


@pytest.mark.parametrize("spec", SPECS)
def test_redis_cluster(redis_cluster, spec):
    seeds = ",".join("127.0.0.1:%d" % p for p in redis_cluster)
    assert run("redis-cluster://" + seeds, spec) == LIMIT
