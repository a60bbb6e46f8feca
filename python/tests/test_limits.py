"""drl.limits: libdrl behind limits' storage schemes and strategies."""
import time

import limits
import pytest
from limits.errors import ConfigurationError
from limits.storage import storage_from_string
from limits.strategies import STRATEGIES

import drl
import drl.limits

ALGORITHMS = ["fixed_window", "sliding_window", "subwindow", "token_bucket",
              "gcra", "sliding_log"]


@pytest.fixture(params=["memory", "redis", "memcached"])
def storage_uri(request):
    if request.param == "memory":
        return "drl+memory://"
    server = request.getfixturevalue(request.param + "_server")
    return "drl+%s://127.0.0.1:%d" % (request.param, server.port)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_hit_test_stats_clear(storage_uri, algorithm):
    storage = storage_from_string(storage_uri)
    assert isinstance(storage, drl.limits.DrlStorage) and storage.check()
    strategy = STRATEGIES["drl-" + algorithm](storage)
    assert STRATEGIES["drl-" + algorithm.replace("_", "-")] is type(strategy)
    item = limits.parse("3/hour")
    who = ("user-%s-%f" % (algorithm, time.time()), "scope")
    assert strategy.test(item, *who)
    assert [strategy.hit(item, *who) for _ in range(4)] == [True] * 3 + [False]
    assert not strategy.test(item, *who)
    decisions = storage.store.stats()["decisions"]
    reset, remaining = strategy.get_window_stats(item, *who)
    assert storage.store.stats()["decisions"] == decisions  # no round trip
    # sliding_window: full again two periods after the last hit
    assert remaining == 0 and time.time() < reset <= time.time() + 7200
    strategy.clear(item, *who)
    assert strategy.hit(item, *who, cost=3) and not strategy.hit(item, *who)
    storage.clear(item.key_for(*who))
    assert strategy.hit(item, *who)


def test_denials_consume_nothing():
    storage = storage_from_string("drl+memory://")
    strategy = STRATEGIES["drl-fixed_window"](storage)
    item = limits.parse("2/day")
    assert strategy.hit(item, "k", cost=2)
    assert not strategy.hit(item, "k", cost=5)
    assert strategy.get_window_stats(item, "k")[1] == 0


def test_drl_strategy_needs_drl_storage():
    with pytest.raises(ConfigurationError, match="drl\\+ storage"):
        STRATEGIES["drl-gcra"](storage_from_string("memory://"))


def test_limits_own_strategy_on_drl_storage_names_the_fix():
    storage = storage_from_string("drl+memory://")  # limits holds a weakref
    strategy = STRATEGIES["fixed-window"](storage)
    with pytest.raises(ConfigurationError, match="drl-gcra"):
        strategy.hit(limits.parse("1/second"), "k")


def test_bad_store_uri_raises_the_library_error():
    with pytest.raises(drl.InvalidError, match="tx"):
        storage_from_string("drl+redis://127.0.0.1:1?tx=nope")
