"""A cluster's start and end: a clean stop on SIGTERM/SIGINT, no orphans
when the supervisor is killed, an external ZooKeeper, free ports, nodes
that cannot start, and its ZooKeeper restarted when it dies."""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable

import pytest
from broker_process import free_ports, wait_for
from cluster_clients import consume, ends_of, produce
from cluster_process import SESSION_TIMEOUT, ClusterProcess, alive, override_of, processes_with
from cluster_wire import create_topic, create_topic_when_served, settled_leaders, zk_broker_ids
from kafka_wire import RawClient
from zk_process import chroot_for

from pylog.cluster import lines
from pylog.protocol import ApiKey
from pylog.zk.server import ZooKeeperServer

# A liveness bound for the children's parent-death signal and their shutdown.
ORPHAN_TIMEOUT_S = 60

StartCluster = Callable[..., ClusterProcess]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_stop_signal_stops_the_nodes_then_zookeeper_and_exits_0(
        start_cluster: StartCluster, sig: signal.Signals) -> None:
    cluster = start_cluster(2)
    pids = [*cluster.node_pids().values(), *cluster.zookeeper_pids()]
    assert len(pids) == 3
    cluster.signal(sig)
    assert cluster.wait_exit() == 0
    # The supervisor waited for each of them before exiting.
    assert [pid for pid in pids if alive(pid)] == []
    assert processes_with(str(cluster.data_dir)) == []
    stopping = cluster.out.index(lines.STOPPING)
    # Each node shut down cleanly (its own last line), before the end.
    assert sorted(cluster.out[stopping + 1:-1]) == [f"pylog broker: node {i} stopped"
                                                   for i in range(2)]
    assert cluster.out[-1] == lines.STOPPED
    assert cluster.err == []
    # The cluster's files: <log.dirs>/node-<i> and <log.dirs>/zookeeper, nothing else.
    assert sorted(p.name for p in cluster.data_dir.iterdir()) == ["node-0", "node-1",
                                                                  "zookeeper"]
    assert (cluster.data_dir / "zookeeper" / "version-2").is_dir()


def test_supervisor_killed_leaves_no_orphans(start_cluster: StartCluster) -> None:
    cluster = start_cluster(2)
    pids = [*cluster.node_pids().values(), *cluster.zookeeper_pids()]
    assert len(pids) == 3
    cluster.signal(signal.SIGKILL)
    assert cluster.wait_exit() == -signal.SIGKILL
    wait_for(lambda: not any(alive(pid) for pid in pids), ORPHAN_TIMEOUT_S,
             "the nodes and ZooKeeper to die with their supervisor")
    assert processes_with(str(cluster.data_dir)) == []


def test_external_zookeeper_and_free_ports(start_cluster: StartCluster,
                                           zk_server: ZooKeeperServer,
                                           request: pytest.FixtureRequest) -> None:
    """zookeeper.connect given: no server of the supervisor's; listeners on
    port 0: each node takes a free port, and the lines tell the real ones."""
    connect = zk_server.address + chroot_for(request.node.name)
    cluster = start_cluster(2, f"zookeeper.connect={connect}", port=0)
    assert cluster.zookeeper_pids() == []
    assert not (cluster.data_dir / "zookeeper").exists()
    assert cluster.out[-1] == lines.CLUSTER_READY.format(nodes=2, zookeeper=connect)
    addresses = {}
    for line in cluster.out:
        if line.startswith("pylog cluster: node "):
            node_id = int(line.split()[3])
            addresses[node_id] = line.split()[6].rstrip(",")
            assert line == lines.NODE_READY.format(
                node_id=node_id, address=addresses[node_id],
                log_dir=cluster.data_dir.resolve() / f"node-{node_id}")
    assert sorted(addresses) == [0, 1]
    assert len(set(addresses.values())) == 2
    for address in addresses.values():
        assert int(address.rpartition(":")[2]) > 0
        with RawClient(address) as client:
            assert client.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
    children = cluster.children()
    assert len(children) == 2
    for argv in children.values():
        assert override_of(argv, "zookeeper.connect") == connect
    assert cluster.stop() == 0


def test_a_node_that_cannot_start_stops_the_cluster(start_cluster: StartCluster) -> None:
    """Node 1's port is taken: restarting it would fail forever, so the
    cluster stops with the reason, status 1."""
    port = free_ports(2)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port + 1))
        taken.listen()
        cluster = start_cluster(2, port=port, wait=False)
        assert cluster.wait_exit() == 1
    failed = [line for line in cluster.err if line.startswith("pylog cluster: node 1 ")]
    assert len(failed) == 1 and failed[0].endswith(
        f" {lines.NEVER_STARTED} (exited with status 1); stopping the cluster"), cluster.err
    assert any("address already in use" in line for line in cluster.err), cluster.err
    assert cluster.out[-1] == lines.STOPPED
    assert processes_with(str(cluster.data_dir)) == []


def test_a_node_refusing_its_config_stops_the_cluster(start_cluster: StartCluster) -> None:
    """Exit status 2 (a config the node refuses; here its event loop) is
    never retried."""
    cluster = start_cluster(2, wait=False, env={"PYLOG_EVENT_LOOP": "no-such-loop"})
    assert cluster.wait_exit() == 1
    failed = [line for line in cluster.err if line.startswith("pylog cluster: node ")]
    assert len(failed) == 1 and failed[0].endswith(
        f" {lines.REFUSED_CONFIG} (exited with status 2); stopping the cluster"), cluster.err
    assert "pylog broker: PYLOG_EVENT_LOOP='no-such-loop': expected one of uvloop, asyncio" \
        in cluster.err
    assert processes_with(str(cluster.data_dir)) == []



