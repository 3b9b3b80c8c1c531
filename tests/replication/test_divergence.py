"""Replicas that diverged are made equal again by leader epochs: a replica
coming back truncates what the current leader never had (records written
at an epoch that ended earlier on the leader) and then copies the leader's,
so that every replica's log ends up byte for byte the same, and no consumer
reads the lost records.  Each test has its own cluster: they kill nodes."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import KafkaError
from node_cluster import NodeCluster, segment_bytes
from replication_workload import codes, produce, read_log

# Long: the followers' pause must not drop them from the ISR here, so the
# new leader is elected cleanly from it.
NODE_OVERRIDES = ("replica.lag.time.max.ms=30000",)


def _epochs(nodes: NodeCluster, node_id: int, topic: str) -> str:
    return (nodes.partition_dir(node_id, topic, 0) / "leader-epoch-checkpoint").read_text()


def test_returning_leader_truncates_records_the_new_leader_never_had(
        start_nodes: Callable[..., NodeCluster], topic: str) -> None:
    """acks=1 records on a leader whose followers are hung (SIGSTOP) never
    reach them; the leader is killed, a follower takes over (it was still in
    the ISR) and takes new records at the same offsets; the old leader,
    restarted, truncates its records and copies the new leader's."""
    nodes = start_nodes(3, *NODE_OVERRIDES)
    nodes.create_topic(topic, 1, 3)
    old = nodes.leader(topic, 0)
    followers = [i for i in range(nodes.count) if i != old]
    assert codes(produce(nodes.bootstrap, topic, [f"a{i}" for i in range(5)], "all")) == [
        KafkaError.NO_ERROR] * 5
    nodes.wait_replicas_equal(topic, 0, range(nodes.count))

    for f in followers:
        nodes.pause(f)
    lost = [f"lost{i}" for i in range(5)]
    results = produce(nodes.address(old), topic, lost, "1")
    assert codes(results) == [KafkaError.NO_ERROR] * 5
    assert [offset for _, offset in results] == list(range(5, 10))
    nodes.kill_node(old, wait_unregistered=False)
    for f in followers:
        nodes.resume(f)
    new = nodes.wait_leader(topic, 0, followers)
    nodes.wait_isr(topic, [0], followers)
    # A fetch the leader had parked for a follower may have been answered
    # with the first of them before the pause took hold (the follower reads
    # it when it resumes); no later one reached a follower.
    new_log = segment_bytes(nodes.partition_dir(new, topic, 0))
    kept = [v for v in lost if v.encode() in new_log]
    assert kept == lost[:len(kept)] and len(kept) <= 1
    written = produce(",".join(nodes.address(f) for f in followers), topic,
                      [f"c{i}" for i in range(5)], "all")
    assert codes(written) == [KafkaError.NO_ERROR] * 5
    # At the offsets where the old leader holds the rest of ``lost``.
    assert [offset for _, offset in written] == list(range(5 + len(kept), 10 + len(kept)))
    old_log = segment_bytes(nodes.partition_dir(old, topic, 0))
    assert all(v.encode() in old_log for v in lost)

    nodes.start_node(old)
    nodes.wait_isr(topic, [0], range(nodes.count))
    log = nodes.wait_replicas_equal(topic, 0, range(nodes.count))
    assert not any(v.encode() in log for v in lost[len(kept):])
    assert _epochs(nodes, old, topic) == _epochs(nodes, new, topic)
    values = [v for _, v in read_log(nodes.bootstrap, topic, 1)[0]]
    assert values == [f"a{i}" for i in range(5)] + kept + [f"c{i}" for i in range(5)]
    assert f"truncating {topic}-0 to {5 + len(kept)}" in nodes.nodes[old].log_text()


def test_replica_that_led_an_epoch_without_writing_follows_the_next_leader(
        start_nodes: Callable[..., NodeCluster], topic: str) -> None:
    """A node becomes leader (its new epoch starts at its log end in its
    epoch cache) and loses the lead, while running, before any record is
    written in that epoch: it hangs (SIGSTOP) until its ZooKeeper session
    expires and another replica is elected.  The new leader never knew that
    epoch; the node, resumed, must drop its empty epoch (as Kafka's
    truncateTo does even when no record goes) and follow, back in the ISR."""
    nodes = start_nodes(3, *NODE_OVERRIDES)
    nodes.create_topic(topic, 1, 3)
    assert codes(produce(nodes.bootstrap, topic, [f"a{i}" for i in range(5)], "all")) == [
        KafkaError.NO_ERROR] * 5
    everyone = range(nodes.count)
    nodes.wait_replicas_equal(topic, 0, everyone)

    first = nodes.leader(topic, 0)
    nodes.stop_node(first)  # controlled: the lead moves to another replica
    empty = nodes.wait_leader(topic, 0, set(everyone) - {first})
    nodes.start_node(first)
    nodes.wait_isr(topic, [0], everyone)
    nodes.pause(empty)  # ...which loses it before anything is written
    nodes.wait(lambda: empty not in nodes.registered(), f"node {empty}'s session to expire")
    nodes.wait_leader(topic, 0, set(everyone) - {empty})
    nodes.resume(empty)
    nodes.wait_isr(topic, [0], everyone, timeout=60)

    written = produce(nodes.bootstrap, topic, [f"b{i}" for i in range(5)], "all")
    assert codes(written) == [KafkaError.NO_ERROR] * 5
    nodes.wait_replicas_equal(topic, 0, everyone)
    epochs = {_epochs(nodes, i, topic) for i in everyone}
    assert len(epochs) == 1, epochs
