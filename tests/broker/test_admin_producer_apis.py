"""DescribeProducers, ListTransactions and DescribeTransactions (KIP-664) of
the real broker, as a single Kafka 3.6 broker answers them: real idempotent
producers (kafka-python, confluent-kafka) described by kafka-python's
KafkaAdminClient, before and after a restart, and every version on the wire.

A producer's id is known from pylog's sequential ids: a raw InitProducerId
just before and just after the client's gives the two neighbours of its id.
"""

from __future__ import annotations

import time

import confluent_kafka
import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin._transactions import PartitionProducerState, ProducerState
from kafka.errors import TransactionalIdNotFoundError, UnknownTopicOrPartitionError
from kafka_wire import RawClient, produce_body
from test_broker_protocol import partition_response

from pylog.protocol import ApiKey, ErrorCode
from pylog.records import BatchBuilder

UNKNOWN = "This server does not host this topic-partition."  # Errors.UNKNOWN_TOPIC_OR_PARTITION
NO_TXN = -1  # current_txn_start_offset with no open transaction
NO_COORDINATOR_EPOCH = -1
# Topic.validate's refusal, in pylog's words (pylog.server.topics.validate_name)
ILLEGAL = ("topic name 'bad name!' holds characters other than ASCII alphanumerics, "
           "'.', '_' and '-'")
STATES = ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
          "CompleteAbort", "Dead", "PrepareEpochFence"]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def create_topic(c: RawClient, name: str, partitions: int = 1, **configs: str) -> None:
    r = c.request(ApiKey.CREATE_TOPICS, 7, {"timeout_ms": 5000, "validate_only": False,
                  "topics": [{"name": name, "num_partitions": partitions,
                              "replication_factor": 1, "assignments": [], "configs": [
                                  {"name": k, "value": v} for k, v in configs.items()]}]})
    assert r.topics[0].error_code == 0, r.topics[0]


def init_producer_id(bootstrap: str) -> tuple[int, int]:
    with RawClient(bootstrap) as c:
        r = c.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None,
                                                   "transaction_timeout_ms": 60000,
                                                   "producer_id": -1, "producer_epoch": -1})
    assert r.error_code == 0
    return r.producer_id, r.producer_epoch


def node_id(bootstrap: str) -> int:
    with RawClient(bootstrap) as c:
        r = c.request(ApiKey.METADATA, 9, {"topics": [], "allow_auto_topic_creation": False})
    return r.brokers[0].node_id


def describe_producers(c: RawClient, topics: list[tuple[str, list[int]]]) -> list:
    r = c.request(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [
        {"name": name, "partition_indexes": parts} for name, parts in topics]})
    assert r.throttle_time_ms == 0
    return [(t.name, [(p.partition_index, p.error_code, p.error_message,
                       [(a.producer_id, a.producer_epoch, a.last_sequence, a.last_timestamp,
                         a.coordinator_epoch, a.current_txn_start_offset)
                        for a in p.active_producers]) for p in t.partitions])
            for t in r.topics]


def described(pid: int, last_sequence: int, last_timestamp: int, epoch: int = 0):
    return PartitionProducerState([ProducerState(pid, epoch, last_sequence, last_timestamp,
                                                 NO_COORDINATOR_EPOCH, NO_TXN)])


def raw_send(c: RawClient, topic: str, pid: int, epoch: int, seq: int, stamps: list[int]):
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    for t in stamps:
        b.append(t, b"k", b"v")
    r = partition_response(c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, b.build())))
    assert r.error_code == 0, r
    return r


