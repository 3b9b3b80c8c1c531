"""Settings and helpers shared by the consumer group tests."""

from __future__ import annotations

from broker_process import wait_for  # noqa: F401  (the group tests import it from here)

# Small enough to keep tests quick, large enough that consumers started
# together land in one first generation.
REBALANCE_DELAY_MS = 300
SESSION_TIMEOUT_MS = 6000  # group.min.session.timeout.ms: the smallest allowed
GROUP_OVERRIDES = (f"group.initial.rebalance.delay.ms={REBALANCE_DELAY_MS}",)

# librdkafka consumer settings shared by the tests.
RDKAFKA = {"session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 300,
           "enable.auto.commit": False, "auto.offset.reset": "earliest",
           "topic.metadata.refresh.interval.ms": 1000}


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, count: int, partitions: int, start: int = 0) -> None:
    """``count`` records with values ``start..start+count-1``, round robin over partitions."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        p.produce(topic, str(i).encode(), partition=i % partitions)
    assert p.flush(30) == 0
