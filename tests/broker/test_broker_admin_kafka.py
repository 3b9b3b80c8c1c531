"""Admin and metadata requests answered as Kafka 3.6 answers them: DeleteRecords
on compacted and internal topics, Metadata for missing topics, the "authorized
operations" fields, DeleteTopics' refusals, CreateTopics' partition cap,
ListOffsets' leader epoch check, OffsetForLeaderEpoch and ApiVersions' client
software check."""

from __future__ import annotations

import uuid

from kafka_wire import RawClient, latest_offset, produce_body

from pylog.protocol import ApiKey, ErrorCode
from pylog.records import BatchBuilder

ZERO_ID = uuid.UUID(int=0)
NOT_REQUESTED = -2**31  # Kafka's Int.MinValue in an "authorized operations" field
# With no authorizer Kafka grants every operation a resource type supports:
# bit n for AclOperation n (AclEntry.supportedOperations).
TOPIC_OPS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))  # READ..ALTER_CONFIGS
GROUP_OPS = sum(1 << op for op in (3, 6, 8))  # READ, DELETE, DESCRIBE
CLUSTER_OPS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))  # CREATE..IDEMPOTENT_WRITE


def create_topics(c: RawClient, *topics: tuple[str, int], configs: dict | None = None,
                  validate_only: bool = False, version: int = 7):
    return c.request(ApiKey.CREATE_TOPICS, version, {"topics": [
        {"name": name, "num_partitions": n, "replication_factor": 1, "assignments": [],
         "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}
        for name, n in topics], "timeout_ms": 5000, "validate_only": validate_only})


def metadata(c: RawClient, *names: str, version: int = 9, allow: bool = False, **flags: bool):
    return c.request(ApiKey.METADATA, version, {
        "topics": [{"name": n} for n in names], "allow_auto_topic_creation": allow, **flags})


def exists(c: RawClient, name: str) -> bool:
    return metadata(c, name).topics[0].error_code == 0


def produce(c: RawClient, topic: str, n: int) -> None:
    b = BatchBuilder()
    for i in range(n):
        b.append(1_700_000_000_000 + i, b"k%d" % i, b"v")
    r = c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, b.build()))
    assert r.responses[0].partition_responses[0].error_code == 0


def delete_records(c: RawClient, topic: str, offsets: dict[int, int]) -> list[tuple[int, int]]:
    r = c.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
        {"partition_index": p, "offset": o} for p, o in offsets.items()]}],
        "timeout_ms": 5000})
    return [(p.error_code, p.low_watermark) for p in r.topics[0].partitions]


def earliest_offset(c: RawClient, topic: str) -> int:
    r = c.request(ApiKey.LIST_OFFSETS, 1, {"replica_id": -1, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -2}]}]})
    return r.topics[0].partitions[0].offset


def test_delete_records_refused_without_delete_policy(broker, topic) -> None:
    """As Kafka's Partition.deleteRecordsOnLeader: a log whose cleanup.policy
    lacks "delete" keeps its records (POLICY_VIOLATION); "compact,delete" does not."""
    both = topic + "-both"
    with RawClient(broker.bootstrap) as c:
        assert [t.error_code for t in create_topics(
            c, (topic, 1), configs={"cleanup.policy": "compact"}).topics] == [0]
        assert [t.error_code for t in create_topics(
            c, (both, 1), configs={"cleanup.policy": "compact,delete"}).topics] == [0]
        for name in (topic, both):
            produce(c, name, 3)
        assert delete_records(c, topic, {0: 2}) == [(ErrorCode.POLICY_VIOLATION, -1)]
        assert delete_records(c, topic, {0: -1}) == [(ErrorCode.POLICY_VIOLATION, -1)]
        assert earliest_offset(c, topic) == 0
        assert delete_records(c, both, {0: 2}) == [(0, 2)]
        assert earliest_offset(c, both) == 2


