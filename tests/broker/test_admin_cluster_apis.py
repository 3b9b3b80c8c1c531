"""Cluster admin APIs one node answers as a single Kafka 3.6 broker with no
authorizer does (it is the whole cluster, the controller and the only replica
of every partition): DescribeAcls, CreateAcls and DeleteAcls (SECURITY_DISABLED),
ElectLeaders (ELECTION_NOT_NEEDED), ListPartitionReassignments (nothing in
progress) and AlterPartitionReassignments (only this node is a valid replica
set) -- through confluent-kafka's and kafka-python's admin clients and raw
requests at every version."""

from __future__ import annotations

from typing import Any

import pytest
from kafka_wire import RawClient

from pylog.protocol import ApiKey, ErrorCode

ck = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
from confluent_kafka import ElectionType, KafkaException, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka import TopicPartition as KafkaTopicPartition  # noqa: E402
from kafka.admin import (  # noqa: E402
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KafkaResourceType  # noqa: E402
from kafka.errors import (  # noqa: E402
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    SecurityDisabledError,
    UnknownTopicOrPartitionError,
)

NODE = 0  # the broker's node.id (default)
NO_AUTHORIZER = "No Authorizer is configured."
NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"
NOT_NEEDED = "Leader election not needed for topic partition."
UNKNOWN_TP = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
INVALID_ASSIGNMENT = ErrorCode.INVALID_REPLICA_ASSIGNMENT


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    with RawClient(bootstrap) as c:
        r = c.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
            {"name": name, "num_partitions": partitions, "replication_factor": 1,
             "assignments": [], "configs": []}], "timeout_ms": 5000, "validate_only": False})
    assert r.topics[0].error_code in (0, ErrorCode.TOPIC_ALREADY_EXISTS), r


def acl_filter(**overrides: Any) -> dict[str, Any]:
    return {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": None, "host_filter": None, "operation": 1,
            "permission_type": 1, **overrides}


def acl_creation(**overrides: Any) -> dict[str, Any]:
    return {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3,
            "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3,
            **overrides}


@pytest.fixture
def kadmin(broker) -> Any:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield client
    client.close()


# -- ACLs ----------------------------------------------------------------------


