"""``pylog broker --nodes 3``: the supervisor's ready lines, its three node
processes (ids, ports, log dirs), its ZooKeeper, and a node's restart after
kill -9.  One cluster for the module: these tests leave it running."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable

from cluster_process import ClusterProcess, override_of
from cluster_wire import brokers, create_topic, metadata, zookeeper
from kafka_wire import RawClient

from pylog.cluster import lines
from pylog.log import meta_properties
from pylog.protocol import ApiKey

NODES = 3


def _answers_api_versions(address: str) -> bool:
    with RawClient(address) as client:
        return client.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0


def test_ready_lines(three_nodes: ClusterProcess) -> None:
    """One line per node once it is ready, then the cluster's: exact, as
    scripts wait for them."""
    ours = [line for line in three_nodes.out if line.startswith("pylog cluster: ")]
    data = three_nodes.data_dir.resolve()
    assert sorted(ours[:NODES]) == [
        lines.NODE_READY.format(node_id=i, address=f"127.0.0.1:{three_nodes.port + i}",
                                log_dir=data / f"node-{i}") for i in range(NODES)]
    zk_port = int(three_nodes.zookeeper_address.rpartition(":")[2])
    assert ours[NODES] == lines.CLUSTER_READY.format(nodes=NODES,
                                                     zookeeper=f"127.0.0.1:{zk_port}")
    # The nodes' own ready lines are passed on too.
    for i in range(NODES):
        assert (f"pylog broker: node {i} listening on 127.0.0.1:{three_nodes.port + i}, "
                f"data in {data / f'node-{i}'}") in three_nodes.out


def test_node_processes_have_their_ids_ports_and_log_dirs(three_nodes: ClusterProcess) -> None:
    pids = three_nodes.node_pids()
    assert sorted(pids) == list(range(NODES))
    children = three_nodes.children()
    for node_id, pid in pids.items():
        argv = children[pid]
        assert argv[1:4] == ["-m", "pylog", "broker"]
        port = three_nodes.port + node_id
        assert override_of(argv, "listeners") == f"PLAINTEXT://127.0.0.1:{port}"
        log_dir = three_nodes.data_dir / f"node-{node_id}"
        assert override_of(argv, "log.dirs") == str(log_dir)
        assert _answers_api_versions(f"127.0.0.1:{port}")
        # The node took the id: its formatted log dir says so.
        assert meta_properties.read(log_dir)["node.id"] == str(node_id)
    # ZooKeeper is the supervisor's child too, its data under the log dir.
    assert len(three_nodes.zookeeper_pids()) == 1
    assert (three_nodes.data_dir / "zookeeper" / "zookeeper.cfg").is_file()


def test_nodes_are_pointed_at_the_clusters_zookeeper(three_nodes: ClusterProcess) -> None:
    """The ZooKeeper the ready line names serves, every node was given it,
    and every node registered there under its own id."""
    address = three_nodes.zookeeper_address
    for pid in three_nodes.node_pids().values():
        assert override_of(three_nodes.children()[pid], "zookeeper.connect") == address
    with zookeeper(address) as client:
        assert "zookeeper" in client.get_children("/")
        assert sorted(client.get_children("/brokers/ids"), key=int) == ["0", "1", "2"]
        for i in range(NODES):
            data, _ = client.get(f"/brokers/ids/{i}")
            assert json.loads(data)["endpoints"] == [
                f"PLAINTEXT://127.0.0.1:{three_nodes.port + i}"]


def test_the_cluster_serves_once_announced(start_cluster: Callable[..., ClusterProcess]
                                           ) -> None:
    """Right after the cluster's ready line, with no wait: every node's
    Metadata lists all the nodes and the controller, and a topic can be
    created through any of them."""
    cluster = start_cluster(NODES)
    everyone = {i: ("127.0.0.1", cluster.port + i) for i in range(NODES)}
    views = [(metadata(a, []).controller_id, brokers(a)) for a in cluster.addresses]
    assert len({controller for controller, _ in views}) == 1
    assert views[0][0] in everyone
    assert [nodes for _, nodes in views] == [everyone] * NODES
    for i, address in enumerate(cluster.addresses):
        row = create_topic(address, f"at-once-{i}", 3)
        assert row.error_code == 0, row


def test_a_killed_node_is_restarted(three_nodes: ClusterProcess) -> None:
    before = three_nodes.node_pids()
    os.kill(before[1], signal.SIGKILL)
    three_nodes.wait_line(three_nodes.err, lines.NODE_DIED.format(
        node_id=1, pid=before[1], how="was killed by SIGKILL", delay=1))
    prefix = "pylog cluster: node 1 restarted (pid "
    (restarted,) = three_nodes.wait_line(three_nodes.err, prefix)
    new_pid = int(restarted[len(prefix):].partition(")")[0])
    address = f"127.0.0.1:{three_nodes.port + 1}"
    assert restarted == lines.NODE_RESTARTED.format(node_id=1, pid=new_pid, address=address)
    after = three_nodes.node_pids()
    assert after[1] == new_pid != before[1]
    assert {i: after[i] for i in (0, 2)} == {i: before[i] for i in (0, 2)}
    assert _answers_api_versions(address)
    # The restart is said on stderr only: stdout's ready lines stay one per node.
    assert sum(line.startswith("pylog cluster: node 1 listening") for line in three_nodes.out) == 1
