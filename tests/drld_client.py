#!/usr/bin/env python3
"""Concurrent HTTP clients for tests/test_drld.sh (standard library only).

  drld_client.py share LIMIT_SPEC KEY PER_THREAD PORT [PORT...]
      8 threads, split evenly over the ports (each drld), each POSTs
      PER_THREAD /v1/check requests for KEY on one keep-alive connection.
      Prints "allowed=N denied=N errors=N".

  drld_client.py hammer PID CONFIG CONFIG_A CONFIG_B RELOADS PORT
      4 threads POST /v1/check (rule "r") in a loop while the main thread
      copies CONFIG_A or CONFIG_B over CONFIG and sends PID a SIGHUP,
      RELOADS times, each once drld counted the one before (signals that
      arrive together are one signal); the threads stop once they made
      100 requests or more and every reload was counted (each wait has a
      generous deadline, never a fixed nap standing in for progress).
      Prints "requests=N failures=N reloads=N first_failure=...". A
      failure is anything but a 200 with a JSON decision, or a connection
      error.

  drld_client.py trickle PORT N
      Slowloris: N connections each send a request's headers one byte
      every 0.5 s (never ending them), until drld has closed every one or
      60 s passed; meanwhile one GET /healthz (30 s deadline) tries.
      Prints "closed=N healthz=STATUS" (STATUS the HTTP status, or the
      error's name).
"""
import http.client
import json
import os
import shutil
import signal
import sys
import threading
import time


def post_check(conn, body):
    """POST body to /v1/check on conn; (status, decoded JSON or None)."""
    conn.request("POST", "/v1/check", body=json.dumps(body),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    try:
        return resp.status, json.loads(data)
    except ValueError:
        return resp.status, None


def share(spec, key, per_thread, ports):
    counts = {"allowed": 0, "denied": 0, "errors": 0}
    lock = threading.Lock()
    start = threading.Barrier(8)

    def worker(port):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        start.wait()
        mine = {"allowed": 0, "denied": 0, "errors": 0}
        for _ in range(per_thread):
            try:
                status, o = post_check(conn, {"key": key, "limit": spec})
            except (OSError, http.client.HTTPException):
                mine["errors"] += 1
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port,
                                                  timeout=30)
                continue
            if status != 200 or o is None:
                mine["errors"] += 1
            elif o["allowed"]:
                mine["allowed"] += 1
            else:
                mine["denied"] += 1
        conn.close()
        with lock:
            for k in counts:
                counts[k] += mine[k]

    threads = [threading.Thread(target=worker, args=(ports[i % len(ports)],))
               for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("allowed=%d denied=%d errors=%d" % (counts["allowed"],
                                              counts["denied"],
                                              counts["errors"]))


def reloads_ok(port):
    """drld_config_reloads_total{result="ok"} from /metrics, or -1."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    except (OSError, http.client.HTTPException):
        return -1
    finally:
        conn.close()
    for line in text.splitlines():
        if line.startswith('drld_config_reloads_total{result="ok"} '):
            return int(line.split()[1])
    return -1


def wait_until(cond, seconds=60):
    """Poll cond every 10 ms until it holds or `seconds` passed."""
    end = time.monotonic() + seconds
    while not cond() and time.monotonic() < end:
        time.sleep(0.01)
    return cond()


def hammer(pid, config, config_a, config_b, reloads, port):
    stop = threading.Event()
    lock = threading.Lock()
    stats = {"requests": 0, "failures": 0, "first": ""}

    def worker(n):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        i = 0
        while not stop.is_set():
            i += 1
            body = {"key": "hammer-%d-%d" % (n, i % 50), "rule": "r"}
            try:
                status, o = post_check(conn, body)
                bad = "" if status == 200 and o is not None and \
                    "allowed" in o else "status %d: %r" % (status, o)
            except (OSError, http.client.HTTPException) as e:
                bad = "connection: %r" % e
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port,
                                                  timeout=30)
            with lock:
                stats["requests"] += 1
                if bad:
                    stats["failures"] += 1
                    stats["first"] = stats["first"] or bad
        conn.close()

    def requests():
        with lock:
            return stats["requests"]

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    wait_until(lambda: requests() >= 10)
    done = 0
    for i in range(reloads):
        before = reloads_ok(port)
        shutil.copyfile(config_a if i % 2 == 0 else config_b, config)
        os.kill(pid, signal.SIGHUP)
        if wait_until(lambda: reloads_ok(port) > before):
            done += 1
    wait_until(lambda: requests() >= 100)
    stop.set()
    for t in threads:
        t.join()
    print("requests=%d failures=%d reloads=%d first_failure=%s" % (
        stats["requests"], stats["failures"], done, stats["first"] or "none"))


def trickle(port, n):
    """See the usage: N slowloris connections, then /healthz."""
    import socket
    conns = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.setblocking(False)
        conns.append(s)
    line = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 10000
    sent = 0
    closed = 0
    health = []

    def healthz():
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", "/healthz")
            health.append(str(c.getresponse().status))
            c.close()
        except (OSError, http.client.HTTPException) as e:
            health.append(type(e).__name__)

    asker = threading.Thread(target=healthz)
    asker.start()
    end = time.monotonic() + 60
    while (conns or not health) and time.monotonic() < end:
        for s in list(conns):
            try:
                gone = s.recv(4096) == b""
            except BlockingIOError:
                gone = False
            except OSError:
                gone = True
            if not gone:
                try:
                    s.send(line[sent:sent + 1])
                except BlockingIOError:
                    pass
                except OSError:
                    gone = True
            if gone:
                conns.remove(s)
                s.close()
                closed += 1
        sent = min(sent + 1, len(line) - 1)
        time.sleep(0.5)
    asker.join()
    for s in conns:
        s.close()
    print("closed=%d healthz=%s" % (closed, health[0]))


def main(argv):
    if len(argv) >= 6 and argv[1] == "share":
        share(argv[2], argv[3], int(argv[4]), [int(p) for p in argv[5:]])
    elif len(argv) == 8 and argv[1] == "hammer":
        hammer(int(argv[2]), argv[3], argv[4], argv[5], int(argv[6]),
               int(argv[7]))
    elif len(argv) == 4 and argv[1] == "trickle":
        trickle(int(argv[2]), int(argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
