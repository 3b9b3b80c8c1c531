"""OffsetDelete: drop a group's committed offsets of partitions nobody consumes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.OFFSET_DELETE
VERSIONS = (0, 0)


def _exists(node: NodeServices, topic: str, partition: int) -> bool:
    return node.metadata.partition(topic, partition) is not None


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    tps = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
    # As Kafka (KIP-496): partitions that do not exist are answered here and
    # never reach the group, which only decides about the others.
    unknown = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in tps
               if not _exists(node, *tp)}
    error, per_partition = node.groups.delete_offsets(
        body.group_id, [tp for tp in tps if tp not in unknown])
    per_partition.update(unknown)
    topics = [] if error else [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": per_partition[(t.name, p.partition_index)]}
            for p in t.partitions]} for t in body.topics]
    return {"error_code": error, "throttle_time_ms": 0, "topics": topics}
