"""OffsetCommit: store a group's consumed positions in ``__consumer_offsets``.

Answered once the commit is in the in-sync replicas of the group's
partition (offsets.commit.required.acks=-1): at once on a single node, else
when the coordinator's write is replicated (:mod:`pylog.coordinator.acked`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.coordinator.acked import answer
from pylog.coordinator.coordinator import Commits, OffsetCommit
from pylog.protocol import ApiKey

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.OFFSET_COMMIT
VERSIONS = (0, 9)


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> Any:
    version = ctx.api_version
    commits = [OffsetCommit(t.name, p.partition_index, p.committed_offset,
                            p.committed_leader_epoch, p.committed_metadata,
                            p.commit_timestamp if version == 1 else -1)
               for t in body.topics for p in t.partitions]
    # v0 has no generation: a group that only stores offsets here.
    generation = body.generation_id_or_member_epoch if version >= 1 else -1
    retention = body.retention_time_ms if 2 <= version <= 4 else -1
    def response(errors: Commits) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "topics": [
            {"name": t.name, "partitions": [
                {"partition_index": p.partition_index,
                 "error_code": errors[(t.name, p.partition_index)]} for p in t.partitions]}
            for t in body.topics]}

    return answer(node.groups.commit_offsets(body.group_id, generation, body.member_id or "",
                                             body.group_instance_id, commits, retention),
                  response)
