"""A node of ``pylog broker --nodes 3`` killed with SIGKILL: its partitions
(replication factor 1) have no leader once its ZooKeeper session expires
while the other nodes go on serving theirs, and it comes back with every
record it acknowledged; the controller killed: another node takes over and
topic admin goes on; the controller frozen past its session: it comes back
as a plain node without a restart.  Each test has a cluster of its own.

While a node is down the supervisor is held (SIGSTOP), so its restart waits
until the test has seen the cluster without it; SIGCONT lets the supervisor
notice the death and restart the node, as it would have at once."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

from cluster_clients import consume, ends_of, produce
from cluster_process import SESSION_TIMEOUT, SESSION_TIMEOUT_MS, ClusterProcess
from cluster_wire import (
    agreed,
    alter_topic_configs,
    brokers,
    create_partitions,
    create_topic,
    delete_topic,
    describe_cluster,
    partitions,
    settled_leaders,
    topic_configs,
    zk_broker_ids,
    zk_controller,
)

from pylog.protocol import ErrorCode

StartCluster = Callable[..., ClusterProcess]
NODES = 3
PARTITIONS = 6
# A liveness margin past the session timeout for the cluster to act on an expiry.
MARGIN_S = 30


def test_a_killed_node_that_is_not_the_controller(start_cluster: StartCluster) -> None:
    cluster = start_cluster(NODES, SESSION_TIMEOUT)
    topic = "spread"
    assert create_topic(cluster.address(0), topic, PARTITIONS).error_code == 0
    led = settled_leaders(cluster.addresses, topic, PARTITIONS)
    controller, _ = describe_cluster(cluster.address(0))
    victim = next(i for i in range(NODES) if i != controller)
    theirs = sorted(p for p, leader in led.items() if leader == victim)
    ours = sorted(p for p, leader in led.items() if leader != victim)
    assert theirs and ours
    before = produce("confluent-kafka", cluster.bootstrap, topic, range(PARTITIONS), 10,
                     "before")
    others = [cluster.address(i) for i in range(NODES) if i != victim]
    pid = cluster.node_pids()[victim]

    with cluster.held():
        os.kill(pid, signal.SIGKILL)

        # After its session expired, every other node's Metadata: the node is
        # gone, its partitions have no leader, the rest are led as before.
        def without_victim(address: str) -> dict[int, tuple[int, int]] | None:
            found = partitions(address, topic)
            if victim in brokers(address) or found is None:
                return None
            return found
        want = {p: ((ErrorCode.LEADER_NOT_AVAILABLE, -1) if p in theirs else (0, led[p]))
                for p in range(PARTITIONS)}
        agreed(others, without_victim, want, SESSION_TIMEOUT_MS / 1000 + MARGIN_S,
               f"node {victim}'s partitions to lose their leader")
        assert zk_broker_ids(cluster.zookeeper_address) == sorted(set(range(NODES)) - {victim})
        assert zk_controller(cluster.zookeeper_address) == controller

        # The others serve their partitions meanwhile.
        bootstrap = ",".join(others)
        during = produce("aiokafka", bootstrap, topic, ours, 10, "during")
        ends = {p: ends_of(before)[p] + 10 for p in ours}
        read = consume("kafka-python", bootstrap, topic, ends)
        assert read == {p: before[p] + during[p] for p in ours}

    cluster.wait_restarted(victim, pid)
    # Back: it leads its partitions again and serves everything it acknowledged.
    assert settled_leaders(cluster.addresses, topic, PARTITIONS) == led
    assert zk_broker_ids(cluster.zookeeper_address) == [0, 1, 2]
    after = produce("kafka-python", cluster.bootstrap, topic, range(PARTITIONS), 5, "after")
    everything = {p: before[p] + during.get(p, []) + after[p] for p in range(PARTITIONS)}
    for p in range(PARTITIONS):
        assert [o for o, _ in everything[p]] == list(range(len(everything[p])))
    assert consume("confluent-kafka", cluster.bootstrap, topic,
                   ends_of(everything)) == everything


def test_a_killed_controller_is_replaced(start_cluster: StartCluster) -> None:
    """Another node becomes the controller once the old one's session
    expired; creating, growing, altering the configs of and deleting topics
    work under it, on the nodes left and on the old controller once back."""
    cluster = start_cluster(NODES, SESSION_TIMEOUT)
    old, _ = agreed(cluster.addresses, describe_cluster)
    assert create_topic(cluster.address(old), "kept", 3).error_code == 0
    settled_leaders(cluster.addresses, "kept", 3)
    others = [cluster.address(i) for i in range(NODES) if i != old]
    pid = cluster.node_pids()[old]

    with cluster.held():
        os.kill(pid, signal.SIGKILL)

        def new_controller(address: str) -> tuple[int, list[int]] | None:
            controller, ids = describe_cluster(address)
            return (controller, ids) if controller not in (old, -1) and old not in ids else None
        new, ids = agreed(others, new_controller, timeout=SESSION_TIMEOUT_MS / 1000 + MARGIN_S,
                          what="another node to become the controller")
        assert ids == sorted(set(range(NODES)) - {old})
        assert zk_controller(cluster.zookeeper_address) == new

        # Admin through each node left: the controller's work is done.
        for i, address in enumerate(others):
            topic = f"made-{i}"
            assert create_topic(address, topic, 2).error_code == 0
            assert set(settled_leaders(others, topic, 2).values()) <= set(ids)
            assert create_partitions(address, topic, 4).error_code == 0
            assert set(settled_leaders(others, topic, 4).values()) == set(ids)
            assert alter_topic_configs(address, topic, {"retention.ms": "60000"}).error_code == 0
            agreed(others, lambda a, t=topic: topic_configs(a, t)["retention.ms"], "60000")
            acked = produce("confluent-kafka", ",".join(others), topic, range(4), 3, "new")
            assert consume("aiokafka", ",".join(others), topic, ends_of(acked)) == acked
        assert delete_topic(others[0], "made-0").error_code == 0
        agreed(others, lambda a: partitions(a, "made-0") is None, True)

    cluster.wait_restarted(old, pid)
    # The old controller, back as one node among three, agrees with the rest.
    agreed(cluster.addresses, describe_cluster, (new, [0, 1, 2]))
    for address in cluster.addresses:
        assert partitions(address, "made-0") is None
    settled_leaders(cluster.addresses, "kept", 3)
    settled_leaders(cluster.addresses, "made-1", 4)
    assert topic_configs(cluster.address(old), "made-1")["retention.ms"] == "60000"


def test_a_frozen_controller_comes_back_as_a_node(start_cluster: StartCluster) -> None:
    """The controller stopped (SIGSTOP) past its ZooKeeper session: another
    node takes over and its partitions lose their leader; resumed, the same
    process (no restart) finds its session expired, registers again, leads
    its partitions again with every record it acknowledged, and follows the
    new controller."""
    cluster = start_cluster(NODES, SESSION_TIMEOUT)
    assert create_topic(cluster.address(0), "t", PARTITIONS).error_code == 0
    led = settled_leaders(cluster.addresses, "t", PARTITIONS)
    old, _ = agreed(cluster.addresses, describe_cluster)
    before = produce("confluent-kafka", cluster.bootstrap, "t", range(PARTITIONS), 5, "before")
    others = [cluster.address(i) for i in range(NODES) if i != old]
    pid = cluster.node_pids()[old]

    os.kill(pid, signal.SIGSTOP)
    try:
        def taken_over(address: str) -> int | None:
            controller, ids = describe_cluster(address)
            return controller if controller not in (old, -1) and old not in ids else None
        new = agreed(others, taken_over, timeout=SESSION_TIMEOUT_MS / 1000 + MARGIN_S,
                     what="another node to become the controller")
        want = {p: ((ErrorCode.LEADER_NOT_AVAILABLE, -1) if leader == old else (0, leader))
                for p, leader in led.items()}
        agreed(others, lambda a: partitions(a, "t"), want)
    finally:
        os.kill(pid, signal.SIGCONT)

    agreed(cluster.addresses, describe_cluster, (new, [0, 1, 2]))
    assert zk_controller(cluster.zookeeper_address) == new
    assert settled_leaders(cluster.addresses, "t", PARTITIONS) == led
    assert consume("kafka-python", cluster.bootstrap, "t", ends_of(before)) == before
    assert create_topic(cluster.address(old), "after", 3).error_code == 0
    assert set(settled_leaders(cluster.addresses, "after", 3).values()) == {0, 1, 2}
    assert cluster.node_pids()[old] == pid
    assert not any(line.startswith("pylog cluster: node ") for line in cluster.err)
