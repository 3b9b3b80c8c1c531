"""Consumer groups and transactions outlive their coordinator's node: with
the internal topics replicated 3 ways (offsets.topic.replication.factor=3,
transaction.state.log.replication.factor=3 and transaction.state.log.min.isr=2,
the defaults), kill -9 of the node leading the group's __consumer_offsets
partition, or the transactional id's __transaction_state partition, moves
the coordinator to the new leader, which has every committed offset and
transaction state: a group member goes on committing and a new member
starts where it left off (kafka-python); an open transaction commits after
the failover, earlier commits and aborts stay as they were, and a new
producer with the same transactional id still fences the old one
(confluent-kafka, read back by aiokafka's read_committed consumer).

What makes that hold whenever the node dies: a coordinator answers only
once its write is in the in-sync replicas (Kafka's
offsets.commit.required.acks=-1, and acks=-1 with
transaction.state.log.min.isr for the transaction log), and a transaction
completes only once its markers are in their partitions' in-sync replicas
(WriteTxnMarkers' acks=-1), checked with the followers hung (SIGSTOP).
Each test has its own cluster."""

from __future__ import annotations

import asyncio
import struct
import threading
from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from kafka import KafkaConsumer, TopicPartition
from kafka.errors import (
    CommitFailedError,
    IllegalGenerationError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from kafka.errors import KafkaError as KafkaPythonError
from kafka.structs import OffsetAndMetadata
from kafka_wire import RawClient
from node_cluster import NodeCluster, segment_bytes
from replication_workload import codes, produce

from pylog.protocol import ApiKey

GROUP, TRANSACTION = 0, 1  # FindCoordinator's key types
LIVENESS_S = 120
INTERNAL_PARTITIONS = 50  # offsets.topic.num.partitions, transaction.state.log.num.partitions
# Short: a hung follower leaves the ISR soon.
NODE_OVERRIDES = ("replica.lag.time.max.ms=3000",)
# How long a transaction commit is watched for completing while the
# transaction log has fewer in-sync replicas than its min.isr (it must not).
HELD_S = 10


def _string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """Kafka's OffsetCommitKey (version 1) as __consumer_offsets stores it."""
    return struct.pack(">h", 1) + _string(group) + _string(topic) + struct.pack(">i", partition)


def transaction_key(transactional_id: str) -> bytes:
    """Kafka's TransactionLogKey (version 0) as __transaction_state stores it."""
    return struct.pack(">h", 0) + _string(transactional_id)


def internal_partition(nodes: NodeCluster, topic: str, node_id: int, key: bytes) -> int:
    """The partition of the internal topic whose log on ``node_id`` holds ``key``."""
    found = [p for p in range(INTERNAL_PARTITIONS)
             if key in segment_bytes(nodes.partition_dir(node_id, topic, p))]
    assert len(found) == 1, f"{key!r} in {topic} partitions {found} on node {node_id}"
    return found[0]


def coordinator(nodes: NodeCluster, key: str, key_type: int) -> int:
    """The coordinator FindCoordinator names (asked of any running node)."""
    def ask() -> tuple[int] | None:  # (node id,): node 0 is an answer too
        for i in range(nodes.count):
            if nodes.running(i):
                with RawClient(nodes.address(i)) as client:
                    r = client.request(ApiKey.FIND_COORDINATOR, 2,
                                       {"key": key, "key_type": key_type})
                return (r.node_id,) if r.error_code == 0 else None
        return None

    return nodes.wait(ask, f"a coordinator for {key!r}")[0]


def _kafka_python_consumer(nodes: NodeCluster, topic: str, group: str) -> KafkaConsumer:
    return KafkaConsumer(topic, bootstrap_servers=nodes.bootstrap.split(","), group_id=group,
                         enable_auto_commit=False, auto_offset_reset="earliest",
                         session_timeout_ms=10000, heartbeat_interval_ms=1000)


def _poll_values(consumer: KafkaConsumer, count: int, nodes: NodeCluster) -> list[str]:
    got: list[str] = []

    def more() -> bool:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(r.value.decode() for r in records)
        return len(got) >= count

    nodes.wait(more, f"{count} records for the group", LIVENESS_S)
    return got


def _commit(consumer: KafkaConsumer, tp: TopicPartition, offset: int,
            nodes: NodeCluster) -> None:
    """A synchronous commit, tried again while the coordinator moves."""
    def commit() -> bool:
        try:
            consumer.commit({tp: OffsetAndMetadata(offset, "", -1)})
        except (CommitFailedError, RebalanceInProgressError, IllegalGenerationError,
                UnknownMemberIdError):
            pass  # the group moved on: rejoin (poll) and commit again
        except KafkaPythonError as exc:
            if not exc.retriable:
                raise
        else:
            return True
        consumer.poll(timeout_ms=200)  # rejoin the group / find the coordinator
        return False

    nodes.wait(commit, f"the commit of offset {offset}", LIVENESS_S)


def test_group_offsets_survive_a_kill_of_the_coordinator(
        start_nodes: Callable[..., NodeCluster], topic: str) -> None:
    nodes = start_nodes(3, *NODE_OVERRIDES)
    nodes.create_topic(topic, 1, 3)
    first = [f"v{i}" for i in range(10)]
    assert codes(produce(nodes.bootstrap, topic, first, "all")) == [KafkaError.NO_ERROR] * 10
    group = f"{topic}-group"
    tp = TopicPartition(topic, 0)

    member = _kafka_python_consumer(nodes, topic, group)
    try:
        assert _poll_values(member, 10, nodes) == first
        _commit(member, tp, 6, nodes)
        old = coordinator(nodes, group, GROUP)
        offsets = internal_partition(nodes, "__consumer_offsets", old,
                                     offset_commit_key(group, topic, 0))
        nodes.wait_replicas_equal("__consumer_offsets", offsets, range(nodes.count))
        nodes.kill_node(old)
        nodes.wait(lambda: coordinator(nodes, group, GROUP) != old, "a new coordinator")
        # The new coordinator loaded the group's offsets from its replica.
        assert member.committed(tp) == 6
        _commit(member, tp, 10, nodes)
    finally:
        member.close(autocommit=False)

    later = [f"w{i}" for i in range(3)]
    assert codes(produce(",".join(nodes.address(i) for i in range(nodes.count)
                                  if i != old), topic, later, "all")) == [
        KafkaError.NO_ERROR] * 3
    successor = _kafka_python_consumer(nodes, topic, group)
    try:
        assert _poll_values(successor, 3, nodes) == later  # from offset 10 on
        assert successor.committed(tp) == 10
    finally:
        successor.close(autocommit=False)


def _read_committed(nodes: NodeCluster, topic: str, count: int) -> list[str]:
    """``count`` values read by aiokafka with isolation_level=read_committed,
    then a little longer, to see that no more come."""
    async def read() -> list[str]:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=nodes.bootstrap,
                                    isolation_level="read_committed",
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    group_id=None)
        await consumer.start()
        got: list[str] = []
        try:
            async with asyncio.timeout(LIVENESS_S):
                while len(got) < count:
                    batch = await consumer.getmany(timeout_ms=500)
                    got += [r.value.decode() for rs in batch.values() for r in rs]
            batch = await consumer.getmany(timeout_ms=2000)
            got += [r.value.decode() for rs in batch.values() for r in rs]
        finally:
            await consumer.stop()
        return got

    return asyncio.run(read())


