"""The synchronous binding: results, keys, errors, bad input, close, reset."""
import os
import subprocess
import sys
import threading

import pytest

import drl

T0 = 1_800_000_000_000_000  # a fixed decision time (µs): no clock involved


@pytest.fixture
def store():
    with drl.Store() as s:
        yield s


def test_result_has_every_field_of_drl_result(store):
    lim = drl.Limiter(store, "token_bucket:2/1s")
    first = lim.allow_at("k", 1, T0)
    assert first and first.allowed and first.would_allow
    assert (first.limit, first.remaining, first.retry_after_us) == (2, 1, 0)
    assert first.reset_after_us == 500_000
    assert (first.limit_index, first.path) == (0, drl.PATH_STORE)
    lim.allow_at("k", 1, T0)
    denied = lim.allow_at("k", 1, T0)
    assert not denied and denied.retry_after_us == 500_000
    assert lim.allow_at("k", 3, T0).retry_after_us == drl.NEVER
    assert "allowed=False" in repr(denied)


def test_str_and_bytes_name_the_same_key(store):
    lim = drl.Limiter(store, "fixed_window:2/1h")
    assert lim.allow_at("ключ", 1, T0).remaining == 1
    assert lim.allow_at("ключ".encode(), 1, T0).remaining == 0
    assert not lim.allow_at(b"\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87", 1, T0)


def test_policy_reports_the_limit_that_decided(store):
    lim = drl.Limiter(store, "fixed_window:5/1h;fixed_window:1/1s", "p:")
    assert lim.allow_at("k", 1, T0)
    denied = lim.allow_at("k", 1, T0)
    assert not denied and denied.limit_index == 1 and denied.limit == 1
    assert (lim.spec, lim.prefix, lim.store) == (
        "fixed_window:5/1h;fixed_window:1/1s", "p:", store)


def test_reset_forgets_the_key(store):
    lim = drl.Limiter(store, "sliding_log:1/1h")
    assert lim.allow_at("k", 1, T0) and not lim.allow_at("k", 1, T0)
    lim.reset_at("k", T0)
    assert lim.allow_at("k", 1, T0)
    lim.reset("k")
    assert lim.allow("k")


def test_threads_share_one_limit(store):
    lim = drl.Limiter(store, "fixed_window:1000/1h")
    admitted = []

    def worker():
        admitted.append(sum(lim.allow_at("k", 1, T0).allowed
                            for _ in range(300)))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(admitted) == 1000
    assert store.stats()["decisions"] == 2400


BAD_INPUT = [
    (lambda l: l.allow("k", -1), drl.InvalidError, "cost -1 is negative"),
    (lambda l: l.allow("k", 1.5), TypeError, "cost must be an int"),
    (lambda l: l.allow("k", 2.0), TypeError, "cost must be an int"),
    (lambda l: l.allow("k", True), TypeError, "cost must be an int"),
    (lambda l: l.allow("k", 2 ** 63), drl.InvalidError, "out of range"),
    (lambda l: l.allow("k", -2 ** 80), drl.InvalidError, "out of range"),
    (lambda l: l.allow(42), TypeError, "key must be str or bytes"),
    (lambda l: l.allow(None), TypeError, "key must be str or bytes"),
    (lambda l: l.allow(bytearray(b"k")), TypeError, "str or bytes"),
    (lambda l: l.allow(""), drl.InvalidError, "key length 0"),
    (lambda l: l.allow(b"x" * (drl.KEY_MAX + 1)), drl.InvalidError,
     "key length"),
    (lambda l: l.allow("\ud800"), UnicodeEncodeError, "surrogate"),
    (lambda l: l.allow_at("k", 1, -5), drl.InvalidError, ""),
    (lambda l: l.allow(), TypeError, "missing key"),
    (lambda l: l.allow("k", cost=1, weight=2), TypeError, "'weight'"),
    (lambda l: drl.Store("bogus://x"), drl.InvalidError,
     'unknown store scheme "bogus"'),
    (lambda l: drl.Store("redis://127.0.0.1:1?tx=nope"), drl.InvalidError,
     "tx"),
    (lambda l: drl.Limiter(l.store, "token_bucket:0/1s"), drl.InvalidError,
     "token_bucket:0/1s"),
    (lambda l: drl.Limiter(l.store, "nope:1/1s"), drl.InvalidError,
     'unknown algorithm "nope"'),
    (lambda l: drl.Limiter(l.store, 7), TypeError, ""),
]


