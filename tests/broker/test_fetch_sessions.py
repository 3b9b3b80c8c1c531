"""Incremental fetch sessions (KIP-227) against the real broker: the raw
protocol for the rules of Kafka's FetchManager, kafka-python (which opens a
session on every Fetch v7+ connection) for a consumer that relies on them."""

from __future__ import annotations

import time
import urllib.request

import kafka
import pytest
from broker_process import free_port
from kafka_wire import RawClient, produce_body
from test_broker_protocol import batch, metadata

from pylog.protocol import ApiKey, ErrorCode
from pylog.server.fetch_sessions import FetchSessionCache, next_epoch


def create(client: RawClient, topic: str, partitions: int) -> None:
    r = client.request(ApiKey.CREATE_TOPICS, 4, {"topics": [{
        "name": topic, "num_partitions": partitions, "replication_factor": 1,
        "assignments": [], "configs": []}], "timeout_ms": 5000, "validate_only": False})
    assert r.topics[0].error_code == 0


def fetch(client: RawClient, session_id: int, epoch: int,
          partitions: list[tuple[str, int, int]], forgotten: list[tuple[str, list[int]]] = (),
          *, version: int = 12, max_wait_ms: int = 0):
    """A Fetch naming ``partitions`` as (topic, partition, fetch offset)."""
    topics: dict[str, list] = {}
    for topic, index, offset in partitions:
        topics.setdefault(topic, []).append({"partition": index, "fetch_offset": offset,
                                             "partition_max_bytes": 1 << 20})
    return client.request(ApiKey.FETCH, version, {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
        "topics": [{"topic": t, "partitions": p} for t, p in topics.items()],
        "forgotten_topics_data": [{"topic": t, "partitions": p} for t, p in forgotten],
        "rack_id": ""})


def answered(response) -> dict[tuple[str, int], tuple[int, int, int, int]]:
    """(topic, partition) -> (error, high watermark, log start, record bytes)."""
    return {(t.topic, p.partition_index): (p.error_code, p.high_watermark, p.log_start_offset,
                                           len(p.records or b""))
            for t in response.responses for p in t.partitions}


@pytest.mark.parametrize("version", [7, 12])
def test_incremental_fetches_send_only_what_changed(broker, topic, version) -> None:
    with RawClient(broker.bootstrap) as c:
        create(c, topic, 3)
        all3 = [(topic, p, 0) for p in range(3)]
        r = fetch(c, 0, 0, all3, version=version)  # INITIAL epoch: open a session
        assert r.error_code == 0 and r.session_id != 0
        sid = r.session_id
        assert answered(r) == {(topic, p): (0, 0, 0, 0) for p in range(3)}  # full: every one

        r = fetch(c, sid, 1, [], version=version)  # nothing changed: nothing sent
        assert (r.error_code, r.session_id, r.responses) == (0, sid, [])

        one = batch(4)
        c.request(ApiKey.PRODUCE, 9, produce_body(topic, 1, one))
        r = fetch(c, sid, 2, [], version=version)  # the session's offsets: 0 for each
        assert answered(r) == {(topic, 1): (0, 4, 0, len(one))}
        r = fetch(c, sid, 3, [], version=version)  # records are always sent, same offset
        assert answered(r) == {(topic, 1): (0, 4, 0, len(one))}
        r = fetch(c, sid, 4, [(topic, 1, 4)], version=version)  # the client moved on
        assert r.responses == []

        # Forgotten partitions leave the session; their new data is not sent.
        r = fetch(c, sid, 5, [], [(topic, [1])], version=version)
        c.request(ApiKey.PRODUCE, 9, produce_body(topic, 1, one))
        c.request(ApiKey.PRODUCE, 9, produce_body(topic, 2, one))
        r = fetch(c, sid, 6, [], version=version)
        assert answered(r) == {(topic, 2): (0, 4, 0, len(one))}

        # A new log start offset is news too (DeleteRecords).
        c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, one))
        r = fetch(c, sid, 7, [(topic, 0, 4), (topic, 2, 4)], version=version)
        assert answered(r) == {(topic, 0): (0, 4, 0, 0)}  # its high watermark moved
        d = c.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "offset": 2}]}], "timeout_ms": 5000})
        assert d.topics[0].partitions[0].error_code == 0
        r = fetch(c, sid, 8, [], version=version)
        assert answered(r) == {(topic, 0): (0, 4, 2, 0)}

        # A wrong epoch is refused and leaves the session where it was.
        r = fetch(c, sid, 3, [], version=version)
        assert (r.error_code, r.responses) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, [])
        r = fetch(c, sid, 9, [], version=version)
        assert (r.error_code, r.session_id, r.responses) == (0, sid, [])

        # A FINAL-epoch fetch closes it and is answered in full, sessionless.
        r = fetch(c, sid, -1, [(topic, 0, 4)], version=version)
        assert (r.error_code, r.session_id) == (0, 0)
        assert answered(r) == {(topic, 0): (0, 4, 2, 0)}
        r = fetch(c, sid, 10, [], version=version)
        assert (r.error_code, r.responses) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, [])


