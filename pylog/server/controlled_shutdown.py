"""ControlledShutdown: a node about to stop asks the controller to move the
leadership of its partitions to other in-sync replicas first; the answer
lists the partitions it still leads (it asks again, up to
controlled.shutdown.max.retries times)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.CONTROLLED_SHUTDOWN
VERSIONS = (1, 3)


async def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    cluster = node.cluster
    if cluster is None or not cluster.controller.active:
        return {"error_code": ErrorCode.NOT_CONTROLLER, "remaining_partitions": []}
    error, remaining = await cluster.controller.controlled_shutdown(
        body.broker_id, getattr(body, "broker_epoch", -1))
    return {"error_code": error, "remaining_partitions": [
        {"topic_name": t, "partition_index": p} for t, p in remaining]}
