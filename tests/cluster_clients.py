"""Producing to and consuming from a cluster's partitions with the real
clients (confluent-kafka, kafka-python, aiokafka), each partition named
explicitly: no consumer groups.  A record's value says which client, topic
partition and step wrote it, so what comes back is checked against exactly
what was acknowledged."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

# Liveness bounds: a client finding the partition leaders and reading all.
CLIENT_TIMEOUT_S = 60
CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")

# partition -> [(offset, value)] in offset order
Records = dict[int, list[tuple[int, bytes]]]


def values(tag: str, partition: int, n: int) -> list[bytes]:
    return [f"{tag}-p{partition}-{i}".encode() for i in range(n)]


def produce(client: str, bootstrap: str, topic: str, partitions: Iterable[int], n: int,
            tag: str) -> Records:
    """``n`` records to each partition with acks=all; the acknowledged
    (offset, value)s.  Every record must be acknowledged."""
    wanted = {p: values(f"{client}-{tag}", p, n) for p in partitions}
    acked = {"confluent-kafka": _confluent_produce, "kafka-python": _kafka_python_produce,
             "aiokafka": _aiokafka_produce}[client](bootstrap, topic, wanted)
    for p, sent in wanted.items():
        got = sorted(acked.get(p, []))
        assert [v for _, v in got] == sent, (p, got, sent)
    return {p: sorted(acked[p]) for p in wanted}


def consume(client: str, bootstrap: str, topic: str, ends: dict[int, int]) -> Records:
    """Each partition read from offset 0 until offset ``ends[p]``."""
    got = {"confluent-kafka": _confluent_consume, "kafka-python": _kafka_python_consume,
           "aiokafka": _aiokafka_consume}[client](bootstrap, topic, ends)
    return {p: got.get(p, []) for p in ends}


def ends_of(records: Records) -> dict[int, int]:
    """The offset after the last of each partition's records."""
    return {p: (rs[-1][0] + 1 if rs else 0) for p, rs in records.items()}


# -- confluent-kafka (librdkafka) ---------------------------------------------------------


def _confluent_produce(bootstrap: str, topic: str, wanted: dict[int, list[bytes]]
                       ) -> dict[int, list[tuple[int, bytes]]]:
    import confluent_kafka as ck

    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    acked: dict[int, list[tuple[int, bytes]]] = {}
    errors: list[object] = []

    def delivered(err: object, msg: ck.Message) -> None:
        if err:
            errors.append(err)
        else:
            acked.setdefault(msg.partition(), []).append((msg.offset(), msg.value()))

    for p, vals in wanted.items():
        for v in vals:
            producer.produce(topic, value=v, partition=p, on_delivery=delivered)
    assert producer.flush(CLIENT_TIMEOUT_S) == 0
    assert not errors, errors[:3]
    return acked


def _confluent_consume(bootstrap: str, topic: str, ends: dict[int, int]) -> Records:
    import confluent_kafka as ck

    # librdkafka wants a group.id even for assigned partitions; nothing is committed.
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-unused",
                            "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
    consumer.assign([ck.TopicPartition(topic, p, 0) for p, end in ends.items() if end])
    got: Records = {}
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    try:
        while not _done(got, ends) and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                assert not m.error(), m.error()
                got.setdefault(m.partition(), []).append((m.offset(), m.value()))
    finally:
        consumer.close()
    return got


# -- kafka-python -------------------------------------------------------------------------


def _kafka_python_produce(bootstrap: str, topic: str, wanted: dict[int, list[bytes]]
                          ) -> dict[int, list[tuple[int, bytes]]]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        futures = [(p, v, producer.send(topic, value=v, partition=p))
                   for p, vals in wanted.items() for v in vals]
        producer.flush(CLIENT_TIMEOUT_S)
        acked: dict[int, list[tuple[int, bytes]]] = {}
        for p, v, f in futures:
            meta = f.get(CLIENT_TIMEOUT_S)
            assert meta.partition == p
            acked.setdefault(p, []).append((meta.offset, v))
    finally:
        producer.close(timeout=CLIENT_TIMEOUT_S)  # never a hang on a stuck flush
    return acked


def _kafka_python_consume(bootstrap: str, topic: str, ends: dict[int, int]) -> Records:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             fetch_max_wait_ms=100)
    tps = [TopicPartition(topic, p) for p, end in ends.items() if end]
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, 0)
    got: Records = {}
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    try:
        while not _done(got, ends) and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                got.setdefault(tp.partition, []).extend((m.offset, m.value) for m in msgs)
    finally:
        consumer.close()
    return got


# -- aiokafka -----------------------------------------------------------------------------


def _aiokafka_produce(bootstrap: str, topic: str, wanted: dict[int, list[bytes]]
                      ) -> dict[int, list[tuple[int, bytes]]]:
    from aiokafka import AIOKafkaProducer

    async def run() -> dict[int, list[tuple[int, bytes]]]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                                    request_timeout_ms=CLIENT_TIMEOUT_S * 1000)
        await producer.start()
        try:
            sent = [(p, v, await producer.send(topic, v, partition=p))
                    for p, vals in wanted.items() for v in vals]
            acked: dict[int, list[tuple[int, bytes]]] = {}
            for p, v, fut in sent:
                meta = await fut
                assert meta.partition == p
                acked.setdefault(p, []).append((meta.offset, v))
        finally:
            await producer.stop()
        return acked

    return asyncio.run(run())


def _aiokafka_consume(bootstrap: str, topic: str, ends: dict[int, int]) -> Records:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

    async def run() -> Records:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                    fetch_max_wait_ms=100)
        await consumer.start()
        got: Records = {}
        try:
            tps = [TopicPartition(topic, p) for p, end in ends.items() if end]
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, 0)
            deadline = time.monotonic() + CLIENT_TIMEOUT_S
            while not _done(got, ends) and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for tp, msgs in batches.items():
                    got.setdefault(tp.partition, []).extend((m.offset, m.value) for m in msgs)
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


def _done(got: Records, ends: dict[int, int]) -> bool:
    return all(end == 0 or (p in got and got[p][-1][0] + 1 >= end) for p, end in ends.items())
