"""A disk that refuses a write: KAFKA_STORAGE_ERROR, the node halts, nothing acknowledged is lost.

The broker runs with RLIMIT_FSIZE set, so the kernel refuses the append that
would grow the segment past it (EFBIG, as a full disk's ENOSPC).  Kafka takes
the log dir offline on such an error and a node without another dir halts
(ReplicaManager's LogDirFailureHandler); the restart recovers as after kill -9.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import confluent_kafka as ck
import pytest
from broker_process import EVENT_LOOPS, BrokerProcess
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_wire import RawClient, produce_body

from pylog.protocol import ApiKey, ErrorCode
from pylog.records import build_batch

LIMIT = 2 << 20  # bytes a file of the broker may grow to
RECORDS = 50     # per batch, each about 2 KB: a batch is about 100 KB


def _batch(value: bytes) -> bytes:
    return bytes(build_batch([(1_700_000_000_000 + i, b"k%d" % i, value)
                              for i in range(RECORDS)]))


def _read_all(bootstrap: str, topic: str, count: int,
              partition: int = 0) -> list[tuple[int, bytes | None]]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                            "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
    consumer.assign([ck.TopicPartition(topic, partition, 0)])
    got: list[tuple[int, bytes | None]] = []
    try:
        while len(got) < count:
            # no more than are missing: consume() waits for the number asked
            msgs = consumer.consume(min(1000, count - len(got)), timeout=10)
            assert msgs, f"read {len(got)} of {count} records"
            for m in msgs:
                assert m.error() is None, m.error()
                got.append((m.offset(), m.value()))
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_refused_append_answers_storage_error_and_halts(tmp_path: Path, event_loop: str) -> None:
    data = tmp_path / "data"
    node = BrokerProcess(data, "log.index.size.max.bytes=65536", event_loop=event_loop,
                         file_size_limit=LIMIT).start()
    topic = "disk"
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        values: list[bytes] = []
        error = None
        with RawClient(node.bootstrap) as client:
            for _ in range(2 * LIMIT // (RECORDS * 2000) + 2):
                value = os.urandom(2000)
                response = client.request(ApiKey.PRODUCE, 8, produce_body(
                    topic, 0, _batch(value)))
                part = response.responses[0].partition_responses[0]
                if part.error_code:
                    error = part
                    break
                assert part.base_offset == len(values) * RECORDS
                values.append(value)
        assert error is not None, "every append fitted under the limit"
        assert error.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert "File too large" in error.error_message
        assert len(values) >= LIMIT // (RECORDS * 2100)  # the appends before it were fine
        # As Kafka: the node does not go on with a dir it cannot trust.
        assert node.wait_exit() == 1
    finally:
        node.kill()
    output = "".join(node.output)
    assert f"Error while appending records to {topic}-0 in dir {data}" in output
    assert f"Halting broker because dir {data} is offline" in output

    # The restart recovers: every acknowledged record, once and in order, and
    # nothing of the refused batch (its bytes were cut from the file).
    again = BrokerProcess(data, event_loop=event_loop).start()
    try:
        acked = len(values) * RECORDS
        got = _read_all(again.bootstrap, topic, acked)
        assert [offset for offset, _ in got] == list(range(acked))
        assert [value for _, value in got] == [v for v in values for _ in range(RECORDS)]
        with RawClient(again.bootstrap) as client:
            response = client.request(ApiKey.PRODUCE, 8, produce_body(
                topic, 0, _batch(b"after")))
            part = response.responses[0].partition_responses[0]
            assert (part.error_code, part.base_offset) == (0, acked)
    finally:
        assert again.stop() == 0


def _immutable(path: Path, on: bool) -> None:
    subprocess.run(["chattr", "+i" if on else "-i", str(path)], check=True,
                   capture_output=True)


def test_refused_producer_snapshot_takes_the_dir_offline(tmp_path: Path) -> None:
    """A partition dir that refuses the producer snapshot (made immutable:
    the filesystem, root included, refuses new files in it; appends to the
    segment already open go on): as Kafka's takeSnapshot, the error takes the
    dir offline and the node halts; the restart keeps every acknowledged record."""
    probe = tmp_path / "probe"
    probe.mkdir()
    try:
        _immutable(probe, True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("this filesystem has no immutable attribute (chattr +i)")
    _immutable(probe, False)
    data = tmp_path / "data"
    # Producer snapshots every 200 ms (Kafka writes them with the offset checkpoints).
    node = BrokerProcess(data, "log.flush.offset.checkpoint.interval.ms=200").start()
    topic = "snap"
    part = data / f"{topic}-0"
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        producer = ck.Producer({"bootstrap.servers": node.bootstrap,
                                "enable.idempotence": True})
        for i in range(100):
            producer.produce(topic, b"v%d" % i, partition=0)
        assert producer.flush(30) == 0
        _immutable(part, True)
        acked: list[int] = []
        for i in range(100, 200):
            producer.produce(topic, b"v%d" % i, partition=0,
                             on_delivery=lambda err, m: err or acked.append(m.offset()))
        producer.flush(30)
        assert node.wait_exit(30) == 1
    finally:
        if part.exists():
            _immutable(part, False)
        node.kill()
    output = "".join(node.output)
    assert f"Error while writing producer snapshot for {topic}-0 in dir {data}" in output
    assert f"Halting broker because dir {data} is offline" in output

    again = BrokerProcess(data).start()
    try:
        got = _read_all(again.bootstrap, topic, 100 + len(acked))
        assert [offset for offset, _ in got][:100 + len(acked)] == list(range(100 + len(acked)))
        assert [value for _, value in got][:100] == [b"v%d" % i for i in range(100)]
    finally:
        assert again.stop() == 0
