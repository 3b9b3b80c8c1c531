"""Metadata v12 by topic id, against the real broker with raw requests.

Kafka 3.6's KafkaApis.handleTopicMetadataRequest: when a v12+ request names
any non-zero topic id, the set of those ids alone is answered -- unknown ids
first, as UNKNOWN_TOPIC_ID rows with a null name, then the known topics --
and the topic names of the request are ignored (none is auto-created)."""

from __future__ import annotations

import uuid

from kafka_wire import RawClient

from pylog.protocol import ApiKey, ErrorCode

ZERO = uuid.UUID(int=0)
NOT_REQUESTED = -2**31
TOPIC_OPERATIONS = 3576  # every operation a topic supports, as Kafka reports it


def _metadata(c: RawClient, version: int, topics: list[dict], *, allow: bool = True,
              operations: bool = False):
    return c.request(ApiKey.METADATA, version, {
        "topics": topics, "allow_auto_topic_creation": allow,
        "include_topic_authorized_operations": operations})


def _ids(c: RawClient, *names: str) -> dict[str, uuid.UUID]:
    r = _metadata(c, 12, [{"name": n, "topic_id": ZERO} for n in names])
    assert all(t.error_code == 0 for t in r.topics)
    return {t.name: t.topic_id for t in r.topics}


def test_a_request_naming_a_topic_id_is_answered_by_ids_alone(broker, topic) -> None:
    a, b, fresh = f"{topic}-a", f"{topic}-b", f"{topic}-never-created"
    unknown = uuid.UUID(int=0x1234_5678_9ABC_DEF0_1234_5678_9ABC_DEF0)
    with RawClient(broker.bootstrap) as c:
        ids = _ids(c, a, b)
        r = _metadata(c, 12, [
            {"name": None, "topic_id": ids[a]},
            {"name": fresh, "topic_id": ZERO},       # a name: ignored, not created
            {"name": None, "topic_id": unknown},
            {"name": b, "topic_id": ZERO},           # an existing name: ignored too
            {"name": b, "topic_id": ids[a]},         # name and id: the id counts
            {"name": None, "topic_id": unknown},
        ], operations=True)
        rows = [(t.name, t.topic_id, t.error_code, len(t.partitions),
                 t.topic_authorized_operations) for t in r.topics]
        # Each id once; the unknown ones first.
        assert rows == [(None, unknown, ErrorCode.UNKNOWN_TOPIC_ID, 0, NOT_REQUESTED),
                        (a, ids[a], 0, 1, TOPIC_OPERATIONS)]
        assert r.topics[0].is_internal is False
        p = r.topics[1].partitions[0]
        assert (p.error_code, p.partition_index, p.leader_id) == (0, 0, r.brokers[0].node_id)

        # Only unknown ids: only their rows, still nothing created by name.
        r = _metadata(c, 12, [{"name": fresh, "topic_id": unknown}])
        assert [(t.name, t.topic_id, t.error_code) for t in r.topics] == [
            (None, unknown, ErrorCode.UNKNOWN_TOPIC_ID)]

        # The names were never auto-created.
        r = _metadata(c, 12, [{"name": fresh, "topic_id": ZERO}], allow=False)
        assert [(t.name, t.error_code) for t in r.topics] == [
            (fresh, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


def test_a_request_without_topic_ids_is_answered_by_name(broker, topic) -> None:
    """Every id zero: names as before, auto-created when allowed."""
    with RawClient(broker.bootstrap) as c:
        r = _metadata(c, 12, [{"name": topic, "topic_id": ZERO}])
        assert [(t.name, t.error_code, len(t.partitions)) for t in r.topics] == [(topic, 0, 1)]
        assert r.topics[0].topic_id != ZERO


def test_a_topic_named_twice_is_answered_once(broker, topic) -> None:
    """Kafka looks the request's names up as a set."""
    other = f"{topic}-other"
    with RawClient(broker.bootstrap) as c:
        for version in (1, 9, 12):
            r = _metadata(c, version, [{"name": n, "topic_id": ZERO}
                                       for n in (topic, other, topic, other, topic)])
            assert [(t.name, t.error_code) for t in r.topics] == [(topic, 0), (other, 0)]
