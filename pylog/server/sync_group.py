"""SyncGroup: the leader hands in the assignment; every member gets its own part."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from pylog.coordinator.coordinator import SyncResult
from pylog.protocol import ApiKey

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.SYNC_GROUP
VERSIONS = (0, 5)


def _response(r: SyncResult) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": r.error, "protocol_type": r.protocol_type,
            "protocol_name": r.protocol, "assignment": r.assignment}


async def _parked(pending: asyncio.Future) -> dict[str, Any]:
    return _response(await pending)


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> Any:
    assignments = {a.member_id: bytes(a.assignment) for a in body.assignments}
    result = node.groups.sync_group(body.group_id, body.generation_id, body.member_id,
                                      body.group_instance_id, body.protocol_type,
                                      body.protocol_name, assignments)
    if isinstance(result, asyncio.Future):
        return _parked(result)
    return _response(result)
