"""``pylog broker --nodes 3`` serving as one cluster: every node's Metadata
lists the three nodes and one controller, a topic's partitions are led all
over the cluster, the real clients produce to and consume from each of them,
and topic admin sent to a node that is not the controller is carried out
everywhere.  One cluster for the module: these tests leave it running."""

from __future__ import annotations

import re
from collections.abc import Iterable

import confluent_kafka as ck
import pytest
from broker_process import safe_name, wait_for
from cluster_clients import CLIENTS, consume, ends_of, produce
from cluster_process import ClusterProcess
from cluster_wire import (
    agreed,
    alter_topic_configs,
    brokers,
    create_partitions,
    create_topic,
    delete_topic,
    describe_cluster,
    incremental_alter_topic_configs,
    metadata,
    partitions,
    settled_leaders,
    topic_configs,
    zk_broker_ids,
    zk_controller,
)

from pylog.protocol import ErrorCode

NODES = 3
PARTITIONS = 12
RECORDS = 20  # per partition


def _name(request: pytest.FixtureRequest) -> str:
    return safe_name(request.node.name, keep="-")


def _partition_dirs(cluster: ClusterProcess, topic: str) -> dict[int, set[int]]:
    """node id -> the partitions of ``topic`` with a directory in its log dir
    (``<topic>-<p>``, or ``<topic>-<p>.<id>-delete`` on its way out)."""
    name = re.compile(re.escape(topic) + r"-(\d+)(\.[0-9a-f]+-delete)?")
    return {i: {int(m[1]) for path in cluster.log_dir(i).iterdir()
                if (m := name.fullmatch(path.name))}
            for i in range(cluster.nodes)}


def _dirs_on_leaders(cluster: ClusterProcess, topic: str, led: dict[int, int]) -> None:
    """Each partition's directory is in its leader's log dir and no other."""
    want = {i: {p for p, leader in led.items() if leader == i} for i in range(cluster.nodes)}
    assert _partition_dirs(cluster, topic) == want


def test_every_node_lists_the_three_nodes_and_one_controller(three_nodes: ClusterProcess
                                                             ) -> None:
    everyone = {i: ("127.0.0.1", three_nodes.port + i) for i in range(NODES)}
    for address in three_nodes.addresses:
        assert brokers(address) == everyone
    controller, ids = agreed(three_nodes.addresses, describe_cluster,
                             what="DescribeCluster to agree")
    assert ids == [0, 1, 2]
    assert controller in everyone
    assert zk_controller(three_nodes.zookeeper_address) == controller
    assert zk_broker_ids(three_nodes.zookeeper_address) == [0, 1, 2]
    for address in three_nodes.addresses:
        assert metadata(address, []).controller_id == controller


def test_partitions_are_led_by_every_node(three_nodes: ClusterProcess,
                                          request: pytest.FixtureRequest) -> None:
    topic = _name(request)
    row = create_topic(three_nodes.address(0), topic, PARTITIONS)
    assert row.error_code == 0, row
    led = settled_leaders(three_nodes.addresses, topic, PARTITIONS)
    assert sorted(led) == list(range(PARTITIONS))
    assert set(led.values()) == {0, 1, 2}
    _dirs_on_leaders(three_nodes, topic, led)


@pytest.mark.parametrize("client", CLIENTS)
def test_clients_produce_to_and_consume_from_every_partition(
        three_nodes: ClusterProcess, request: pytest.FixtureRequest, client: str) -> None:
    """Each client finds each partition's leader through any node: what it
    produced to every partition (acks=all) is read back, in order, by it and
    by the other clients."""
    topic = _name(request)
    row = create_topic(three_nodes.address(1), topic, PARTITIONS)
    assert row.error_code == 0, row
    assert set(settled_leaders(three_nodes.addresses, topic, PARTITIONS).values()) == {0, 1, 2}
    acked = produce(client, three_nodes.bootstrap, topic, range(PARTITIONS), RECORDS, "spread")
    for p in range(PARTITIONS):
        assert [offset for offset, _ in acked[p]] == list(range(RECORDS))
    for reader in CLIENTS:
        assert consume(reader, three_nodes.bootstrap, topic, ends_of(acked)) == acked, reader


