"""OffsetCommit: store a group's consumed positions in ``__consumer_offsets``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.coordinator.coordinator import OffsetCommit
from pylog.protocol import ApiKey

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.OFFSET_COMMIT
VERSIONS = (0, 9)


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    version = ctx.api_version
    commits = [OffsetCommit(t.name, p.partition_index, p.committed_offset,
                            p.committed_leader_epoch, p.committed_metadata,
                            p.commit_timestamp if version == 1 else -1)
               for t in body.topics for p in t.partitions]
    # v0 has no generation: a group that only stores offsets here.
    generation = body.generation_id_or_member_epoch if version >= 1 else -1
    retention = body.retention_time_ms if 2 <= version <= 4 else -1
    errors = node.groups.commit_offsets(body.group_id, generation, body.member_id or "",
                                          body.group_instance_id, commits, retention)
    return {"throttle_time_ms": 0, "topics": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": errors[(t.name, p.partition_index)]} for p in t.partitions]}
        for t in body.topics]}
