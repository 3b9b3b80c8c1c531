"""Kafka's replication_test.py (kafkatest/tests/core/replication_test.py) on
pylog: 3 nodes, a topic of 3 partitions with replication factor 3 and
min.insync.replicas=2; while an idempotent acks=all producer and a consumer
run, the leader of partition 0, or the controller, is shut down cleanly
(SIGTERM: a controlled shutdown), killed (kill -9), or bounced either way.
Every acknowledged record must be consumed, exactly once, in order per
partition, and the final log must hold each at the offset it was
acknowledged at.

Kafka bounces 5 times; the suite does ``BOUNCES`` (2) to stay short, and
``PYLOG_REPLICATION_BOUNCES=5`` runs Kafka's full count.  One cluster for the
module, a topic per case; each case's stopped node is started again after it.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from node_cluster import NodeCluster
from replication_workload import Workload, check, read_log

BOUNCES = int(os.environ.get("PYLOG_REPLICATION_BOUNCES", "2"))
PARTITIONS = 3
NODE_OVERRIDES = ("replica.lag.time.max.ms=5000",)
# Acknowledged records to wait for before the failure and after it: the load
# runs across it, and writes work again afterwards (a liveness check).
RECORDS_AROUND = 150
LIVENESS_S = 120


def _broker(nodes: NodeCluster, topic: str, broker_type: str) -> int:
    """Kafka's broker_node(): the leader of partition 0, or the controller."""
    if broker_type == "leader":
        return nodes.wait_leader(topic, 0, range(nodes.count))
    nodes.wait(lambda: nodes.controller() is not None, "a controller")
    return int(nodes.controller())  # type: ignore[arg-type]


def clean_shutdown(nodes: NodeCluster, pick: Callable[[], int]) -> None:
    assert nodes.stop_node(pick()) == 0


def hard_shutdown(nodes: NodeCluster, pick: Callable[[], int]) -> None:
    nodes.kill_node(pick())


def clean_bounce(nodes: NodeCluster, pick: Callable[[], int]) -> None:
    for _ in range(BOUNCES):
        node = pick()
        assert nodes.stop_node(node) == 0
        nodes.start_node(node)


def hard_bounce(nodes: NodeCluster, pick: Callable[[], int]) -> None:
    for _ in range(BOUNCES):
        node = pick()
        # As Kafka's: killed, and started again once ZooKeeper saw it go.
        nodes.kill_node(node)
        nodes.start_node(node)


CASES = [pytest.param(failure, broker_type, id=f"{failure.__name__}-{broker_type}")
         for failure in (clean_shutdown, hard_shutdown, clean_bounce, hard_bounce)
         for broker_type in ("leader", "controller")]


@pytest.mark.parametrize(("failure", "broker_type"), CASES)
def test_replication_with_broker_failure(nodes: NodeCluster, topic: str,
                                         failure: Callable[..., None],
                                         broker_type: str) -> None:
    nodes.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    work = Workload(nodes.bootstrap, topic, PARTITIONS).start()
    try:
        work.wait_acked(RECORDS_AROUND, LIVENESS_S, "before the failure ")
        failure(nodes, lambda: _broker(nodes, topic, broker_type))
        work.wait_acked(RECORDS_AROUND, LIVENESS_S, "after the failure ")
        work.stop()
    except BaseException:
        work.abort()
        raise
    final = read_log(nodes.bootstrap, topic, PARTITIONS)
    findings = check(work, final)
    assert not work.fatal, f"the producer failed: {work.fatal}\n{nodes.logs()}"
    assert not work.failed, f"records failed for good: {work.failed[:10]}"
    assert not findings.problems(), f"{findings.problems()}\n{nodes.logs()}"
    assert findings.acked == work.sent == findings.log_records
