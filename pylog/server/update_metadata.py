"""UpdateMetadata (ZooKeeper mode): the controller's view of the live brokers
and every partition, for this node's metadata cache."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey
from pylog.server.inter_broker import not_in_a_cluster

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.UPDATE_METADATA
VERSIONS = (5, 8)  # v5: partitions grouped by topic


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    if node.cluster is None:
        return not_in_a_cluster(API_KEY, body)
    return {"error_code": node.cluster.update_metadata(body)}
