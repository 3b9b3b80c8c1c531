"""Log compaction in the running broker: the cleaner keeps the latest record of each key.

A real broker process with a fast cleaner (``log.cleaner.backoff.ms``) and
small segments; confluent-kafka produces keyed records and tombstones to a
``cleanup.policy=compact`` topic and reads it back from the start.  The
cleaner's own checkpoint (``cleaner-offset-checkpoint``, Kafka's file) says
how far the log has been cleaned; below it every key appears once, with the
latest value it had there.
"""

from __future__ import annotations

import os
import random
import time
import urllib.request
from pathlib import Path

import confluent_kafka as ck
import pytest
from broker_process import EVENT_LOOPS, BrokerProcess, free_port, wait_for
from confluent_kafka.admin import AdminClient, NewTopic

from pylog.log.checkpoint import OffsetCheckpointFile
from pylog.log.cleaner import CLEANER_CHECKPOINT

KEYS = 40


def _cleaned_to(data: Path, topic: str) -> int:
    try:
        return OffsetCheckpointFile(data / CLEANER_CHECKPOINT).read().get((topic, 0), -1)
    except (OSError, ValueError):
        return -1  # being replaced


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes | None]]) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                            "enable.idempotence": True, "compression.type": "lz4"})
    for i, (key, value) in enumerate(records):
        producer.produce(topic, value, key, partition=0)
        if i % 25 == 24:  # small batches: many segments of 4 KiB
            producer.flush(30)
    assert producer.flush(30) == 0


