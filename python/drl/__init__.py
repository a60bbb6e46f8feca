"""libdrl's rate-limit decisions in-process (docs/python.md).

    store = drl.Store("redis://127.0.0.1:6379")
    limiter = drl.Limiter(store, "gcra:100/1m,burst=20", prefix="app:")
    r = limiter.allow("user42")            # r.allowed, r.retry_after_us, ...
    r = await limiter.allow_async("user42")  # on the running asyncio loop

Every libdrl error is a drl.Error subclass, one per DRL_E* code (bad
input: drl.InvalidError, also a ValueError; a key of the wrong type or a
cost that is not an int: TypeError).
"""
from . import _drl, aio
from ._drl import (  # noqa: F401
    LIBDRL_VERSION, NEVER, KEY_MAX, LIMIT_MAX, PATH_STORE, PATH_LOCAL,
    PATH_FAIL_OPEN, PATH_FAIL_CLOSED, PATH_NEAR, Store, Result, now_us,
    Error, InvalidError, NoMemoryError, StoreError, TimedOutError,
    ConflictError, NotSupportedError, CorruptError, RangeError, InternalError,
    UnavailableError, CanceledError, BusyError)


class Limiter(_drl.Limiter):
    """Limiter(store, spec, prefix=None): a limit or a policy on a store.

    allow(key, cost=1), allow_at(key, cost, now_us), reset(key) and
    reset_at(key, now_us) are the C calls, the GIL released during each.
    """

    __slots__ = ()

    async def allow_async(self, key, cost=1):
        """Decide on the running asyncio loop, without a thread per call:
        the loop watches the async context's descriptor (drl.aio)."""
        return await aio.allow(self, key, cost)

