"""``pylog transactions`` (kafka-transactions.sh) and WriteTxnMarkers, against a real broker.

A hanging transaction made as KIP-664 describes one: a transactional batch
in a partition that no coordinator knows of (partition verification off, so
the broker takes it), which holds the partition's last stable offset.
``find-hanging`` lists it, ``abort --start-offset`` ends it with an ABORT
marker (WriteTxnMarkers), and a read_committed consumer gets past it.  A
transaction the coordinator does know is listed and described, and is not
hanging.  WriteTxnMarkers' refusals on the wire: an unknown partition, an
older producer epoch, a coordinator epoch newer than this node's.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import confluent_kafka as ck
import pytest
from broker_process import BrokerProcess
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_wire import RawClient, produce_body

from pylog.protocol import ApiKey, ErrorCode
from pylog.records import BatchBuilder

HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def unverified(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("txn-tool"),
                      "transaction.partition.verification.enable=false").start()
    yield b
    b.stop()


def _create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # referenced until the result
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)


def _hang(bootstrap: str, topic: str, pid: int, epoch: int = 3) -> int:
    """A transactional record no coordinator knows of, written an hour ago; its offset."""
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=0,
                     is_transactional=True)
    b.append(int(time.time() * 1000) - HOUR_MS, b"k", b"hung")
    body = produce_body(topic, 0, b.build())
    body["transactional_id"] = "nobody-knows"
    with RawClient(bootstrap) as c:
        r = c.request(ApiKey.PRODUCE, 9, body).responses[0].partition_responses[0]
    assert r.error_code == 0, r
    return r.base_offset


def _ends(bootstrap: str, topic: str) -> tuple[int, int]:
    """(last stable offset, high watermark) of partition 0."""
    out = []
    for isolation in ("read_committed", "read_uncommitted"):
        c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "ends",
                         "isolation.level": isolation})
        try:
            out.append(c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10,
                                               cached=False)[1])
        finally:
            c.close()
    return out[0], out[1]


def _rows(stdout: str) -> list[list[str]]:
    """Kafka's table: tab-terminated, space-padded columns."""
    return [[cell.strip() for cell in line.split("\t")[:-1]] for line in stdout.splitlines()]


def test_find_and_abort_a_hanging_transaction(pylog, unverified) -> None:
    bs, topic = unverified.bootstrap, f"hung-{uuid.uuid4().hex[:8]}"
    _create(bs, topic)
    offset = _hang(bs, topic, pid=4242)
    plain = ck.Producer({"bootstrap.servers": bs})
    plain.produce(topic, b"after", partition=0)
    assert plain.flush(20) == 0
    assert _ends(bs, topic) == (offset, offset + 2)  # held at the hanging record

    def tool(*args: str):
        return pylog("transactions", "--bootstrap-server", bs, *args)

    out = tool("describe-producers", "--topic", topic, "--partition", "0")
    assert out.returncode == 0, out.stderr
    rows = _rows(out.stdout)
    assert rows[0] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                       "LastTimestamp", "CurrentTransactionStartOffset"]
    assert [r[:4] + r[5:] for r in rows[1:]] == [["4242", "3", "-1", "0", str(offset)]]

    out = tool("find-hanging", "--broker-id", "0")
    assert out.returncode == 0, out.stderr
    rows = _rows(out.stdout)
    assert rows[0] == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                       "StartOffset", "LastTimestamp", "Duration(min)"]
    (hung,) = [r for r in rows[1:] if r[0] == topic]
    assert hung[:6] == [topic, "0", "4242", "3", "-1", str(offset)]
    assert int(hung[7]) >= 59  # written an hour ago
    # Within the search's transaction timeout, it is not a candidate yet.
    out = tool("find-hanging", "--topic", topic, "--max-transaction-timeout", "120")
    assert _rows(out.stdout)[1:] == []

    out = tool("abort", "--topic", topic, "--partition", "0", "--start-offset",
               str(offset + 1))
    assert out.returncode == 1
    assert out.stderr.strip() == (f"Could not find any open transactions starting at offset "
                                  f"{offset + 1} on partition {topic}-0")
    out = tool("abort", "--topic", topic, "--partition", "0", "--start-offset", str(offset))
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")

    # The ABORT marker ends it: stable again, the aborted record skipped.
    assert _ends(bs, topic) == (offset + 3, offset + 3)
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": "after-abort",
                     "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                     "enable.partition.eof": True, "fetch.queue.backoff.ms": 10})
    c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got = []
    try:
        while True:
            m = c.poll(10)
            assert m is not None
            if m.error():
                assert m.error().code() == ck.KafkaError._PARTITION_EOF
                break
            got.append(m.value())
    finally:
        c.close()
    assert got == [b"after"]
    rows = _rows(tool("describe-producers", "--topic", topic, "--partition", "0").stdout)
    assert rows[1][0] == "4242" and rows[1][2] == "0" and rows[1][5] == "None"
    assert [r for r in _rows(tool("find-hanging", "--broker-id", "0").stdout)[1:]
            if r[0] == topic] == []