def test_a_second_stop_signal_kills_a_node_that_does_not_stop(
        start_cluster: StartCluster) -> None:
    """Node 0 is frozen (SIGSTOP: it cannot act on SIGTERM); node 1 stops
    cleanly; a second SIGTERM kills node 0 at once, and the exit is still 0."""
    cluster = start_cluster(2)
    pids = cluster.node_pids()
    os.kill(pids[0], signal.SIGSTOP)
    cluster.signal(signal.SIGTERM)
    cluster.wait_line(cluster.out, "pylog broker: node 1 stopped")
    wait_for(lambda: not alive(pids[1]), ORPHAN_TIMEOUT_S, "node 1 to exit")
    cluster.signal(signal.SIGTERM)
    assert cluster.wait_exit() == 0
    # (the nodes' own log lines, a controlled shutdown with a frozen peer, aside)
    assert _supervisor_lines(cluster.err) == [
        lines.NODE_KILLED.format(node_id=0, pid=pids[0], why="a second stop signal")]
    assert "pylog broker: node 0 stopped" not in cluster.out
    assert cluster.out[-1] == lines.STOPPED
    assert processes_with(str(cluster.data_dir)) == []


def test_zookeeper_dying_is_restarted(start_cluster: StartCluster) -> None:
    """The supervisor's ZooKeeper killed: the nodes go on serving what they
    lead; the supervisor starts it again (same port, same dataDir) after the
    back-off, and the nodes, not restarted, are a working cluster again."""
    cluster = start_cluster(2, SESSION_TIMEOUT)
    nodes = cluster.node_pids()
    (zookeeper,) = cluster.zookeeper_pids()
    assert create_topic(cluster.address(0), "kept", 4).error_code == 0
    led = settled_leaders(cluster.addresses, "kept", 4)
    before = produce("confluent-kafka", cluster.bootstrap, "kept", range(4), 5, "before")
    with cluster.held():  # ZooKeeper stays down until the supervisor goes on
        os.kill(zookeeper, signal.SIGKILL)
        wait_for(lambda: not alive(zookeeper), ORPHAN_TIMEOUT_S, "ZooKeeper to die")
        during = produce("kafka-python", cluster.bootstrap, "kept", range(4), 5, "during")
        both = {p: before[p] + during[p] for p in range(4)}
        assert consume("aiokafka", cluster.bootstrap, "kept", ends_of(both)) == both
    died = lines.ZOOKEEPER_DIED.format(pid=zookeeper, how="was killed by SIGKILL", delay=1)
    cluster.wait_line(cluster.err, died)
    prefix = "pylog cluster: ZooKeeper restarted (pid "
    (restarted,) = cluster.wait_line(cluster.err, prefix)
    new_pid = int(restarted[len(prefix):].partition(")")[0])
    assert restarted == lines.ZOOKEEPER_RESTARTED.format(pid=new_pid,
                                                         address=cluster.zookeeper_address)
    assert cluster.zookeeper_pids() == [new_pid] != [zookeeper]
    assert cluster.node_pids() == nodes

    row = create_topic_when_served(cluster.address(1), "after", 4)
    assert row.error_code == 0, row
    assert set(settled_leaders(cluster.addresses, "after", 4).values()) == {0, 1}
    acked = produce("confluent-kafka", cluster.bootstrap, "after", range(4), 5, "after")
    assert consume("kafka-python", cluster.bootstrap, "after", ends_of(acked)) == acked
    assert settled_leaders(cluster.addresses, "kept", 4) == led
    assert zk_broker_ids(cluster.zookeeper_address) == [0, 1]
    assert cluster.node_pids() == nodes
    # (the nodes' own log lines, their ZooKeeper connection breaking, aside)
    assert _supervisor_lines(cluster.err) == [died, restarted]
    assert cluster.stop() == 0
    assert processes_with(str(cluster.data_dir)) == []


def test_zookeeper_restart_waits_for_its_port(start_cluster: StartCluster) -> None:
    """ZooKeeper can only come back where the nodes look for it: while
    another process holds its port, the supervisor says so and tries again
    after the back-off."""
    cluster = start_cluster(2, SESSION_TIMEOUT)
    (zookeeper,) = cluster.zookeeper_pids()
    port = int(cluster.zookeeper_address.rpartition(":")[2])
    with socket.socket() as squatter:
        with cluster.held():
            os.kill(zookeeper, signal.SIGKILL)
            wait_for(lambda: not alive(zookeeper), ORPHAN_TIMEOUT_S, "ZooKeeper to die")
            squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            # (once the dead server's connections are closed)
            wait_for(lambda: _bound(squatter, port), ORPHAN_TIMEOUT_S, f"port {port} to be free")
            squatter.listen()
        refused = lines.ZOOKEEPER_NOT_RESTARTED.format(
            error=f"port {port} is in use on 127.0.0.1: another server is listening there",
            delay=2)
        cluster.wait_line(cluster.err, refused)
    (restarted,) = cluster.wait_line(cluster.err, "pylog cluster: ZooKeeper restarted (pid ")
    assert _supervisor_lines(cluster.err) == [
        lines.ZOOKEEPER_DIED.format(pid=zookeeper, how="was killed by SIGKILL", delay=1),
        refused, restarted]
    assert create_topic_when_served(cluster.address(0), "after", 2).error_code == 0
    settled_leaders(cluster.addresses, "after", 2)
    assert cluster.stop() == 0


def _bound(sock: socket.socket, port: int) -> bool:
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        return False
    return True


def _supervisor_lines(err: list[str]) -> list[str]:
    return [line for line in err if line.startswith("pylog cluster:")]
