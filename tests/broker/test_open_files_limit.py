"""A node out of file descriptors: what it refuses, and how it keeps serving.

Each partition holds five descriptors (its segment, and each index twice: the
file and the mmap's own dup).  The broker lifts its soft RLIMIT_NOFILE to the
hard one at start, as the JVM does for Kafka; past the hard one, creating a
topic or partitions fails with KAFKA_STORAGE_ERROR naming the cause, leaves no
partition directory and no descriptor behind, and the node goes on serving.
The limits here are real ones, set on the broker process (``setrlimit``).
"""

from __future__ import annotations

import os
from pathlib import Path

import confluent_kafka as ck
import pytest
from broker_process import EVENT_LOOPS, BrokerProcess, wait_for
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka_wire import RawClient

from pylog.protocol import ApiKey, ErrorCode

LOW = 200  # descriptors: room for a few dozen partitions


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _soft_limit(pid: int) -> int:
    with open(f"/proc/{pid}/limits") as f:
        line = next(line for line in f if line.startswith("Max open files"))
    return int(line.split()[3])


def _dirs(data: Path, topic: str) -> list[str]:
    return sorted(p.name for p in data.iterdir() if p.name.startswith(f"{topic}-"))


def _create(client: RawClient, name: str, partitions: int) -> tuple[int, str | None]:
    r = client.request(ApiKey.CREATE_TOPICS, 7, {
        "timeout_ms": 10000, "validate_only": False,
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                    "assignments": [], "configs": []}]})
    return r.topics[0].error_code, r.topics[0].error_message


def test_the_soft_limit_is_raised_to_the_hard_one(tmp_path: Path) -> None:
    node = BrokerProcess(tmp_path / "data", open_files=(256, 4096)).start()
    try:
        assert _soft_limit(node.proc.pid) == 4096
    finally:
        node.stop()


def test_out_of_descriptors_a_create_is_refused_whole_and_the_node_serves_on(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    node = BrokerProcess(data, open_files=(LOW, LOW)).start()
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic("few", 3, 1)])["few"].result(30)
        pid = node.proc.pid
        before = _fds(pid)
        with pytest.raises(ck.KafkaException) as refused:
            admin.create_topics([NewTopic("many", 300, 1)])["many"].result(30)
        err = refused.value.args[0]
        assert err.code() == ck.KafkaError.KAFKA_STORAGE_ERROR
        assert "Too many open files" in err.str() and "many" in err.str()
        assert _dirs(data, "many") == []  # not one partition of it stayed
        assert _fds(pid) == before  # and not one descriptor
        with pytest.raises(ck.KafkaException) as refused:
            admin.create_partitions([NewPartitions("few", 300)])["few"].result(30)
        assert refused.value.args[0].code() == ck.KafkaError.KAFKA_STORAGE_ERROR
        assert _dirs(data, "few") == ["few-0", "few-1", "few-2"]
        assert _fds(pid) == before
        md = admin.list_topics(timeout=10)
        assert "many" not in md.topics and len(md.topics["few"].partitions) == 3
        # Still a broker: records go in and come back.
        producer = ck.Producer({"bootstrap.servers": node.bootstrap})
        for p in range(3):
            producer.produce("few", f"v{p}".encode(), partition=p)
        assert producer.flush(30) == 0
        consumer = ck.Consumer({"bootstrap.servers": node.bootstrap, "group.id": "g",
                                "enable.auto.commit": False})
        consumer.assign([ck.TopicPartition("few", p, 0) for p in range(3)])
        got: list[bytes] = []
        wait_for(lambda: got.extend(m.value() for m in consumer.consume(3, 1)
                                    if not m.error()) or len(got) == 3, 30, "the records")
        consumer.close()
        assert sorted(got) == [b"v0", b"v1", b"v2"]
        del admin, producer, refused  # librdkafka's threads go now, not at a later gc
    finally:
        node.stop()
    assert "could not create topic many: [Errno 24] Too many open files" in "".join(node.output)
    # The registry never kept what it refused: a restart finds the same topics.
    node = BrokerProcess(data, port=node.port).start()
    try:
        md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(timeout=10)
        assert "many" not in md.topics and len(md.topics["few"].partitions) == 3
    finally:
        node.stop()


def test_a_group_whose_partition_cannot_be_made_gets_coordinator_not_available(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    node = BrokerProcess(data, open_files=(LOW, LOW)).start()
    try:
        with RawClient(node.bootstrap) as c:
            # Use the descriptors up, one partition at a time, on this one
            # connection (a new one would need a descriptor too).
            n = 0
            while _create(c, f"fill{n}", 1)[0] == 0:
                n += 1
            assert _create(c, "one-more", 1)[0] == ErrorCode.KAFKA_STORAGE_ERROR
            r = c.request(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
            assert r.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
            assert "Too many open files" in r.error_message
            assert r.node_id == -1
            # No half of __consumer_offsets either.
            assert _dirs(data, "__consumer_offsets") == []
            md = c.request(ApiKey.METADATA, 9, {"topics": None,
                                                "allow_auto_topic_creation": False})
            assert "__consumer_offsets" not in {t.name for t in md.topics}
    finally:
        node.stop()


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_connections_past_the_limit_wait_and_the_log_stays_short(
        tmp_path: Path, event_loop: str) -> None:
    node = BrokerProcess(tmp_path / "data", event_loop=event_loop,
                         open_files=(64, 64)).start()
    clients: list[RawClient] = []
    try:
        for _ in range(100):  # the kernel completes them all into the backlog
            clients.append(RawClient(node.bootstrap, timeout=0.2))
        answered = 0
        for c in clients:
            try:
                c.request(ApiKey.API_VERSIONS, 0, {})
                answered += 1
            except OSError:  # not accepted yet, or (uvloop) accepted and closed
                pass
        assert 0 < answered < 100
        for c in clients:
            c.close()
        clients.clear()
        # Descriptors free again: a new client is served.
        def served() -> bool:
            try:
                with RawClient(node.bootstrap, timeout=2) as c:
                    return c.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
            except OSError:
                return False
        wait_for(served, 30, "a connection once descriptors are free")
    finally:
        for c in clients:
            c.close()
        node.stop()
    output = "".join(node.output)
    # asyncio's own loop would log a traceback per failed accept, ~1024 per
    # wake-up (hundreds of MB in seconds): one line per 10 s instead.
    assert "Traceback" not in output
    assert output.count("cannot accept connections") <= 3
