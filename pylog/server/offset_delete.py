"""OffsetDelete: drop a group's committed offsets of partitions nobody consumes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey

if TYPE_CHECKING:
    from pylog.server.broker import Broker

API_KEY = ApiKey.OFFSET_DELETE
VERSIONS = (0, 0)


def handle(broker: Broker, header: Any, body: Any) -> dict[str, Any]:
    tps = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
    error, per_partition = broker.groups.delete_offsets(body.group_id, tps)
    topics = [] if error else [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": per_partition[(t.name, p.partition_index)]}
            for p in t.partitions]} for t in body.topics]
    return {"error_code": error, "throttle_time_ms": 0, "topics": topics}