@pytest.mark.parametrize("call,exc,message", BAD_INPUT)
def test_bad_input_raises_the_documented_exception(store, call, exc, message):
    lim = drl.Limiter(store, "gcra:10/1s")
    with pytest.raises(exc) as info:
        call(lim)
    assert message in str(info.value)
    if isinstance(info.value, drl.Error):
        assert info.value.code == -1 and info.value.name == "DRL_EINVAL"
        assert isinstance(info.value, ValueError)
    assert lim.allow("still-works")


def test_every_error_code_has_its_class():
    names = ["InvalidError", "NoMemoryError", "StoreError", "TimedOutError",
             "ConflictError", "NotSupportedError", "CorruptError",
             "RangeError", "InternalError", "UnavailableError",
             "CanceledError", "BusyError"]
    for name in names:
        assert issubclass(getattr(drl, name), drl.Error)
    assert issubclass(drl.TimedOutError, TimeoutError)


def test_closed_store_raises_and_never_crashes():
    s = drl.Store()
    lim = drl.Limiter(s, "fixed_window:1/1s")
    s.close()
    assert s.closed
    for call in (lambda: lim.allow("k"), lambda: lim.reset("k"),
                 lambda: drl.Limiter(s, "gcra:1/1s"), s.stats):
        with pytest.raises(drl.InvalidError, match="closed"):
            call()
    s.close()  # twice is fine


def test_unreachable_redis_is_a_store_error():
    with pytest.raises(drl.Error) as info:
        drl.Store("redis://127.0.0.1:1?timeout_ms=200")
    assert info.value.code in (-3, -4, -10)
    assert "127.0.0.1:1" in str(info.value)


def test_redis_store_decides(redis_server):
    with drl.Store("redis://127.0.0.1:%d" % redis_server.port) as s:
        lim = drl.Limiter(s, "gcra:2/1h", "t_redis:")
        assert [bool(lim.allow("k")) for _ in range(3)] == [True, True, False]
        assert "redis://127.0.0.1" in repr(s)


def test_a_library_of_another_version_refuses_to_load(tmp_path):
    """The struct layout check: drl_version() from a shim preloaded in
    front of libdrl says another version; import raises ImportError."""
    shim = tmp_path / "shim.c"
    shim.write_text('const char *drl_version(void) { return "9.9.9"; }\n')
    so = tmp_path / "shim.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", so, shim], check=True)
    out = subprocess.run(
        [sys.executable, "-c", "import drl"], capture_output=True, text=True,
        env=dict(os.environ, LD_PRELOAD=str(so)))
    assert out.returncode == 1
    assert "ImportError: drl: this module was built against libdrl " \
        + drl.LIBDRL_VERSION + " but loaded libdrl 9.9.9" in out.stderr


def test_the_gil_is_released_during_a_store_call(own_redis):
    """While one thread waits on a stopped Redis, another runs Python."""
    import time
    s = drl.Store("redis://127.0.0.1:%d?timeout_ms=1000&breaker_failures=0"
                  % own_redis.port)
    lim = drl.Limiter(s, "fixed_window:10/1s")
    ticks = []
    with own_redis.stopped():
        t = threading.Thread(target=lambda: pytest.raises(drl.Error,
                                                          lim.allow, "k"))
        t.start()
        while t.is_alive():
            ticks.append(1)
            time.sleep(0.01)
        t.join()
    assert len(ticks) >= 3  # the waiting call held no GIL (0 or 1 if it did)


def test_close_during_a_call_is_busy_and_frees_nothing(own_redis):
    """close() while another thread waits inside a call: drl.BusyError;
    the call finishes on its store, and close() works afterwards."""
    import time
    s = drl.Store("redis://127.0.0.1:%d?timeout_ms=2000&breaker_failures=0"
                  % own_redis.port)
    lim = drl.Limiter(s, "fixed_window:10/1s")
    outcome = []
    with own_redis.stopped():
        t = threading.Thread(target=lambda: outcome.append(lim.allow("k")))
        t.start()
        deadline = time.monotonic() + 20
        while s.in_flight == 0:  # until the thread is inside the call
            assert time.monotonic() < deadline
            time.sleep(0.001)
        with pytest.raises(drl.BusyError, match="in flight"):
            s.close()
        assert not s.closed
    t.join()
    assert outcome and outcome[0].allowed  # the server answered once resumed
    s.close()
    assert s.closed
