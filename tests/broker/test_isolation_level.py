"""An isolation_level other than 0 and 1, against the real broker with raw requests.

Kafka 3.6's IsolationLevel.forId throws IllegalArgumentException("Unknown
isolation level N"), which Errors.forException makes UNKNOWN_SERVER_ERROR:

* Fetch: KafkaApis.handleFetchRequest reads the level (FetchIsolation.of) once
  it has a partition to read and answers with FetchRequest.getErrorResponse --
  the top-level error (v7+) and every partition the request names with the
  error, the request's session id -- at once, never a long poll.
* ListOffsets: handleListOffsetRequestV1AndAbove reads a consumer's level
  inside each partition's try, so each partition (but a duplicated one, which
  is INVALID_REQUEST first) gets UNKNOWN_SERVER_ERROR, offset and timestamp -1.
"""

from __future__ import annotations

from kafka_wire import RawClient, produce_body
from test_broker_protocol import batch, fetch_body, metadata

from pylog.protocol import ApiKey, ErrorCode

PART = {"fetch_offset": 0, "partition_max_bytes": 1 << 20}
# Longer than the test may take: a fetch that parks fails with the client's
# socket timeout, so only an answer given at once passes.
PARKS_FOREVER_MS = 2**31 - 1


def _rows(r) -> list[tuple]:
    return [(t.topic, p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
             p.log_start_offset, len(p.records or b""), p.aborted_transactions)
            for t in r.responses for p in t.partitions]


def test_fetch_with_an_unknown_isolation_level_is_refused_at_once(broker, topic) -> None:
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)  # an empty partition: a fetch at offset 0 would park
        error = ErrorCode.UNKNOWN_SERVER_ERROR
        for version in (4, 6, 7, 11, 12):
            for level in (2, -1, 127, -128):
                body = fetch_body(topic, 0, max_wait_ms=PARKS_FOREVER_MS, min_bytes=1)
                body["isolation_level"] = level
                body["topics"] = [
                    {"topic": topic, "partitions": [{"partition": 0, **PART},
                                                    {"partition": 7, **PART},  # unknown
                                                    {"partition": 0, **PART}]},
                    {"topic": f"{topic}-missing", "partitions": [{"partition": 0, **PART}]}]
                r = c.request(ApiKey.FETCH, version, body)
                # Every partition as the request names it, duplicates too.
                assert _rows(r) == [
                    (topic, 0, error, -1, -1, -1, 0, None), (topic, 7, error, -1, -1, -1, 0, None),
                    (topic, 0, error, -1, -1, -1, 0, None),
                    (f"{topic}-missing", 0, error, -1, -1, -1, 0, None)], (version, level)
                if version >= 7:
                    assert (r.error_code, r.session_id) == (error, 0)
        # The connection and the topic are fine afterwards.
        c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, batch(2)))
        r = c.request(ApiKey.FETCH, 12, fetch_body(topic, 0))
        assert r.error_code == 0 and _rows(r)[0][2:4] == (0, 2)


def test_fetch_with_an_unknown_isolation_level_and_no_known_partition(broker, topic) -> None:
    """Kafka asks for the level only when a partition is left to read: a fetch
    of unknown partitions alone is answered as any other."""
    with RawClient(broker.bootstrap) as c:
        body = fetch_body(f"{topic}-missing", 0)
        body["isolation_level"] = 5
        r = c.request(ApiKey.FETCH, 12, body)
        assert r.error_code == 0
        assert [row[:3] for row in _rows(r)] == [
            (f"{topic}-missing", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


def test_fetch_session_with_an_unknown_isolation_level(broker, topic) -> None:
    """An incremental fetch reads its session's partitions: the error response
    (with the request's session id, and the partitions the request itself
    names: none here) comes after the session moved on to its next epoch, as
    FetchManager.newContext does before KafkaApis reads the level."""
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        r = c.request(ApiKey.FETCH, 12, {**fetch_body(topic, 0), "session_epoch": 0})
        sid = r.session_id
        assert r.error_code == 0 and sid != 0
        incremental = {**fetch_body(topic, 0, max_wait_ms=PARKS_FOREVER_MS),
                       "session_id": sid, "session_epoch": 1, "topics": []}
        r = c.request(ApiKey.FETCH, 12, {**incremental, "isolation_level": 3})
        assert (r.error_code, r.session_id, r.responses) == (ErrorCode.UNKNOWN_SERVER_ERROR,
                                                              sid, [])
        r = c.request(ApiKey.FETCH, 12, {**incremental, "max_wait_ms": 0})
        assert (r.error_code, r.session_id) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
        r = c.request(ApiKey.FETCH, 12, {**incremental, "session_epoch": 2, "max_wait_ms": 0})
        assert (r.error_code, r.session_id) == (0, sid)


def test_list_offsets_with_an_unknown_isolation_level(broker, topic) -> None:
    other = f"{topic}-other"
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic, other)
        c.request(ApiKey.PRODUCE, 9, produce_body(other, 0, batch(3)))

        def list_offsets(version: int, level: int, replica_id: int = -1):
            return c.request(ApiKey.LIST_OFFSETS, version, {
                "replica_id": replica_id, "isolation_level": level, "topics": [
                    {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1},
                                                   {"partition_index": 0, "timestamp": -2}]},
                    {"name": other, "partitions": [{"partition_index": 0, "timestamp": -1}]},
                    {"name": f"{topic}-missing", "partitions": [
                        {"partition_index": 0, "timestamp": -1}]}]})

        for version in (2, 5, 7):
            for level in (2, -1):
                r = list_offsets(version, level)
                rows = [(t.name, p.partition_index, p.error_code, p.offset, p.timestamp)
                        for t in r.topics for p in t.partitions]
                assert rows == [
                    (topic, 0, ErrorCode.INVALID_REQUEST, -1, -1),
                    (topic, 0, ErrorCode.INVALID_REQUEST, -1, -1),
                    (other, 0, ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1),
                    (f"{topic}-missing", 0, ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1)], version
            # Not a consumer (a debugging tool, replica id -2): the level is not read.
            r = list_offsets(version, 2, replica_id=-2)
            assert [(p.error_code, p.offset) for p in r.topics[1].partitions] == [(0, 3)]
            # Both known levels are served.
            for level in (0, 1):
                r = list_offsets(version, level)
                assert [(p.error_code, p.offset) for p in r.topics[1].partitions] == [(0, 3)]
