"""kafka-python and aiokafka reading a cleaned compacted topic from start to end.

A cleaned log has offset gaps, batches whose record count is below
``lastOffsetDelta + 1``, and compressed batches the cleaner re-compressed.
confluent-kafka produces (every codec); once the cleaner has cleaned all it
can (its checkpoint at the active segment's base), each client must get
exactly the records the log holds, with their offsets, and those must be a
correct compaction of what was produced.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import confluent_kafka as ck
from broker_process import BrokerProcess, wait_for
from confluent_kafka.admin import AdminClient, NewTopic

from pylog.log.checkpoint import OffsetCheckpointFile
from pylog.log.cleaner import CLEANER_CHECKPOINT
from pylog.records import read_batches

TOPIC = "compacted-gaps"
KEYS = 150
Got = list[tuple[int, bytes | None, bytes | None]]


def _cleaned_to(data: Path) -> int:
    try:
        return OffsetCheckpointFile(data / CLEANER_CHECKPOINT).read().get((TOPIC, 0), -1)
    except (OSError, ValueError):
        return -1


def _active_base(data: Path) -> int:
    return max(int(p.name[:20]) for p in (data / f"{TOPIC}-0").glob("*.log"))


def _produce(bootstrap: str) -> list[tuple[bytes, bytes | None]]:
    rng = random.Random(11)
    produced: list[tuple[bytes, bytes | None]] = []
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                "compression.type": codec, "enable.idempotence": True})
        for i in range(400):
            key = b"key-%d" % rng.randrange(KEYS)
            value = None if rng.random() < 0.03 else b"%s-%d" % (codec.encode(), i)
            producer.produce(TOPIC, value, key, partition=0)
            produced.append((key, value))
            if i % 20 == 19:
                producer.flush(30)  # batches of ~20 records
        assert producer.flush(30) == 0
    return produced


def _kafka_python(bootstrap: str, end: int) -> Got:
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(TOPIC, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_bytes=4096,
                             max_partition_fetch_bytes=4096)
    got: Got = []
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        for _ in range(600):
            if consumer.position(tp) >= end:
                break
            for records in consumer.poll(timeout_ms=200).values():
                got += [(r.offset, r.key, r.value) for r in records]
        assert consumer.position(tp) == end
    finally:
        consumer.close()
    return got


def _aiokafka(bootstrap: str, end: int) -> Got:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

    async def run() -> Got:
        tp = TopicPartition(TOPIC, 0)
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                    auto_offset_reset="earliest", fetch_max_bytes=4096,
                                    max_partition_fetch_bytes=4096)
        await consumer.start()
        got: Got = []
        try:
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            for _ in range(600):
                if await consumer.position(tp) >= end:
                    break
                for records in (await consumer.getmany(tp, timeout_ms=200)).values():
                    got.extend((r.offset, r.key, r.value) for r in records)
            assert await consumer.position(tp) == end
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


def _on_disk(data: Path) -> tuple[Got, bool, bool]:
    """The log's records read from its segment files; whether a rebuilt
    batch (fewer records than its offset span) and a compressed one exist."""
    got: Got = []
    rebuilt = compressed = False
    for path in sorted((data / f"{TOPIC}-0").glob("*.log")):
        for batch in read_batches(path.read_bytes()):
            records = list(batch.records())
            rebuilt |= batch.record_count < batch.last_offset_delta + 1
            compressed |= batch.compression != 0 and rebuilt
            got += [(r.offset, r.key, r.value) for r in records]
    return got, rebuilt, compressed


def test_clients_read_a_cleaned_compacted_topic(tmp_path: Path) -> None:
    data = tmp_path / "data"
    node = BrokerProcess(data, "log.cleaner.backoff.ms=100").start()
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1, config={
            "cleanup.policy": "compact", "segment.bytes": "4096",
            "min.cleanable.dirty.ratio": "0.01"})])[TOPIC].result(30)
        produced = _produce(node.bootstrap)
        end = len(produced)
        # Done when everything below the active segment is cleaned.
        wait_for(lambda: _cleaned_to(data) == _active_base(data) > end // 2, 60,
                 "the cleaner's checkpoint at the active segment")
        cleaned_to = _cleaned_to(data)
        log, rebuilt, compressed = _on_disk(data)
        assert rebuilt and compressed, "the vectors should hold rebuilt compressed batches"
        offsets = [o for o, _, _ in log]
        assert offsets == sorted(set(offsets)) and len(offsets) < end // 3  # gaps
        # A correct compaction of what was produced.
        for o, k, v in log:
            assert produced[o] == (k, v), o
        below = [k for o, k, _ in log if o < cleaned_to]
        assert len(below) == len(set(below))
        latest = {k: o for o, (k, _) in enumerate(produced)}
        assert set(latest.values()) <= set(offsets)

        assert _kafka_python(node.bootstrap, end) == log
        assert _aiokafka(node.bootstrap, end) == log
    finally:
        node.stop()
