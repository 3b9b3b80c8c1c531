"""Clusters on one host (``pylog broker --nodes N``) as real subprocesses:
the supervisor, its ZooKeeper (Debian's package; tests/conftest.py's
zookeeper_installed) and its node processes, on free ports and temp dirs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cluster_process import SESSION_TIMEOUT, ClusterProcess


@pytest.fixture
def start_cluster(zookeeper_installed: None, tmp_path: Path
                  ) -> Iterator[Callable[..., ClusterProcess]]:
    """``start_cluster(3, "key=value", ..., wait=True)`` -> a started cluster
    with its data under the test's tmp_path; anything left running is killed after."""
    made: list[ClusterProcess] = []

    def start(nodes: int, *overrides: str, wait: bool = True, **kwargs: object
              ) -> ClusterProcess:
        cluster = ClusterProcess(tmp_path / f"data{len(made)}", nodes, *overrides,
                                 **kwargs)  # type: ignore[arg-type]
        made.append(cluster)
        return cluster.start(wait=wait)

    yield start
    for cluster in made:
        cluster.cleanup()


@pytest.fixture(scope="module")
def three_nodes(zookeeper_installed: None, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[ClusterProcess]:
    """One 3-node cluster shared by a module's tests that leave it running."""
    cluster = ClusterProcess(tmp_path_factory.mktemp("cluster") / "data", 3, SESSION_TIMEOUT)
    try:
        yield cluster.start()
    finally:
        cluster.cleanup()