def test_transactions_survive_a_kill_of_the_coordinator(
        start_nodes: Callable[..., NodeCluster], topic: str) -> None:
    nodes = start_nodes(3, *NODE_OVERRIDES)
    nodes.create_topic(topic, 2, 3)
    tid = f"{topic}-txn"
    config = {"bootstrap.servers": nodes.bootstrap, "transactional.id": tid,
              "transaction.timeout.ms": 120000}
    producer = Producer(config)
    producer.init_transactions(LIVENESS_S)

    def transaction(values: list[str], commit: bool, who: Producer = producer) -> None:
        who.begin_transaction()
        for i, value in enumerate(values):
            who.produce(topic, value=value.encode(), partition=i % 2)
        if commit:
            who.commit_transaction(LIVENESS_S)
        else:
            who.abort_transaction(LIVENESS_S)

    committed = [f"c{i}" for i in range(4)]
    aborted = [f"a{i}" for i in range(4)]
    transaction(committed, commit=True)
    transaction(aborted, commit=False)
    spanning = [f"s{i}" for i in range(4)]
    producer.begin_transaction()
    for i, value in enumerate(spanning):
        producer.produce(topic, value=value.encode(), partition=i % 2)
    producer.flush(LIVENESS_S)  # written, the transaction still open

    old = coordinator(nodes, tid, TRANSACTION)
    state = internal_partition(nodes, "__transaction_state", old, transaction_key(tid))
    nodes.wait_replicas_equal("__transaction_state", state, range(nodes.count))
    nodes.kill_node(old)
    nodes.wait(lambda: coordinator(nodes, tid, TRANSACTION) != old, "a new coordinator")
    producer.commit_transaction(LIVENESS_S)  # on the new coordinator
    after = [f"d{i}" for i in range(4)]
    transaction(after, commit=True)

    # A new producer with the same id fences the old one, across the failover.
    successor = Producer(config)
    successor.init_transactions(LIVENESS_S)
    with pytest.raises(KafkaException) as fenced:
        transaction(["fenced"], commit=True)
    assert fenced.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                           KafkaError.INVALID_PRODUCER_EPOCH)
    last = [f"e{i}" for i in range(4)]
    transaction(last, commit=True, who=successor)

    expected = committed + spanning + after + last
    got = _read_committed(nodes, topic, len(expected))
    assert sorted(got) == sorted(expected)
    for p in (0, 1):  # each partition in the order written
        assert [v for v in got if v in expected[p::2]] == expected[p::2]


