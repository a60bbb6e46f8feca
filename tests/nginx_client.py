#!/usr/bin/env python3
"""Concurrent HTTP clients for tests/test_nginx.sh (standard library only).

  nginx_client.py burst N URL [URL...]
      N requests, all at once: N threads (each its own connection) wait on
      one barrier, then each GETs URL[i % len(URLs)]. Prints
      "200=A 429=B other=C" (other: any other status or an error).

  nginx_client.py load STOPFILE URL [URL...]
      4 threads GET the URLs round-robin in a loop, each on a new
      connection, until STOPFILE exists (and each made 20 requests at
      least), 120 s at most. Prints "requests=N 200=A 429=B other=C
      first_other=..." (an error's name or a status).
"""
import http.client
import os
import sys
import threading
import time
import urllib.parse


def get(url, timeout=30):
    """The status of GET url, or the name of the error."""
    u = urllib.parse.urlsplit(url)
    try:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        c.request("GET", (u.path or "/") + ("?" + u.query if u.query else ""))
        r = c.getresponse()
        r.read()
        c.close()
        return str(r.status)
    except (OSError, http.client.HTTPException) as e:
        return type(e).__name__


def tally(results):
    ok = sum(1 for s in results if s == "200")
    denied = sum(1 for s in results if s == "429")
    return ok, denied, len(results) - ok - denied


def burst(n, urls):
    barrier = threading.Barrier(n)
    results = [None] * n

    def one(i):
        barrier.wait()
        results[i] = get(urls[i % len(urls)])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok, denied, other = tally(results)
    print("200=%d 429=%d other=%d" % (ok, denied, other))
    if other:
        print("# other: %s" % sorted(set(s for s in results
                                           if s not in ("200", "429"))))


def load(stopfile, urls):
    results = []
    lock = threading.Lock()
    end = time.time() + 120

    def loop(k):
        i = 0
        while time.time() < end and (i < 20 or not os.path.exists(stopfile)):
            s = get(urls[(k + i) % len(urls)])
            with lock:
                results.append(s)
            i += 1

    threads = [threading.Thread(target=loop, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok, denied, other = tally(results)
    first = next((s for s in results if s not in ("200", "429")), "-")
    print("requests=%d 200=%d 429=%d other=%d first_other=%s" %
          (len(results), ok, denied, other, first))


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "burst":
        burst(int(sys.argv[2]), sys.argv[3:])
    elif len(sys.argv) >= 4 and sys.argv[1] == "load":
        load(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
