"""``__consumer_offsets`` is compacted: many commits, few records, the last one wins.

The broker runs with a small ``offsets.topic.segment.bytes`` (Kafka's broker
config, the segment size the offsets topic is created with) and a fast
cleaner.  A group commits many times; once the cleaner ran, the offsets
partition holds far fewer records than commits were made, and after a
restart (SIGTERM, then kill -9) the group's committed offsets are the last
ones committed.
"""

from __future__ import annotations

from pathlib import Path

import confluent_kafka as ck
from broker_process import BrokerProcess, wait_for
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from pylog.errors import CorruptBatchError
from pylog.log.checkpoint import OffsetCheckpointFile
from pylog.log.cleaner import CLEANER_CHECKPOINT
from pylog.records import read_batches

OFFSETS = "__consumer_offsets"
TOPIC = "committed"
GROUP = "many-commits"
COMMITS = 600
SETTINGS = ("log.cleaner.backoff.ms=100", "offsets.topic.num.partitions=1",
            "offsets.topic.segment.bytes=4096")


def _records_on_disk(data: Path) -> int:
    """Records in the partition's segment files, read while the broker runs:
    a file the cleaner swaps out between the listing and the read, or a batch
    being appended, is read again."""
    def count() -> int | None:
        n = 0
        try:
            for path in (data / f"{OFFSETS}-0").glob("*.log"):
                n += sum(b.record_count for b in read_batches(path.read_bytes()))
        except (FileNotFoundError, CorruptBatchError):
            return None
        return n
    return wait_for(count, 30, "a stable read of the offsets partition")


def _cleaned_to(data: Path) -> int:
    try:
        return OffsetCheckpointFile(data / CLEANER_CHECKPOINT).read().get((OFFSETS, 0), -1)
    except (OSError, ValueError):
        return -1


def _consumer(bootstrap: str) -> ck.Consumer:
    return ck.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                        "enable.auto.commit": False})


def _commit(bootstrap: str, first: int, count: int) -> tuple[int, int]:
    consumer = _consumer(bootstrap)
    try:
        for i in range(first, first + count):
            consumer.commit(offsets=[ck.TopicPartition(TOPIC, 0, i),
                                     ck.TopicPartition(TOPIC, 1, 2 * i)], asynchronous=False)
    finally:
        consumer.close()
    last = first + count - 1
    return last, 2 * last


def _committed(bootstrap: str) -> tuple[int, int]:
    consumer = _consumer(bootstrap)
    try:
        found = consumer.committed([ck.TopicPartition(TOPIC, 0), ck.TopicPartition(TOPIC, 1)],
                                   timeout=30)
    finally:
        consumer.close()
    return found[0].offset, found[1].offset


def test_offsets_topic_is_compacted_and_keeps_the_last_commit(tmp_path: Path) -> None:
    data = tmp_path / "data"
    node = BrokerProcess(data, *SETTINGS).start()
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
        last = _commit(node.bootstrap, 1, COMMITS)
        assert _committed(node.bootstrap) == last
        # The offsets topic was created with offsets.topic.segment.bytes.
        res = ConfigResource(ConfigResource.Type.TOPIC, OFFSETS)
        configs = admin.describe_configs([res])[res].result(30)
        assert configs["segment.bytes"].value == "4096"
        assert configs["cleanup.policy"].value == "compact"
        assert len(list((data / f"{OFFSETS}-0").glob("*.log"))) > 5  # many segments rolled
        # Two records (one a partition) a commit: far fewer once cleaned.
        wait_for(lambda: _records_on_disk(data) < COMMITS // 4, 60,
                 "the cleaner to compact __consumer_offsets")
        # The checkpoint is written after the cleaned segments are swapped in.
        wait_for(lambda: _cleaned_to(data) > COMMITS, 30, "the cleaner's checkpoint")

        node.stop()  # SIGTERM
        node = BrokerProcess(data, *SETTINGS, port=node.port).start()
        assert _committed(node.bootstrap) == last
        # More commits, then a crash.
        last = _commit(node.bootstrap, COMMITS + 1, 50)
        node.kill()
        node = BrokerProcess(data, *SETTINGS, port=node.port).start()
        assert _committed(node.bootstrap) == last
        assert _records_on_disk(data) < COMMITS // 2
    finally:
        node.stop()