def test_confluent_acls_security_disabled(broker) -> None:
    """CreateAcls and DeleteAcls fail each binding / filter with
    SECURITY_DISABLED and Kafka's message.  librdkafka drops DescribeAcls'
    top-level error code (rd_kafka_DescribeAclsResponse_parse), so against
    Kafka without an authorizer describe_acls gives an empty list, as here."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    any_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(any_filter).result(10) == []
    bindings = [AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:a", "*",
                           AclOperation.READ, AclPermissionType.ALLOW),
                AclBinding(ResourceType.GROUP, "g", ResourcePatternType.PREFIXED, "User:b",
                           "10.0.0.1", AclOperation.DESCRIBE, AclPermissionType.DENY)]
    created, deleted = admin.create_acls(bindings), admin.delete_acls([any_filter])
    assert (list(created), list(deleted)) == (bindings, [any_filter])
    for fut in [*created.values(), *deleted.values()]:
        with pytest.raises(KafkaException) as exc:
            fut.result(10)
        err = exc.value.args[0]
        assert (err.code(), err.str()) == (ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)


def test_kafka_python_acls_security_disabled(kadmin) -> None:
    """kafka-python raises DescribeAcls' top-level SECURITY_DISABLED and
    reports it for each creation and each filter."""
    any_filter = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                           permission_type=ACLPermissionType.ANY,
                           resource_pattern=ResourcePatternFilter(
                               KafkaResourceType.ANY, None, ACLResourcePatternType.ANY))
    with pytest.raises(SecurityDisabledError, match=NO_AUTHORIZER_DESCRIBE):
        kadmin.describe_acls(any_filter)
    acls = [ACL("User:a", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                ResourcePattern(KafkaResourceType.TOPIC, "t")),
            ACL("User:b", "*", ACLOperation.WRITE, ACLPermissionType.DENY,
                ResourcePattern(KafkaResourceType.GROUP, "g"))]
    assert kadmin.create_acls(acls) == {
        "succeeded": [], "failed": [SecurityDisabledError, SecurityDisabledError]}
    result = kadmin.delete_acls([any_filter, any_filter])
    assert [(f, matched, err) for f, matched, err in result] == [
        (any_filter, [], SecurityDisabledError), (any_filter, [], SecurityDisabledError)]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_acls_raw_every_version(broker, version: int) -> None:
    """DescribeAcls: top-level SECURITY_DISABLED, no resources; CreateAcls and
    DeleteAcls: one result per creation / filter, in order (none for none)."""
    with RawClient(broker.bootstrap) as c:
        r = c.request(ApiKey.DESCRIBE_ACLS, version, acl_filter())
        assert (r.throttle_time_ms, r.error_code, r.error_message, r.resources) == (
            0, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER_DESCRIBE, [])
        for creations in ([acl_creation(), acl_creation(resource_type=3, operation=8)], []):
            r = c.request(ApiKey.CREATE_ACLS, version, {"creations": creations})
            assert [(x.error_code, x.error_message) for x in r.results] == [
                (ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)] * len(creations)
        for filters in ([acl_filter(), acl_filter(resource_type_filter=2, operation=4),
                         acl_filter(principal_filter="User:x")], []):
            r = c.request(ApiKey.DELETE_ACLS, version, {"filters": filters})
            assert [(x.error_code, x.error_message, x.matching_acls)
                    for x in r.filter_results] == [
                (ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER, [])] * len(filters)


UNKNOWN_ELEMENTS = [
    (ApiKey.DESCRIBE_ACLS, lambda **kw: acl_filter(**kw), "resource_type_filter"),
    (ApiKey.DESCRIBE_ACLS, lambda **kw: acl_filter(**kw), "operation"),
    (ApiKey.DESCRIBE_ACLS, lambda **kw: acl_filter(**kw), "permission_type"),
    (ApiKey.DESCRIBE_ACLS, lambda **kw: acl_filter(**kw), "pattern_type_filter"),
    (ApiKey.CREATE_ACLS, lambda **kw: {"creations": [acl_creation(), acl_creation(**kw)]},
     "resource_type"),
    (ApiKey.CREATE_ACLS, lambda **kw: {"creations": [acl_creation(**kw)]}, "operation"),
    (ApiKey.CREATE_ACLS, lambda **kw: {"creations": [acl_creation(**kw)]}, "permission_type"),
    (ApiKey.CREATE_ACLS, lambda **kw: {"creations": [acl_creation(**kw)]},
     "resource_pattern_type"),
    (ApiKey.DELETE_ACLS, lambda **kw: {"filters": [acl_filter(**kw)]}, "resource_type_filter"),
    (ApiKey.DELETE_ACLS, lambda **kw: {"filters": [acl_filter(), acl_filter(**kw)]},
     "operation"),
    (ApiKey.DELETE_ACLS, lambda **kw: {"filters": [acl_filter(**kw)]}, "permission_type"),
    (ApiKey.DELETE_ACLS, lambda **kw: {"filters": [acl_filter(**kw)]}, "pattern_type_filter"),
]


@pytest.mark.parametrize(("api_key", "body", "field"), UNKNOWN_ELEMENTS,
                         ids=[f"{k.name}-{f}" for k, _, f in UNKNOWN_ELEMENTS])
def test_acls_unknown_element_closes_the_connection(broker, api_key, body, field: str) -> None:
    """An UNKNOWN (0) resource type, pattern type, operation or permission
    type makes Kafka's request parsing throw, and Kafka closes the connection
    without answering; other connections go on.  The pattern type is not on
    the wire at v0 (it is LITERAL there), so v0 cannot carry that one."""
    versions = (1, 3) if "pattern" in field else (0, 2)
    for version in versions:
        with RawClient(broker.bootstrap) as c, RawClient(broker.bootstrap) as bystander:
            c.send(api_key, version, body(**{field: 0}))
            assert c.is_closed()
            r = bystander.request(api_key, version, body(**{field: 1}))
            assert r.throttle_time_ms == 0


# -- ElectLeaders --------------------------------------------------------------


def test_confluent_elect_leaders(broker, topic) -> None:
    """Each named partition: ELECTION_NOT_NEEDED (its only replica leads) or
    UNKNOWN_TOPIC_OR_PARTITION; all partitions (None): nothing to report."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)
    for election in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        result = admin.elect_leaders(election, [
            TopicPartition(topic, 0), TopicPartition(topic, 1), TopicPartition(topic, 2),
            TopicPartition(topic + "-missing", 0)]).result(10)
        assert {(tp.topic, tp.partition): (err.code(), err.str())
                for tp, err in result.items()} == {
            (topic, 0): (ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED),
            (topic, 1): (ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED),
            (topic, 2): (UNKNOWN_TP, f"No such partition as {topic}-2"),
            (topic + "-missing", 0): (UNKNOWN_TP, f"No such topic as {topic}-missing")}
        assert admin.elect_leaders(election, None).result(10) == {}


