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


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    if ctx.api_version < 8:
        return {"throttle_time_ms": 0, "error_code": 0,
                "topics": _topics(node, body.group_id, body.topics,
                                  ctx.api_version >= 7 and body.require_stable)}
    return {"throttle_time_ms": 0, "groups": [
        {"group_id": g.group_id, "error_code": 0,
         "topics": _topics(node, g.group_id, g.topics, body.require_stable)}
        for g in body.groups]}
