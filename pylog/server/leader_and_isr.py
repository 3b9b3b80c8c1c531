"""LeaderAndIsr (ZooKeeper mode): the controller says who leads each of this
node's partitions, at which epoch, and the ISR (see pylog.server.zk_node)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey
from pylog.server.inter_broker import not_in_a_cluster

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.LEADER_AND_ISR
# v2 is the first with partitions grouped by topic, which is what pylog's
# (and Kafka 3.x's) controllers send.
VERSIONS = (2, 7)


async def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    if node.cluster is None:
        return not_in_a_cluster(API_KEY, body)
    return await node.cluster.leader_and_isr(body, ctx.api_version)
