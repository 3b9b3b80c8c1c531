"""Heartbeat: keep a member's session; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.HEARTBEAT
VERSIONS = (0, 4)


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    error = node.groups.heartbeat(body.group_id, body.generation_id, body.member_id,
                                    body.group_instance_id)
    return {"throttle_time_ms": 0, "error_code": error}