def test_delete_records_refused_on_internal_topics(broker) -> None:
    """As Kafka's ReplicaManager.deleteRecordsOnLocalLog: an internal topic's
    records cannot be deleted (INVALID_TOPIC_EXCEPTION); __consumer_offsets
    holds the committed offsets, which a restart would otherwise lose."""
    with RawClient(broker.bootstrap) as c:
        r = c.request(ApiKey.FIND_COORDINATOR, 3, {"key": "dr-group", "key_type": 0})
        assert r.error_code == 0  # creates __consumer_offsets (the group's partition at least)
        count = len(metadata(c, "__consumer_offsets").topics[0].partitions)
        rows = delete_records(c, "__consumer_offsets", dict.fromkeys(range(count), -1))
        codes = {code for code, _ in rows}
        # A partition whose log is still being created off the loop is unknown.
        assert ErrorCode.INVALID_TOPIC_EXCEPTION in codes
        assert codes <= {ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_metadata_missing_topic_without_auto_creation(start_broker) -> None:
    """As Kafka's getTopicMetadata: a topic that is not going to be created is
    INVALID_TOPIC_EXCEPTION when its name is illegal, else UNKNOWN_TOPIC_OR_PARTITION,
    and a missing internal topic is still reported as internal.  (A broker of
    its own: on the shared one, another test's FindCoordinator may have made
    __transaction_state already.)"""
    broker = start_broker()
    with RawClient(broker.bootstrap) as c:
        for version in (4, 9, 12):
            r = metadata(c, "bad!", "x" * 250, "no-such-topic", "__transaction_state",
                         version=version)
            assert [(t.name, t.error_code, t.is_internal) for t in r.topics] == [
                ("bad!", ErrorCode.INVALID_TOPIC_EXCEPTION, False),
                ("x" * 250, ErrorCode.INVALID_TOPIC_EXCEPTION, False),
                ("no-such-topic", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, False),
                ("__transaction_state", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, True)], version


def test_metadata_invalid_name_with_auto_creation_disabled(start_broker) -> None:
    """The same for every version when the broker does not auto-create topics
    (v0-3 requests cannot say whether they allow it)."""
    b = start_broker("auto.create.topics.enable=false")
    with RawClient(b.bootstrap) as c:
        for version in range(13):
            r = metadata(c, "bad!", "no-such-topic", "__consumer_offsets", version=version,
                         allow=True)
            assert [t.error_code for t in r.topics] == [
                ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION], version
            if version >= 1:  # is_internal came with v1
                assert [t.is_internal for t in r.topics] == [False, False, True], version


def test_authorized_operations_when_asked(broker, topic) -> None:
    """As Kafka with no authorizer: every operation the resource type supports
    when the request asks for them, Int.MinValue when it does not."""
    with RawClient(broker.bootstrap) as c:
        create_topics(c, (topic, 1))
        for version in range(8, 13):
            for asked in (False, True):
                r = metadata(c, topic, "no-such-topic", version=version,
                             include_topic_authorized_operations=asked,
                             include_cluster_authorized_operations=asked)
                want = TOPIC_OPS if asked else NOT_REQUESTED
                assert [t.topic_authorized_operations for t in r.topics] == [want, want]
                if version <= 10:  # the cluster field is gone from v11
                    assert r.cluster_authorized_operations == (
                        CLUSTER_OPS if asked else NOT_REQUESTED), version
        for version in (0, 1):
            for asked in (False, True):
                r = c.request(ApiKey.DESCRIBE_CLUSTER, version, {
                    "include_cluster_authorized_operations": asked, "endpoint_type": 1})
                assert r.error_code == 0
                assert r.cluster_authorized_operations == (
                    CLUSTER_OPS if asked else NOT_REQUESTED), version
        for version in range(3, 6):
            for asked in (False, True):
                r = c.request(ApiKey.DESCRIBE_GROUPS, version, {
                    "groups": ["ops-group"], "include_authorized_operations": asked})
                assert r.groups[0].error_code == 0
                assert r.groups[0].authorized_operations == (
                    GROUP_OPS if asked else NOT_REQUESTED), version


def test_delete_topics_refuses_ambiguous_entries(broker, topic) -> None:
    """As Kafka's ControllerApis.deleteTopics: INVALID_REQUEST for an entry with
    both a name and an id or neither, for a name or id given twice, and for a
    name whose id is also given; none of those topics is deleted."""
    a, b, d = (f"{topic}-{s}" for s in "abd")
    with RawClient(broker.bootstrap) as c:
        ids = {t.name: t.topic_id for t in create_topics(c, (a, 1), (b, 1), (d, 1)).topics}

        def delete(*entries: tuple[str | None, uuid.UUID], version: int = 6):
            body = ({"topics": [{"name": n, "topic_id": i} for n, i in entries]}
                    if version >= 6 else {"topic_names": [n for n, _ in entries]})
            r = c.request(ApiKey.DELETE_TOPICS, version, {**body, "timeout_ms": 5000})
            return [(t.name, t.error_code, t.error_message) for t in r.responses]

        invalid = ErrorCode.INVALID_REQUEST
        assert delete((a, ids[b])) == [
            (a, invalid, "You may not specify both topic name and topic id.")]
        assert delete((None, ZERO_ID)) == [
            (None, invalid, "Neither topic name nor id were specified.")]
        assert delete((a, ZERO_ID), (a, ZERO_ID)) == [(a, invalid, "Duplicate topic name.")]
        assert delete((None, ids[b]), (None, ids[b])) == [(None, invalid, "Duplicate topic id.")]
        assert delete((d, ZERO_ID), (None, ids[d])) == [
            (d, invalid, "The provided topic name maps to an ID that was already supplied.")]
        assert delete((b, ZERO_ID), (b, ZERO_ID), version=5) == [
            (b, invalid, "Duplicate topic name.")]
        assert all(exists(c, name) for name in (a, b, d))
        # Well-formed entries next to a refused one are still served.
        assert delete((a, ZERO_ID), (None, ids[b]), (d, ids[d])) == [
            (a, 0, None), (b, 0, None),
            (d, invalid, "You may not specify both topic name and topic id.")]
        assert [exists(c, name) for name in (a, b, d)] == [False, False, True]


def test_delete_topics_disabled_answer_depends_on_version(start_broker, topic) -> None:
    """As Kafka: with delete.topic.enable=false, INVALID_REQUEST before v3
    (those clients do not know TOPIC_DELETION_DISABLED), TOPIC_DELETION_DISABLED after."""
    b = start_broker("delete.topic.enable=false")
    with RawClient(b.bootstrap) as c:
        create_topics(c, (topic, 1))
        for version in range(7):
            body = ({"topics": [{"name": topic}]} if version >= 6
                    else {"topic_names": [topic]})
            r = c.request(ApiKey.DELETE_TOPICS, version, {**body, "timeout_ms": 5000})
            want = ErrorCode.INVALID_REQUEST if version < 3 else ErrorCode.TOPIC_DELETION_DISABLED
            assert [(t.name, t.error_code) for t in r.responses] == [(topic, want)], version
        assert exists(c, topic)


def test_create_topics_caps_partitions_per_request(broker, topic) -> None:
    """As Kafka's ReplicationControlManager: more than 10000 partitions asked for
    in one request (the default count for -1) refuse the whole request with
    POLICY_VIOLATION, validate_only or not, and nothing is created."""
    policy = (ErrorCode.POLICY_VIOLATION, "Excessively large number of partitions per request.")
    first, second = topic + "-1", topic + "-2"
    with RawClient(broker.bootstrap) as c:
        for topics in (((first, 10_001),), ((first, 5_000), (second, 5_001)),
                       ((first, 10_000), (second, -1))):
            r = create_topics(c, *topics, validate_only=True)
            assert [(t.error_code, t.error_message) for t in r.topics] == [policy] * len(topics)
        r = create_topics(c, (first, 10_000), validate_only=True)
        assert [t.error_code for t in r.topics] == [0]
        r = create_topics(c, (first, 5_000), (second, 5_001))
        assert [(t.name, t.error_code) for t in r.topics] == [
            (first, policy[0]), (second, policy[0])]
        r = create_topics(c, (first, 10_001), version=0)
        assert [(t.name, t.error_code) for t in r.topics] == [(first, policy[0])]
        assert not exists(c, first) and not exists(c, second)


def test_list_offsets_checks_current_leader_epoch(broker, topic) -> None:
    """As Kafka's Partition.localLogWithEpochOrThrow (v4+): a current_leader_epoch
    ahead of the leader's is UNKNOWN_LEADER_EPOCH, one behind it FENCED_LEADER_EPOCH;
    -1 (no epoch) and the epoch Metadata reports are served."""
    with RawClient(broker.bootstrap) as c:
        create_topics(c, (topic, 1))
        produce(c, topic, 4)
        epoch = metadata(c, topic).topics[0].partitions[0].leader_epoch

        def list_offsets(version: int, current: int) -> tuple[int, int]:
            r = c.request(ApiKey.LIST_OFFSETS, version, {
                "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
                    {"partition_index": 0, "current_leader_epoch": current, "timestamp": -1}]}]})
            p = r.topics[0].partitions[0]
            return p.error_code, p.offset

        # -1 is "no epoch", so an epoch behind a leader at epoch 0 can only be below -1.
        behind = epoch - 1 if epoch > 0 else -2
        for version in range(4, 8):
            assert list_offsets(version, -1) == (0, 4)
            assert list_offsets(version, epoch) == (0, 4)
            assert list_offsets(version, epoch + 1) == (ErrorCode.UNKNOWN_LEADER_EPOCH, -1)
            assert list_offsets(version, behind) == (ErrorCode.FENCED_LEADER_EPOCH, -1)
        assert latest_offset(c, topic) == 4  # v1 has no epoch to check


