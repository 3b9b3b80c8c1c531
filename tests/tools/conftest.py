"""A real broker (with metrics.listener on) and a real 3-node cluster for the
tool tests, and a runner for ``pylog <tool> ...`` as a subprocess, the way an
operator runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from broker_process import BrokerProcess, free_port, free_ports
from cluster_process import ClusterProcess


@dataclass
class ToolBroker:
    process: BrokerProcess
    bootstrap: str
    metrics_url: str


@pytest.fixture(scope="session")
def tool_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolBroker]:
    metrics_url = f"http://127.0.0.1:{free_port()}/metrics"
    b = BrokerProcess(tmp_path_factory.mktemp("tools-broker"),
                      f"metrics.listener={metrics_url}",
                      # Groups join without the 3 s initial delay: the tests are short.
                      "group.initial.rebalance.delay.ms=0").start()
    yield ToolBroker(b, b.bootstrap, metrics_url)
    b.stop()


@dataclass
class ToolCluster:
    """``pylog broker --nodes 3``: node i listens on ``port + i`` and serves its
    metrics at ``metrics_urls[i]``."""

    process: ClusterProcess
    port: int
    metrics_urls: list[str]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def node_bootstrap(self, node_id: int) -> str:
        return f"127.0.0.1:{self.port + node_id}"


# The cluster's settings for the tests: leaders stay where elections put them
# (no automatic preferred-leader rebalance); a follower that stops fetching
# leaves the ISR after 4 s, before a frozen node's ZooKeeper session expires
# after 12 s (so the leaders shrink the ISRs, not the controller), and the
# tests that stop a node wait less than with Kafka's defaults.
CLUSTER_OVERRIDES = ("auto.leader.rebalance.enable=false", "replica.lag.time.max.ms=4000",
                     "zookeeper.session.timeout.ms=12000")


@pytest.fixture(scope="session")
def tool_cluster(zookeeper_installed: None, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[ToolCluster]:
    first = free_ports(6)  # the nodes' listeners, then their metrics pages
    metrics = first + 3
    cluster = ClusterProcess(tmp_path_factory.mktemp("tools-cluster") / "data", 3,
                             f"metrics.listener=http://127.0.0.1:{metrics}/metrics",
                             *CLUSTER_OVERRIDES, port=first)
    try:
        cluster.start()
        yield ToolCluster(cluster, first, [f"http://127.0.0.1:{metrics + i}/metrics"
                                           for i in range(3)])
        cluster.stop()
    finally:
        cluster.cleanup()


def _pylog() -> list[str]:
    # The console script, as operators run it; `python -m pylog` where it is not on PATH.
    script = shutil.which("pylog", path=os.path.dirname(sys.executable))
    return [script] if script else [sys.executable, "-m", "pylog"]


@pytest.fixture(scope="session")
def pylog_cmd() -> list[str]:
    return _pylog()


def run_tool(*args: str, stdin: str | None = None, timeout: float = 60
             ) -> subprocess.CompletedProcess:
    return subprocess.run([*_pylog(), *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="session")
def pylog() -> object:
    """``pylog("topics", "--list", ...)`` -> CompletedProcess (text, captured)."""
    return run_tool


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name of its own for each test."""
    return "".join(c if c.isalnum() or c in "-" else "-" for c in request.node.name)[:200]
