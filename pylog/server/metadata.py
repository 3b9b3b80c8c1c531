"""Metadata: the node, the cluster id, and topics with this node leading every partition.

A request naming a topic that does not exist creates it when
``auto.create.topics.enable`` and the request (v4+) allow it, as Kafka does;
otherwise the topic comes back with UNKNOWN_TOPIC_OR_PARTITION, or
INVALID_TOPIC_EXCEPTION when its name is not a legal one.  A v12+ request
that names any topic id is answered by its topic ids alone, as Kafka's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode
from pylog.server.produce import INTERNAL_TOPICS
from pylog.server.topics import Topic, TopicError, validate_name

if TYPE_CHECKING:
    from pylog.server.broker import Broker

API_KEY = ApiKey.METADATA
VERSIONS = (0, 12)
LEADER_EPOCH = 0

# Kafka's AclOperation codes.  With no authorizer Kafka grants every operation
# a resource type supports (AclEntry.supportedOperations) and reports them, when
# asked, as a bitfield with bit n set for operation n; these constants serve
# Metadata, DescribeCluster and DescribeGroups alike.
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12


def _bitfield(*operations: int) -> int:
    return sum(1 << op for op in operations)


TOPIC_OPERATIONS = _bitfield(READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE,
                             DESCRIBE_CONFIGS, ALTER_CONFIGS)  # 3576
GROUP_OPERATIONS = _bitfield(READ, DELETE, DESCRIBE)  # 328
CLUSTER_OPERATIONS = _bitfield(CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
                               ALTER_CONFIGS, IDEMPOTENT_WRITE)  # 8096
OPERATIONS_NOT_REQUESTED = -2**31  # Kafka's Int.MinValue: the client did not ask


def authorized_operations(requested: bool, operations: int) -> int:
    """What an "authorized operations" field carries: the bitfield when asked for."""
    return operations if requested else OPERATIONS_NOT_REQUESTED


def _topic(broker: Broker, topic: Topic) -> dict[str, Any]:
    node = [broker.node_id]
    return {"error_code": 0, "name": topic.name, "topic_id": topic.topic_id,
            "is_internal": topic.name in INTERNAL_TOPICS,
            "partitions": [{"error_code": 0, "partition_index": p, "leader_id": broker.node_id,
                            "leader_epoch": LEADER_EPOCH, "replica_nodes": node,
                            "isr_nodes": node, "offline_replicas": []}
                           for p in range(topic.partitions)]}


def _error(name: str | None, code: int, topic_id: Any = None) -> dict[str, Any]:
    # Kafka's Topic.isInternal(name): a missing internal topic is still internal.
    return {"error_code": code, "name": name, "topic_id": topic_id,
            "is_internal": name in INTERNAL_TOPICS, "partitions": []}


def _missing(name: str) -> dict[str, Any]:
    """A topic that does not exist and is not being created: Kafka's
    getTopicMetadata tells an illegal name from a merely unknown one."""
    try:
        validate_name(name)
    except TopicError as exc:
        return _error(name, exc.code)
    return _error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


# Topic ids in requests came with v12; v10-11 carry the field but may not use it.
FIRST_VERSION_BY_ID = 12


def _by_ids(broker: Broker, ids: list[Any]) -> list[dict[str, Any]]:
    """Kafka's handleTopicMetadataRequest when a v12+ request names a topic id:
    the set of requested ids alone decides the answer (the names, and the
    entries without an id, are ignored, so nothing is auto-created).  Each id
    is answered once: the unknown ones first, as UNKNOWN_TOPIC_ID rows with a
    null name, then the topics of the known ones."""
    by_id = broker.topics.by_id
    unknown: list[dict[str, Any]] = []
    known: list[dict[str, Any]] = []
    for topic_id in dict.fromkeys(ids):  # a set, as Kafka's, in the request's order
        found = by_id.get(topic_id)
        if found is None:
            unknown.append(_error(None, ErrorCode.UNKNOWN_TOPIC_ID, topic_id))
        else:
            known.append(_topic(broker, found))
    return unknown + known


def _requested(broker: Broker, version: int, body: Any) -> list[dict[str, Any]]:
    if version >= FIRST_VERSION_BY_ID:
        ids = [t.topic_id for t in body.topics if t.topic_id.int != 0]
        if ids:
            return _by_ids(broker, ids)
    registry = broker.topics
    allow_create = broker.config["auto.create.topics.enable"] and (
        version < 4 or body.allow_auto_topic_creation)
    topics = []
    seen: set[str] = set()
    for req in body.topics:
        name = req.name
        if name is None:  # v12, with the zero topic id: no topic to look up
            topics.append(_error(None, ErrorCode.UNKNOWN_TOPIC_ID, req.topic_id))
            continue
        if name in seen:
            continue  # Kafka looks up the set of names: each is answered once
        seen.add(name)
        found = registry.get(name)
        if found is None and allow_create:
            try:
                found = broker.auto_create(name)
            except TopicError as exc:
                topics.append(_error(name, exc.code))
                continue
        topics.append(_topic(broker, found) if found else _missing(name))
    return topics


def _refuse_ids(version: int, body: Any) -> dict[str, Any] | None:
    """Kafka's handleTopicMetadataRequest before v12: a null name or a topic id
    is an InvalidRequestException, answered by MetadataRequest.getErrorResponse
    (every requested topic with INVALID_REQUEST, a null name as "")."""
    if version < 10 or version >= FIRST_VERSION_BY_ID or not body.topics:
        return None
    if all(t.name is not None and t.topic_id.int == 0 for t in body.topics):
        return None
    return {"throttle_time_ms": 0, "brokers": [], "cluster_id": None, "controller_id": -1,
            "topics": [{"error_code": ErrorCode.INVALID_REQUEST,
                        "name": "" if t.name is None else t.name, "topic_id": t.topic_id,
                        "is_internal": False, "partitions": []} for t in body.topics]}


def handle(broker: Broker, header: Any, body: Any) -> dict[str, Any]:
    version = header.api_version
    refused = _refuse_ids(version, body)
    if refused is not None:
        return refused
    if body.topics is None or (version == 0 and not body.topics):
        topics = [_topic(broker, t) for t in list(broker.topics.topics.values())]
    else:
        topics = _requested(broker, version, body)
    if body.include_topic_authorized_operations:  # v8+
        for t in topics:
            if t["name"] is not None:  # as Kafka: not the rows of unknown topic ids
                t["topic_authorized_operations"] = TOPIC_OPERATIONS
    ep = broker.endpoint
    return {"throttle_time_ms": 0,
            "brokers": [{"node_id": broker.node_id, "host": ep.host, "port": ep.port,
                         "rack": None}],
            "cluster_id": broker.cluster_id, "controller_id": broker.node_id,
            "topics": topics,
            "cluster_authorized_operations": authorized_operations(  # v8-10
                body.include_cluster_authorized_operations, CLUSTER_OPERATIONS)}
