"""``pylog broker --nodes 3`` serving as one cluster: every node's Metadata
lists the three nodes and one controller, a topic's partitions are led all
over the cluster, the real clients produce to and consume from each of them,
and topic admin sent to a node that is not the controller is carried out
everywhere.  One cluster for the module: these tests leave it running."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from typing import Any

import confluent_kafka as ck
import pytest
from broker_process import safe_name, wait_for
from cluster_clients import CLIENT_TIMEOUT_S, CLIENTS, consume, ends_of, produce
from cluster_process import ClusterProcess
from cluster_wire import (
    AGREE_TIMEOUT_S,
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
    zookeeper,
)
from cluster_wire import request as wire_request
from kafka_wire import produce_body

from pylog.protocol import ApiKey, ErrorCode
from pylog.records import BatchBuilder

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
    # The leaders' logs take the new configs (as in Kafka, once each node has
    # read the config change notice, which DescribeConfigs does not wait
    # for): a record over max.message.bytes is refused by each node.
    one_per_node = {leader: p for p, leader in grown.items()}
    refused = {p: ck.KafkaError.MSG_SIZE_TOO_LARGE for p in one_per_node.values()}
    wait_for(lambda: _too_large(three_nodes.bootstrap, topic, 300_000,
                                one_per_node.values()) == refused,
             AGREE_TIMEOUT_S, "every leader to refuse a record over max.message.bytes")
    row = incremental_alter_topic_configs(address, topic, {"segment.ms": "86400000"},
                                          delete=("max.message.bytes",))
    assert row.error_code == 0, row

    def segment_ms(a: str) -> tuple[str | None, str | None]:
        found = topic_configs(a, topic)
        return found["segment.ms"], found["max.message.bytes"]
    agreed(three_nodes.addresses, segment_ms, ("86400000", "1048588"),
           what="every node's DescribeConfigs")
    wait_for(lambda: _too_large(three_nodes.bootstrap, topic, 300_000,
                                one_per_node.values()) == {},
             AGREE_TIMEOUT_S, "every leader to take the record again")

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


def _txn_batch(pid: int, epoch: int, seq: int) -> bytes:
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                     is_transactional=True)
    for i in range(3):
        b.append(1_700_000_000_000 + i, b"k", b"v-%d-%d" % (seq, i))
    return b.build()


def _txn_produce(address: str, topic: str, p: int, txn_id: str, records: bytes) -> Any:
    body = produce_body(topic, p, records)
    body["transactional_id"] = txn_id
    r = wire_request(address, ApiKey.PRODUCE, 9, body)
    return r.responses[0].partition_responses[0]


def _read_committed_end(address: str, topic: str, p: int) -> int:
    r = wire_request(address, ApiKey.LIST_OFFSETS, 4, {
        "replica_id": -1, "isolation_level": 1, "topics": [
            {"name": topic, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                            "timestamp": -1}]}]})
    return r.topics[0].partitions[0].offset


def test_transactions_are_verified_by_a_coordinator_on_another_node(
        three_nodes: ClusterProcess, request: pytest.FixtureRequest) -> None:
    """Kafka 3.6's transaction verification (KIP-890) across nodes: a leader
    asks the transaction's coordinator, on another node, before the first
    transactional batch of a transaction lands in a partition.  A partition
    never added to the transaction, or whose transaction has ended, is
    refused with INVALID_TXN_STATE and nothing is written."""
    topic, txn_id = _name(request), _name(request) + "-txn"
    assert create_topic(three_nodes.address(0), topic, 6).error_code == 0
    led = settled_leaders(three_nodes.addresses, topic, 6)

    wait_for(lambda: _coordinator(three_nodes.address(0), 1, txn_id) is not None,
             AGREE_TIMEOUT_S, "the transaction's coordinator")  # node 0 may be it
    coordinator_id = _coordinator(three_nodes.address(0), 1, txn_id)
    assert coordinator_id is not None
    coord = three_nodes.address(coordinator_id)
    init = wait_for(lambda: (r := wire_request(coord, ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": txn_id, "transaction_timeout_ms": 60000, "producer_id": -1,
        "producer_epoch": -1})).error_code == 0 and r, AGREE_TIMEOUT_S, "InitProducerId")
    pid, epoch = init.producer_id, init.producer_epoch
    p = next(p for p, leader in led.items() if leader != coordinator_id)
    leader = three_nodes.address(led[p])

    refused = _txn_produce(leader, topic, p, txn_id, _txn_batch(pid, epoch, 0))
    assert refused.error_code == ErrorCode.INVALID_TXN_STATE, refused
    assert refused.error_message == "Partition was not added to the transaction"
    added = wire_request(coord, ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": [p]}]})
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0] \
        .partition_error_code == 0
    for seq in (0, 3):  # the first is asked about; the second finds the transaction open
        written = _txn_produce(leader, topic, p, txn_id, _txn_batch(pid, epoch, seq))
        assert (written.error_code, written.base_offset) == (0, seq), written
    ended = wire_request(coord, ApiKey.END_TXN, 3, {
        "transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
        "committed": True})
    assert ended.error_code == 0
    # The COMMIT marker at 6 ends it on the leader: the last stable offset passes it.
    wait_for(lambda: _read_committed_end(leader, topic, p) == 7, AGREE_TIMEOUT_S,
             "the commit marker written")
    late = _txn_produce(leader, topic, p, txn_id, _txn_batch(pid, epoch, 6))
    assert late.error_code == ErrorCode.INVALID_TXN_STATE, late
    assert _read_committed_end(leader, topic, p) == 7


def _coordinator(address: str, key_type: int, key: str) -> int | None:
    r = wire_request(address, ApiKey.FIND_COORDINATOR, 4,
                     {"key_type": key_type, "coordinator_keys": [key]}).coordinators[0]
    return r.node_id if r.error_code == 0 else None


def test_a_group_and_a_transaction_coordinated_on_different_nodes(
        three_nodes: ClusterProcess, request: pytest.FixtureRequest) -> None:
    """Consume-transform-produce with confluent-kafka: a consumer group whose
    coordinator is one node, a transactional producer whose coordinator is
    another, input and output partitions led by all three.  Committed
    transactions carry their output and the group's offsets; an aborted one
    leaves neither (read_committed), and the group resumes from the last
    commit."""
    name = _name(request)
    source, sink = f"{name}-in", f"{name}-out"
    for topic in (source, sink):
        assert create_topic(three_nodes.address(0), topic, 3).error_code == 0
        assert set(settled_leaders(three_nodes.addresses, topic, 3).values()) == {0, 1, 2}
    address = three_nodes.address(0)
    group = wait_for(lambda: _coordinator(address, 0, f"{name}-g") is not None
                     and f"{name}-g", AGREE_TIMEOUT_S, "the group's coordinator")
    group_node = _coordinator(address, 0, group)
    # A transactional id coordinated elsewhere (ids hash over 50 partitions).
    wait_for(lambda: _coordinator(address, 1, f"{name}-t0") is not None, AGREE_TIMEOUT_S,
             "__transaction_state")
    txn_id = next(t for t in (f"{name}-t{i}" for i in range(200))
                  if _coordinator(address, 1, t) not in (None, group_node))
    assert _coordinator(address, 1, txn_id) != group_node

    inputs = produce("confluent-kafka", three_nodes.bootstrap, source, range(3), 10, "in")
    bootstrap = three_nodes.bootstrap
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                            "enable.auto.commit": False, "auto.offset.reset": "earliest",
                            "isolation.level": "read_committed"})
    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    producer.init_transactions(CLIENT_TIMEOUT_S)
    consumer.subscribe([source])

    def transform(count: int, commit: bool) -> list[bytes]:
        """``count`` input records through one transaction: their outputs."""
        got: list[ck.Message] = []
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            got += [m for m in consumer.consume(count - len(got), 1) if m.error() is None]
        assert len(got) == count
        producer.begin_transaction()
        out = [b"out-" + m.value() for m in got]
        for m, value in zip(got, out, strict=True):
            producer.produce(sink, value=value, partition=m.partition())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(),
                                             CLIENT_TIMEOUT_S)
        if commit:
            producer.commit_transaction(CLIENT_TIMEOUT_S)
        else:
            producer.abort_transaction(CLIENT_TIMEOUT_S)
            # Back to the last committed offsets, as an aborting application does.
            committed = consumer.committed(consumer.assignment(), CLIENT_TIMEOUT_S)
            for tp in committed:
                consumer.seek(ck.TopicPartition(tp.topic, tp.partition,
                                                max(tp.offset, 0)))
        return out

    try:
        committed = transform(12, True)
        transform(6, False)
        committed += transform(18, True)
    finally:
        consumer.close()
    # Every input went out exactly once, in committed transactions only.
    want = sorted(b"out-" + v for rows in inputs.values() for _, v in rows)
    assert sorted(committed) == want
    reader = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"{name}-reader",
                          "enable.auto.commit": False, "auto.offset.reset": "earliest",
                          "isolation.level": "read_committed"})
    reader.subscribe([sink])
    seen: list[bytes] = []
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while len(seen) < len(want) and time.monotonic() < deadline:
        seen += [m.value() for m in reader.consume(100, 1) if m.error() is None]
    seen += [m.value() for m in reader.consume(100, 2) if m.error() is None]
    reader.close()
    assert sorted(seen) == want
    # The group's committed offsets are the inputs' ends, on its coordinator.
    check = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    offsets = check.committed([ck.TopicPartition(source, p) for p in range(3)],
                              CLIENT_TIMEOUT_S)
    check.close()
    assert {tp.partition: tp.offset for tp in offsets} == ends_of(inputs)


def _replicas_and_leader(address: str, topic: str) -> tuple[list[int], int] | None:
    found = metadata(address, [topic]).topics[0]
    if found.error_code or not found.partitions:
        return None
    p = found.partitions[0]
    return list(p.replica_nodes), p.leader_id


def test_the_admin_znodes_of_older_tools(three_nodes: ClusterProcess,
                                         request: pytest.FixtureRequest) -> None:
    """What Kafka's tools wrote before KIP-455 still works, as in Kafka's
    ZooKeeper mode: a JSON written to ``/admin/reassign_partitions`` moves the
    partition with its data, and ``/admin/preferred_replica_election`` makes
    the preferred replica lead; the controller deletes each znode when done."""
    topic = _name(request)
    r = wire_request(three_nodes.address(1), ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": topic, "num_partitions": -1, "replication_factor": -1,
         "assignments": [{"partition_index": 0, "broker_ids": [0]}], "configs": []}],
        "timeout_ms": 30_000, "validate_only": False})
    assert r.topics[0].error_code == 0, r
    agreed(three_nodes.addresses, lambda a: _replicas_and_leader(a, topic), ([0], 0),
           what="the topic on node 0")
    acked = produce("confluent-kafka", three_nodes.bootstrap, topic, [0], 20, "moved")

    def moved(replicas: list[int], leader: int) -> None:
        agreed(three_nodes.addresses, lambda a: _replicas_and_leader(a, topic),
               (replicas, leader), what=f"{topic} on {replicas} led by {leader}")

    with zookeeper(three_nodes.zookeeper_address) as zk:
        zk.create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [1, 2]}]}).encode(), makepath=True)
        wait_for(lambda: zk.exists("/admin/reassign_partitions") is None, AGREE_TIMEOUT_S,
                 "the reassignment to finish")
        moved([1, 2], 1)
        # Node 0 gave the partition up (its directory renamed ``-delete``, gone
        # after file.delete.delay.ms); the new replicas hold every record.
        wait_for(lambda: [(three_nodes.log_dir(i) / f"{topic}-0").is_dir()
                          for i in range(NODES)] == [False, True, True],
                 AGREE_TIMEOUT_S, "node 0's replica deleted")
        assert consume("kafka-python", three_nodes.bootstrap, topic, ends_of(acked)) == acked
        # The same replicas in another order: node 2 is now preferred, node 1 still leads.
        zk.create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [2, 1]}]}).encode())
        wait_for(lambda: zk.exists("/admin/reassign_partitions") is None, AGREE_TIMEOUT_S,
                 "the reorder")
        moved([2, 1], 1)
        zk.create("/admin/preferred_replica_election", json.dumps({
            "version": 1, "partitions": [{"topic": topic, "partition": 0}]}).encode())
        wait_for(lambda: zk.exists("/admin/preferred_replica_election") is None,
                 AGREE_TIMEOUT_S, "the preferred replica election")
        moved([2, 1], 2)
    more = produce("aiokafka", three_nodes.bootstrap, topic, [0], 5, "after")
    both = {0: acked[0] + more[0]}
    assert consume("confluent-kafka", three_nodes.bootstrap, topic, ends_of(both)) == both
