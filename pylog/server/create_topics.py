"""CreateTopics: new topics, their replicas placed by the node (or as the client asks)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode
from pylog.server import topic_configs
from pylog.server.topic_admin import NewTopic
from pylog.server.topics import TopicError

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.CREATE_TOPICS
VERSIONS = (0, 7)
# CreatableTopicConfigs: DescribeConfigs' entry less synonyms, type and docs.
_CREATED_FIELDS = ("name", "value", "read_only", "config_source", "is_sensitive")
# Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH: a request asking
# for more partitions than this in all is refused whole, before anything is made.
MAX_PARTITIONS_PER_REQUEST = 10_000


async def _create(node: NodeServices, t: Any, validate_only: bool) -> dict[str, Any]:
    partitions, rf = t.num_partitions, t.replication_factor
    assignment = None
    if t.assignments:
        if partitions != -1 or rf != -1:
            raise TopicError(ErrorCode.INVALID_REQUEST, "Both numPartitions or "
                             "replicationFactor and replicasAssignments were set.")
        if sorted(a.partition_index for a in t.assignments) != list(range(len(t.assignments))):
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "partitions should be a consecutive 0-based integer sequence")
        assignment = {a.partition_index: list(a.broker_ids) for a in t.assignments}
        partitions, rf = len(t.assignments), len(t.assignments[0].broker_ids)
    if partitions == -1:
        partitions = node.config["num.partitions"]
    if rf == -1:
        rf = node.config["default.replication.factor"]
    raw = {c.name: c.value for c in t.configs}
    new = NewTopic(t.name, partitions, rf, assignment, raw)
    topic_id = await node.admin.create_topic(new, validate_only)
    configs = node.admin.validate_configs(raw)
    return {"name": t.name, "topic_id": topic_id, "error_code": 0, "error_message": None,
            "num_partitions": partitions, "replication_factor": rf,
            "configs": [{k: c[k] for k in _CREATED_FIELDS}
                        for c in topic_configs.describe(configs, node.config)]}


def _requested_partitions(node: NodeServices, topics: list[Any]) -> int:
    """Kafka's validateTotalNumberOfPartitions: the default count for -1, the
    assignments' count when given, nothing for a count that is not positive."""
    total = 0
    for t in topics:
        if t.assignments:
            total += len(t.assignments)
        elif t.num_partitions == -1:
            total += node.config["num.partitions"]
        elif t.num_partitions > 0:
            total += t.num_partitions
    return total


def _refuse_all(body: Any, code: int, message: str) -> dict[str, Any]:
    # Kafka's CreateTopicsRequest.getErrorResponse: one row per requested entry.
    return {"throttle_time_ms": 0, "topics": [
        {"name": t.name, "error_code": code, "error_message": message, "configs": None}
        for t in body.topics]}


async def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    results = []
    # As Kafka's ControllerApis: a name given twice gets one INVALID_REQUEST
    # and is not created at all.
    names = [t.name for t in body.topics]
    duplicates = {n for n in names if names.count(n) > 1}
    unique = [t for t in body.topics if t.name not in duplicates]
    if _requested_partitions(node, unique) > MAX_PARTITIONS_PER_REQUEST:
        return _refuse_all(body, ErrorCode.POLICY_VIOLATION,
                           "Excessively large number of partitions per request.")
    for name in dict.fromkeys(n for n in names if n in duplicates):
        results.append({"name": name, "error_code": ErrorCode.INVALID_REQUEST,
                        "error_message": "Duplicate topic name.", "configs": None})
    for t in unique:
        try:
            results.append(await _create(node, t, body.validate_only))
        except TopicError as exc:
            results.append({"name": t.name, "error_code": exc.code, "error_message": str(exc),
                            "configs": None})
    if not body.validate_only:
        # A cluster: answered once this node's metadata shows every new
        # partition with a leader, or timeout_ms passed (REQUEST_TIMED_OUT;
        # the topic is created all the same, as in Kafka).
        made = [r["name"] for r in results if r["error_code"] == 0]
        late = await node.admin.await_created(made, body.timeout_ms)
        for r in results:
            exc = late.get(r["name"])
            if exc is not None:
                r.update(error_code=exc.code, error_message=str(exc))
    return {"throttle_time_ms": 0, "topics": results}
