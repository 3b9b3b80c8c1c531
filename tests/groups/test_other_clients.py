"""Consumer groups with kafka-python and aiokafka, and a group mixing librdkafka
and kafka-python members (same assignor name: the broker only matches names)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from group_helpers import SESSION_TIMEOUT_MS, create_topic, produce, wait_for
from kafka import KafkaConsumer
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.errors import NoOffsetForPartitionError
from test_confluent_groups import ThreadConsumer, covers

KP = {"session_timeout_ms": SESSION_TIMEOUT_MS, "heartbeat_interval_ms": 300,
      "enable_auto_commit": False, "auto_offset_reset": "earliest",
      "metadata_max_age_ms": 1000}


class KafkaPythonConsumer:
    def __init__(self, bootstrap: str, group: str, topic: str, **conf: object) -> None:
        self.conf = {"bootstrap_servers": bootstrap, "group_id": group, **KP, **conf}
        self.topic = topic
        self.values: list[int] = []
        self.assignment: set[int] = set()
        self.error: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        c = KafkaConsumer(self.topic, **self.conf)
        try:
            while not self._stop.is_set():
                batches = c.poll(timeout_ms=100)
                self.assignment = {tp.partition for tp in c.assignment()}
                for records in batches.values():
                    self.values += [int(r.value) for r in records]
                if batches:
                    c.commit()  # the positions just consumed, before the next poll
        except Exception as exc:  # the test reads it (auto_offset_reset=none)
            self.error = exc
        finally:
            c.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)


def test_kafka_python_group(group_broker, name) -> None:
    bs = group_broker.bootstrap
    create_topic(bs, name, 6)
    produce(bs, name, 300, 6)
    consumers = [KafkaPythonConsumer(bs, name, name) for _ in range(3)]
    try:
        wait_for(lambda: sum(len(c.values) for c in consumers) >= 300, 40, "300 records")
        wait_for(lambda: covers(consumers, 6), 10, "3 members covering 6 partitions")
        assert sorted(v for c in consumers for v in c.values) == list(range(300))
        consumers.append(KafkaPythonConsumer(bs, name, name))  # a rebalance
        wait_for(lambda: covers(consumers, 6), 30, "4 members covering 6 partitions")
        produce(bs, name, 100, 6, start=300)
        wait_for(lambda: sum(len(c.values) for c in consumers) >= 400, 30, "400 records")
        assert sorted(v for c in consumers for v in c.values) == list(range(400))
    finally:
        for c in consumers:
            c.close()


def test_kafka_python_auto_offset_reset_none(group_broker, name) -> None:
    bs = group_broker.bootstrap
    create_topic(bs, name, 1)
    c = KafkaPythonConsumer(bs, name, name, auto_offset_reset="none")
    try:
        wait_for(lambda: c.error is not None, 20, "NoOffsetForPartitionError")
        assert isinstance(c.error, NoOffsetForPartitionError)
    finally:
        c.close()


@pytest.mark.parametrize("assignor", ["range", "roundrobin"])
def test_mixed_librdkafka_and_kafka_python_group(group_broker, name, assignor) -> None:
    bs = group_broker.bootstrap
    create_topic(bs, name, 6)
    produce(bs, name, 120, 6)
    kp_assignor = {"range": RangePartitionAssignor,
                   "roundrobin": RoundRobinPartitionAssignor}[assignor]
    members = [ThreadConsumer(bs, name, name, **{"partition.assignment.strategy": assignor}),
               KafkaPythonConsumer(bs, name, name, partition_assignment_strategy=[kp_assignor]),
               ThreadConsumer(bs, name, name, **{"partition.assignment.strategy": assignor})]
    try:
        wait_for(lambda: sum(len(m.values) for m in members) >= 120, 40, "120 records")
        wait_for(lambda: covers(members, 6), 20, "3 mixed members covering 6 partitions")
        assert sorted(v for m in members for v in m.values) == list(range(120))
    finally:
        for m in members:
            m.close()


def test_aiokafka_group(group_broker, name) -> None:
    from aiokafka import AIOKafkaConsumer

    bs = group_broker.bootstrap
    create_topic(bs, name, 6)
    produce(bs, name, 300, 6)

    async def scenario() -> None:
        def make() -> AIOKafkaConsumer:
            return AIOKafkaConsumer(name, bootstrap_servers=bs, group_id=name,
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    session_timeout_ms=SESSION_TIMEOUT_MS,
                                    heartbeat_interval_ms=300, metadata_max_age_ms=1000)

        consumers = [make() for _ in range(3)]
        values: list[int] = []
        stop = asyncio.Event()

        async def run(c: AIOKafkaConsumer) -> None:
            await c.start()
            try:
                while not stop.is_set():
                    batches = await c.getmany(timeout_ms=100)
                    for records in batches.values():
                        values.extend(int(r.value) for r in records)
                    if batches:
                        await c.commit()
            finally:
                await c.stop()

        def owned(cs: list) -> list[set[int]]:
            return [{tp.partition for tp in c.assignment()} for c in cs]

        async def until(pred, timeout: float, what: str) -> None:
            for _ in range(int(timeout * 10)):
                if pred():
                    return
                await asyncio.sleep(0.1)
            raise AssertionError(f"timed out waiting for {what}")

        def covered(cs: list) -> bool:
            o = owned(cs)
            return all(o) and sum(map(len, o)) == 6 and set().union(*o) == set(range(6))

        tasks = [asyncio.create_task(run(c)) for c in consumers]
        await until(lambda: len(values) >= 300, 40, "300 records")
        await until(lambda: covered(consumers), 20, "3 members covering 6 partitions")
        consumers.append(make())
        tasks.append(asyncio.create_task(run(consumers[-1])))
        await until(lambda: covered(consumers), 30, "4 members covering 6 partitions")
        stop.set()
        await asyncio.gather(*tasks)
        assert sorted(values) == list(range(300))

    asyncio.run(scenario())