def _read_messages(bootstrap: str, topic: str) -> list[ck.Message]:
    """Every record from the start to the end of the log."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                            "enable.auto.commit": False, "fetch.queue.backoff.ms": 10,
                            "enable.partition.eof": True})
    consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got: list[ck.Message] = []
    try:
        while True:
            msg = consumer.poll(10)
            assert msg is not None, f"no end of partition after {len(got)} records"
            if msg.error():
                assert msg.error().code() == ck.KafkaError._PARTITION_EOF, msg.error()
                return got
            got.append(msg)
    finally:
        consumer.close()


def _read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    return [(m.offset(), m.key(), m.value()) for m in _read_messages(bootstrap, topic)]


def _check_compacted(produced: list[tuple[bytes, bytes | None]],
                     got: list[tuple[int, bytes, bytes | None]], cleaned_to: int) -> None:
    """What Kafka promises: offsets and values as produced, every latest
    record kept, and below the cleaned offset no record with a later one of
    its key there (so each key once)."""
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets))
    for offset, key, value in got:
        assert produced[offset] == (key, value), offset
    kept = set(offsets)
    latest = {key: offset for offset, (key, _) in enumerate(produced)}
    assert set(latest.values()) - kept <= {
        o for o in latest.values() if produced[o][1] is None}, "a key's latest value is gone"
    below = [(o, k) for o, k, _ in got if o < cleaned_to]
    assert len({k for _, k in below}) == len(below), "a key twice in the cleaned part"
    last_below = {key: offset for offset, (key, _) in enumerate(produced[:cleaned_to])}
    assert all(last_below[k] == o for o, k in below)


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_compacted_topic_keeps_the_latest_value_of_each_key(tmp_path: Path,
                                                            event_loop: str) -> None:
    data = tmp_path / "data"
    node = BrokerProcess(data, "log.cleaner.backoff.ms=100",
                         event_loop=event_loop).start()
    topic = "compacted"
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config={
            "cleanup.policy": "compact", "segment.bytes": "4096",
            "min.cleanable.dirty.ratio": "0.01"})])[topic].result(30)
        rng = random.Random(7)
        produced = [(b"key-%d" % rng.randrange(KEYS), b"value-%d" % i) for i in range(3000)]
        # Tombstones for a few keys, then more records so they leave the active segment.
        produced += [(b"key-%d" % k, None) for k in range(5)]
        produced += [(b"key-%d" % (5 + i % 10), b"late-%d" % i) for i in range(300)]
        _produce(node.bootstrap, topic, produced)
        # The dirty part ends at the active segment: wait until the cleaner got
        # past the tombstones.
        wait_for(lambda: _cleaned_to(data, topic) > 3005, 60, "the cleaner's checkpoint")
        got = _read_all(node.bootstrap, topic)
        cleaned_to = _cleaned_to(data, topic)
        _check_compacted(produced, got, cleaned_to)
        assert len(got) < len(produced) // 4
        # delete.retention.ms (1 day) keeps the tombstones: a reader still sees them.
        assert {k for _, k, v in got if v is None} == {b"key-%d" % k for k in range(5)}

        # A restart (kill -9) keeps the cleaned log as it was.
        node.kill()
        node = BrokerProcess(data, "log.cleaner.backoff.ms=100", port=node.port,
                             event_loop=event_loop).start()
        assert _read_all(node.bootstrap, topic) == got
        # Appends go on at the log end.
        _produce(node.bootstrap, topic, [(b"key-1", b"after")])
        assert _read_all(node.bootstrap, topic)[-1] == (len(produced), b"key-1", b"after")
    finally:
        node.stop()


def _gauges(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    return {name: float(value) for name, value in
            (line.split(" ", 1) for line in text.splitlines()
             if line.startswith("kafka_log_logcleaner"))}


def test_tombstones_go_after_delete_retention(tmp_path: Path) -> None:
    data = tmp_path / "data"
    url = f"http://127.0.0.1:{free_port()}/metrics"
    node = BrokerProcess(data, "log.cleaner.backoff.ms=100", f"metrics.listener={url}").start()
    topic = "deletes"
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config={
            "cleanup.policy": "compact", "segment.bytes": "4096",
            "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})])[topic].result(30)
        produced = [(b"key-%d" % (i % KEYS), b"value-%d" % i) for i in range(1000)]
        produced += [(b"key-%d" % k, None) for k in range(KEYS // 2)]
        _produce(node.bootstrap, topic, produced)
        # Later passes: the first clean that keeps the tombstones gives their
        # batches a delete horizon of its own time (delete.retention.ms = 0),
        # and the next clean drops them (KIP-534).
        for _ in range(3):
            # Incompressible: the filler must fill segments past the tombstones.
            filler = [(b"filler-%d" % (i % 7), os.urandom(100)) for i in range(150)]
            produced += filler
            _produce(node.bootstrap, topic, filler)
            mark = len(produced) - 150
            wait_for(lambda m=mark: _cleaned_to(data, topic) > m, 60,
                     f"the cleaner past offset {mark}")

        def tombstones_gone() -> list | None:
            got = _read_all(node.bootstrap, topic)
            return None if any(v is None for _, _, v in got) else got
        got = wait_for(tombstones_gone, 60, "the tombstones to be removed")
        _check_compacted(produced, got, _cleaned_to(data, topic))
        keys = {k for _, k, _ in got}
        assert not keys & {b"key-%d" % k for k in range(KEYS // 2)}
        assert {b"key-%d" % k for k in range(KEYS // 2, KEYS)} <= keys
        # Kafka's cleaner gauges: the last clean kept a fraction of what it read.
        gauges = _gauges(url)
        assert 0 < gauges["kafka_log_logcleaner_cleanerrecopypercent"] < 100
        assert "kafka_log_logcleaner_maxbufferutilizationpercent" in gauges  # few keys: ~0
        assert gauges["kafka_log_logcleanermanager_uncleanablepartitionscount"] == 0
        assert gauges["kafka_log_logcleaner_deadthreadcount"] == 0
    finally:
        node.stop()


def _read_stamped(bootstrap: str, topic: str) -> dict[int, tuple[bytes, bytes | None, int]]:
    """offset -> (key, value, timestamp), from the start to the end of the log."""
    return {m.offset(): (m.key(), m.value(), m.timestamp()[1])
            for m in _read_messages(bootstrap, topic)}


def test_tombstones_of_a_quiet_log_go_at_the_horizon_their_first_clean_set(
        tmp_path: Path) -> None:
    """KIP-534 on a log that gets a few writes now and then: every clean
    merges it into one segment, so the rule older Kafka used (tombstones go
    when their segment is delete.retention.ms older than the last clean one)
    would keep them for ever.  The first clean that keeps them stamps their
    batch with a horizon; a clean after it drops them.  Record timestamps
    read by librdkafka stay the producer's through the re-encoding."""
    data = tmp_path / "data"
    node = BrokerProcess(data, "log.cleaner.backoff.ms=100").start()
    topic = "quiet"
    retention_ms = 3000
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config={
            "cleanup.policy": "compact", "segment.ms": "300", "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": str(retention_ms)})])[topic].result(30)
        producer = ck.Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})
        t0 = int(time.time() * 1000) - 600_000  # far below any horizon: long deltas
        stamps: dict[bytes, tuple[bytes | None, int]] = {}
        puts = [0]

        def put(key: bytes, value: bytes | None) -> int:
            # A second apart: segment.ms counts in record time (Kafka's
            # rollingBasedTimestamp), so every put rolls the segment before it.
            ts = t0 + puts[0] * 1000
            puts[0] += 1
            offsets: list[int] = []
            producer.produce(topic, value, key, partition=0, timestamp=ts,
                             on_delivery=lambda err, msg: offsets.append(msg.offset()))
            assert producer.flush(30) == 0 and offsets
            stamps[key] = (value, ts)
            return offsets[0]

        for i in range(5):
            for k in range(10):
                put(b"k%d" % k, b"v%d-%d" % (k, i))
        put(b"k3", None)
        put(b"k7", None)

        def tick(name: bytes) -> None:
            """A write, then another that rolls its segment, which the cleaner
            then takes; wait for that clean."""
            mark = put(name, b"t")
            put(b"roll", b"r")
            wait_for(lambda: _cleaned_to(data, topic) > mark, 60, f"a clean past {mark}")

        tick(b"tick-1")
        first = _read_stamped(node.bootstrap, topic)
        assert {k: (v, ts) for k, v, ts in first.values()} == stamps
        assert [k for k, v, _ in first.values() if v is None] == [b"k3", b"k7"]

        time.sleep(retention_ms / 1000 + 0.2)  # past the horizon of that clean
        tick(b"tick-2")
        later = _read_stamped(node.bootstrap, topic)
        assert {k: (v, ts) for k, v, ts in later.values()} == {
            k: vt for k, vt in stamps.items() if vt[0] is not None}
    finally:
        node.stop()
