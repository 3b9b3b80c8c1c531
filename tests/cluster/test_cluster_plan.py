"""What each node and the ZooKeeper server of a cluster get (pylog.cluster.plan),
checked through the config each node will load; and the restart back-off."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from pylog.cluster.backoff import RestartBackoff
from pylog.cluster.plan import ZOOKEEPER_DIR, ClusterPlan, plan_cluster
from pylog.server.config import BrokerConfig


def _node_config(plan: ClusterPlan, node_id: int) -> BrokerConfig:
    """The config node ``node_id`` loads: the operator's, then the supervisor's overrides."""
    node = plan.nodes[node_id]
    return BrokerConfig.load(plan.config_path, (*plan.overrides, *node.overrides))


def test_each_node_shifted_from_the_first(zookeeper_installed: None, tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("node.id=7\nlisteners=PLAINTEXT://[::1]:19092\n"
                      "advertised.listeners=PLAINTEXT://broker.example.com:29092\n"
                      f"log.dirs={tmp_path / 'a'}\n")
    plan = plan_cluster(str(config), ["num.partitions=3"], 3)
    assert plan.zookeeper is not None
    assert plan.zookeeper.data_dir == tmp_path / "a" / ZOOKEEPER_DIR
    assert plan.zookeeper.host == "127.0.0.1"
    assert plan.zookeeper_connect == plan.zookeeper.address == f"127.0.0.1:{plan.zookeeper.port}"
    for i in range(3):
        node = _node_config(plan, i)
        assert node.node_id == i == node["broker.id"]
        assert [str(ep) for ep in node.listeners] == [f"PLAINTEXT://::1:{19092 + i}"]
        assert str(node.advertised()) == f"PLAINTEXT://broker.example.com:{29092 + i}"
        assert node["log.dirs"] == (str(tmp_path / "a" / f"node-{i}"),)
        assert node["zookeeper.connect"] == plan.zookeeper_connect
        assert node["num.partitions"] == 3  # the operator's settings stay
        assert plan.nodes[i].port == 19092 + i


def test_node_command_line(zookeeper_installed: None, tmp_path: Path) -> None:
    plan = plan_cluster(None, [f"log.dirs={tmp_path}"], 2)
    command = plan.command(plan.nodes[1])
    # Dies with the supervisor, even if that is killed with SIGKILL.
    assert command[:3] == [shutil.which("setpriv"), "--pdeathsig", "TERM"]
    assert command[3:7] == [sys.executable, "-m", "pylog", "broker"]
    assert command[7:] == [arg for item in (f"log.dirs={tmp_path}", *plan.nodes[1].overrides)
                           for arg in ("--override", item)]
    assert plan.nodes[1].overrides == (
        "broker.id=1", "listeners=PLAINTEXT://127.0.0.1:9093", f"log.dirs={tmp_path}/node-1",
        f"zookeeper.connect={plan.zookeeper_connect}")


def test_port_zero_leaves_each_node_a_free_port(zookeeper_installed: None,
                                                tmp_path: Path) -> None:
    plan = plan_cluster(None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0"], 2)
    for i in range(2):
        assert plan.nodes[i].port == 0
        assert [ep.port for ep in _node_config(plan, i).listeners] == [0]


def test_external_zookeeper_is_passed_on(tmp_path: Path) -> None:
    connect = "zk1:2181,zk2:2181/kafka"
    plan = plan_cluster(None, [f"log.dirs={tmp_path}", f"zookeeper.connect={connect}"], 2)
    assert plan.zookeeper is None
    assert plan.zookeeper_connect == connect
    assert not any(o.startswith("zookeeper.connect=") for o in plan.nodes[0].overrides)
    assert _node_config(plan, 0)["zookeeper.connect"] == connect


def test_zookeeper_config_file(zookeeper_installed: None, tmp_path: Path) -> None:
    """Kafka's zookeeper.properties keys for the supervisor's server."""
    zk_config = tmp_path / "zookeeper.properties"
    zk_config.write_text(f"dataDir={tmp_path / 'zk'}\nclientPort=21810\ntickTime=500\n")
    plan = plan_cluster(None, [f"log.dirs={tmp_path}"], 2, str(zk_config))
    assert plan.zookeeper is not None
    assert (plan.zookeeper.data_dir, plan.zookeeper.port) == (tmp_path / "zk", 21810)
    assert plan.zookeeper.properties["tickTime"] == "500"
    assert plan.zookeeper_connect == "127.0.0.1:21810"


def test_each_node_serves_its_own_metrics_page(zookeeper_installed: None,
                                               tmp_path: Path) -> None:
    """metrics.listener's port moves up by the node id, as the listener's does."""
    plan = plan_cluster(None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:19092",
                               "metrics.listener=http://[::1]:19404/prom"], 3)
    assert [_node_config(plan, i)["metrics.listener"] for i in range(3)] == [
        f"http://[::1]:{19404 + i}/prom" for i in range(3)]
    # Port 0: each node a free port of its own; no metrics.listener: none.
    plan = plan_cluster(None, [f"log.dirs={tmp_path}",
                               "metrics.listener=http://127.0.0.1:0/metrics"], 2)
    assert [_node_config(plan, i)["metrics.listener"] for i in range(2)] == [
        "http://127.0.0.1:0/metrics"] * 2
    plan = plan_cluster(None, [f"log.dirs={tmp_path}"], 2)
    assert not any(o.startswith("metrics.listener=") for o in plan.nodes[1].overrides)


@pytest.mark.parametrize("ran_for", [0.0, 59.0])
def test_backoff_doubles_to_30s_while_a_node_keeps_dying(ran_for: float) -> None:
    backoff = RestartBackoff()
    assert [backoff.next_delay(ran_for) for _ in range(8)] == [1, 2, 4, 8, 16, 30, 30, 30]


def test_backoff_starts_over_after_a_healthy_run() -> None:
    backoff = RestartBackoff()
    assert [backoff.next_delay(1.0) for _ in range(3)] == [1, 2, 4]
    assert backoff.next_delay(60.0) == 1
    assert backoff.next_delay(1.0) == 2
