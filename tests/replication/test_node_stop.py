"""A node's SIGTERM stop ends whatever its replica fetchers are doing: its
leaders answering all the time, paused, killed, or ZooKeeper away.

The stop cancels each fetcher's task and waits for it.  A fetcher that the
cancellation missed went on fetching, and the stop waited for it for ever:
CPython 3.11's ``asyncio.wait_for`` returns the awaited result instead of
raising when the cancellation comes as that result does (gh-86296).  Here
the followers' fetches are answered at once (``replica.fetch.wait.max.ms=0``)
by several fetchers each (``num.replica.fetchers``), as a busy leader's
followers are answered: a stop met that within one or two tries.  A stop that
hangs fails ``NodeCluster.stop_node``, with the node's asyncio tasks.
"""

from __future__ import annotations

import os

import pytest
from node_cluster import NodeCluster

NODE_OVERRIDES = ("replica.fetch.wait.max.ms=0", "num.replica.fetchers=4")
STOPS = int(os.environ.get("PYLOG_NODE_STOPS", "10"))
PARTITIONS = 16
FOLLOWER = 0
LEADER = 1


def _followed(nodes: NodeCluster, topic: str) -> None:
    """A topic led by nodes 1 and 2 by turns, followed by node 0."""
    nodes.create_topic(topic, assignment=[[1 + p % 2, 2 - p % 2, FOLLOWER]
                                          for p in range(PARTITIONS)])


def test_a_follower_answered_all_the_time_stops(nodes: NodeCluster, topic: str) -> None:
    _followed(nodes, topic)
    for _ in range(STOPS):
        assert nodes.stop_node(FOLLOWER) == 0
        nodes.start_node(FOLLOWER)
        nodes.wait_isr(topic, range(PARTITIONS), range(nodes.count))


@pytest.mark.parametrize("away", ["leader paused", "leader killed", "ZooKeeper away"])
def test_a_follower_stops_with_its_leader_or_zookeeper_away(nodes: NodeCluster, topic: str,
                                                           away: str) -> None:
    """Fetches that wait on a leader that does not answer (SIGSTOP), that
    cannot connect (kill -9, before its session expires), or a node that
    cannot leave ZooKeeper: the stop ends all the same (the fixture heals)."""
    _followed(nodes, topic)
    assert nodes.zk_server is not None
    if away == "leader paused":
        nodes.pause(LEADER)
        assert nodes.stop_node(FOLLOWER) == 0
    elif away == "leader killed":
        nodes.kill_node(LEADER, wait_unregistered=False)
        assert nodes.stop_node(FOLLOWER) == 0
    else:
        nodes.zk_server.stop()
        try:
            assert nodes.stop_node(FOLLOWER, wait_unregistered=False) == 0
        finally:
            nodes.zk_server.start()
