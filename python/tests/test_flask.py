"""A flask-limiter app under gunicorn with 4 workers, switched to libdrl by
two configuration strings: on every shared store it admits exactly the
limit, and Retry-After is libdrl's retry rounded up to a whole second."""
import email.utils
import http.client
import os
import subprocess
import sys
import threading
import time
import uuid

import pytest

from conftest import binary, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
LIMIT, REQUESTS, CLIENTS = 20, 60, 8


@pytest.fixture
def gunicorn():
    """start(storage, strategy) -> port of a gunicorn with 4 workers."""
    exe = binary("gunicorn")
    procs = []

    def start(storage, strategy):
        port = free_port()
        env = dict(os.environ, DRL_APP_STORAGE=storage,
                   DRL_APP_STRATEGY=strategy, DRL_APP_LIMIT="%d/day" % LIMIT,
                   DRL_APP_PREFIX=uuid.uuid4().hex,
                   PYTHONPATH=os.pathsep.join(
                       [HERE, os.environ.get("PYTHONPATH", "")]))
        p = subprocess.Popen([sys.executable, exe, "-w", "4", "-b",
                              "127.0.0.1:%d" % port, "--log-level",
                              "warning", "flask_app:app"], env=env)
        procs.append(p)
        deadline = time.monotonic() + 60
        while True:  # every worker answers once the app is imported
            assert p.poll() is None, "gunicorn exited"
            assert time.monotonic() < deadline, "gunicorn did not start"
            try:
                get(port, "/nope")
                return port
            except OSError:
                time.sleep(0.1)

    yield start
    for p in procs:
        p.terminate()
        p.wait(30)


def get(port, path="/"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("GET", path)
        r = c.getresponse()
        r.read()
        return r.status, dict(r.getheaders())
    finally:
        c.close()


def hammer(port):
    """REQUESTS requests from CLIENTS threads: the responses."""
    out, lock = [], threading.Lock()

    def client(n):
        for _ in range(n):
            r = get(port)
            with lock:
                out.append(r)

    threads = [threading.Thread(target=client, args=(REQUESTS // CLIENTS,))
               for _ in range(CLIENTS)]
    threads.append(threading.Thread(target=client,
                                    args=(REQUESTS % CLIENTS,)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def stores(request):
    kind, strategy = request.param
    if kind == "cluster":
        ports = request.getfixturevalue("redis_cluster")
        return "drl+redis-cluster://" + ",".join(
            "127.0.0.1:%d" % p for p in ports), strategy
    server = request.getfixturevalue(kind + "_server")
    return "drl+%s://127.0.0.1:%d" % (kind, server.port), strategy


@pytest.fixture(params=[("redis", "drl-gcra"),
                        ("memcached", "drl-token_bucket"),
                        ("cluster", "drl-gcra")])
def config(request):
    return stores(request)


def test_gunicorn_admits_exactly_the_limit(gunicorn, config):
    port = gunicorn(*config)
    responses = hammer(port)
    assert [s for s, _ in responses].count(200) == LIMIT
    assert [s for s, _ in responses].count(429) == REQUESTS - LIMIT
    for status, headers in responses:
        if status != 429:
            continue
        # Retry-After (http-date): the first whole second after the
        # instant libdrl said the request could be allowed.
        allowed_at = (int(headers["X-Drl-At-Us"]) +
                      int(headers["X-Drl-Retry-Us"])) / 1e6
        retry = email.utils.parsedate_to_datetime(headers["Retry-After"])
        assert retry.timestamp() == int(allowed_at) + 1
        assert int(headers["X-RateLimit-Remaining"]) == 0
