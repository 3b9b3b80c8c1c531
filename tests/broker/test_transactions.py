"""Transactions (KIP-98) against the real broker, with real clients.

confluent-kafka's transactional producer (init/begin/commit/abort,
send_offsets_to_transaction) and kafka-python 3.x's, read back by
read_committed and read_uncommitted consumers; fencing by a second producer
with the same transactional.id; a transaction open past its timeout aborted
by the coordinator; and kill -9 with transactions committed and open.
"""

from __future__ import annotations

import time
import uuid

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_wire import RawClient, produce_body

from pylog.protocol import ApiKey, ErrorCode
from pylog.records import BatchBuilder

PARTITIONS = 2


def _create(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def _producer(bootstrap: str, txn_id: str, **extra: object) -> ck.Producer:
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                     "linger.ms": 5, **extra})
    p.init_transactions(20)
    return p


def _read(bootstrap: str, topic: str, isolation: str,
          partitions: int = PARTITIONS) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record a fresh consumer at that
    isolation level reads up to the end it sees (its end-of-partition)."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4()}",
                     "auto.offset.reset": "earliest", "isolation.level": isolation,
                     "enable.partition.eof": True, "enable.auto.commit": False,
                     "fetch.queue.backoff.ms": 10})
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
    got: list[tuple[int, int, bytes]] = []
    ended: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(ended) < partitions and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == ck.KafkaError._PARTITION_EOF, m.error()
                ended.add(m.partition())
                continue
            got.append((m.partition(), m.offset(), m.value()))
    finally:
        c.close()
    assert len(ended) == partitions, "the consumer never reached the end"
    return got


def _values(rows: list[tuple[int, int, bytes]]) -> list[bytes]:
    return sorted(v for _, _, v in rows)


def _produce(p: ck.Producer, topic: str, prefix: str, n: int) -> list[bytes]:
    values = [f"{prefix}-{i:04d}".encode() for i in range(n)]
    for i, v in enumerate(values):
        p.produce(topic, v, key=str(i).encode(), partition=i % PARTITIONS)
    return values


def _end_offsets(bootstrap: str, topic: str, isolation: str) -> list[int]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks",
                     "isolation.level": isolation})
    try:
        return [c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10,
                                        cached=False)[1] for p in range(PARTITIONS)]
    finally:
        c.close()


def _describe(bootstrap: str, txn_id: str) -> object:
    with RawClient(bootstrap) as c:
        r = c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn_id]})
    return r.transaction_states[0]


def test_committed_aborted_and_open_transactions(broker, topic) -> None:
    bs = broker.bootstrap
    _create(bs, topic)
    p = _producer(bs, f"{topic}-txn")
    p.begin_transaction()
    committed = _produce(p, topic, "commit", 200)
    p.commit_transaction(20)
    p.begin_transaction()
    aborted = _produce(p, topic, "abort", 100)
    p.flush(20)  # written to the log, then aborted
    p.abort_transaction(20)
    p.begin_transaction()
    open_ = _produce(p, topic, "open", 50)
    p.flush(20)  # written, not ended

    assert _values(_read(bs, topic, "read_committed")) == sorted(committed)
    assert _values(_read(bs, topic, "read_uncommitted")) == sorted(committed + aborted + open_)
    # ListOffsets: read_committed's end is the last stable offset (the open
    # transaction's first offset), read_uncommitted's the high watermark.
    stable, high = (_end_offsets(bs, topic, "read_committed"),
                    _end_offsets(bs, topic, "read_uncommitted"))
    assert all(s < h for s, h in zip(stable, high, strict=True))
    state = _describe(bs, f"{topic}-txn")
    assert state.error_code == 0 and state.transaction_state == "Ongoing"
    assert sorted((t.topic, sorted(t.partitions)) for t in state.topics) == [
        (topic, list(range(PARTITIONS)))]

    p.commit_transaction(20)
    rows = _read(bs, topic, "read_committed")
    assert _values(rows) == sorted(committed + open_)
    # Offsets within each partition in order; markers took offsets of their own.
    for part in range(PARTITIONS):
        offsets = [o for q, o, _ in rows if q == part]
        assert offsets == sorted(offsets)
    assert _describe(bs, f"{topic}-txn").transaction_state == "CompleteCommit"