def test_kafka_python_elect_leaders(broker, topic, kadmin) -> None:
    """kafka-python ignores ELECTION_NOT_NEEDED and raises the rest."""
    create_topic(broker.bootstrap, topic, 2)
    for election in (0, 1):
        r = kadmin.elect_leaders(election, {topic: [0, 1]})
        assert r.error_code == 0
        assert [(x.topic, [(p.partition_id, p.error_code, p.error_message)
                           for p in x.partition_result])
                for x in r.replica_election_results] == [
            (topic, [(0, ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED),
                     (1, ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED)])]
        with pytest.raises(UnknownTopicOrPartitionError, match=f"No such partition as {topic}-5"):
            kadmin.elect_leaders(election, {topic: [0, 5]})


def _elect(c: RawClient, version: int, election_type: int, partitions: Any) -> Any:
    return c.request(ApiKey.ELECT_LEADERS, version, {
        "election_type": election_type, "timeout_ms": 5000, "topic_partitions": None
        if partitions is None else [{"topic": t, "partitions": ps} for t, ps in partitions]})


def _results(r: Any) -> list:
    return [(t.topic, [(p.partition_id, p.error_code, p.error_message)
                       for p in t.partition_result]) for t in r.replica_election_results]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_raw_every_version(broker, topic, version: int) -> None:
    """Per partition in request order, repeats included; null asks for every
    partition, and Kafka lists every topic but leaves out the partitions whose
    election is not needed (all of them here).  v0: no top-level error code,
    and always a preferred election."""
    create_topic(broker.bootstrap, topic, 3)
    nn = (ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED)
    with RawClient(broker.bootstrap) as c:
        for election in ((0,) if version == 0 else (0, 1)):
            r = _elect(c, version, election, [(topic, [2, 0, 0, -1, 3]), ("no-such", [0]),
                                              (topic, [1])])
            if version >= 1:
                assert r.error_code == 0
            assert _results(r) == [
                (topic, [(2, *nn), (0, *nn), (0, *nn),
                         (-1, UNKNOWN_TP, f"No such partition as {topic}--1"),
                         (3, UNKNOWN_TP, f"No such partition as {topic}-3")]),
                ("no-such", [(0, UNKNOWN_TP, "No such topic as no-such")]),
                (topic, [(1, *nn)])]
            assert _results(_elect(c, version, election, [])) == []
            names = {t.name for t in c.request(ApiKey.METADATA, 1, {"topics": None}).topics}
            everything = _elect(c, version, election, None)
            assert topic in names
            assert sorted(_results(everything)) == sorted((n, []) for n in names)


@pytest.mark.parametrize("election_type", [2, 3, -1, 127, -128])
def test_elect_leaders_unknown_election_type(broker, topic, election_type: int) -> None:
    """ElectionType.valueOf fails: InvalidRequestException("Unknown election
    type N"), which ElectLeadersRequest.getErrorResponse puts at the top and on
    every requested partition (none when all are asked for)."""
    create_topic(broker.bootstrap, topic, 1)
    message = f"Unknown election type {election_type}"
    with RawClient(broker.bootstrap) as c:
        for version in (1, 2):
            r = _elect(c, version, election_type, [(topic, [0, 7]), ("no-such", [1])])
            assert r.error_code == ErrorCode.INVALID_REQUEST
            assert _results(r) == [
                (topic, [(0, ErrorCode.INVALID_REQUEST, message),
                         (7, ErrorCode.INVALID_REQUEST, message)]),
                ("no-such", [(1, ErrorCode.INVALID_REQUEST, message)])]
            r = _elect(c, version, election_type, None)
            assert (r.error_code, _results(r)) == (ErrorCode.INVALID_REQUEST, [])


# -- partition reassignments ---------------------------------------------------


