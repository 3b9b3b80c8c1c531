"""Unmodified Kafka clients against the real broker process."""

from __future__ import annotations

import asyncio
import subprocess
import time

import pytest

ck = pytest.importorskip("confluent_kafka")

N = 10_000


def confluent_produce(bootstrap: str, topic: str, n: int, **conf: object) -> list[int]:
    """Produce ``n`` records ``v<i>``; returns the acknowledged offsets."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    offsets: list[int] = []
    errors: list[object] = []

    def delivered(err: object, msg: object) -> None:
        if err:
            errors.append(err)
        else:
            offsets.append(msg.offset())

    for i in range(n):
        p.produce(topic, value=b"v%d" % i, key=b"k%d" % (i % 7), on_delivery=delivered)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    assert not errors, errors[:3]
    return offsets


def confluent_consume(bootstrap: str, topic: str, n: int, timeout: float = 30) -> list[bytes]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                     "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < n and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                assert not m.error(), m.error()
                values.append(m.value())
        # Nothing more than what was produced.
        extra = [m for m in c.consume(100, 0.3) if not m.error()]
        assert not extra
    finally:
        c.close()
    return values


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_confluent_roundtrip(broker, topic, compression) -> None:
    offsets = confluent_produce(broker.bootstrap, topic, N, acks="all",
                                **{"compression.type": compression})
    assert sorted(offsets) == list(range(N))
    assert confluent_consume(broker.bootstrap, topic, N) == [b"v%d" % i for i in range(N)]


def test_confluent_idempotent_no_duplicates(broker, topic) -> None:
    offsets = confluent_produce(broker.bootstrap, topic, N, acks="all",
                                **{"enable.idempotence": True, "compression.type": "lz4"})
    assert sorted(offsets) == list(range(N))
    assert confluent_consume(broker.bootstrap, topic, N) == [b"v%d" % i for i in range(N)]


def test_confluent_admin_create_delete(broker) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fs = admin.create_topics([NewTopic("admin-made", 3, 1, config={"retention.ms": "60000"})])
    fs["admin-made"].result(10)
    md = admin.list_topics(timeout=10)
    assert len(md.topics["admin-made"].partitions) == 3
    fs = admin.create_topics([NewTopic("admin-made", 1, 1)])
    with pytest.raises(ck.KafkaException, match="TOPIC_ALREADY_EXISTS"):
        fs["admin-made"].result(10)
    fs = admin.create_topics([NewTopic("admin-rf3", 1, 3)])
    with pytest.raises(ck.KafkaException, match="INVALID_REPLICATION_FACTOR"):
        fs["admin-rf3"].result(10)
    admin.delete_topics(["admin-made"])["admin-made"].result(10)
    assert "admin-made" not in admin.list_topics(timeout=10).topics


def test_kafka_python_roundtrip(broker, topic) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                             compression_type="gzip")
    futures = [producer.send(topic, value=b"v%d" % i) for i in range(2000)]
    producer.flush()
    assert [f.get(10).offset for f in futures] == list(range(2000))
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=2000)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 1000)
    values = [m.value for m in consumer]
    consumer.close()
    assert values == [b"v%d" % i for i in range(1000, 2000)]


def test_aiokafka_roundtrip(broker, topic) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                                    enable_idempotence=True)
        await producer.start()
        try:
            batch = [await producer.send(topic, b"v%d" % i) for i in range(2000)]
            metas = await asyncio.gather(*batch)
        finally:
            await producer.stop()
        assert [m.offset for m in metas] == list(range(2000))
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap,
                                    enable_auto_commit=False)
        await consumer.start()
        got: list[bytes] = []
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            while len(got) < 2000:
                batches = await consumer.getmany(timeout_ms=2000)
                if not batches:
                    break
                for msgs in batches.values():
                    got.extend(m.value for m in msgs)
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == [b"v%d" % i for i in range(2000)]


def test_kcat_produce_consume(broker, topic, system_command) -> None:
    if system_command("kcat", "kcat") is None:
        pytest.skip("kcat is not installed and cannot be installed here (needs root and apt)")
    lines = "".join(f"line-{i}\n" for i in range(1000))
    subprocess.run(["kcat", "-P", "-b", broker.bootstrap, "-t", topic],
                   input=lines, text=True, check=True, timeout=30)
    out = subprocess.run(["kcat", "-C", "-b", broker.bootstrap, "-t", topic, "-o", "beginning",
                          "-e", "-q"], capture_output=True, text=True, check=True, timeout=30)
    assert out.stdout == lines
