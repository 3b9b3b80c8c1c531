"""Transactions meet compaction and ``__consumer_offsets``, in the real broker.

A compacted topic written in transactions (confluent-kafka's transactional
producer): the cleaner drops an aborted transaction's records, lets a later
committed value replace an earlier committed one, and removes a COMMIT marker
once its transaction keeps no record (after ``delete.retention.ms``), while
ABORT markers stay.  And the last stable offset of a ``__consumer_offsets``
partition follows the transactional offsets written there, across a
``kill -9``: a transaction the restart found open and the coordinator then
aborted does not hold it (nor the cleaner) back.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import confluent_kafka as ck
from broker_process import wait_for
from confluent_kafka.admin import AdminClient, NewTopic

from pylog.coordinator.offsets_store import OFFSETS_TOPIC
from pylog.coordinator.records import partition_for
from pylog.records import read_batches
from pylog.records.markers import marker_of

KEYS = 10
FAST_CLEANER = "log.cleaner.backoff.ms=100"


def _producer(bootstrap: str, txn_id: str, **extra: object) -> ck.Producer:
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                     "linger.ms": 0, **extra})
    p.init_transactions(20)
    return p


def _transaction(p: ck.Producer, topic: str, prefix: str, commit: bool) -> None:
    p.begin_transaction()
    for i in range(KEYS):
        p.produce(topic, f"{prefix}-{i}".encode(), f"k{i}".encode(), partition=0)
    p.flush(20)
    if commit:
        p.commit_transaction(20)
    else:
        p.abort_transaction(20)


def _read(bootstrap: str, topic: str, isolation: str) -> list[tuple[bytes, bytes]]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4()}",
                     "isolation.level": isolation, "enable.partition.eof": True,
                     "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
    c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got: list[tuple[bytes, bytes]] = []
    try:
        while True:
            m = c.poll(10)
            assert m is not None, "no end of partition"
            if m.error():
                assert m.error().code() == ck.KafkaError._PARTITION_EOF, m.error()
                return got
            got.append((m.key(), m.value()))
    finally:
        c.close()


def _markers(partition_dir: Path) -> list[tuple[int, bool]]:
    """(offset, commit) of every transaction marker in the partition's segments."""
    found = []
    for path in sorted(partition_dir.glob("*.log")):
        for batch in read_batches(path.read_bytes()):
            if batch.is_control:
                found.append((batch.base_offset, marker_of(batch)[0]))
    return found


def test_compaction_of_a_topic_written_in_transactions(start_broker, tmp_path, topic) -> None:
    data = tmp_path / "data"
    b = start_broker(FAST_CLEANER, log_dir=data)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "1024",
        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})])[topic].result(20)
    p = _producer(b.bootstrap, f"{topic}-txn")
    _transaction(p, topic, "first", commit=True)
    _transaction(p, topic, "aborted", commit=False)
    _transaction(p, topic, "last", commit=True)
    markers = _markers(data / f"{topic}-0")
    assert [commit for _, commit in markers] == [True, False, True]
    # Plain records of one key after them, so that every transaction leaves
    # the active segment (the cleaner never touches it).
    filler = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})

    def fill(n: int) -> None:
        for _ in range(n):
            filler.produce(topic, b"x" * 100, b"filler", partition=0)
            filler.flush(20)

    fill(40)

    def cleaned() -> bool:
        fill(5)  # new dirty segments: the cleaner comes back
        k_records = [(k, v) for k, v in _read(b.bootstrap, topic, "read_uncommitted")
                     if k != b"filler"]
        return len(k_records) == KEYS and markers[0] not in _markers(data / f"{topic}-0")

    # The first COMMIT marker goes in the clean after the one that found it
    # keeping no record (delete.retention.ms=0).
    wait_for(cleaned, 60, "the transactions' records and first COMMIT marker cleaned")
    want = [(f"k{i}".encode(), f"last-{i}".encode()) for i in range(KEYS)]
    for isolation in ("read_uncommitted", "read_committed"):
        got = [(k, v) for k, v in _read(b.bootstrap, topic, isolation) if k != b"filler"]
        assert got == want, isolation
    # The ABORT marker stays (consumers told of the aborted transaction need
    # it), and so does the last COMMIT marker: its transaction kept records.
    assert _markers(data / f"{topic}-0") == markers[1:]
    # The producer goes on after the clean.
    _transaction(p, topic, "after", commit=True)
    got = [(k, v) for k, v in _read(b.bootstrap, topic, "read_committed") if k != b"filler"]
    assert got == want + [(f"k{i}".encode(), f"after-{i}".encode()) for i in range(KEYS)]