def test_read_committed_consumer_waits_for_the_commit(broker, topic) -> None:
    """A read_committed consumer parked at the last stable offset gets the
    records when the commit marker is written (the marker wakes the fetch)."""
    bs = broker.bootstrap
    _create(bs, topic, 1)
    p = _producer(bs, f"{topic}-txn")
    p.begin_transaction()
    p.produce(topic, b"late", partition=0)
    p.flush(20)
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": f"{topic}-g",
                     "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                     "fetch.wait.max.ms": 5000, "fetch.queue.backoff.ms": 10})
    c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    try:
        assert c.poll(1.5) is None  # nothing stable yet
        p.commit_transaction(20)
        m = None
        deadline = time.monotonic() + 20
        while m is None and time.monotonic() < deadline:
            m = c.poll(0.5)
        assert m is not None and m.error() is None and m.value() == b"late"
    finally:
        c.close()


def test_consume_transform_produce_commits_offsets_with_the_records(broker, topic) -> None:
    bs = broker.bootstrap
    source, sink, group = f"{topic}-in", f"{topic}-out", f"{topic}-group"
    _create(bs, source, 1)
    _create(bs, sink, 1)
    feeder = ck.Producer({"bootstrap.servers": bs})
    for i in range(20):
        feeder.produce(source, f"in-{i}".encode(), partition=0)
    feeder.flush(20)
    consumer = ck.Consumer({"bootstrap.servers": bs, "group.id": group,
                            "auto.offset.reset": "earliest", "enable.auto.commit": False,
                            "isolation.level": "read_committed",
                            "fetch.queue.backoff.ms": 10})
    consumer.subscribe([source])
    p = _producer(bs, f"{topic}-txn")
    try:
        for commit in (False, True):
            seen = []
            deadline = time.monotonic() + 30
            while len(seen) < 10 and time.monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is not None and m.error() is None:
                    seen.append(m)
            assert len(seen) == 10
            p.begin_transaction()
            for m in seen:
                p.produce(sink, m.value().upper(), partition=0)
            positions = [ck.TopicPartition(source, 0, seen[-1].offset() + 1)]
            p.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 20)
            if commit:
                p.commit_transaction(20)
            else:
                p.flush(20)
                p.abort_transaction(20)
                # As an application does after an abort: back to the committed position.
                committed = consumer.committed([ck.TopicPartition(source, 0)], timeout=10)
                assert committed[0].offset == ck.OFFSET_INVALID  # the abort committed nothing
                consumer.seek(ck.TopicPartition(source, 0, 0))
        committed = consumer.committed([ck.TopicPartition(source, 0)], timeout=10)
        assert committed[0].offset == 10
    finally:
        consumer.close()
    out = _read(bs, sink, "read_committed", 1)
    assert [v for _, _, v in out] == [f"IN-{i}".encode() for i in range(10)]


def test_a_new_producer_fences_the_old_one_and_aborts_its_transaction(broker, topic) -> None:
    bs = broker.bootstrap
    _create(bs, topic)
    txn_id = f"{topic}-txn"
    old = _producer(bs, txn_id)
    old.begin_transaction()
    left_open = _produce(old, topic, "zombie", 30)
    old.flush(20)
    epoch = _describe(bs, txn_id).producer_epoch
    new = _producer(bs, txn_id)  # fences old, aborts what it left open
    state = _describe(bs, txn_id)
    assert state.producer_epoch > epoch and state.transaction_state == "Empty"
    new.begin_transaction()
    kept = _produce(new, topic, "new", 30)
    new.commit_transaction(20)
    with pytest.raises(ck.KafkaException) as caught:
        old.commit_transaction(20)
    assert caught.value.args[0].fatal()  # librdkafka: the producer was fenced
    assert _values(_read(bs, topic, "read_committed")) == sorted(kept)
    assert _values(_read(bs, topic, "read_uncommitted")) == sorted(left_open + kept)


