"""PartitionProducers and producer id expiration (Kafka's
``ProducerStateManager.isProducerExpired`` / ``removeExpiredProducers``), and
the snapshot format that carries each producer's last timestamp (version 2,
version 1 still read).  The broker-level behaviour is in
tests/broker/test_producer_expiration.py."""

from __future__ import annotations

from pylog.protocol import ErrorCode
from pylog.records import BatchBuilder
from pylog.server.producer_state import (
    SNAPSHOT_VERSION,
    PartitionProducers,
    ProducerBatch,
    max_timestamp,
    producer_batch,
)

T = 1_800_000_000_000


def test_record_keeps_the_last_batch_timestamp_and_describes_it() -> None:
    p = PartitionProducers()
    p.record(ProducerBatch(7, 0, 0, 2), 0, -1, T + 5)
    p.record(ProducerBatch(7, 0, 3, 3), 3, -1, T + 1)  # the last batch counts, not the max
    p.record(ProducerBatch(9, 1, 0, 0), 4, T + 50, T + 50)
    assert p.last_batches() == [(7, 0, 3, T + 1, -1, -1), (9, 1, 0, T + 50, -1, -1)]


def test_remove_expired_uses_greater_or_equal_as_kafka() -> None:
    p = PartitionProducers()
    p.record(ProducerBatch(1, 0, 0, 0), 0, -1, T)
    p.record(ProducerBatch(2, 0, 0, 0), 1, -1, T + 1)
    assert p.remove_expired(T + 999, 1000) == 0
    assert p.remove_expired(T + 1000, 1000) == 1  # now - last == expiration: expired
    assert [pid for pid, *_ in p.last_batches()] == [2]
    assert p.remove_expired(T + 1001, 1000) == 1
    assert p.producers == {}


def test_an_expired_producer_is_an_unknown_one() -> None:
    """Before: a gap in the sequence is refused, a retry is a duplicate.
    After expiry: any sequence is taken, as for a producer never seen."""
    p = PartitionProducers()
    p.record(ProducerBatch(1, 0, 0, 4), 10, -1, T)
    assert p.check(ProducerBatch(1, 0, 9, 9)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.check(ProducerBatch(1, 0, 0, 4)) == (10, -1, 0)
    p.remove_expired(T + 10, 10)
    assert p.check(ProducerBatch(1, 0, 9, 9)) is None
    assert p.check(ProducerBatch(1, 0, 0, 4)) is None


def test_snapshot_v2_round_trip() -> None:
    p = PartitionProducers()
    p.record(ProducerBatch(1, 0, 0, 2), 0, -1, T + 2)
    p.record(ProducerBatch(1, 0, 3, 5), 3, -1, T + 9)
    p.record(ProducerBatch(4, 2, 0, 0), 6, T + 20, T + 20)
    data = p.to_json(7)
    assert data["version"] == SNAPSHOT_VERSION == 3
    assert data["producers"]["1"]["last_timestamp"] == T + 9
    back = PartitionProducers.from_json(data, 7)
    assert back.last_batches() == p.last_batches() == [(1, 0, 5, T + 9, -1, -1),
                                                      (4, 2, 0, T + 20, -1, -1)]
    assert back.check(ProducerBatch(1, 0, 3, 5)) == (3, -1, 0)


def test_snapshot_v1_loads_with_append_time_or_snapshot_time() -> None:
    """Version 1 (no last_timestamp): a LogAppendTime last batch gives its
    append time; a CreateTime one whose batch cannot be read (no log here)
    the snapshot's time."""
    v1 = {"version": 1, "offset": 9, "producers": {
        "1": {"epoch": 0, "batches": [[0, 2, 0, -1], [3, 5, 3, -1]]},
        "2": {"epoch": 3, "batches": [[0, 0, 6, T + 40]]},
        "3": {"epoch": 0, "batches": [[0, 0, 9, -1]]}}}  # at the log end: dropped
    p = PartitionProducers.from_json(v1, 9, None, T + 100)
    assert p.last_batches() == [(1, 0, 5, T + 100, -1, -1), (2, 3, 0, T + 40, -1, -1)]
    assert p.check(ProducerBatch(1, 0, 3, 5)) == (3, -1, 0)
    assert p.remove_expired(T + 140, 100) == 1  # producer 2: 100 ms after T + 40
    assert [pid for pid, *_ in p.last_batches()] == [1]


def test_max_timestamp_is_the_batch_header_field() -> None:
    b = BatchBuilder(producer_id=5, producer_epoch=0, base_sequence=0)
    for t in (T + 3, T + 8, T + 1):
        b.append(t, b"k", b"v")
    records = memoryview(bytearray(b.build()))
    assert max_timestamp(records) == T + 8
    assert producer_batch(records) == ProducerBatch(5, 0, 0, 2)
