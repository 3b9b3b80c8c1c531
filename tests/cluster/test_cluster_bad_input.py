"""A cluster given bad input: znodes the controller reads holding malformed
JSON (the controller logs them and goes on with the other topics), a second
node process with a node id already registered (it refuses to start, naming
the id), and a ZooKeeper that cannot be reached at start (a clear error once
``zookeeper.connection.timeout.ms`` passed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from broker_process import free_port, wait_for
from cluster_clients import consume, ends_of, produce
from cluster_process import SESSION_TIMEOUT, SESSION_TIMEOUT_MS, ClusterProcess, processes_with
from cluster_wire import (
    agreed,
    create_topic,
    describe_cluster,
    partitions,
    settled_leaders,
    zk_broker_ids,
    zk_controller,
    zookeeper,
)

from pylog.cluster import lines
from pylog.protocol import ErrorCode

StartCluster = Callable[..., ClusterProcess]
NODES = 3
GARBAGE = b'{"version":1,"partitions":{"0":[0]'  # cut short: not JSON
# A liveness bound for a process that must give up on its own.
EXIT_TIMEOUT_S = 60


def _works(cluster: ClusterProcess, topic: str, via: int) -> None:
    """A new topic made through node ``via`` is led all over the cluster and serves."""
    row = create_topic(cluster.address(via), topic, 3)
    assert row.error_code == 0, row
    assert set(settled_leaders(cluster.addresses, topic, 3).values()) == {0, 1, 2}
    acked = produce("confluent-kafka", cluster.bootstrap, topic, range(3), 3, topic)
    assert consume("kafka-python", cluster.bootstrap, topic, ends_of(acked)) == acked


def test_malformed_topic_znodes(start_cluster: StartCluster) -> None:
    """A topic znode and a partition state znode of garbage, written by hand:
    each is logged, naming it, and the other topics are served, by the
    running controller and by a newly elected one that reads every znode."""
    cluster = start_cluster(NODES, SESSION_TIMEOUT)
    pids = cluster.node_pids()
    _works(cluster, "before", 0)
    with zookeeper(cluster.zookeeper_address) as zk:
        # A topic that never was: the controller's topic watch fires on it.
        zk.create("/brokers/topics/garbage", GARBAGE)
        # A topic that was, its partition 1 state overwritten.
        zk.set("/brokers/topics/before/partitions/1/state", GARBAGE)
    _logged(cluster, "/brokers/topics/garbage")
    _works(cluster, "while-running", 1)

    # A new controller reads every znode when it takes over.
    new = _move_controller(cluster)
    _works(cluster, "after-failover", 2)
    _logged(cluster, "/brokers/topics/before/partitions/1/state")
    # The partitions of "before" with a good state are still served.
    acked = produce("aiokafka", cluster.bootstrap, "before", [0, 2], 2, "later")
    assert [len(acked[p]) for p in (0, 2)] == [2, 2]
    assert describe_cluster(cluster.address(0))[0] == new
    assert cluster.node_pids() == pids
    assert zk_broker_ids(cluster.zookeeper_address) == [0, 1, 2]


def test_malformed_broker_registrations(start_cluster: StartCluster) -> None:
    """Children of /brokers/ids that are not a registration (garbage data, a
    name that is no id): logged, and the controller still follows the real
    nodes: a killed one loses its partitions' leadership and gets it back."""
    cluster = start_cluster(NODES, SESSION_TIMEOUT)
    _works(cluster, "before", 0)
    with zookeeper(cluster.zookeeper_address) as zk:
        zk.create("/brokers/ids/9", GARBAGE)
        zk.create("/brokers/ids/oops", b"{}")
    _logged(cluster, "/brokers/ids/9")
    _logged(cluster, "/brokers/ids/oops")
    controller = _move_controller(cluster)  # a new one reads them all
    agreed(cluster.addresses, describe_cluster, (controller, [0, 1, 2]))
    _works(cluster, "while-there", 1)

    victim = next(i for i in range(NODES) if i != controller)
    led = settled_leaders(cluster.addresses, "before", 3)
    pid = cluster.node_pids()[victim]
    others = [cluster.address(i) for i in range(NODES) if i != victim]
    with cluster.held():
        os.kill(pid, signal.SIGKILL)
        want = {p: (ErrorCode.LEADER_NOT_AVAILABLE, -1) if leader == victim else (0, leader)
                for p, leader in led.items()}
        agreed(others, lambda a: partitions(a, "before"), want, SESSION_TIMEOUT_MS / 1000 + 30,
               f"node {victim}'s partitions to lose their leader")
    cluster.wait_restarted(victim, pid)
    assert settled_leaders(cluster.addresses, "before", 3) == led
    _works(cluster, "after", 2)