@pytest.mark.parametrize("restart", ["sigterm", "kill-9"])
def test_kafka_python_producers_described_across_restart(start_broker, tmp_path,
                                                         restart) -> None:
    """kafka-python's default (idempotent) producer on two partitions and a
    LogAppendTime topic, a non-idempotent producer beside it: describe_producers
    gives the idempotent one's id, epoch 0, the last sequence (records sent - 1)
    and the last batch's max timestamp (the broker's append time on the
    LogAppendTime topic), coordinator epoch and txn start offset -1, and
    nothing for the non-idempotent one; the same after a restart."""
    data = tmp_path / "data"
    b = start_broker(log_dir=data)
    topic, appended = "described", "described-append-time"
    with RawClient(b.bootstrap) as c:
        create_topic(c, topic, 3)
        create_topic(c, appended, 1, **{"message.timestamp.type": "LogAppendTime"})
    before, _ = init_producer_id(b.bootstrap)
    producer = KafkaProducer(bootstrap_servers=b.bootstrap)
    start = now_ms()
    sent = {0: 7, 1: 4}
    for partition, n in sent.items():
        for i in range(n):  # one batch per record (each send waited for)
            producer.send(topic, b"v", partition=partition, timestamp_ms=start + i).get(30)
    append_times = [producer.send(appended, b"v", partition=0).get(30).timestamp
                    for _ in range(2)]
    producer.close()
    after, _ = init_producer_id(b.bootstrap)
    assert after == before + 2  # the producer's InitProducerId came in between
    pid = before + 1
    plain = KafkaProducer(bootstrap_servers=b.bootstrap, enable_idempotence=False, acks=1)
    for partition in (0, 2):
        plain.send(topic, b"plain", partition=partition, timestamp_ms=start + 100).get(30)
    plain.close()
    expected = {TopicPartition(topic, 0): described(pid, 6, start + 6),
                TopicPartition(topic, 1): described(pid, 3, start + 3),
                TopicPartition(topic, 2): PartitionProducerState([]),
                TopicPartition(appended, 0): described(pid, 1, append_times[-1])}
    assert append_times[-1] >= start
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        assert admin.describe_producers(list(expected)) == expected
    finally:
        admin.close()
    if restart == "sigterm":
        assert b.stop() == 0
    else:
        b.kill()
    b2 = start_broker(log_dir=data, port=b.port)
    admin = KafkaAdminClient(bootstrap_servers=b2.bootstrap)
    try:
        assert admin.describe_producers(list(expected)) == expected
    finally:
        admin.close()


def test_confluent_kafka_idempotent_producer_described(start_broker) -> None:
    """librdkafka with enable.idempotence=true: its id, epoch 0, the last
    sequence of the records it sent and its last record's timestamp."""
    b = start_broker()
    topic = "confluent-idempotent"
    with RawClient(b.bootstrap) as c:
        create_topic(c, topic, 2)
    before, _ = init_producer_id(b.bootstrap)
    p = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap,
                                  "enable.idempotence": True})
    start = now_ms()
    errors: list = []
    for i in range(9):
        p.produce(topic, b"v%d" % i, partition=1, timestamp=start + i,
                  on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(30) == 0
    assert errors == [None] * 9
    after, _ = init_producer_id(b.bootstrap)
    assert after == before + 2
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        found = admin.describe_producers([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    finally:
        admin.close()
    assert found == {TopicPartition(topic, 0): PartitionProducerState([]),
                     TopicPartition(topic, 1): described(before + 1, 8, start + 8)}


def test_describe_producers_unknown_partition_and_topic_kafka_python(broker, topic) -> None:
    """Sent to the broker itself (broker_id): UNKNOWN_TOPIC_OR_PARTITION for a
    partition the topic lacks and for a topic that does not exist."""
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic, 2)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        node = node_id(broker.bootstrap)
        assert admin.describe_producers([TopicPartition(topic, 1)], broker_id=node) == {
            TopicPartition(topic, 1): PartitionProducerState([])}
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_producers([TopicPartition(topic, 2)], broker_id=node)
        with pytest.raises(UnknownTopicOrPartitionError, match=UNKNOWN):
            admin.describe_producers([TopicPartition(topic + "-missing", 0)], broker_id=node)
    finally:
        admin.close()


def test_describe_producers_v0_on_the_wire(broker, topic) -> None:
    """Raw DescribeProducers v0: producers by id with their epoch (an epoch
    bump restarts the entry), last sequence and last batch's max timestamp;
    partitions in the request's order, duplicates included; Kafka's errors for
    an unknown partition (no message), an unknown topic (the error's message)
    and an illegal topic name (INVALID_TOPIC_EXCEPTION)."""
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic, 2)
        first, _ = init_producer_id(broker.bootstrap)
        second, _ = init_producer_id(broker.bootstrap)
        t = now_ms()
        raw_send(c, topic, first, 0, 0, [t, t + 5, t + 2])
        raw_send(c, topic, second, 0, 0, [t + 1])
        raw_send(c, topic, first, 0, 3, [t + 9, t + 7])  # last sequence 4, max ts t+9
        raw_send(c, topic, second, 0, 1, [t + 3, t + 4, t + 6])
        raw_send(c, topic, second, 1, 0, [t + 8, t + 10])  # epoch bump: sequence from 0
        producers = [(first, 0, 4, t + 9, -1, -1), (second, 1, 1, t + 10, -1, -1)]
        missing = topic + "-missing"
        assert describe_producers(c, [(topic, [0, 1, 0, 2, -1]), (missing, [0, 3]),
                                      ("bad name!", [0]), (topic, [])]) == [
            (topic, [(0, 0, None, producers), (1, 0, None, []), (0, 0, None, producers),
                     (2, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, []),
                     (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, [])]),
            (missing, [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN, []),
                       (3, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN, [])]),
            ("bad name!", [(0, ErrorCode.INVALID_TOPIC_EXCEPTION, ILLEGAL, [])]),
            (topic, [])]