def test_a_transaction_open_past_its_timeout_is_aborted(start_broker, topic) -> None:
    b = start_broker("transaction.abort.timed.out.transaction.cleanup.interval.ms=200")
    _create(b.bootstrap, topic)
    p = _producer(b.bootstrap, f"{topic}-txn", **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    _produce(p, topic, "slow", 10)
    p.flush(20)
    deadline = time.monotonic() + 20
    while _describe(b.bootstrap, f"{topic}-txn").transaction_state != "CompleteAbort":
        assert time.monotonic() < deadline, "the coordinator never aborted it"
        time.sleep(0.2)
    assert _read(b.bootstrap, topic, "read_committed") == []
    assert (_end_offsets(b.bootstrap, topic, "read_committed")
            == _end_offsets(b.bootstrap, topic, "read_uncommitted"))
    with pytest.raises(ck.KafkaException):
        p.commit_transaction(20)


def test_transactions_survive_kill_9(start_broker, tmp_path, topic) -> None:
    data = tmp_path / "data"
    b = start_broker(log_dir=data)
    _create(b.bootstrap, topic)
    p = _producer(b.bootstrap, f"{topic}-txn")
    p.begin_transaction()
    committed = _produce(p, topic, "acked", 300)
    p.commit_transaction(20)
    p.begin_transaction()
    _produce(p, topic, "open", 40)
    p.flush(20)
    b.kill()
    del p
    b2 = start_broker(log_dir=data, port=b.port)
    # The open transaction still holds the last stable offset after the restart...
    assert _values(_read(b2.bootstrap, topic, "read_committed")) == sorted(committed)
    assert _describe(b2.bootstrap, f"{topic}-txn").transaction_state == "Ongoing"
    # ...until the transactional id's next producer aborts it.
    again = _producer(b2.bootstrap, f"{topic}-txn")
    again.begin_transaction()
    later = _produce(again, topic, "later", 20)
    again.commit_transaction(20)
    b2.kill()
    b3 = start_broker(log_dir=data, port=b.port)
    assert _values(_read(b3.bootstrap, topic, "read_committed")) == sorted(committed + later)


def test_kafka_python_transactional_producer(broker, topic) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    bs = broker.bootstrap
    _create(bs, topic)
    p = KafkaProducer(bootstrap_servers=bs, transactional_id=f"{topic}-kp")
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(50):
            p.send(topic, f"kp-{i}".encode(), partition=i % PARTITIONS)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(20):
            p.send(topic, f"gone-{i}".encode(), partition=i % PARTITIONS)
        p.flush()
        p.abort_transaction()
    finally:
        p.close()
    c = KafkaConsumer(topic, bootstrap_servers=bs, auto_offset_reset="earliest",
                      isolation_level="read_committed", consumer_timeout_ms=3000,
                      group_id=None)
    try:
        got = sorted(m.value for m in c)
    finally:
        c.close()
    assert got == sorted(f"kp-{i}".encode() for i in range(50))


def test_coordinator_errors(broker, topic) -> None:
    bs = broker.bootstrap
    _create(bs, topic)
    with RawClient(bs) as c:
        def init(txn_id: str, timeout_ms: int = 60000, version: int = 4):
            return c.request(ApiKey.INIT_PRODUCER_ID, version, {
                "transactional_id": txn_id, "transaction_timeout_ms": timeout_ms,
                "producer_id": -1, "producer_epoch": -1})

        assert init(f"{topic}-t", 900_001).error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert init("").error_code == ErrorCode.INVALID_REQUEST
        r = init(f"{topic}-t")
        assert r.error_code == 0 and r.producer_epoch == 0
        pid = r.producer_id

        def add(producer_id: int, epoch: int, partitions: list[int], version: int = 3):
            r = c.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, {
                "v3_and_below_transactional_id": f"{topic}-t",
                "v3_and_below_producer_id": producer_id,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": topic, "partitions": partitions}]})
            return {p.partition_index: p.partition_error_code
                    for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}

        assert add(pid + 1, 0, [0]) == {0: ErrorCode.INVALID_PRODUCER_ID_MAPPING}
        assert add(pid, 1, [0]) == {0: ErrorCode.PRODUCER_FENCED}
        assert add(pid, 1, [0], version=1) == {0: ErrorCode.INVALID_PRODUCER_EPOCH}
        assert add(pid, 0, [0, 99]) == {0: ErrorCode.OPERATION_NOT_ATTEMPTED,
                                        99: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}

        def end(commit: bool, epoch: int = 0) -> int:
            return c.request(ApiKey.END_TXN, 3, {
                "transactional_id": f"{topic}-t", "producer_id": pid,
                "producer_epoch": epoch, "committed": commit}).error_code

        assert end(True) == ErrorCode.INVALID_TXN_STATE  # nothing added: Empty
        assert add(pid, 0, [0, 1]) == {0: 0, 1: 0}
        assert end(False) == 0
        assert end(False) == 0  # a retry of the same end
        assert end(True) == ErrorCode.INVALID_TXN_STATE
        r = c.request(ApiKey.LIST_TRANSACTIONS, 1, {
            "state_filters": ["CompleteAbort", "Nope"], "producer_id_filters": [pid],
            "duration_filter": -1})
        assert r.unknown_state_filters == ["Nope"]
        assert [(s.transactional_id, s.transaction_state) for s in r.transaction_states] == [
            (f"{topic}-t", "CompleteAbort")]

        # Partition verification: only the coordinator's epoch writes into its
        # transaction (a newer one would hold the stable offset for good), and
        # only under a transactional id.
        def produce(epoch: int, txn_id: str | None = f"{topic}-t") -> int:
            b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=0,
                             is_transactional=True)
            b.append(int(time.time() * 1000), b"k", b"v")
            body = produce_body(topic, 0, b.build())
            body["transactional_id"] = txn_id
            return c.request(ApiKey.PRODUCE, 9, body).responses[0].partition_responses[
                0].error_code

        assert add(pid, 0, [0]) == {0: 0}
        assert produce(1) == ErrorCode.INVALID_PRODUCER_EPOCH
        assert produce(0, None) == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert produce(0) == 0
        assert end(True) == 0
    # Ended: nothing of the producer's holds the stable offsets back.
    assert (_end_offsets(bs, topic, "read_committed")
            == _end_offsets(bs, topic, "read_uncommitted"))


def test_stable_offset_never_below_the_log_start(broker, topic) -> None:
    """DeleteRecords past the start of an open transaction: read_committed's
    end is the log start (Kafka's updateFirstUnstableOffset), never below its
    earliest offset, until the transaction ends."""
    bs = broker.bootstrap
    _create(bs, topic, 1)
    p = _producer(bs, f"{topic}-txn")
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, f"open-{i:04d}".encode(), partition=0)
    p.flush(20)
    with RawClient(bs) as c:
        r = c.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "offset": 6}]}], "timeout_ms": 5000})
        assert r.topics[0].partitions[0].error_code == 0

        def list_offset(timestamp: int, isolation: int) -> int:
            r = c.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1,
                                                    "isolation_level": isolation,
                                                    "topics": [{"name": topic, "partitions": [
                                                        {"partition_index": 0,
                                                         "timestamp": timestamp}]}]})
            return r.topics[0].partitions[0].offset

        assert (list_offset(-2, 1), list_offset(-1, 1)) == (6, 6)
        assert list_offset(-1, 0) == 10
        r = c.request(ApiKey.FETCH, 11, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 1, "session_id": 0, "session_epoch": -1, "rack_id": "",
            "forgotten_topics_data": [], "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": 6, "partition_max_bytes": 1 << 20}]}]})
        fetched = r.responses[0].partitions[0]
        assert (fetched.error_code, fetched.high_watermark, fetched.last_stable_offset,
                fetched.log_start_offset) == (0, 10, 6, 6)
        p.commit_transaction(20)
        assert list_offset(-1, 1) == 11  # the marker's offset + 1
    assert _values(_read(bs, topic, "read_committed", 1)) == [
        f"open-{i:04d}".encode() for i in range(6, 10)]