def test_offset_commit_is_answered_once_the_in_sync_replicas_have_it(
        start_nodes: Callable[..., NodeCluster], topic: str) -> None:
    """Both followers of the group's offsets partition hang: the commit may
    be answered only when every replica still in the ISR holds it (Kafka
    answers once the leader has dropped them, after replica.lag.time.max.ms)."""
    nodes = start_nodes(3, *NODE_OVERRIDES)
    nodes.create_topic(topic, 1, 3)
    assert codes(produce(nodes.bootstrap, topic, ["v"], "all")) == [KafkaError.NO_ERROR]
    group = f"{topic}-group"
    tp = TopicPartition(topic, 0)
    member = _kafka_python_consumer(nodes, topic, group)
    try:
        _poll_values(member, 1, nodes)
        _commit(member, tp, 0, nodes)  # the group's partition now holds this key
        leader = coordinator(nodes, group, GROUP)
        key = offset_commit_key(group, topic, 0)
        offsets = internal_partition(nodes, "__consumer_offsets", leader, key)
        nodes.wait_replicas_equal("__consumer_offsets", offsets, range(nodes.count))
        followers = [i for i in range(nodes.count) if i != leader]
        for f in followers:
            nodes.pause(f)
        _commit(member, tp, 1, nodes)
        isr = nodes.isr("__consumer_offsets", offsets)
        held = {i: segment_bytes(nodes.partition_dir(i, "__consumer_offsets", offsets))
                .count(key) for i in isr}
        for f in followers:
            nodes.resume(f)
        assert held == {i: 2 for i in isr}, f"commits held by the ISR {isr} when answered"
    finally:
        for f in range(nodes.count):
            nodes.resume(f)
        member.close(autocommit=False)