@pytest.mark.parametrize("version", [0, 1])
def test_list_transactions_on_the_wire(start_broker, version: int) -> None:
    """Raw ListTransactions v0 and v1 (duration filter) on a broker that never
    saw a transactional id: error NONE, no transactions whatever the
    filters, and the state filters Kafka's TransactionState does not name
    (case-sensitive), each once."""
    broker = start_broker()
    body = {"state_filters": ["Ongoing", "bogus", "ongoing", "bogus", "Dead", ""],
            "producer_id_filters": [0, 1, -1, 2**63 - 1]}
    if version >= 1:
        body["duration_filter"] = 0
    with RawClient(broker.bootstrap) as c:
        r = c.request(ApiKey.LIST_TRANSACTIONS, version, body)
        assert (r.throttle_time_ms, r.error_code, r.unknown_state_filters,
                r.transaction_states) == (0, 0, ["bogus", "ongoing", ""], [])
        r = c.request(ApiKey.LIST_TRANSACTIONS, version,
                      {"state_filters": STATES, "producer_id_filters": []})
        assert (r.error_code, r.unknown_state_filters, r.transaction_states) == (0, [], [])


def test_list_transactions_kafka_python(start_broker) -> None:
    """KafkaAdminClient.list_transactions: an empty listing from the one
    broker, with or without filters, even while an idempotent producer is
    writing (no transaction is open), and with a duration filter (v1)."""
    b = start_broker()
    producer = KafkaProducer(bootstrap_servers=b.bootstrap)
    producer.send("listed", b"v").get(30)
    producer.close()
    node = node_id(b.bootstrap)
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        assert admin.list_transactions() == {node: []}
        assert admin.list_transactions(state_filters=["Ongoing", "PrepareCommit"],
                                       producer_id_filters=[0]) == {node: []}
        assert admin.list_transactions(duration_filter_ms=0) == {node: []}
    finally:
        admin.close()


def test_describe_transactions_on_the_wire(start_broker) -> None:
    """Raw DescribeTransactions v0: NOT_COORDINATOR while no partition of
    ``__transaction_state`` is led here (before anything made the topic, as
    Kafka answers); once FindCoordinator made it, TRANSACTIONAL_ID_NOT_FOUND
    for an id with no state (every id here) with the other fields at their
    defaults, an empty id INVALID_REQUEST, ids answered in order, duplicates
    included."""
    b = start_broker()
    with RawClient(b.bootstrap) as c:
        r = c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["no-such-txn"]})
        assert [s.error_code for s in r.transaction_states] == [ErrorCode.NOT_COORDINATOR]
        found = c.request(ApiKey.FIND_COORDINATOR, 3, {"key": "no-such-txn", "key_type": 1})
        assert (found.error_code, found.port) == (0, b.port)
        r = c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [
            "no-such-txn", "", "no-such-txn"]})
        assert r.throttle_time_ms == 0
        assert [(s.error_code, s.transactional_id, s.transaction_state,
                 s.transaction_timeout_ms, s.transaction_start_time_ms, s.producer_id,
                 s.producer_epoch, s.topics) for s in r.transaction_states] == [
            (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, "no-such-txn", "", 0, 0, 0, 0, []),
            (ErrorCode.INVALID_REQUEST, "", "", 0, 0, 0, 0, []),
            (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, "no-such-txn", "", 0, 0, 0, 0, [])]
        r = c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": []})
        assert r.transaction_states == []


def test_describe_transactions_kafka_python(broker) -> None:
    """KafkaAdminClient.describe_transactions finds this node as the
    transaction coordinator and raises TransactionalIdNotFoundError."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        with pytest.raises(TransactionalIdNotFoundError):
            admin.describe_transactions(["no-such-txn"])
    finally:
        admin.close()


def test_api_versions_advertise_the_three_apis(broker) -> None:
    with RawClient(broker.bootstrap) as c:
        r = c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                               "client_software_version": "1"})
    keys = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    assert (keys.get(ApiKey.DESCRIBE_PRODUCERS), keys.get(ApiKey.DESCRIBE_TRANSACTIONS),
            keys.get(ApiKey.LIST_TRANSACTIONS)) == ((0, 0), (0, 0), (0, 1))


