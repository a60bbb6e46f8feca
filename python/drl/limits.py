"""libdrl as a storage and strategies of the limits package (docs/python.md).

`import drl.limits` registers, through limits' own extension points:
- the storage schemes "drl+" + any libdrl store scheme (drl+memory://,
  drl+redis://host:6379, drl+redis-cluster://..., drl+memcached://...):
  a Storage subclass with STORAGE_SCHEME (limits' StorageRegistry);
- the strategies "drl-" + any libdrl algorithm (drl-fixed_window,
  drl-gcra, drl-token_bucket, ..., also spelled with "-": drl-fixed-window)
  in limits.strategies.STRATEGIES.

A drl strategy turns each RateLimitItem ("10/minute") into the libdrl spec
"ALGORITHM:10/60s" and decides with one libdrl call: hit() is allow(key,
cost), test() a cost-0 decision, get_window_stats() the decision this
thread just made for that item and key (no second round trip; a cost-0
decision when there is none), clear() drl's reset(). Differences from
limits' own strategies: windows are aligned to the Unix epoch, a denied hit
consumes nothing, and the store keys are libdrl's (docs/python.md).

Checked against limits 2.8.0 (Debian's, tested) and 5.8 (upstream source,
read): Storage(uri, **options) with STORAGE_SCHEME, STRATEGIES, and
WindowStats where it exists (a plain tuple before limits 3).
"""
import threading

import limits.strategies
from limits.errors import ConfigurationError
from limits.storage import Storage

import drl

try:
    from limits.util import WindowStats
except ImportError:  # limits < 3: get_window_stats returns a tuple
    def WindowStats(reset_time, remaining):
        return (reset_time, remaining)

ALGORITHMS = ("fixed_window", "sliding_window", "subwindow", "token_bucket",
              "gcra", "sliding_log")
STORE_SCHEMES = ("memory", "redis", "rediss", "redis+unix", "redis-cluster",
                 "rediss-cluster", "redis-sentinel", "rediss-sentinel",
                 "memcached", "memcached+unix")


class DrlStorage(Storage):
    """A libdrl store under limits' storage API: "drl+" + its URI.

    Only the drl-* strategies can use it: limits' own strategies need
    counters (incr/get) that libdrl does not expose, and raise
    ConfigurationError naming the drl-* strategies.
    """

    STORAGE_SCHEME = ["drl+" + s for s in STORE_SCHEMES]

    def __init__(self, uri, wrap_exceptions=False, **options):
        super().__init__(uri, **options)
        self.wrap_exceptions = wrap_exceptions
        self.store = drl.Store(uri[len("drl+"):])
        self._limiters = {}  # libdrl spec -> drl.Limiter
        self._last = threading.local()  # (spec, key) -> (result, at_us)

    @property
    def base_exceptions(self):
        return drl.Error

    def limiter(self, spec):
        """The drl.Limiter for spec (made once, shared by threads)."""
        lim = self._limiters.get(spec)
        if lim is None:
            lim = self._limiters.setdefault(
                spec, drl.Limiter(self.store, spec))
        return lim

    def decide(self, spec, key, cost):
        """One decision, remembered for get_window_stats on this thread."""
        at_us = drl.now_us()  # the decision's time, for the reset time
        result = self.limiter(spec).allow(key, cost)
        last = self._last.__dict__
        if len(last) > 1024:
            last.clear()
        last[(spec, key)] = last[None] = (result, at_us)
        return result

    def latest(self):
        """This thread's latest (drl.Result, decision time in µs), or None:
        for logs and headers of an application's own."""
        return self._last.__dict__.get(None)

    def last(self, spec, key):
        """This thread's latest (result, at_us) for spec and key, or None."""
        return self._last.__dict__.get((spec, key))

    def _counters(self, *args, **kwargs):
        raise ConfigurationError(
            "drl+ storage decides with libdrl's own strategies: use "
            "strategy drl-<algorithm> (" + ", ".join(
                "drl-" + a for a in ALGORITHMS) + ")")

    incr = get = get_expiry = _counters

    def check(self):
        try:
            self.decide("fixed_window:1/1s", "drl.limits:check", 0)
            return True
        except drl.Error:
            return False

    def reset(self):
        """limits' "clear every limit": libdrl has no such call; None."""
        return None

    def clear(self, key):
        """Forget key on every limiter this storage made."""
        for lim in list(self._limiters.values()):
            lim.reset(key)


class DrlStrategy(limits.strategies.RateLimiter):
    """Base of the drl-<algorithm> strategies (ALGORITHM names one)."""

    ALGORITHM = None

    def __init__(self, storage):
        if not isinstance(storage, DrlStorage):
            raise ConfigurationError(
                "strategy drl-%s needs a drl+ storage URI (drl+redis://..., "
                "drl+memory://), not %s" % (self.ALGORITHM,
                                             type(storage).__name__))
        super().__init__(storage)
        self.drl = storage  # a strong reference: limits keeps a weak one

    def spec(self, item):
        return "%s:%d/%ds" % (self.ALGORITHM, item.amount, item.get_expiry())

    def hit(self, item, *identifiers, cost=1):
        return self.drl.decide(self.spec(item), item.key_for(*identifiers),
                               cost).allowed

    def test(self, item, *identifiers, cost=1):
        r = self.drl.decide(self.spec(item), item.key_for(*identifiers), 0)
        return r.remaining >= cost

    def get_window_stats(self, item, *identifiers):
        """(reset time, remaining): the reset time is when the limit is
        back to full quota, or, after a denial, when the request can be
        allowed (seconds since the epoch, a float); from the decision this
        thread just made for the item and key."""
        spec, key = self.spec(item), item.key_for(*identifiers)
        last = self.drl.last(spec, key)
        if last is None:
            self.drl.decide(spec, key, 0)
            last = self.drl.last(spec, key)
        r, at_us = last
        wait_us = r.reset_after_us if r.allowed else max(r.retry_after_us, 0)
        return WindowStats((at_us + wait_us) / 1e6, r.remaining)

    def clear(self, item, *identifiers):
        self.drl.limiter(self.spec(item)).reset(item.key_for(*identifiers))


for _alg in ALGORITHMS:
    _cls = type("Drl_" + _alg, (DrlStrategy,), {"ALGORITHM": _alg})
    limits.strategies.STRATEGIES["drl-" + _alg] = _cls
    limits.strategies.STRATEGIES["drl-" + _alg.replace("_", "-")] = _cls