def test_partition_errors_are_sent_every_time_and_the_recovery_after(broker, topic) -> None:
    """A partition in error goes in every response (its cached high watermark
    is -1), so the client hears when the error is gone (a topic deleted and
    made again)."""
    with RawClient(broker.bootstrap) as c:
        create(c, topic, 1)
        r = fetch(c, 0, 0, [(topic, 0, 0)])
        sid = r.session_id
        r = c.request(ApiKey.DELETE_TOPICS, 4, {"topic_names": [topic], "timeout_ms": 5000})
        assert r.responses[0].error_code == 0
        for epoch in (1, 2):
            r = fetch(c, sid, epoch, [])
            assert answered(r) == {(topic, 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, 0)}
        deadline = time.monotonic() + 20
        while True:  # the name is free once the old logs are gone
            r = c.request(ApiKey.CREATE_TOPICS, 4, {"topics": [{
                "name": topic, "num_partitions": 1, "replication_factor": 1,
                "assignments": [], "configs": []}], "timeout_ms": 5000, "validate_only": False})
            if r.topics[0].error_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert r.topics[0].error_code == 0
        r = fetch(c, sid, 3, [])
        assert answered(r) == {(topic, 0): (0, 0, 0, 0)}
        r = fetch(c, sid, 4, [])
        assert r.responses == []


def test_an_incremental_long_poll_is_woken_by_its_partitions(broker, topic) -> None:
    with RawClient(broker.bootstrap) as c, RawClient(broker.bootstrap) as producer:
        create(c, topic, 2)
        sid = fetch(c, 0, 0, [(topic, 0, 0), (topic, 1, 0)]).session_id
        started = time.monotonic()
        cid = c.send(ApiKey.FETCH, 12, {
            "replica_id": -1, "max_wait_ms": 30_000, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": sid, "session_epoch": 1, "topics": [],
            "forgotten_topics_data": [], "rack_id": ""})
        time.sleep(0.3)
        producer.request(ApiKey.PRODUCE, 9, produce_body(topic, 1, batch(3)))
        got, r = c.recv(ApiKey.FETCH, 12)
        assert got == cid and time.monotonic() - started < 20  # the append woke it
        assert answered(r) == {(topic, 1): (0, 3, 0, len(batch(3)))}


def test_a_parked_fetch_overtaken_by_the_next_epoch_gets_invalid_epoch(broker, topic) -> None:
    """IncrementalFetchContext: the session's epoch moved on while the fetch
    waited (a duplicate request), so its answer is INVALID_FETCH_SESSION_EPOCH."""
    with RawClient(broker.bootstrap) as a, RawClient(broker.bootstrap) as b:
        create(a, topic, 1)
        sid = fetch(a, 0, 0, [(topic, 0, 0)]).session_id
        a.send(ApiKey.FETCH, 12, {
            "replica_id": -1, "max_wait_ms": 1500, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": sid, "session_epoch": 1, "topics": [],
            "forgotten_topics_data": [], "rack_id": ""})
        time.sleep(0.3)  # parked: no data
        r = fetch(b, sid, 2, [])
        assert (r.error_code, r.session_id, r.responses) == (0, sid, [])
        _, r = a.recv(ApiKey.FETCH, 12)
        assert (r.error_code, r.responses) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, [])
        assert fetch(b, sid, 3, []).error_code == 0  # the session itself goes on