def test_transaction_commit_waits_for_the_transaction_log_min_isr(
        start_nodes: Callable[..., NodeCluster], topic: str) -> None:
    """The transaction log takes writes only with transaction.state.log.min.isr
    (2) replicas in sync: with both followers of the transactional id's
    partition hung and out of the ISR, a commit cannot complete; once they
    are back it does."""
    nodes = start_nodes(3, *NODE_OVERRIDES)
    nodes.create_topic(topic, 1, 3)
    tid = f"{topic}-txn"
    producer = Producer({"bootstrap.servers": nodes.bootstrap, "transactional.id": tid,
                         "transaction.timeout.ms": 120000})
    producer.init_transactions(LIVENESS_S)
    leader = coordinator(nodes, tid, TRANSACTION)
    state = internal_partition(nodes, "__transaction_state", leader, transaction_key(tid))
    admin = AdminClient({"bootstrap.servers": nodes.bootstrap})
    (described,) = admin.describe_configs([ConfigResource("topic", "__transaction_state")]
                                          ).values()
    assert described.result(60)["min.insync.replicas"].value == "2"

    producer.begin_transaction()
    producer.produce(topic, value=b"held", partition=0)
    producer.flush(LIVENESS_S)
    followers = [i for i in range(nodes.count) if i != leader]
    for f in followers:
        nodes.pause(f)
    done = threading.Event()
    errors: list[BaseException] = []

    def commit() -> None:
        try:
            producer.commit_transaction(LIVENESS_S)
        except BaseException as exc:
            errors.append(exc)
        done.set()

    try:
        nodes.wait_isr("__transaction_state", [state], [leader], by_leader=True)
        committer = threading.Thread(target=commit, daemon=True)
        committer.start()
        completed_while_held = done.wait(HELD_S)
    finally:
        for f in followers:
            nodes.resume(f)
    assert not completed_while_held, f"committed below min.isr ({errors or 'no error'})"
    assert done.wait(LIVENESS_S) and not errors, errors
    assert _read_committed(nodes, topic, 1) == ["held"]


def _describe_txn(nodes: NodeCluster, node_id: int, tid: str) -> tuple[str, dict[str, list[int]]]:
    """DescribeTransactions asked of the coordinator: (state, the partitions
    still waiting for their marker, by topic)."""
    with RawClient(nodes.address(node_id)) as client:
        r = client.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]})
    (found,) = r.transaction_states
    assert found.error_code == 0, found
    return found.transaction_state, {t.topic: sorted(t.partitions) for t in found.topics}


def _fetch_committed(nodes: NodeCluster, node_id: int, topic: str, partition: int
                     ) -> tuple[int, int, bool]:
    """A read_committed consumer's Fetch from offset 0, of the partition's
    leader: (high watermark, last stable offset, whether records came)."""
    with RawClient(nodes.address(node_id)) as client:
        r = client.request(ApiKey.FETCH, 11, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 1, "session_id": 0, "session_epoch": -1, "rack_id": "",
            "forgotten_topics_data": [], "topics": [{"topic": topic, "partitions": [
                {"partition": partition, "fetch_offset": 0,
                 "partition_max_bytes": 1 << 20}]}]})
    found = r.responses[0].partitions[0]
    assert found.error_code == 0, found
    return found.high_watermark, found.last_stable_offset, bool(found.records)


