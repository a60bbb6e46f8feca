"""Fork: a child never uses its parent's connections; it reopens lazily
from the store's URI, and the parent's store keeps working."""
import os
import socket

import drl


def connections(port):
    """Clients connected to the redis-server at port (CLIENT LIST)."""
    with socket.create_connection(("127.0.0.1", port), 5) as s:
        s.sendall(b"CLIENT LIST\r\n")
        data = b""
        while not data.endswith(b"\r\n") or data.count(b"\r\n") < 2:
            data += s.recv(65536)
    return [line for line in data.decode().split("\n")[1:] if "id=" in line]


def in_child(fn):
    """Run fn() in a forked child; its exit status (0: fn returned True)."""
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if fn() else 1)
        except BaseException:
            os._exit(2)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_child_reopens_and_parent_is_untouched(redis_server):
    uri = "redis://127.0.0.1:%d?pipelines=0&pool=1" % redis_server.port
    store = drl.Store(uri)
    lim = drl.Limiter(store, "fixed_window:5/1h", "fork:")
    key = "k%d" % os.getpid()
    assert lim.allow(key).remaining == 4
    before = len(connections(redis_server.port))

    def child():
        r = lim.allow(key)  # shared limit, through a new connection
        return (r.remaining == 3 and store.stats()["decisions"] == 1
                and len(connections(redis_server.port)) == before + 1)

    assert in_child(child) == 0
    assert lim.allow(key).remaining == 2  # the parent's store still works
    assert store.stats()["decisions"] == 2


def test_child_of_memory_store_starts_empty():
    """memory:// is per process: a child reopens an empty one."""
    lim = drl.Limiter(drl.Store(), "fixed_window:1/1h")
    assert lim.allow("k")
    assert in_child(lambda: lim.allow("k").allowed) == 0
    assert not lim.allow("k")


def test_child_can_close_without_touching_the_parent(redis_server):
    store = drl.Store("redis://127.0.0.1:%d" % redis_server.port)
    lim = drl.Limiter(store, "gcra:5/1h", "fork2:")
    assert lim.allow("k")

    def child():
        store.close()  # the parent's handles: leaked, not freed
        return store.closed
    assert in_child(child) == 0
    assert lim.allow("k")


def test_child_threads_reopen_once(redis_server):
    """Eight threads of a child use the store at once: one reopen, so the
    child's store counts all eight decisions."""
    import threading
    store = drl.Store("redis://127.0.0.1:%d" % redis_server.port)
    lim = drl.Limiter(store, "fixed_window:100/1h", "fork3:")
    assert lim.allow("k")

    def child():
        start = threading.Barrier(8)

        def one():
            start.wait()
            lim.allow("k")
        threads = [threading.Thread(target=one) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return store.stats()["decisions"] == 8
    assert in_child(child) == 0
