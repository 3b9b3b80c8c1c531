"""Unclean leader election, the scenario of Kafka's docs ("Unclean leader
election: What if they all die?"): a partition on replicas [0, 1]; the
follower stops, more records are written to the leader alone, then the
leader stops and only the stale follower comes back.  While
unclean.leader.election.enable is off the partition stays offline (leader
-1, LEADER_NOT_AVAILABLE): no out-of-sync replica may lead.  Turned on with
``pylog configs`` (the broker default, or the topic's config), the
controller elects the stale replica at once; the records written after it
fell behind are gone, and the old leader, back, truncates them too.  Node 2
holds no replica and stays up throughout.  Each case has its own cluster."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient
from node_cluster import NodeCluster
from replication_workload import codes, produce, read_log

LEADER, STALE, BYSTANDER = 0, 1, 2


def _configs(nodes: NodeCluster, *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pylog", "configs", "--bootstrap-server",
                           nodes.address(BYSTANDER), "--alter", "--add-config",
                           "unclean.leader.election.enable=true", *args],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Completed updating"), done.stdout


def _barrier(nodes: NodeCluster, name: str) -> None:
    """Until the controller has handled every event before this one (it
    handles them in order): a topic made now has its state in ZooKeeper."""
    nodes.create_topic(name, 1, 1)


def _metadata(nodes: NodeCluster, node_id: int, topic: str) -> tuple[int, int]:
    """(leader, error code) of partition 0 as the node's Metadata answers."""
    md = AdminClient({"bootstrap.servers": nodes.address(node_id)}).list_topics(topic,
                                                                                timeout=30)
    p = md.topics[topic].partitions[0]
    return p.leader, p.error.code() if p.error is not None else KafkaError.NO_ERROR


@pytest.mark.parametrize("where", ["broker-default", "topic"])
def test_stale_replica_leads_only_with_unclean_election(
        start_nodes: Callable[..., NodeCluster], topic: str, where: str) -> None:
    nodes = start_nodes(3)
    nodes.create_topic(topic, assignment=[[LEADER, STALE]])
    assert nodes.leader(topic, 0) == LEADER
    kept = [f"a{i}" for i in range(5)]
    assert codes(produce(nodes.bootstrap, topic, kept, "all")) == [KafkaError.NO_ERROR] * 5
    nodes.wait_replicas_equal(topic, 0, [LEADER, STALE])

    nodes.stop_node(STALE)
    nodes.wait_isr(topic, [0], [LEADER])
    lost = [f"b{i}" for i in range(5)]
    assert codes(produce(nodes.address(LEADER), topic, lost, "all")) == [
        KafkaError.NO_ERROR] * 5  # committed: the ISR is the leader alone
    nodes.stop_node(LEADER)
    nodes.start_node(STALE)
    _barrier(nodes, f"{topic}-barrier")

    # Offline: the stale replica is not in the ISR, and may not lead.
    assert nodes.state(topic, 0)["leader"] == -1
    assert nodes.isr(topic, 0) == [LEADER]
    for node_id in (STALE, BYSTANDER):
        assert _metadata(nodes, node_id, topic) == (-1, KafkaError.LEADER_NOT_AVAILABLE)

    if where == "broker-default":
        _configs(nodes, "--entity-type", "brokers", "--entity-default")
    else:
        _configs(nodes, "--entity-type", "topics", "--entity-name", topic)
    nodes.wait_leader(topic, 0, [STALE])
    assert nodes.isr(topic, 0) == [STALE]
    nodes.wait_metadata(topic, [STALE, BYSTANDER])
    assert [v for _, v in read_log(nodes.address(STALE), topic, 1)[0]] == kept

    more = [f"c{i}" for i in range(5)]
    assert codes(produce(nodes.address(STALE), topic, more, "all")) == [
        KafkaError.NO_ERROR] * 5
    # The old leader comes back: it drops what the new leader never had.
    nodes.start_node(LEADER)
    nodes.wait_isr(topic, [0], [LEADER, STALE])
    log = nodes.wait_replicas_equal(topic, 0, [LEADER, STALE])
    assert not any(v.encode() in log for v in lost)
    assert [v for _, v in read_log(nodes.bootstrap, topic, 1)[0]] == kept + more
