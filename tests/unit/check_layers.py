#!/usr/bin/env python3
"""
The Redis store's layer table (backends/redis/internal.h) obeyed: no file
of backends/redis/ calls a function defined in, or includes the header of,
a file of a higher layer, and no two files call each other.

The table is read from internal.h's top comment (rows "N  file.c, ...");
a function's file is the one that defines it without `static`. Headers
map to the file of their name (redis.h: store.c; internal.h and codes.h
are every layer's). Prints TAP; exits 1 on a violation.
"""
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..", "..", "backends", "redis")
if len(sys.argv) > 1:
    root = sys.argv[1]


def layer_table(text):
    head = re.search(r"/\*(.*?)\*/", text, re.S).group(1)
    layer, table = None, {}
    for line in head.splitlines():
        m = re.match(r"\s*\*\s+(\d+)\s+(\S.*)$", line)
        if m:
            layer = int(m.group(1))
            rest = m.group(2)
        else:
            m = re.match(r"\s*\*\s{10,}(\w+\.c\b.*)$", line)
            if not m or layer is None:
                continue
            rest = m.group(1)
        files = re.match(r"((?:\w+\.c(?:,\s*)?)+)", rest)
        if files:
            for f in re.findall(r"\w+\.c", files.group(1)):
                table[f] = layer
    return table


def main():
    table = layer_table(open(os.path.join(root, "internal.h")).read())
    on_disk = sorted(f for f in os.listdir(root) if f.endswith(".c"))
    n, bad = 0, 0

    def check(ok, what):
        nonlocal n, bad
        n += 1
        bad += not ok
        print(("ok" if ok else "not ok") + " %d - %s" % (n, what))

    missing = [f for f in on_disk if f not in table]
    check(not missing and len(table) >= 10,
          "every file of backends/redis/ has a layer in internal.h's "
          "table (%d files; missing: %s)" % (len(table), missing or "none"))
    src = {f: open(os.path.join(root, f)).read() for f in on_disk}
    defs = {}
    for f, t in src.items():
        for m in re.finditer(r"^(?!static)[A-Za-z_][\w \*]*?\b(drl__\w+)\(",
                             t, re.M):
            defs.setdefault(m.group(1), f)
    calls = set()
    for f, t in src.items():
        body = re.sub(r"/\*.*?\*/", "", t, flags=re.S)
        for m in re.finditer(r"\b(drl__\w+)\s*\(", body):
            g = defs.get(m.group(1))
            if g and g != f:
                calls.add((f, g, m.group(1)))
    up = sorted("%s -> %s (%s)" % c for c in calls
                if table.get(c[1], 0) > table.get(c[0], 0))
    check(not up, "no call goes to a higher layer (%d cross-file calls)%s"
          % (len(calls), ": " + "; ".join(up) if up else ""))
    pairs = {(f, g) for f, g, _ in calls}
    circles = sorted("%s <-> %s" % (f, g) for f, g in pairs
                     if (g, f) in pairs and f < g)
    check(not circles, "no two files call each other%s"
          % (": " + "; ".join(circles) if circles else ""))
    header_of = {"redis.h": "store.c"}
    upinc = []
    for f, t in src.items():
        for h in re.findall(r'#include "(\w+\.h)"', t):
            g = header_of.get(h, h[:-2] + ".c")
            if g in table and table[g] > table.get(f, 0):
                upinc.append("%s includes %s" % (f, h))
    check(not upinc, "no file includes a higher layer's header%s"
          % (": " + "; ".join(upinc) if upinc else ""))
    print("1..%d" % n)
    return 1 if bad else 0


sys.exit(main())