def _logged(cluster: ClusterProcess, path: str) -> None:
    wait_for(lambda: any(f"Malformed data in znode {path}:" in line
                         or f"ignoring {path}: not a broker id" in line for line in cluster.err),
             60, f"a node to log the bad znode {path}")


def _move_controller(cluster: ClusterProcess) -> int:
    """/controller deleted by hand (Kafka's way to move the controller): the
    controller of the next epoch (it may be the same node), once every node
    names it."""
    def epoch() -> int:
        with zookeeper(cluster.zookeeper_address) as zk:
            return int(zk.get("/controller_epoch")[0])
    before = epoch()
    with zookeeper(cluster.zookeeper_address) as zk:
        zk.delete("/controller")
    wait_for(lambda: epoch() > before and zk_controller(cluster.zookeeper_address) is not None,
             60, "a controller election")
    new = zk_controller(cluster.zookeeper_address)
    agreed(cluster.addresses, lambda a: describe_cluster(a)[0], new)
    return new


def test_a_second_node_with_a_registered_id_refuses_to_start(
        start_cluster: StartCluster, tmp_path: Path) -> None:
    """Exit status 1 with Kafka's message naming the id's znode; the node
    holding the id keeps it."""
    cluster = start_cluster(NODES, SESSION_TIMEOUT)
    with zookeeper(cluster.zookeeper_address) as zk:
        registered = zk.get("/brokers/ids/1")
    out = _node(tmp_path / "twin", "broker.id=1",
                f"zookeeper.connect={cluster.zookeeper_address}")
    assert out.returncode == 1, out
    assert out.stdout == ""
    message = out.stderr.splitlines()[-1]
    assert message.startswith("pylog broker: Error while creating ephemeral at /brokers/ids/1, "
                              "node already exists and owner "), out.stderr
    assert message.endswith("(broker id 1 is registered by another broker)"), out.stderr
    with zookeeper(cluster.zookeeper_address) as zk:
        assert zk.get("/brokers/ids/1") == registered
    agreed(cluster.addresses, lambda a: describe_cluster(a)[1], [0, 1, 2])
    _works(cluster, "still", 1)


def test_zookeeper_unreachable_at_start(tmp_path: Path) -> None:
    """A node gives up after zookeeper.connection.timeout.ms, saying where
    and how long it tried; it wrote nothing."""
    connect = _unreachable()
    out = _node(tmp_path / "data", f"zookeeper.connect={connect}",
                "zookeeper.connection.timeout.ms=2000")
    assert out.returncode == 1, out
    assert out.stdout == ""
    # Kafka's ZooKeeperClientTimeoutException message, with where and how long.
    assert out.stderr.splitlines()[-1] == _timed_out(connect), out.stderr
    assert not (tmp_path / "data").exists()


def test_zookeeper_unreachable_at_start_stops_a_cluster(start_cluster: StartCluster) -> None:
    """``--nodes`` with zookeeper.connect naming nothing: the nodes never get
    ready, so the supervisor stops, status 1, with their reason."""
    connect = _unreachable()
    cluster = start_cluster(2, f"zookeeper.connect={connect}",
                            "zookeeper.connection.timeout.ms=2000", wait=False)
    assert cluster.wait_exit() == 1
    failed = [line for line in cluster.err if line.startswith("pylog cluster: node ")]
    assert len(failed) == 1 and failed[0].endswith(
        f" {lines.NEVER_STARTED} (exited with status 1); stopping the cluster"), cluster.err
    assert _timed_out(connect) in cluster.err
    assert processes_with(str(cluster.data_dir)) == []


def _node(log_dir: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    """A node process of its own, run to its end."""
    args = [sys.executable, "-m", "pylog", "broker",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
            "--override", f"log.dirs={log_dir}"]
    for item in overrides:
        args += ["--override", item]
    return subprocess.run(args, capture_output=True, text=True, timeout=EXIT_TIMEOUT_S)


def _unreachable() -> str:
    """A ZooKeeper address nothing listens on."""
    return f"127.0.0.1:{free_port()}"


def _timed_out(connect: str) -> str:
    return ("pylog broker: Timed out waiting for connection while in state: CONNECTING "
            f"(ZooKeeper at {connect}, zookeeper.connection.timeout.ms=2000)")
