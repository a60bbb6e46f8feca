"""asyncio: decisions on the running loop through the async context's
descriptor; a stalled Redis never blocks the loop."""
import asyncio
import os
import signal
import time

import pytest

import drl
from conftest import pause


def test_memory_decisions_in_order():
    lim = drl.Limiter(drl.Store(), "gcra:5/1h")

    async def main():
        return await asyncio.gather(*[lim.allow_async("k") for _ in range(8)])
    assert [r.allowed for r in asyncio.run(main())] == [True] * 5 + [False] * 3


def test_bad_input_raises_at_once():
    lim = drl.Limiter(drl.Store(), "gcra:5/1h")

    async def main():
        with pytest.raises(TypeError):
            await lim.allow_async(5)
        with pytest.raises(drl.InvalidError, match="negative"):
            await lim.allow_async("k", -1)
    asyncio.run(main())


def test_redis_many_in_flight_is_exact(redis_server):
    store = drl.Store("redis://127.0.0.1:%d" % redis_server.port)
    lim = drl.Limiter(store, "fixed_window:50/1h", "aio:%d:" % os.getpid())
    assert lim.async_path()[0]  # no worker thread: the loop reads replies

    async def main():
        return await asyncio.gather(*[lim.allow_async("k")
                                      for _ in range(200)])
    assert sum(r.allowed for r in asyncio.run(main())) == 50


async def stalled_call(limiter, server):
    """Stop the server, make one call, count the loop's ticks meanwhile."""
    ticks = 0
    stop = asyncio.Event()

    async def counter():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    task = asyncio.create_task(counter())
    await asyncio.sleep(0)
    pause(server.pid)
    t0 = time.monotonic()
    try:
        outcome = await limiter.allow_async("k")
    except drl.Error as e:
        outcome = e
    elapsed = time.monotonic() - t0
    os.kill(server.pid, signal.SIGCONT)
    stop.set()
    await task
    return outcome, elapsed, ticks


@pytest.mark.parametrize("tx", ["auto", "watch"])
def test_stalled_redis_never_blocks_the_loop(own_redis, tx):
    """tx=auto: the loop's own connection; tx=watch: a worker thread."""
    uri = ("redis://127.0.0.1:%d?tx=%s&timeout_ms=500&breaker_failures=0"
           % (own_redis.port, tx))
    lim = drl.Limiter(drl.Store(uri), "fixed_window:10/1s;on_error=deny")
    r, elapsed, ticks = asyncio.run(stalled_call(lim, own_redis))
    assert isinstance(r, drl.Result), r
    assert not r.allowed and r.path == drl.PATH_FAIL_CLOSED
    assert elapsed >= 0.45  # failed at timeout_ms, not before
    assert ticks >= 3  # the counter ran while the call waited

    async def after():  # the server is back: the store decides again
        return await lim.allow_async("k")
    assert asyncio.run(after()).path == drl.PATH_STORE


def test_stalled_redis_without_on_error_raises(own_redis):
    uri = ("redis://127.0.0.1:%d?timeout_ms=300&breaker_failures=0"
           % own_redis.port)
    lim = drl.Limiter(drl.Store(uri), "gcra:10/1s")
    e, elapsed, ticks = asyncio.run(stalled_call(lim, own_redis))
    assert isinstance(e, (drl.TimedOutError, drl.StoreError)), e
    assert elapsed >= 0.25 and ticks >= 3


def test_forked_child_gets_its_own_context(redis_server):
    """A child (a gunicorn worker) runs a loop of its own: a new async
    context with its own connection; the parent's is left alone."""
    lim = drl.Limiter(drl.Store("redis://127.0.0.1:%d" % redis_server.port),
                      "fixed_window:3/1h", "aiofork:%d:" % os.getpid())
    assert asyncio.run(lim.allow_async("k")).remaining == 2
    loop = asyncio.new_event_loop()
    assert loop.run_until_complete(lim.allow_async("k")).remaining == 1
    pid = os.fork()
    if pid == 0:
        try:
            r = asyncio.run(lim.allow_async("k"))
            with pytest.raises(RuntimeError, match="before fork"):
                loop.run_until_complete(lim.allow_async("k"))
            os._exit(0 if r.remaining == 0 else 1)
        except BaseException:
            os._exit(2)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    assert not loop.run_until_complete(lim.allow_async("k"))
    loop.close()
