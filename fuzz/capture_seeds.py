#!/usr/bin/env python3
"""Capture the reply fuzzers' seed corpora from real servers.

Usage: fuzz/capture_seeds.py BUILD_FUZZ_DIR

Starts redis-server and memcached on free loopback ports (persistence off),
then, for each configuration byte in CONFIGS, runs the fuzz target once on
an input holding only that byte, with FUZZ_PEER_SOCKET pointing at a
recording proxy (a unix socket relayed to the real server). The target
then makes exactly the decision it makes while fuzzing, against the real
server; the proxy writes down what the server answered, one piece per
request, and the seed is the configuration byte followed by those pieces
joined with the fuzzers' "#NEXT#" marker (fuzz/fuzz_peer.h). Each
configuration runs twice: a fresh key first, then the state the first run
left (and, for Redis, a script cache that already holds the twin).

Seeds go to fuzz/corpus/fuzz_{redis,memcached}_reply/cap-<cfg>-<run>.
Everything is bounded: servers are stopped (by pid) at exit, each run has a
time limit.
"""
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

MARK = b"#NEXT#"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Redis: bit 0 tx=watch, bit 1 clock=server, bits 2-4 spec, bit 6 batch.
REDIS = [tx | clock << 1 | spec << 2
         for tx in (0, 1) for clock in (0, 1) for spec in range(8)]
REDIS += [spec << 2 | 1 << 6 for spec in range(8)]        # lua batches
REDIS += [1 << 5, 1 | 1 << 5, 3 << 2 | 1 << 5]             # peeks
# memcached: bits 0-2 spec, bit 3 peek, bit 4 batch.
MEMCACHED = list(range(8)) + [spec | 1 << 4 for spec in (0, 3)] + [1 << 3]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc):
    for _ in range(500):
        if proc.poll() is not None:
            sys.exit("capture: server exited at startup")
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            return
        except OSError:
            time.sleep(0.01)
    sys.exit("capture: server did not start")


class Recorder:
    """A unix socket relayed to 127.0.0.1:port; per connection, the
    server's bytes cut into one piece per client request."""

    def __init__(self, path, port):
        self.port = port
        self.conns = []
        self.lsock = socket.socket(socket.AF_UNIX)
        self.lsock.bind(path)
        self.lsock.listen(8)
        self.lsock.settimeout(0.2)
        self.stop = False
        self.thread = threading.Thread(target=self.accept, daemon=True)
        self.thread.start()

    def accept(self):
        while not self.stop:
            try:
                c, _ = self.lsock.accept()
            except socket.timeout:
                continue
            pieces = []
            self.conns.append(pieces)
            threading.Thread(target=self.relay, args=(c, pieces),
                             daemon=True).start()

    def relay(self, c, pieces):
        r = socket.create_connection(("127.0.0.1", self.port))
        new_request = True
        deadline = time.time() + 10
        while time.time() < deadline:
            ready, _, _ = select.select([c, r], [], [], 0.2)
            data = b""
            for s in ready:
                try:
                    data = s.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    break
                if s is c:
                    r.sendall(data)
                    new_request = True
                else:
                    c.sendall(data)
                    if new_request:
                        pieces.append(b"")
                        new_request = False
                    pieces[-1] += data
            if ready and not data:
                break
        c.close()
        r.close()

    def close(self):
        self.stop = True
        self.thread.join()
        self.lsock.close()


def capture(target, cfgs, port, build, out, which_conn, prefix):
    os.makedirs(out, exist_ok=True)
    for cfg in cfgs:
        for run in (1, 2):
            d = tempfile.mkdtemp(prefix="drl-cap-")
            try:
                rec = Recorder(os.path.join(d, "s.sock"), port)
                inp = os.path.join(d, "in")
                with open(inp, "wb") as f:
                    f.write(bytes([cfg]))
                env = dict(os.environ, FUZZ_PEER_SOCKET=rec.lsock.getsockname())
                subprocess.run([os.path.join(build, "fuzz", target), inp],
                               env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=60,
                               check=True)
                time.sleep(0.05)
                rec.close()
                pieces = rec.conns[which_conn] if rec.conns else []
                name = "%s-%02x-%d" % (prefix, cfg, run)
                with open(os.path.join(out, name), "wb") as f:
                    f.write(bytes([cfg]) + MARK.join(pieces))
            finally:
                shutil.rmtree(d, ignore_errors=True)


def start(argv):
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    procs = []
    rtmp = tempfile.mkdtemp(prefix="drl-cap-redis-")
    try:
        rport, mport = free_port(), free_port()
        procs.append(start(["redis-server", "--port", str(rport), "--bind",
                            "127.0.0.1", "--save", "", "--appendonly", "no",
                            "--dir", rtmp]))
        wait_port(rport, procs[-1])
        mc = ["memcached", "-p", str(mport), "-l", "127.0.0.1", "-U", "0"]
        if os.geteuid() == 0:
            mc += ["-u", "root"]
        procs.append(start(mc))
        wait_port(mport, procs[-1])
        corpus = os.path.join(ROOT, "fuzz", "corpus")
        capture("fuzz_redis_reply", REDIS, rport, build,
                os.path.join(corpus, "fuzz_redis_reply"), 0, "cap")
        # memcached: connection 0 is drl_store_open's probe.
        capture("fuzz_memcached_reply", MEMCACHED, mport, build,
                os.path.join(corpus, "fuzz_memcached_reply"), -1, "cap")
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(rtmp, ignore_errors=True)


if __name__ == "__main__":
    main()
