"""Replication under faults: ZooKeeper and pylog nodes started one by one
(tests/node_cluster.py), so each test can stop, kill -9, pause and restart
nodes on its own, with real clients (tests/replication_workload.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from broker_process import safe_name
from node_cluster import NodeCluster


@pytest.fixture
def start_nodes(zookeeper_installed: None, tmp_path: Path
                ) -> Iterator[Callable[..., NodeCluster]]:
    """``start_nodes(3, "key=value", ...)`` -> a started cluster of the
    test's own (destructive tests); everything is killed after."""
    made: list[NodeCluster] = []

    def start(nodes: int, *overrides: str, **kwargs: object) -> NodeCluster:
        cluster = NodeCluster(tmp_path / f"cluster{len(made)}", nodes, *overrides,
                              **kwargs)  # type: ignore[arg-type]
        made.append(cluster)
        return cluster.start()

    yield start
    for cluster in made:
        cluster.cleanup()


@pytest.fixture(scope="module")
def module_nodes(zookeeper_installed: None, request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeCluster]:
    """One cluster for a module whose tests put it back as they found it:
    ``NODES`` nodes (default 3) with the module's ``NODE_OVERRIDES``."""
    module = request.module
    cluster = NodeCluster(tmp_path_factory.mktemp("nodes"), getattr(module, "NODES", 3),
                          *getattr(module, "NODE_OVERRIDES", ()),
                          **getattr(module, "NODE_OPTIONS", {}))
    try:
        yield cluster.start()
    finally:
        cluster.cleanup()


@pytest.fixture
def nodes(module_nodes: NodeCluster) -> Iterator[NodeCluster]:
    """The module's cluster, healed after each test: paused nodes resumed,
    stopped ones started, every node registered again."""
    yield module_nodes
    for i in range(module_nodes.count):
        module_nodes.resume(i)
        if not module_nodes.running(i):
            module_nodes.start_node(i)
    module_nodes.wait(lambda: module_nodes.registered() == set(range(module_nodes.count)),
                      "every node registered again")


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name of the test's own."""
    return safe_name(request.node.name)