def test_list_offsets_earliest_local_is_the_log_start(broker, topic) -> None:
    """Timestamp -4 (KIP-405's EARLIEST_LOCAL_TIMESTAMP, which Kafka 3.6 takes
    at any version): with no tiered storage, the log start offset, as -2."""
    with RawClient(broker.bootstrap) as c:
        create_topics(c, (topic, 1))
        produce(c, topic, 5)
        assert delete_records(c, topic, {0: 2}) == [(0, 2)]
        for version in (1, 4, 7):
            for ts in (-2, -4):
                r = c.request(ApiKey.LIST_OFFSETS, version, {
                    "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic,
                    "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                    "timestamp": ts}]}]})
                p = r.topics[0].partitions[0]
                assert (p.error_code, p.offset, p.timestamp) == (0, 2, -1), (version, ts)


def test_offset_for_leader_epoch_answers_from_the_one_epoch(broker, topic) -> None:
    """OffsetForLeaderEpoch (KIP-101/320), every version: the node's leader
    epoch ends at the log end offset; -1 and epochs above it are unknown
    (-1, -1); an older epoch ends where the known one starts (the log start,
    after DeleteRecords too); current_leader_epoch fences as in ListOffsets;
    an unknown partition is UNKNOWN_TOPIC_OR_PARTITION."""
    with RawClient(broker.bootstrap) as c:
        create_topics(c, (topic, 1))
        produce(c, topic, 6)
        epoch = metadata(c, topic).topics[0].partitions[0].leader_epoch

        def ask(version: int, requested: int, current: int = -1, partition: int = 0):
            r = c.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, {
                "replica_id": -1, "topics": [{"topic": topic, "partitions": [
                    {"partition": partition, "current_leader_epoch": current,
                     "leader_epoch": requested}]}]})
            assert [t.topic for t in r.topics] == [topic]
            p = r.topics[0].partitions[0]
            assert p.partition == partition
            return (p.error_code, p.leader_epoch, p.end_offset) if version >= 1 else (
                p.error_code, p.end_offset)

        assert delete_records(c, topic, {0: 2}) == [(0, 2)]
        for version in range(5):
            full = version >= 1
            assert ask(version, epoch) == ((0, epoch, 6) if full else (0, 6))
            for unknown in (-1, epoch + 1):
                assert ask(version, unknown) == ((0, -1, -1) if full else (0, -1))
            assert ask(version, -7) == ((0, -7, 2) if full else (0, 2))
            assert ask(version, epoch, partition=3)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if version >= 2:
                assert ask(version, epoch, current=epoch)[0] == 0
                assert ask(version, epoch, current=epoch + 1)[0] == (
                    ErrorCode.UNKNOWN_LEADER_EPOCH)
                assert ask(version, epoch, current=-2)[0] == ErrorCode.FENCED_LEADER_EPOCH


def test_api_versions_answers_carry_their_own_correlation_id(broker) -> None:
    """The answer is encoded once per version and reused: pipelined requests
    of every version, each twice, each get their own correlation id and the
    same list."""
    body = {"client_software_name": "t", "client_software_version": "1"}
    with RawClient(broker.bootstrap) as c:
        sent = [(version, c.send(ApiKey.API_VERSIONS, version, body))
                for _ in range(2) for version in range(5)]
        lists = set()
        for version, cid in sent:
            got, r = c.recv(ApiKey.API_VERSIONS, version)
            assert (got, r.error_code) == (cid, 0)
            lists.add(tuple((k.api_key, k.min_version, k.max_version) for k in r.api_keys))
        assert len(lists) == 1 and (ApiKey.API_VERSIONS, 0, 4) in lists.pop()


def test_api_versions_checks_client_software(broker) -> None:
    """As Kafka's ApiVersionsRequest.isValid (v3+): a client software name or
    version not matching [a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])? gets
    INVALID_REQUEST (with no api keys, as Kafka's getErrorResponse); the
    connection stays usable."""
    with RawClient(broker.bootstrap) as c:
        for version in (3, 4):
            for name, soft_version in (("bad name!!", "1"), ("ok", "1.0-"), ("", "1"),
                                       ("ok", "")):
                r = c.request(ApiKey.API_VERSIONS, version, {
                    "client_software_name": name, "client_software_version": soft_version})
                assert (r.error_code, len(r.api_keys)) == (ErrorCode.INVALID_REQUEST, 0), name
            r = c.request(ApiKey.API_VERSIONS, version, {
                "client_software_name": "confluent-kafka-python",
                "client_software_version": "2.3.0-rdkafka-2.3.0"})
            assert r.error_code == 0 and r.api_keys
        assert c.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
