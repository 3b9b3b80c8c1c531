"""OffsetFetch: a group's committed offsets (v8+: several groups in one request).

With ``require_stable`` (v7+, KIP-447; read_committed consumers set it), a
partition whose offset a transaction not yet ended has committed is
UNSTABLE_OFFSET_COMMIT, as Kafka answers: the consumer asks again, and does
not start from an offset the transaction is about to replace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.OFFSET_FETCH
VERSIONS = (0, 9)


def _topics(node: NodeServices, group_id: str, topics: Any,
            require_stable: bool = False) -> list[dict[str, Any]]:
    wanted = None if topics is None else [
        (t.name, p) for t in topics for p in t.partition_indexes]
    found = node.groups.fetch_offsets(group_id, wanted)
    unstable = node.groups.pending_txn_offsets(group_id) if require_stable else ()
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), o in found.items():
        if (topic, partition) in unstable:
            by_topic.setdefault(topic, []).append({
                "partition_index": partition, "error_code": ErrorCode.UNSTABLE_OFFSET_COMMIT,
                "committed_offset": -1, "committed_leader_epoch": -1, "metadata": ""})
            continue
        by_topic.setdefault(topic, []).append({
            "partition_index": partition, "error_code": 0,
            "committed_offset": o.offset if o else -1,
            "committed_leader_epoch": o.leader_epoch if o else -1,
            "metadata": o.metadata if o else ""})
    return [{"name": name, "partitions": parts} for name, parts in by_topic.items()]


def _refused(error: int, topics: Any) -> list[dict[str, Any]]:
    """Kafka's OffsetFetchRequest.getErrorResponse before v2 (no top-level
    error yet): every partition asked for carries the error."""
    return [{"name": t.name, "partitions": [
        {"partition_index": p, "error_code": error, "committed_offset": -1,
         "committed_leader_epoch": -1, "metadata": ""} for p in t.partition_indexes]}
        for t in topics or ()]


def _group(node: NodeServices, group_id: str, topics: Any,
           require_stable: bool) -> dict[str, Any]:
    # Not this node's group, or its partition still loading: the error
    # alone, as Kafka's handleFetchOffsets (validateGroupStatus).
    error = node.groups.coordinator_error(group_id)
    if error:
        return {"group_id": group_id, "error_code": error, "topics": []}
    return {"group_id": group_id, "error_code": 0,
            "topics": _topics(node, group_id, topics, require_stable)}


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    version = ctx.api_version
    if version < 8:
        found = _group(node, body.group_id, body.topics, version >= 7 and body.require_stable)
        error = found["error_code"]
        topics = _refused(error, body.topics) if error and version < 2 else found["topics"]
        return {"throttle_time_ms": 0, "error_code": error, "topics": topics}
    return {"throttle_time_ms": 0, "groups": [
        _group(node, g.group_id, g.topics, body.require_stable) for g in body.groups]}
