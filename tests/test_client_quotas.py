"""Client quotas without a broker: Kafka's order of precedence, its Rate and
throttle arithmetic, and the store's checks and file (a real file in a temp dir)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pylog.protocol import ErrorCode
from pylog.server.client_quotas import (
    FETCH,
    PRODUCE,
    QuotaManager,
    QuotaStore,
    Rate,
    resolve,
)

U, C = "user", "client-id"


def _set(store: QuotaStore, entity: list, **values: float) -> None:
    ops = [(k, v, False) for k, v in values.items()]
    assert store.alter([(entity, ops)], validate_only=False) == [(0, None)]


def test_precedence_follows_kafkas_eight_levels(tmp_path: Path) -> None:
    """Each level, from the least specific up, takes over from the ones below;
    the tags say who shares the quota (Kafka's DefaultQuotaCallback)."""
    store = QuotaStore(tmp_path)
    assert resolve(store, PRODUCE, "alice", "app") == (("", "app"), None)
    levels = [
        ([(C, None)], ("", "app")),                   # /clients/<default>
        ([(C, "app")], ("", "app")),                  # /clients/<client-id>
        ([(U, None)], ("alice", "")),                 # /users/<default>
        ([(U, None), (C, None)], ("alice", "app")),   # /users/<default>/clients/<default>
        ([(U, None), (C, "app")], ("alice", "app")),  # /users/<default>/clients/<client-id>
        ([(U, "alice")], ("alice", "")),              # /users/<user>
        ([(U, "alice"), (C, None)], ("alice", "app")),  # /users/<user>/clients/<default>
        ([(U, "alice"), (C, "app")], ("alice", "app")),  # /users/<user>/clients/<client-id>
    ]
    for bound, (entity, tags) in enumerate(levels, start=1):
        _set(store, entity, producer_byte_rate=bound * 1000)
        assert resolve(store, PRODUCE, "alice", "app") == (tags, bound * 1000.0), entity
    # Another user falls to the defaults; another client id of alice to her own quotas.
    assert resolve(store, PRODUCE, "bob", "app") == (("bob", "app"), 5000.0)
    assert resolve(store, PRODUCE, "alice", "other") == (("alice", "other"), 7000.0)
    # The quota types are separate: no consumer_byte_rate is set anywhere.
    assert resolve(store, FETCH, "alice", "app") == (("", "app"), None)


def test_rate_and_throttle_follow_kafkas_arithmetic(tmp_path: Path) -> None:
    """Rate counts at least samples - 1 whole windows; the throttle is
    (rate - bound) / bound * window, what brings the rate back to the bound."""
    rate = Rate(samples=11, window_ms=1000, now=0)
    rate.record(5000, 0)
    assert rate.window_size_ms(0) == 10_000 and rate.measure(0) == 500.0
    rate.record(5000, 1500)  # a second sample
    assert rate.window_size_ms(1500) == 10_500
    assert rate.measure(1500) == pytest.approx(10_000 / 10.5)
    # Samples older than samples * window are dropped.
    assert rate.measure(20_000) == 0.0

    store = QuotaStore(tmp_path)
    _set(store, [(C, "app")], producer_byte_rate=1000)
    manager = QuotaManager(store, PRODUCE, samples=2, window_s=1)
    assert manager.record("app", 1000, now=10_000) == 0  # exactly the bound: not over
    # 4000 bytes in a 1 s window against 1000/s: 3 s more to bring it down.
    assert manager.record("app", 3000, now=10_000) == 3000
    assert manager.record("other", 10**9, now=10_000) == 0  # no quota for this client
    manager.unrecord("app", 3000, now=10_000)
    assert manager.record("app", 0, now=10_000) == 0
    assert manager.max_value_in_window("app") == 1000.0
    request = QuotaManager(store, PRODUCE, samples=2, window_s=1, max_throttle_ms=1000)
    assert request.record("app", 10**6, now=0) == 1000  # the request quota's cap


def test_store_checks_as_kafka_and_saves(tmp_path: Path) -> None:
    store = QuotaStore(tmp_path)
    bad = [
        ([], [("producer_byte_rate", 1.0, False)], "Invalid empty client quota entity"),
        ([(U, "a"), (U, "b")], [], "duplicate entity entry user"),
        ([("group", "g")], [], "Unhandled client quota entity type: group"),
        ([(C, "")], [], "Empty client-id not supported"),
        ([(C, "c")], [("foo", 1.0, False)], "Invalid configuration key foo"),
        ([(C, "c")], [("producer_byte_rate", 1.5, False)],
         "Configuration producer_byte_rate must be a Long value"),
        ([(C, "c")], [("producer_byte_rate", 0.0, False)], "must be a positive number"),
        ([(C, "c")], [("producer_byte_rate", 1.0, False), ("producer_byte_rate", 2.0, False)],
         "Duplicate quota key producer_byte_rate"),
        ([(C, "c")], [("controller_mutation_rate", 1.0, False)],
         "pylog does not enforce controller_mutation_rate"),
        ([("ip", "127.0.0.1")], [("connection_creation_rate", 1.0, False)],
         "pylog does not enforce connection_creation_rate"),
        ([("ip", "127.0.0.1")], [("producer_byte_rate", 1.0, False)],
         "Invalid configuration key producer_byte_rate"),
    ]
    for entity, ops, words in bad:
        [(code, message)] = store.alter([(entity, ops)], validate_only=False)
        assert code == ErrorCode.INVALID_REQUEST and words in message, (entity, ops)
    assert not (tmp_path / "pylog-client-quotas.json").exists()
    # validate_only checks and stores nothing; a good entry beside a bad one is applied.
    assert store.alter([([(C, "c")], [("request_percentage", 12.5, False)])],
                       validate_only=True) == [(0, None)]
    assert store.describe([], strict=False) == []
    results = store.alter([([(C, "c")], [("request_percentage", 12.5, False)]),
                           ([(C, "d")], [("foo", 1.0, False)])], validate_only=False)
    assert results[0] == (0, None) and results[1][0] == ErrorCode.INVALID_REQUEST
    saved = json.loads((tmp_path / "pylog-client-quotas.json").read_text())
    assert saved["entities"] == [{"entity": [[C, "c"]], "quotas": {"request_percentage": 12.5}}]
    assert QuotaStore(tmp_path).quotas == store.quotas
    # Removing the last key removes the entity.
    store.alter([([(C, "c")], [("request_percentage", 0.0, True)])], validate_only=False)
    assert QuotaStore(tmp_path).quotas == {}


def test_describe_filters(tmp_path: Path) -> None:
    store = QuotaStore(tmp_path)
    _set(store, [(U, "u1")], consumer_byte_rate=1)
    _set(store, [(U, None)], consumer_byte_rate=2)
    _set(store, [(U, "u1"), (C, "c1")], consumer_byte_rate=3)
    _set(store, [(C, "c1")], consumer_byte_rate=4)

    def found(components: list, strict: bool) -> list:
        return sorted(v["consumer_byte_rate"] for _, v in store.describe(components, strict))

    assert found([], strict=False) == [1, 2, 3, 4]
    assert found([(U, 2, None)], strict=False) == [1, 2, 3]
    assert found([(U, 2, None)], strict=True) == [1, 2]
    assert found([(U, 0, "u1")], strict=False) == [1, 3]
    assert found([(U, 1, None)], strict=True) == [2]
    assert found([(U, 0, "u1"), (C, 2, None)], strict=True) == [3]
    for components, words in (([(U, 2, None), (U, 2, None)], "Duplicate user"),
                              ([("ip", 2, None), (U, 2, None)], "IP filter component"),
                              ([(U, 0, None)], "Missing match"),
                              ([(U, 7, None)], "Unknown match type")):
        with pytest.raises(Exception, match=words):
            store.describe(components, strict=False)
