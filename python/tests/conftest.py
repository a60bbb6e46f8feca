"""Servers for the Python tests: redis-server, memcached and a 3-master Redis
Cluster of their own, on free loopback ports, each stopped by its pid at
the end (as tests/fixtures/server_fixture.c does for the C tests). A missing
server binary skips its tests, except under CI=true, where it fails them.
"""
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

READY_S = 20  # waits for an event: generous on a loaded machine


def all_stopped(pid):
    """Whether every thread of process pid is stopped (state T or t in
    /proc/PID/task/TID/stat)."""
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/stat" % (pid, tid), "rb") as f:
                stat = f.read()
            state = stat[stat.rindex(b")") + 2:][:1]
            if state not in (b"T", b"t"):
                return False
    except (OSError, ValueError):
        return False
    return True


def pause(pid):
    """SIGSTOP pid and return once every thread of it is stopped: a signal
    is delivered asynchronously, so a thread running on another core
    (memcached's workers, Redis's I/O threads) could still answer a request
    sent right after kill()."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 60
    while not all_stopped(pid):
        if time.monotonic() > deadline:
            raise AssertionError("process %d did not stop within 60 s" % pid)
        time.sleep(0.001)


def binary(name):
    path = shutil.which(name) or next(
        (p for p in ("/usr/sbin/" + name, "/usr/bin/" + name)
         if os.access(p, os.X_OK)), None)
    if path is None:
        message = name + " is not installed (scripts/deps.sh)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def bindable(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return s.getsockname()[1]
        except OSError:
            return None


def free_port(also_bus=False):
    """A port free on 127.0.0.1 now (and port+10000 too, for a cluster's
    bus); a race with other processes is retried by Server."""
    while True:
        port = bindable(0)
        if not also_bus or (port + 10000 <= 65535 and bindable(port + 10000)):
            return port


def command(port, *args, timeout=5):
    """One Redis command over a fresh connection; the reply as text."""
    out = subprocess.run(["redis-cli", "-p", str(port), *map(str, args)],
                         capture_output=True, text=True, timeout=timeout)
    return out.stdout


def die_with_parent():
    """In the server's process before exec: SIGKILL when the test process
    dies (PR_SET_PDEATHSIG), so a killed pytest leaves no server behind."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


class Server:
    """One server process on 127.0.0.1:port, logging into its own dir."""

    def __init__(self, argv_of_port, cluster=False):
        self.dir = tempfile.mkdtemp(prefix="drl-py-")
        for attempt in range(5):
            self.port = free_port(also_bus=cluster)
            log = open(os.path.join(self.dir, "server.log"), "w")
            self.proc = subprocess.Popen(argv_of_port(self.port, self.dir),
                                         stdout=log, stderr=log,
                                         cwd=self.dir,
                                         preexec_fn=die_with_parent)
            log.close()
            if self._wait_ready():
                return
            self.stop()
        raise RuntimeError("server did not start: " + self.log())

    def _wait_ready(self):
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                return True
            except OSError:
                time.sleep(0.02)
        return False

    def log(self):
        with open(os.path.join(self.dir, "server.log")) as f:
            return f.read()[-4000:]

    @property
    def pid(self):
        return self.proc.pid

    @contextlib.contextmanager
    def stopped(self):
        """The server stopped (SIGSTOP) while the block runs, resumed
        (SIGCONT) after, however the block ends."""
        pause(self.proc.pid)
        try:
            yield
        finally:
            os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)  # if a test stopped it
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def redis_argv(extra=()):
    exe = binary("redis-server")
    return lambda port, d: [exe, "--port", str(port), "--bind", "127.0.0.1",
                            "--save", "", "--appendonly", "no", *extra]


def start_redis():
    return Server(redis_argv())


@pytest.fixture(scope="session")
def redis_server():
    s = start_redis()
    yield s
    s.stop()


@pytest.fixture
def own_redis():
    """A redis-server for one test alone (the ones that stall it)."""
    s = start_redis()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def memcached_server():
    exe = binary("memcached")
    s = Server(lambda port, d: [exe, "-l", "127.0.0.1", "-p", str(port),
                                "-U", "0", "-u", "root", "-m", "64"])
    yield s
    s.stop()


@pytest.fixture(scope="session")
def redis_cluster():
    """Three masters, no replicas; yields their ports once every node
    reports cluster_state:ok."""
    binary("redis-cli")
    argv = redis_argv(["--cluster-enabled", "yes",
                       "--cluster-config-file", "nodes.conf",
                       "--cluster-node-timeout", "1000",
                       "--cluster-announce-ip", "127.0.0.1"])
    nodes = []
    try:
        for _ in range(3):
            nodes.append(Server(argv, cluster=True))
        hosts = ["127.0.0.1:%d" % n.port for n in nodes]
        subprocess.run(["redis-cli", "--cluster", "create", *hosts,
                        "--cluster-replicas", "0", "--cluster-yes"],
                       check=True, capture_output=True, timeout=60)
        deadline = time.monotonic() + READY_S
        while not all("cluster_state:ok" in command(n.port, "CLUSTER", "INFO")
                      for n in nodes):
            assert time.monotonic() < deadline, "cluster did not converge"
            time.sleep(0.1)
        yield [n.port for n in nodes]
    finally:
        for n in nodes:
            n.stop()
