"""kill -9 of the real broker process at awkward moments, and what a restart
must then show (Kafka's promises for one broker): acknowledged records are
all there, once, in order, at their offsets; DeleteRecords' log start offset
holds; a topic or a partition count is there whole, with its configs, or not
at all; the broker always starts again."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from kafka_wire import RawClient, latest_offset
from test_broker_protocol import metadata

from pylog.protocol import ApiKey

ck = pytest.importorskip("confluent_kafka")
admin = pytest.importorskip("confluent_kafka.admin")

# Enough partitions that making their directories takes far longer than the
# test's reaction to the first one: the kill lands while they are being made.
MANY = 400
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "123456", "retention.ms": "4321000"}


def _wait_for_dir(path: Path) -> None:
    while not path.exists():
        time.sleep(0.0005)


def _described(bootstrap: str, topic: str) -> dict[str, str]:
    client = admin.AdminClient({"bootstrap.servers": bootstrap})
    resource = admin.ConfigResource("topic", topic)
    found = client.describe_configs([resource])[resource].result(10)
    return {name: entry.value for name, entry in found.items()}


def _partition_count(bootstrap: str, topic: str) -> int | None:
    with RawClient(bootstrap) as c:
        t = metadata(c, topic, allow=False).topics[0]
        return None if t.error_code else len(t.partitions)


def _kill_midway_and_restart(start_broker, b, c: RawClient, data, topic: str, first_dir: str):
    """kill -9 ``b`` as soon as ``first_dir`` exists (``c`` sent the request
    making ``topic``'s partitions), check the cut was real, restart, and check
    the topic is back with all MANY partitions, its configs, and its last
    partition served.  Returns the restarted broker."""
    _wait_for_dir(data / first_dir)
    b.kill()
    c.close()
    made = len([p for p in data.iterdir() if p.name.startswith(f"{topic}-")])
    assert made < MANY  # cut short indeed
    b2 = start_broker(log_dir=data, port=b.port)
    assert _partition_count(b2.bootstrap, topic) == MANY
    configs = _described(b2.bootstrap, topic)
    assert {k: configs[k] for k in TOPIC_CONFIGS} == TOPIC_CONFIGS
    with RawClient(b2.bootstrap) as rc:
        assert latest_offset(rc, topic, MANY - 1) == 0
    return b2


def test_create_topics_cut_short_by_kill_9_comes_back_whole(start_broker, tmp_path) -> None:
    """kill -9 while CreateTopics makes the partition directories of a big
    topic.  Kafka writes a topic in one metadata record batch: after the
    restart it is there with every partition and its configs, or not at all.
    (It came back with the partitions made so far and default configs: a
    compacted topic turned into a deleting one, and CreateTopics retried by
    the client was refused with TOPIC_ALREADY_EXISTS.)"""
    data = tmp_path / "data"
    b = start_broker(log_dir=data)
    c = RawClient(b.bootstrap)
    c.send(
        ApiKey.CREATE_TOPICS,
        7,
        {
            "timeout_ms": 60000,
            "validate_only": False,
            "topics": [
                {
                    "name": "big",
                    "num_partitions": MANY,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in TOPIC_CONFIGS.items()],
                }
            ],
        },
    )
    # The first directory was made, so the topic was created: whole.
    b2 = _kill_midway_and_restart(start_broker, b, c, data, "big", "big-0")
    p = ck.Producer({"bootstrap.servers": b2.bootstrap})
    p.produce("big", key=b"k", value=b"v", partition=MANY - 1)
    assert p.flush(10) == 0
    assert b2.stop() == 0
    # and it stays so after a clean restart
    b3 = start_broker(log_dir=data, port=b.port)
    assert _partition_count(b3.bootstrap, "big") == MANY
    with RawClient(b3.bootstrap) as c:
        assert latest_offset(c, "big", MANY - 1) == 1


def test_create_partitions_cut_short_by_kill_9_comes_back_whole(start_broker, tmp_path) -> None:
    """kill -9 while CreatePartitions makes new partition directories: after
    the restart the topic has its old count or the new one, as in Kafka (one
    metadata record batch), not the count made so far; and the new
    partitions have the topic's configs."""
    data = tmp_path / "data"
    b = start_broker(log_dir=data)
    client = admin.AdminClient({"bootstrap.servers": b.bootstrap})
    for f in client.create_topics([admin.NewTopic("grown", 2, 1, config=TOPIC_CONFIGS)]).values():
        f.result(10)
    c = RawClient(b.bootstrap)
    c.send(
        ApiKey.CREATE_PARTITIONS,
        3,
        {
            "topics": [{"name": "grown", "count": MANY, "assignments": None}],
            "timeout_ms": 60000,
            "validate_only": False,
        },
    )
    _kill_midway_and_restart(start_broker, b, c, data, "grown", "grown-2")


def _produce_until_killed(
    bootstrap: str, topic: str, tag: bytes, acked: dict, stop: threading.Event, partitions: int
) -> None:
    p = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 2,
            "batch.size": 8000,
            "enable.idempotence": False,
            "retries": 0,
            "message.timeout.ms": 3000,
        }
    )

    def delivered(err: object, msg: object) -> None:
        if not err:
            acked[(msg.partition(), msg.value())] = msg.offset()

    n = 0
    while not stop.is_set():
        try:
            p.produce(
                topic, value=tag + b"%08d" % n, partition=n % partitions, on_delivery=delivered
            )
        except BufferError:
            p.poll(0.01)
            continue
        n += 1
        p.poll(0)
        if n % 200 == 0:
            time.sleep(0.001)
    p.purge()
    p.flush(5)