def test_a_coordinators_transaction_is_listed_and_not_hanging(pylog, unverified) -> None:
    bs, topic = unverified.bootstrap, f"known-{uuid.uuid4().hex[:8]}"
    txn_id = f"{topic}-txn"
    _create(bs, topic)
    p = ck.Producer({"bootstrap.servers": bs, "transactional.id": txn_id})
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(topic, b"open", partition=0)
    p.flush(20)

    def tool(*args: str) -> list[list[str]]:
        out = pylog("transactions", "--bootstrap-server", bs, *args)
        assert out.returncode == 0, out.stderr
        return _rows(out.stdout)

    rows = tool("list")
    assert rows[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    (mine,) = [r for r in rows[1:] if r[0] == txn_id]
    assert mine[1] == "0" and mine[3] == "Ongoing"
    rows = tool("describe", "--transactional-id", txn_id)
    assert rows[0] == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                       "TransactionState", "TransactionTimeoutMs",
                       "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                       "TopicPartitions"]
    assert rows[1][:2] == ["0", txn_id] and rows[1][2] == mine[2]
    assert rows[1][4:6] == ["Ongoing", "60000"] and rows[1][8] == f"{topic}-0"
    assert int(rows[1][7]) >= 0
    # Open, but the coordinator holds it: not hanging, whatever its age.
    assert [r for r in tool("find-hanging", "--topic", topic,
                            "--max-transaction-timeout", "0")[1:]] == []
    p.commit_transaction(20)
    rows = tool("describe", "--transactional-id", txn_id)
    # As Kafka's coordinator: the ended transaction's start time stays, its partitions go.
    assert rows[1][4] == "CompleteCommit" and rows[1][8] == ""


@pytest.mark.parametrize(("args", "error"), [
    (["abort", "--topic", "t", "--partition", "0"],
     "The transaction to abort must be identified either with --start-offset"),
    (["abort", "--topic", "t", "--partition", "0", "--producer-id", "7"],
     "Missing required argument --producer-epoch"),
    (["find-hanging"], "The `find-hanging` command requires either --topic or --broker-id"),
    (["find-hanging", "--broker-id", "0", "--partition", "1"],
     "The --partition argument requires --topic to be provided"),
    (["describe", "--transactional-id", "never-used"],
     "Failed to describe transaction state of transactional-id `never-used`: "
     "TransactionalIdNotFoundException"),
    (["describe-producers", "--topic", "no-such-topic", "--partition", "0"],
     "Failed to describe producers for partition no-such-topic-0 on leader: This server "
     "does not host this topic-partition."),
])
def test_transactions_tool_errors(pylog, unverified, args: list[str], error: str) -> None:
    out = pylog("transactions", "--bootstrap-server", unverified.bootstrap, *args)
    assert out.returncode == 1 and out.stderr.startswith(error), out.stderr


def test_write_txn_markers_refusals(unverified) -> None:
    bs, topic = unverified.bootstrap, f"markers-{uuid.uuid4().hex[:8]}"
    _create(bs, topic)
    _hang(bs, topic, pid=777, epoch=5)

    def marker(pid: int, epoch: int, coordinator_epoch: int, partition: int = 0,
               name: str = topic, version: int = 1) -> int:
        with RawClient(bs) as c:
            r = c.request(ApiKey.WRITE_TXN_MARKERS, version, {"markers": [
                {"producer_id": pid, "producer_epoch": epoch, "transaction_result": False,
                 "coordinator_epoch": coordinator_epoch,
                 "topics": [{"name": name, "partition_indexes": [partition]}]}]})
        (m,) = r.markers
        assert m.producer_id == pid and m.topics[0].name == name
        return m.topics[0].partitions[0].error_code

    assert marker(777, 5, 0, partition=1) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert marker(777, 5, 0, name="no-such-topic") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert marker(777, 4, 0, version=0) == ErrorCode.INVALID_PRODUCER_EPOCH
    # A coordinator epoch from no coordinator this node has: it would fence
    # the coordinator's own markers for good (a departure from Kafka).
    assert marker(777, 5, 1) == ErrorCode.INVALID_REQUEST
    assert marker(777, 5, 0) == ErrorCode.NONE
    assert marker(777, 5, -1) == ErrorCode.TRANSACTION_COORDINATOR_FENCED  # older than 0
    assert _ends(bs, topic)[0] == _ends(bs, topic)[1]