def test_transaction_completes_once_its_markers_are_in_the_in_sync_replicas(
        start_nodes: Callable[..., NodeCluster], topic: str) -> None:
    """Kafka's WriteTxnMarkers appends a marker with acks=-1: refused
    (NOT_ENOUGH_REPLICAS, sent again) while the partition has fewer in-sync
    replicas than its min.insync.replicas, and the coordinator moves the
    transaction from PrepareCommit to CompleteCommit only once every marker
    is in its partition's in-sync replicas.  Partition 0 is led by another
    node than the coordinator (its marker goes in a WriteTxnMarkers request),
    partition 1 by the coordinator (written there); both have min.insync=2
    and the same follower, which hangs (SIGSTOP) and leaves their ISR: the
    commit is answered (PrepareCommit written) but stays in PrepareCommit,
    nothing is stable for read_committed consumers, until the follower is
    back; then it completes, the follower holding both markers.  The
    transaction's offsets (TxnOffsetCommit) count once it does."""
    nodes = start_nodes(3, *NODE_OVERRIDES)
    tid = f"{topic}-txn"
    producer = Producer({"bootstrap.servers": nodes.bootstrap, "transactional.id": tid,
                         "transaction.timeout.ms": 120000})
    producer.init_transactions(LIVENESS_S)
    txn_coordinator = coordinator(nodes, tid, TRANSACTION)
    leader, follower = (i for i in range(nodes.count) if i != txn_coordinator)
    nodes.create_topic(topic, config={"min.insync.replicas": "2"},
                       assignment=[[leader, follower], [txn_coordinator, follower]])
    led = ((0, leader), (1, txn_coordinator))  # (partition, its leader)
    state = internal_partition(nodes, "__transaction_state", txn_coordinator,
                               transaction_key(tid))
    # A group coordinated on a node that stays up: its marker is not held
    # (__consumer_offsets has min.insync.replicas 1).
    group = next(g for g in (f"{topic}-group{i}" for i in range(20))
                 if coordinator(nodes, g, GROUP) != follower)

    def group_member() -> Consumer:
        return Consumer({"bootstrap.servers": nodes.bootstrap, "group.id": group,
                         "enable.auto.commit": False})

    producer.begin_transaction()
    for p in (0, 1):
        producer.produce(topic, value=f"p{p}".encode(), partition=p)
    producer.flush(LIVENESS_S)
    member = group_member()
    try:
        producer.send_offsets_to_transaction([ConfluentTopicPartition(topic, 0, 1)],
                                             member.consumer_group_metadata(), LIVENESS_S)
    finally:
        member.close()
    nodes.pause(follower)
    try:
        nodes.wait_isr(topic, [0], [leader], by_leader=True)
        nodes.wait_isr(topic, [1], [txn_coordinator], by_leader=True)
        nodes.wait_isr("__transaction_state", [state], [txn_coordinator, leader],
                       by_leader=True)
        producer.commit_transaction(LIVENESS_S)  # EndTxn: PrepareCommit is written
        log = nodes.nodes[txn_coordinator]
        nodes.wait(lambda: all(f"in {topic}-{p}: NOT_ENOUGH_REPLICAS, sending it again"
                               in log.log_text() for p in (0, 1)),
                   "both markers refused for too few in-sync replicas")
        held_state, waiting = _describe_txn(nodes, txn_coordinator, tid)
        held_fetch = [_fetch_committed(nodes, p_leader, topic, p) for p, p_leader in led]
    finally:
        nodes.resume(follower)
    assert (held_state, waiting.get(topic)) == ("PrepareCommit", [0, 1])
    # Each record is in the in-sync replicas (high watermark 1), and nothing
    # is stable: a read_committed consumer gets no records.
    assert held_fetch == [(1, 0, False)] * 2

    def completed() -> bool:
        return _describe_txn(nodes, txn_coordinator, tid)[0] == "CompleteCommit"

    nodes.wait(completed, "the transaction to complete", LIVENESS_S)
    # Completed only once the follower, back in the ISR, had both markers
    # (the last thing written to either partition).
    for p, p_leader in led:
        assert segment_bytes(nodes.partition_dir(follower, topic, p)) == segment_bytes(
            nodes.partition_dir(p_leader, topic, p))
    assert [_fetch_committed(nodes, p_leader, topic, p) for p, p_leader in led] == [
        (2, 2, True)] * 2
    assert sorted(_read_committed(nodes, topic, 2)) == ["p0", "p1"]
    member = group_member()
    try:
        (committed,) = member.committed([ConfluentTopicPartition(topic, 0)], LIVENESS_S)
    finally:
        member.close()
    assert committed.offset == 1
