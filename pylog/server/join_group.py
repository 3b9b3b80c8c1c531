"""JoinGroup: enter a group (or rejoin it); the response waits for the rebalance."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from pylog.coordinator.coordinator import JoinRequest, JoinResult
from pylog.protocol import ApiKey

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.JOIN_GROUP
VERSIONS = (0, 9)


def client_host(ctx: RequestContext) -> str:
    """The member's address as Kafka shows it (``InetAddress.toString``: ``/1.2.3.4``)."""
    peer = ctx.peer
    return f"/{peer[0]}" if peer else ""


def _response(version: int, r: JoinResult) -> dict[str, Any]:
    # ProtocolName became nullable in v7; older versions carry "" for none.
    protocol = r.protocol if r.protocol is not None or version >= 7 else ""
    return {"throttle_time_ms": 0, "error_code": r.error, "generation_id": r.generation,
            "protocol_type": r.protocol_type, "protocol_name": protocol, "leader": r.leader,
            "skip_assignment": r.skip_assignment, "member_id": r.member_id,
            "members": r.members}


async def _parked(version: int, pending: asyncio.Future) -> dict[str, Any]:
    return _response(version, await pending)


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> Any:
    version = ctx.api_version
    rebalance_timeout = body.session_timeout_ms if version == 0 else body.rebalance_timeout_ms
    req = JoinRequest(body.group_id, body.member_id, body.group_instance_id,
                      ctx.client_id or "", client_host(ctx), rebalance_timeout,
                      body.session_timeout_ms, body.protocol_type,
                      [(p.name, bytes(p.metadata)) for p in body.protocols], version)
    result = node.groups.join_group(req)
    if isinstance(result, asyncio.Future):
        return _parked(version, result)
    return _response(version, result)
