"""The in-sync replica set as clients feel it: followers that stop fetching
(SIGSTOP: a hung process) leave the ISR after replica.lag.time.max.ms, and
rejoin once they catch up; acks=all needs min.insync.replicas of them
(NOT_ENOUGH_REPLICAS before the append, NOT_ENOUGH_REPLICAS_AFTER_APPEND when
the ISR shrank while the produce waited); consumers never get a record above
the high watermark, the ISR's smallest log end.

One cluster for the module; each test resumes what it paused.  The session
timeout is ZooKeeper's longest here (10 s) so that the leader's lag check,
not the controller's view of a dead session, takes the followers out."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from node_cluster import NodeCluster, segment_bytes
from replication_workload import codes, high_watermark, produce, read_log

LAG_MS = 6000
NODE_OVERRIDES = (f"replica.lag.time.max.ms={LAG_MS}",)
NODE_OPTIONS = {"session_timeout_ms": 10000}
# A scenario that needs the acknowledgement inside the lag window is tried
# again this often when the machine was too slow to get it there.
ATTEMPTS = 3


def test_acks_all_needs_min_insync_replicas(nodes: NodeCluster, topic: str) -> None:
    nodes.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    leader = nodes.leader(topic, 0)
    first, second = [i for i in range(nodes.count) if i != leader]
    at_leader = nodes.address(leader)
    assert codes(produce(at_leader, topic, ["before"], "all")) == [KafkaError.NO_ERROR]

    nodes.pause(first)
    nodes.pause(second)
    nodes.wait_isr(topic, [0], [leader], by_leader=True)
    # The leader alone is below min.insync.replicas: acks=all is refused
    # before the append, acks=1 does not care.
    assert codes(produce(at_leader, topic, ["refused"], "all")) == [
        KafkaError.NOT_ENOUGH_REPLICAS]
    assert codes(produce(at_leader, topic, ["acks-1"], "1")) == [KafkaError.NO_ERROR]

    nodes.resume(first)
    nodes.wait_isr(topic, [0], [leader, first], by_leader=True)
    assert codes(produce(at_leader, topic, ["after"], "all")) == [KafkaError.NO_ERROR]

    nodes.resume(second)
    nodes.wait_isr(topic, [0], range(nodes.count))
    values = [v for _, v in read_log(nodes.bootstrap, topic, 1)[0]]
    assert values == ["before", "acks-1", "after"]  # the refused one was never appended


def test_isr_shrinking_under_a_waiting_acks_all_produce(nodes: NodeCluster, topic: str) -> None:
    """Both followers hang while an acks=all record waits for them: once the
    leader drops them from the ISR, the record is committed by the leader
    alone, below min.insync.replicas: NOT_ENOUGH_REPLICAS_AFTER_APPEND (the
    record stays in the log, as in Kafka)."""
    nodes.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    leader = nodes.leader(topic, 0)
    followers = [i for i in range(nodes.count) if i != leader]
    for attempt in range(ATTEMPTS):
        for f in followers:
            nodes.pause(f)
        # Sent at once: it reaches the leader well inside the lag window.
        results = produce(nodes.address(leader), topic, [f"waited-{attempt}"], "all")
        for f in followers:
            nodes.resume(f)
        nodes.wait_isr(topic, [0], range(nodes.count))
        if codes(results) == [KafkaError.NOT_ENOUGH_REPLICAS]:
            continue  # the ISR had shrunk before it arrived: try again
        assert codes(results) == [KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND]
        values = [v for _, v in read_log(nodes.bootstrap, topic, 1)[0]]
        assert values[-1] == f"waited-{attempt}"
        return
    pytest.fail(f"the produce never reached the leader within {LAG_MS} ms of the pause")


def test_consumers_never_read_above_the_high_watermark(nodes: NodeCluster, topic: str) -> None:
    """Replicas [1, 2], 1 leading: with 2 hung but still in the ISR, acks=1
    records are in the leader's log but above the high watermark, so no
    consumer gets them; once the leader drops 2 from the ISR (after
    replica.lag.time.max.ms) the high watermark passes them and they are
    read.  2 resumes, catches up and rejoins the ISR."""
    leader, follower = 1, 2
    nodes.create_topic(topic, assignment=[[leader, follower]])
    assert nodes.leader(topic, 0) == leader
    at_leader = nodes.address(leader)
    assert codes(produce(at_leader, topic, [f"committed-{i}" for i in range(3)], "all")) == [
        KafkaError.NO_ERROR] * 3
    consumer = Consumer({"bootstrap.servers": at_leader, "group.id": topic,
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        got = []
        while len(got) < 3:
            msg = consumer.poll(1)
            if msg is not None and not msg.error():
                got.append(msg.value().decode())
        assert got == [f"committed-{i}" for i in range(3)]

        for attempt in range(ATTEMPTS):
            hidden = [f"above-hw-{attempt}-{i}" for i in range(3)]
            nodes.pause(follower)
            results = produce(at_leader, topic, hidden, "1")
            assert codes(results) == [KafkaError.NO_ERROR] * 3
            isr_now = nodes.isr(topic, 0)
            hw_now = high_watermark(at_leader, topic)
            if follower not in nodes.isr(topic, 0):
                # The lag window closed before the acknowledgements came back.
                nodes.resume(follower)
                nodes.wait_isr(topic, [0], [leader, follower])
                continue
            # Appended on the leader, yet above the high watermark.
            assert isr_now == [leader, follower]
            assert hw_now == results[0][1]
            leader_log = segment_bytes(nodes.partition_dir(leader, topic, 0))
            assert all(v.encode() in leader_log for v in hidden)
            # Every record the consumer gets now came after the ISR shrank
            # (the leader writes the ISR to ZooKeeper before it moves the
            # high watermark past the records).
            seen: list[tuple[str, list[int]]] = []

            def read_one(seen: list[tuple[str, list[int]]] = seen,
                         hidden: list[str] = hidden) -> bool:
                msg = consumer.poll(0.5)
                if msg is not None and not msg.error():
                    seen.append((msg.value().decode(), nodes.isr(topic, 0)))
                return len(seen) == len(hidden)

            nodes.wait(read_one, "the records above the high watermark to be read at last")
            assert [v for v, _ in seen] == hidden
            assert [isr for _, isr in seen] == [[leader]] * len(hidden)
            break
        else:
            pytest.fail(f"the records never got acknowledged within {LAG_MS} ms of the pause")
    finally:
        consumer.close()

    nodes.resume(follower)
    nodes.wait_isr(topic, [0], [leader, follower])
    nodes.wait_replicas_equal(topic, 0, [leader, follower])
