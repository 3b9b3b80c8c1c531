"""Metadata: the live brokers, the cluster id, the controller, and each topic's
partitions with their leader, leader epoch, replicas and ISR (from the
node's metadata cache: itself alone on the embedded single node, the
controller's UpdateMetadata in a cluster).

A request naming a topic that does not exist creates it when
``auto.create.topics.enable`` and the request (v4+) allow it, as Kafka does;
otherwise the topic comes back with UNKNOWN_TOPIC_OR_PARTITION, or
INVALID_TOPIC_EXCEPTION when its name is not a legal one.  A v12+ request
that names any topic id is answered by its topic ids alone, as Kafka's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode
from pylog.server.metadata_cache import PartitionInfo, TopicInfo
from pylog.server.produce import INTERNAL_TOPICS
from pylog.server.topics import TopicError, validate_name

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.METADATA
VERSIONS = (0, 12)

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


def _topic(info: TopicInfo) -> dict[str, Any]:
    return {"error_code": 0, "name": info.name, "topic_id": info.topic_id,
            "is_internal": info.name in INTERNAL_TOPICS,
            "partitions": [_partition(p) for p in info.partitions]}


def _partition(p: PartitionInfo) -> dict[str, Any]:
    # Kafka's ZkMetadataCache: a partition whose leader is not alive is
    # LEADER_NOT_AVAILABLE (leader -1); its dead replicas are offline_replicas.
    return {"error_code": 0 if p.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
            "partition_index": p.index, "leader_id": p.leader,
            "leader_epoch": p.leader_epoch, "replica_nodes": list(p.replicas),
            "isr_nodes": list(p.isr), "offline_replicas": list(p.offline)}


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


def _by_ids(node: NodeServices, ids: list[Any]) -> list[dict[str, Any]]:
    """Kafka's handleTopicMetadataRequest when a v12+ request names a topic id:
    the set of requested ids alone decides the answer (the names, and the
    entries without an id, are ignored, so nothing is auto-created).  Each id
    is answered once: the unknown ones first, as UNKNOWN_TOPIC_ID rows with a
    null name, then the topics of the known ones."""
    by_id = node.metadata.topic_by_id
    unknown: list[dict[str, Any]] = []
    known: list[dict[str, Any]] = []
    for topic_id in dict.fromkeys(ids):  # a set, as Kafka's, in the request's order
        found = by_id(topic_id)
        if found is None:
            unknown.append(_error(None, ErrorCode.UNKNOWN_TOPIC_ID, topic_id))
        else:
            known.append(_topic(found))
    return unknown + known


def _requested(node: NodeServices, version: int, body: Any) -> list[dict[str, Any]]:
    if version >= FIRST_VERSION_BY_ID:
        ids = [t.topic_id for t in body.topics if t.topic_id.int != 0]
        if ids:
            return _by_ids(node, ids)
    metadata = node.metadata
    allow_create = node.config["auto.create.topics.enable"] and (
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
        found = metadata.topic(name)
        if found is None and allow_create:
            try:
                found = node.admin.auto_create(name)
            except TopicError as exc:
                topics.append(_error(name, exc.code))
                continue
            if found is None:  # being created by the controller (a cluster)
                topics.append(_error(name, ErrorCode.LEADER_NOT_AVAILABLE))
                continue
        topics.append(_topic(found) if found else _missing(name))
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


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    version = ctx.api_version
    refused = _refuse_ids(version, body)
    if refused is not None:
        return refused
    metadata = node.metadata
    if body.topics is None or (version == 0 and not body.topics):
        topics = [_topic(t) for t in map(metadata.topic, metadata.topic_names()) if t]
    else:
        topics = _requested(node, version, body)
    if body.include_topic_authorized_operations:  # v8+
        for t in topics:
            if t["name"] is not None:  # as Kafka: not the rows of unknown topic ids
                t["topic_authorized_operations"] = TOPIC_OPERATIONS
    return {"throttle_time_ms": 0,
            "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                        for b in metadata.brokers()],
            "cluster_id": metadata.cluster_id, "controller_id": metadata.controller_id,
            "topics": topics,
            "cluster_authorized_operations": authorized_operations(  # v8-10
                body.include_cluster_authorized_operations, CLUSTER_OPERATIONS)}