def test_duplicate_partitions_of_a_full_fetch_make_one_session_entry(broker, topic) -> None:
    with RawClient(broker.bootstrap) as c:
        create(c, topic, 1)
        c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, batch(2)))
        r = c.request(ApiKey.FETCH, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": 0, "topics": [
                {"topic": topic, "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]},
                {"topic": topic, "partitions": [
                    {"partition": 0, "fetch_offset": 2, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        assert answered(r) == {(topic, 0): (0, 2, 0, 0)}  # the last offset given wins
        r = fetch(c, r.session_id, 1, [])
        assert r.error_code == 0 and r.responses == []


def test_the_cache_size_is_max_incremental_fetch_session_cache_slots(start_broker) -> None:
    metrics_url = f"http://127.0.0.1:{free_port()}/metrics"
    b = start_broker("max.incremental.fetch.session.cache.slots=1",
                     f"metrics.listener={metrics_url}")
    with RawClient(b.bootstrap) as c:
        metadata(c, "slots")
        first = fetch(c, 0, 0, [("slots", 0, 0)]).session_id
        assert first != 0
        # Full, and the one session was used just now: no room for another.
        r = fetch(c, 0, 0, [("slots", 0, 0)])
        assert (r.error_code, r.session_id) == (0, 0) and answered(r)
        assert fetch(c, first, 1, []).error_code == 0  # the first one still works
        with urllib.request.urlopen(metrics_url, timeout=10) as resp:
            page = resp.read().decode()
        assert "kafka_server_fetchsessioncache_numincrementalfetchsessions 1" in page
        assert "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached 1" in page
    b0 = start_broker("max.incremental.fetch.session.cache.slots=0")
    with RawClient(b0.bootstrap) as c:
        metadata(c, "slots")
        r = fetch(c, 0, 0, [("slots", 0, 0)])
        assert (r.error_code, r.session_id) == (0, 0) and answered(r)


def test_eviction_follows_kafkas_fetch_session_cache() -> None:
    """FetchSessionCache.tryEvict: a session unused for the eviction time goes
    first; otherwise the smallest session older than it, and only for a
    larger one."""
    now = [0]
    cache = FetchSessionCache(2, lambda: now[0], eviction_ms=100)

    def full(n: int) -> int:
        request = [("t", [(p, 0, 1024, -1) for p in range(n)])]
        answers = [("t", [(p, 0, 0, 0, 0, None, b"") for p in range(n)])]
        return cache.maybe_create(request, answers)

    a, b = full(3), full(2)
    assert a and b and len(cache) == 2
    assert full(5) == 0  # both fresh: nothing may go
    now[0] = 150
    cache.context(a, 1, [], [])  # a used now; b idle for 150 ms > 100: stale
    c = full(1)
    assert c and b not in cache.sessions and a in cache.sessions and cache.evictions == 1
    now[0] = 200  # a (created at 0, 3 partitions) is old but used 50 ms ago
    cache.context(c, 1, [], [])
    assert full(3) == 0  # not larger than the smallest old session (a, 3)
    d = full(4)
    assert d and a not in cache.sessions and len(cache) == 2 and cache.evictions == 2
    assert next_epoch(0) == 1 and next_epoch(2**31 - 1) == 1 and next_epoch(-1) == -1


def test_kafka_python_consumes_through_an_incremental_session(broker, topic) -> None:
    """kafka-python opens a session and then sends incremental fetches: every
    record of four partitions arrives once, in order, while more are produced."""
    with RawClient(broker.bootstrap) as c:
        create(c, topic, 4)
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=2)
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap,
                                   auto_offset_reset="earliest", enable_auto_commit=False,
                                   fetch_max_wait_ms=100)
    try:
        consumer.assign([kafka.TopicPartition(topic, p) for p in range(4)])
        sent: dict[int, list[bytes]] = {p: [] for p in range(4)}
        got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(4)}
        deadline = time.monotonic() + 60
        for round_ in range(20):
            for p in range(4):
                if (round_ + p) % 3 == 0:  # not every partition every round
                    for i in range(25):
                        value = f"{p}-{round_}-{i}".encode()
                        producer.send(topic, value, partition=p)
                        sent[p].append(value)
            producer.flush()
            for records in consumer.poll(timeout_ms=200).values():
                for rec in records:
                    got[rec.partition].append((rec.offset, rec.value))
        while sum(map(len, got.values())) < sum(map(len, sent.values())):
            assert time.monotonic() < deadline, {p: len(v) for p, v in got.items()}
            for records in consumer.poll(timeout_ms=200).values():
                for rec in records:
                    got[rec.partition].append((rec.offset, rec.value))
        for p in range(4):
            assert got[p] == list(enumerate(sent[p]))
        handlers = consumer._fetcher._session_handlers
        sessions = [h.next_metadata for h in handlers.values()]
        assert sessions and all(m.session_id != 0 for m in sessions)
        assert any(m.epoch > 5 for m in sessions)  # many incremental fetches in
    finally:
        consumer.close()
        producer.close()