def test_aiokafka_transactional_producer(broker, topic) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    bs = broker.bootstrap
    _create(bs, topic, 1)

    async def run() -> list[bytes]:
        p = AIOKafkaProducer(bootstrap_servers=bs, transactional_id=f"{topic}-aio")
        await p.start()
        try:
            async with p.transaction():
                for i in range(30):
                    await p.send(topic, f"aio-{i}".encode(), partition=0)
            await p.begin_transaction()
            for i in range(10):
                await p.send(topic, f"dropped-{i}".encode(), partition=0)
            await p.flush()
            await p.abort_transaction()
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, bootstrap_servers=bs, auto_offset_reset="earliest",
                             isolation_level="read_committed")
        await c.start()
        try:
            got: list[bytes] = []
            while True:
                batch = await c.getmany(timeout_ms=2000)
                if not batch:
                    return got
                got += [m.value for ms in batch.values() for m in ms]
        finally:
            await c.stop()

    assert asyncio.run(run()) == [f"aio-{i}".encode() for i in range(30)]


def test_offsets_of_an_open_transaction_are_unstable(broker, topic) -> None:
    """OffsetFetch with require_stable (KIP-447): UNSTABLE_OFFSET_COMMIT while
    the transaction that committed the offset is open; without it, the
    offset committed before; after the commit, the new one."""
    bs = broker.bootstrap
    _create(bs, topic, 1)
    group = f"{topic}-g"
    consumer = ck.Consumer({"bootstrap.servers": bs, "group.id": group})
    consumer.commit(offsets=[ck.TopicPartition(topic, 0, 3)], asynchronous=False)
    p = _producer(bs, f"{topic}-txn")
    p.begin_transaction()
    p.send_offsets_to_transaction([ck.TopicPartition(topic, 0, 7)],
                                  consumer.consumer_group_metadata(), 20)

    def fetch(require_stable: bool) -> tuple[int, int]:
        with RawClient(bs) as c:
            r = c.request(ApiKey.OFFSET_FETCH, 7, {
                "group_id": group, "require_stable": require_stable,
                "topics": [{"name": topic, "partition_indexes": [0]}]})
        part = r.topics[0].partitions[0]
        return part.error_code, part.committed_offset

    try:
        assert fetch(True) == (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
        assert fetch(False) == (0, 3)
        p.commit_transaction(20)
        assert fetch(True) == (0, 7)
    finally:
        consumer.close()
