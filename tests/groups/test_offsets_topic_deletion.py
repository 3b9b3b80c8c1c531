"""DeleteTopics of ``__consumer_offsets`` while groups hold state and commit.

Kafka allows it (no internal-topic check in KafkaApis / ControllerApis), and
its group coordinator resigns the deleted partitions (onResignation): every
group and committed offset is unloaded at once, and the groups start afresh
in the re-created topic.  pylog used to keep them in memory: a group's
offsets committed before the deletion were still served, though they were
gone from disk, so a restart silently changed the answer; and the groups'
timers went on writing their stale state into the re-created topic.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from broker_process import BrokerProcess
from confluent_kafka import OFFSET_INVALID, Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from group_helpers import RDKAFKA, create_topic, produce, wait_for

OFFSETS = "__consumer_offsets"


def committed(bootstrap: str, group: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
    finally:
        c.close()


def commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    """A commit outside group management (generation -1), acknowledged."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        c.close()


class Committer(threading.Thread):
    """A subscribed consumer committing t-0 in a loop; remembers what was acked."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({**RDKAFKA, "bootstrap.servers": bootstrap,
                                  "group.id": group})
        self.topic = topic
        self.acked: list[int] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        self.consumer.subscribe([self.topic])
        n = 0
        while not self.stopping.is_set():
            self.consumer.poll(0.1)
            n += 1
            try:
                self.consumer.commit(offsets=[TopicPartition(self.topic, 0, n)],
                                     asynchronous=False)
            except KafkaException:
                continue  # rejoining after the unload: ILLEGAL_GENERATION, ...
            self.acked.append(n)
        self.consumer.close()

    def finish(self) -> int:
        self.stopping.set()
        self.join(30)
        assert not self.is_alive()
        return self.acked[-1]


def test_deleting_offsets_topic_unloads_groups(
        start_broker: Callable[..., BrokerProcess], name: str) -> None:
    b = start_broker()
    bs = b.bootstrap
    create_topic(bs, name, 1)
    produce(bs, name, 10, 1)
    idle, live = f"{name}-idle", f"{name}-live"
    commit(bs, idle, name, 5)
    assert committed(bs, idle, name) == 5
    worker = Committer(bs, live, name)
    worker.start()
    wait_for(lambda: len(worker.acked) >= 3, 30, "commits of the live group")

    admin = AdminClient({"bootstrap.servers": bs})
    assert admin.delete_topics([OFFSETS])[OFFSETS].result(30) is None

    # The deleted topic held the idle group's commit: it is gone now, as in
    # Kafka, not only after a restart.
    assert committed(bs, idle, name) == OFFSET_INVALID
    # The live group rejoins and commits into the re-created topic.
    before = len(worker.acked)
    wait_for(lambda: len(worker.acked) >= before + 3, 60, "commits after the deletion")
    last = worker.finish()
    assert committed(bs, live, name) == last

    # What is served is what is on disk: the same answers after a restart...
    assert b.stop() == 0
    b = start_broker(log_dir=b.log_dir, port=b.port)
    assert committed(bs, idle, name) == OFFSET_INVALID
    assert committed(bs, live, name) == last
    commit(bs, idle, name, 7)
    # ... and after a crash.
    b.kill()
    b = start_broker(log_dir=b.log_dir, port=b.port)
    assert committed(bs, idle, name) == 7
    assert committed(bs, live, name) == last
    assert b.stop() == 0
    output = "".join(b.output)
    assert "Traceback" not in output, output