def test_kafka_python_partition_reassignments(broker, topic, kadmin) -> None:
    """Nothing is ever being reassigned; moving a partition onto this node is
    a success with nothing to move, anything else is refused as Kafka's
    controller refuses it."""
    create_topic(broker.bootstrap, topic, 2)
    assert kadmin.list_partition_reassignments() == {}
    assert kadmin.list_partition_reassignments({topic: [0, 1, 9], "no-such": [0]}) == {}
    assert kadmin.list_partition_reassignments(
        [KafkaTopicPartition(topic, 0), KafkaTopicPartition("no-such", 3)]) == {}
    assert kadmin.alter_partition_reassignments({
        KafkaTopicPartition(topic, 0): [NODE],
        KafkaTopicPartition(topic, 1): None,
        KafkaTopicPartition(topic, 2): [NODE],
        KafkaTopicPartition("no-such", 0): [NODE]}) == {
        KafkaTopicPartition(topic, 0): None,
        KafkaTopicPartition(topic, 1): NoReassignmentInProgressError,
        KafkaTopicPartition(topic, 2): UnknownTopicOrPartitionError,
        KafkaTopicPartition("no-such", 0): UnknownTopicOrPartitionError}
    assert kadmin.alter_partition_reassignments({
        KafkaTopicPartition(topic, 0): [NODE, NODE],
        KafkaTopicPartition(topic, 1): [NODE, 1]}) == {
        KafkaTopicPartition(topic, 0): InvalidReplicationAssignmentError,
        KafkaTopicPartition(topic, 1): InvalidReplicationAssignmentError}
    assert kadmin.list_partition_reassignments() == {}


def test_list_partition_reassignments_raw(broker, topic) -> None:
    """All, named (existing or not) or none: an empty list, error 0, null message."""
    create_topic(broker.bootstrap, topic, 2)
    with RawClient(broker.bootstrap) as c:
        for topics in (None, [], [{"name": topic, "partition_indexes": [0, 1, 5, -1]},
                                  {"name": "no-such", "partition_indexes": [0]}],
                       [{"name": topic, "partition_indexes": []}]):
            r = c.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
                          {"timeout_ms": 5000, "topics": topics})
            assert (r.throttle_time_ms, r.error_code, r.error_message, r.topics) == (
                0, 0, None, [])


def _alter(c: RawClient, topics: list[tuple[str, list[tuple[int, Any]]]]) -> Any:
    return c.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 5000, "topics": [
        {"name": name, "partitions": [{"partition_index": p, "replicas": replicas}
                                      for p, replicas in parts]} for name, parts in topics]})


def test_alter_partition_reassignments_raw(broker, topic) -> None:
    """ReplicationControlManager's answers, per partition in request order:
    unknown topic / partition, cancel with nothing in progress (null message:
    it is the code's own), empty / unregistered broker (ids checked in
    ascending order) / repeated broker, and [this node] (success).  An empty
    request gets QuorumController's early answer, whose message is "" not null."""
    create_topic(broker.bootstrap, topic, 2)
    no_such_broker = "The manual partition assignment includes broker {}, but no such broker " \
                     "is registered."
    with RawClient(broker.bootstrap) as c:
        r = _alter(c, [(topic, [(0, [NODE]), (1, None), (2, [NODE]), (-1, [NODE]),
                                (0, []), (1, [NODE, NODE]), (0, [NODE, 1]), (1, [5, -1, NODE]),
                                (0, [NODE, NODE, 3])]),
                       ("no-such", [(0, [NODE]), (1, None)]),
                       (topic, [(1, [NODE])])])
        assert (r.throttle_time_ms, r.error_code, r.error_message) == (0, 0, None)
        assert [(t.name, [(p.partition_index, p.error_code, p.error_message)
                          for p in t.partitions]) for t in r.responses] == [
            (topic, [
                (0, 0, None),
                (1, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None),
                (2, UNKNOWN_TP, f"Unable to find partition {topic}:2."),
                (-1, UNKNOWN_TP, f"Unable to find partition {topic}:-1."),
                (0, INVALID_ASSIGNMENT,
                 "The manual partition assignment includes an empty replica list."),
                (1, INVALID_ASSIGNMENT,
                 f"The manual partition assignment includes the broker {NODE} more than once."),
                (0, INVALID_ASSIGNMENT, no_such_broker.format(1)),
                (1, INVALID_ASSIGNMENT, no_such_broker.format(-1)),
                (0, INVALID_ASSIGNMENT,
                 f"The manual partition assignment includes the broker {NODE} more than once.")]),
            ("no-such", [(0, UNKNOWN_TP, "Unable to find a topic named no-such."),
                         (1, UNKNOWN_TP, "Unable to find a topic named no-such.")]),
            (topic, [(1, 0, None)])]
        r = _alter(c, [])
        assert (r.throttle_time_ms, r.error_code, r.error_message, r.responses) == (0, 0, "", [])
        r = _alter(c, [(topic, [])])
        assert (r.error_code, r.error_message) == (0, None)
        assert [(t.name, t.partitions) for t in r.responses] == [(topic, [])]