def test_admin_sent_to_a_node_that_is_not_the_controller(three_nodes: ClusterProcess,
                                                         request: pytest.FixtureRequest
                                                         ) -> None:
    """Create, grow, alter the configs of and delete a topic through one node
    that is not the controller: every node's Metadata and DescribeConfigs
    agree after each step, and the partitions' directories are on exactly
    their leaders' log dirs (and gone from all after the delete)."""
    topic = _name(request)
    controller, _ = describe_cluster(three_nodes.address(0))
    address = three_nodes.address(next(i for i in range(NODES) if i != controller))

    row = create_topic(address, topic, 4, {"retention.ms": "3600000"})
    assert row.error_code == 0, row
    led = settled_leaders(three_nodes.addresses, topic, 4)
    _dirs_on_leaders(three_nodes, topic, led)

    row = create_partitions(address, topic, 9)
    assert row.error_code == 0, row
    grown = settled_leaders(three_nodes.addresses, topic, 9)
    assert {p: grown[p] for p in led} == led  # the first four did not move
    assert set(grown.values()) == {0, 1, 2}
    _dirs_on_leaders(three_nodes, topic, grown)
    # The new partitions serve too.
    acked = produce("confluent-kafka", three_nodes.bootstrap, topic, range(9), 3, "grown")
    assert consume("kafka-python", three_nodes.bootstrap, topic, ends_of(acked)) == acked

    for address_of_reader in three_nodes.addresses:
        assert topic_configs(address_of_reader, topic)["retention.ms"] == "3600000"
    row = alter_topic_configs(address, topic, {"retention.ms": "7200000",
                                               "max.message.bytes": "200000"})
    assert row.error_code == 0, row

    def configs(a: str) -> tuple[str | None, str | None]:
        found = topic_configs(a, topic)
        return found["retention.ms"], found["max.message.bytes"]
    agreed(three_nodes.addresses, configs, ("7200000", "200000"),
           what="every node's DescribeConfigs")
    # The leaders' logs took the new configs: a record over max.message.bytes
    # is refused by each node.
    one_per_node = {leader: p for p, leader in grown.items()}
    assert _too_large(three_nodes.bootstrap, topic, 300_000, one_per_node.values()) == {
        p: ck.KafkaError.MSG_SIZE_TOO_LARGE for p in one_per_node.values()}
    row = incremental_alter_topic_configs(address, topic, {"segment.ms": "86400000"},
                                          delete=("max.message.bytes",))
    assert row.error_code == 0, row

    def segment_ms(a: str) -> tuple[str | None, str | None]:
        found = topic_configs(a, topic)
        return found["segment.ms"], found["max.message.bytes"]
    agreed(three_nodes.addresses, segment_ms, ("86400000", "1048588"),
           what="every node's DescribeConfigs")
    assert _too_large(three_nodes.bootstrap, topic, 300_000, one_per_node.values()) == {}

    row = delete_topic(address, topic)
    assert row.error_code == 0, row
    agreed(three_nodes.addresses, lambda a: partitions(a, topic) is None, True,
           what=f"every node to forget {topic}")
    # The replicas delete their logs as the controller's StopReplica reaches them.
    wait_for(lambda: _partition_dirs(three_nodes, topic) == {i: set() for i in range(NODES)},
             60, f"{topic}'s directories to go")

    # The name again, once the deletion is done: a new topic, none of the old records.
    def recreated() -> object:
        row = create_topic(address, topic, 3)
        return row if row.error_code != ErrorCode.TOPIC_ALREADY_EXISTS else None
    row = wait_for(recreated, 60, f"{topic} to be created again")
    assert row.error_code == 0, row
    _dirs_on_leaders(three_nodes, topic, settled_leaders(three_nodes.addresses, topic, 3))
    for a in three_nodes.addresses:
        assert topic_configs(a, topic)["retention.ms"] == "604800000"
    acked = produce("aiokafka", three_nodes.bootstrap, topic, range(3), 2, "again")
    assert [[o for o, _ in acked[p]] for p in range(3)] == [[0, 1]] * 3
    assert consume("confluent-kafka", three_nodes.bootstrap, topic, ends_of(acked)) == acked


def _too_large(bootstrap: str, topic: str, size: int, parts: Iterable[int]) -> dict[int, int]:
    """partition -> the error code of a ``size``-byte record sent to it (none: taken)."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 2 * size,
                            "retries": 0})
    errors: dict[int, int] = {}

    def delivered(err: ck.KafkaError | None, msg: ck.Message) -> None:
        if err is not None:
            errors[msg.partition()] = err.code()

    for p in parts:
        producer.produce(topic, value=b"x" * size, partition=p, on_delivery=delivered)
    assert producer.flush(60) == 0
    return errors