def test_a_key_deleted_in_a_transaction_whose_marker_is_in_the_active_segment(
        start_broker, tmp_path, topic) -> None:
    """A committed transactional tombstone whose COMMIT marker is still in the
    active segment when the tombstone's segment is cleaned: the transaction
    counts as committed (the cleaner reads markers to the log end), so the
    older plain value goes, and the key stays deleted once the tombstone's
    horizon has passed."""
    b = start_broker(FAST_CLEANER, log_dir=tmp_path / "data")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "2000",
        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})])[topic].result(20)
    plain = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})

    def fill(n: int) -> None:
        for i in range(n):
            plain.produce(topic, b"." * 100, f"f{i % 5}".encode(), partition=0)
            plain.flush(20)

    plain.produce(topic, b"OLD", b"victim", partition=0)
    fill(30)
    p = _producer(b.bootstrap, f"{topic}-txn")
    p.begin_transaction()
    p.produce(topic, None, b"victim", partition=0)
    p.flush(20)
    fill(25)  # the tombstone's segment rolls; the marker goes to the active one
    p.commit_transaction(20)

    def victim(isolation: str) -> list[bytes | None]:
        return [v for k, v in _read(b.bootstrap, topic, isolation) if k == b"victim"]

    def gone() -> bool:
        fill(5)  # the cleaner comes back
        seen = victim("read_uncommitted")
        assert b"OLD" not in seen or None in seen, "the deleted key came back"
        return not seen

    wait_for(gone, 60, "the tombstone and the value before it cleaned away")
    assert victim("read_committed") == []


def _offsets_end(bootstrap: str, partition: int, isolation: str) -> int:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks",
                     "isolation.level": isolation})
    try:
        return c.get_watermark_offsets(ck.TopicPartition(OFFSETS_TOPIC, partition),
                                       timeout=10, cached=False)[1]
    finally:
        c.close()


def test_offsets_partition_stable_offset_follows_transactions_across_kill_9(
        start_broker, tmp_path, topic) -> None:
    data = tmp_path / "data"
    overrides = ("offsets.topic.num.partitions=3",
                 "transaction.abort.timed.out.transaction.cleanup.interval.ms=200")
    b = start_broker(*overrides, log_dir=data)
    group = f"{topic}-group"
    part = partition_for(group, 3)
    consumer = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": group})
    p = _producer(b.bootstrap, f"{topic}-txn", **{"transaction.timeout.ms": 3000})
    p.begin_transaction()
    p.produce(topic, b"v", partition=0)
    p.send_offsets_to_transaction([ck.TopicPartition(topic, 0, 1)],
                                  consumer.consumer_group_metadata(), 20)
    p.flush(20)
    # Open: the group's offsets partition is unstable from the transaction's commit on.
    high = _offsets_end(b.bootstrap, part, "read_uncommitted")
    stable = _offsets_end(b.bootstrap, part, "read_committed")
    assert stable < high
    b.kill()
    b2 = start_broker(*overrides, log_dir=data, port=b.port)
    assert _offsets_end(b2.bootstrap, part, "read_committed") == stable  # still open
    # The coordinator aborts it past its timeout: the ABORT marker frees the partition.
    wait_for(lambda: _offsets_end(b2.bootstrap, part, "read_committed")
             == _offsets_end(b2.bootstrap, part, "read_uncommitted"), 30,
             "the stable offset of the offsets partition after the abort")
    assert consumer.committed([ck.TopicPartition(topic, 0)], timeout=10)[0].offset < 0
    consumer.close()
    del p
    # And it stays free across a clean restart (the producer snapshot written
    # at shutdown carries the ended transaction).
    b2.stop()
    b3 = start_broker(*overrides, log_dir=data, port=b.port)
    assert (_offsets_end(b3.bootstrap, part, "read_committed")
            == _offsets_end(b3.bootstrap, part, "read_uncommitted"))