def _read_back(bootstrap: str, topic: str, partitions: int) -> dict[int, list]:
    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "check",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
            # Retention may move the log start between the watermark query
            # and the first fetch: the reset then goes to the new start, not
            # to the end, where this loop would wait forever.
            "auto.offset.reset": "earliest",
        }
    )
    ends = {}
    for p in range(partitions):
        ends[p] = c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)
    c.assign([ck.TopicPartition(topic, p, ends[p][0]) for p in range(partitions)])
    out: dict[int, list] = {p: [] for p in range(partitions)}
    while any(
        ends[p][1] > (out[p][-1][0] + 1 if out[p] else ends[p][0]) for p in range(partitions)
    ):
        for m in c.consume(5000, 1.0):
            assert not m.error(), m.error()
            out[m.partition()].append((m.offset(), m.value()))
    c.close()
    return out


def test_kill_9_during_rolls_retention_and_delete_records(start_broker, tmp_path) -> None:
    """Repeated kill -9 while acks=all producers fill tiny segments, retention
    deletes old ones and DeleteRecords moves the log start: after every
    restart each partition is a contiguous, in-order run of offsets starting
    at a log start no lower than the one DeleteRecords answered, holding
    every acknowledged record at or after it exactly once at its offset."""
    data = tmp_path / "data"
    overrides = (
        "log.segment.bytes=16384",
        "log.retention.check.interval.ms=20",
        "log.segment.delete.delay.ms=0",
    )
    topic, partitions = "rolling", 2
    acked: dict[tuple[int, bytes], int] = {}
    floor = {p: 0 for p in range(partitions)}  # log start offsets DeleteRecords answered
    port = None
    for cycle in range(4):
        b = start_broker(*overrides, log_dir=data, port=port)
        port = b.port
        client = admin.AdminClient({"bootstrap.servers": b.bootstrap})
        if cycle == 0:
            for f in client.create_topics(
                [admin.NewTopic(topic, partitions, 1, config={"retention.bytes": "200000"})]
            ).values():
                f.result(10)
        stop = threading.Event()
        producer = threading.Thread(
            target=_produce_until_killed,
            args=(b.bootstrap, topic, b"c%d-" % cycle, acked, stop, partitions),
        )
        producer.start()
        while len(acked) < 20_000 * (cycle + 1):
            time.sleep(0.01)
        # DeleteRecords up to the newest acknowledged record of partition 0
        target = max(o for (p, _), o in dict(acked).items() if p == 0)  # a copy: still filling
        done = client.delete_records([ck.TopicPartition(topic, 0, target)])
        floor[0] = max(floor[0], next(iter(done.values())).result(10).low_watermark)
        b.kill()  # producers still sending, retention and rolls under way
        stop.set()
        producer.join()
    b = start_broker(*overrides, log_dir=data, port=port)
    stored = _read_back(b.bootstrap, topic, partitions)
    for p, records in stored.items():
        offsets = [o for o, _ in records]
        assert offsets, f"partition {p} is empty"
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), p
        assert offsets[0] >= floor[p]
        values = [v for _, v in records]
        assert values == sorted(values) and len(set(values)) == len(values)
    where = {(p, v): o for p, records in stored.items() for o, v in records}
    start = {p: records[0][0] for p, records in stored.items()}
    lost = [(k, o) for k, o in acked.items() if o >= start[k[0]] and where.get(k) != o]
    assert not lost, f"{len(lost)} acknowledged records lost or moved, e.g. {lost[:3]}"
