"""Three ``pylog broker --config server.properties`` processes, one on each of
127.0.0.1, 127.0.0.2 and 127.0.0.3 (loopback addresses: Linux routes all of
127/8 to lo), sharing a ZooKeeper the test runs itself: one cluster whose
Metadata names each node by its own host; and that ZooKeeper stopped for a
while and started again on the same port and dataDir: the nodes go on
serving, admin requests fail clearly, and the cluster heals without a restart."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from broker_process import BrokerProcess, free_port
from cluster_clients import CLIENTS, consume, ends_of, produce
from cluster_process import SESSION_TIMEOUT_MS
from cluster_wire import (
    REQUEST_TIMEOUT_MS,
    agreed,
    alter_topic_configs,
    brokers,
    create_partitions,
    create_topic,
    create_topic_when_served,
    delete_topic,
    describe_cluster,
    settled_leaders,
    topic_configs,
    zk_broker_ids,
)
from zk_process import start_zookeeper

from pylog.protocol import ErrorCode
from pylog.zk.server import ZooKeeperServer

HOSTS = ("127.0.0.1", "127.0.0.2", "127.0.0.3")
PARTITIONS = 6
# How long a node's ZooKeeper calls wait for a connection: an admin request
# during an outage fails after this (well within its own timeout).
CONNECTION_TIMEOUT_MS = 3000


@dataclass
class HostsCluster:
    zookeeper: ZooKeeperServer
    nodes: list[BrokerProcess]
    port: int

    @property
    def addresses(self) -> list[str]:
        return [f"{host}:{self.port}" for host in HOSTS]

    @property
    def bootstrap(self) -> str:
        return ",".join(self.addresses)


@pytest.fixture
def hosts_cluster(zookeeper_installed: None, tmp_path: Path) -> Iterator[HostsCluster]:
    zookeeper = start_zookeeper(tmp_path / "zookeeper")
    port = free_port()  # the same port on each host, as on three machines
    nodes: list[BrokerProcess] = []
    try:
        for node_id, host in enumerate(HOSTS):
            config = tmp_path / f"server-{node_id}.properties"
            config.write_text(
                f"broker.id={node_id}\nlisteners=PLAINTEXT://{host}:{port}\n"
                f"log.dirs={tmp_path / f'logs-{node_id}'}\n"
                f"zookeeper.connect={zookeeper.address}\n"
                f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}\n"
                f"zookeeper.connection.timeout.ms={CONNECTION_TIMEOUT_MS}\n")
            nodes.append(BrokerProcess(tmp_path / f"logs-{node_id}", port=port, config=config,
                                       own_listener=False).start())
        cluster = HostsCluster(zookeeper, nodes, port)
        # Each node listens before the controller told it about the cluster.
        agreed(cluster.addresses, lambda a: sorted(brokers(a)), [0, 1, 2])
        yield cluster
    finally:
        for node in nodes:
            node.stop()
        zookeeper.kill()


def _spread_topic(cluster: HostsCluster, via: str, topic: str) -> dict[int, int]:
    assert create_topic(via, topic, PARTITIONS).error_code == 0
    led = settled_leaders(cluster.addresses, topic, PARTITIONS)
    assert set(led.values()) == {0, 1, 2}
    return led


def test_three_hosts_share_one_zookeeper(hosts_cluster: HostsCluster) -> None:
    port = hosts_cluster.port
    for address in hosts_cluster.addresses:
        assert brokers(address) == {i: (host, port) for i, host in enumerate(HOSTS)}
    _, ids = agreed(hosts_cluster.addresses, describe_cluster)
    assert ids == [0, 1, 2]
    assert zk_broker_ids(hosts_cluster.zookeeper.address) == [0, 1, 2]
    _spread_topic(hosts_cluster, hosts_cluster.addresses[2], "across")
    # A client given one host finds the others through Metadata.
    written: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    for client in CLIENTS:
        acked = produce(client, hosts_cluster.addresses[1], "across", range(PARTITIONS), 5,
                        "across")
        for p in range(PARTITIONS):
            written[p] += acked[p]
        assert consume(client, hosts_cluster.addresses[0], "across", ends_of(written)) == written


def test_zookeeper_away_and_back(hosts_cluster: HostsCluster) -> None:
    addresses = hosts_cluster.addresses
    led = _spread_topic(hosts_cluster, addresses[0], "kept")
    before = produce("confluent-kafka", hosts_cluster.bootstrap, "kept", range(PARTITIONS), 5,
                     "before")

    hosts_cluster.zookeeper.stop()
    # Every node goes on serving produce and fetch for the partitions it
    # leads, and Metadata as it last heard it.
    during = produce("kafka-python", hosts_cluster.bootstrap, "kept", range(PARTITIONS), 5,
                     "during")
    both = {p: before[p] + during[p] for p in range(PARTITIONS)}
    assert consume("aiokafka", hosts_cluster.bootstrap, "kept", ends_of(both)) == both
    assert settled_leaders(addresses, "kept", PARTITIONS) == led
    # Admin needs ZooKeeper: a clear error within the request's timeout, not a hang.
    assert CONNECTION_TIMEOUT_MS < REQUEST_TIMEOUT_MS
    for row in (create_topic(addresses[1], "refused", 3),
                create_partitions(addresses[2], "kept", PARTITIONS + 1),
                alter_topic_configs(addresses[0], "kept", {"retention.ms": "60000"}),
                delete_topic(addresses[1], "kept")):
        assert row.error_code == ErrorCode.UNKNOWN_SERVER_ERROR, row
        assert row.error_message.startswith("ZooKeeper is not available: "), row
        assert f"zookeeper.connection.timeout.ms={CONNECTION_TIMEOUT_MS}" in row.error_message

    hosts_cluster.zookeeper.start()  # the same port and dataDir
    # Healed without a restart: a new topic is made and used once the nodes
    # are back in their sessions.
    row = create_topic_when_served(addresses[1], "after", PARTITIONS)
    assert row.error_code == 0, row
    assert set(settled_leaders(addresses, "after", PARTITIONS).values()) == {0, 1, 2}
    acked = produce("confluent-kafka", hosts_cluster.bootstrap, "after", range(PARTITIONS), 5,
                    "after")
    assert consume("kafka-python", hosts_cluster.bootstrap, "after", ends_of(acked)) == acked
    # The refused changes were not made.
    assert settled_leaders(addresses, "kept", PARTITIONS) == led
    agreed(addresses, lambda a: topic_configs(a, "kept")["retention.ms"], str(7 * 24 * 3600_000))
    assert zk_broker_ids(hosts_cluster.zookeeper.address) == [0, 1, 2]
    assert [node.proc.poll() for node in hosts_cluster.nodes] == [None] * 3
    _, ids = agreed(addresses, describe_cluster)
    assert ids == [0, 1, 2]
