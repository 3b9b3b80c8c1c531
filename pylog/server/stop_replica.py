"""StopReplica (ZooKeeper mode): stop serving partitions, and delete them when
the controller says so (topic deletion, a replica moved away)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey
from pylog.server.inter_broker import not_in_a_cluster

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.STOP_REPLICA
VERSIONS = (3, 4)  # v3: a delete flag and leader epoch per partition


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    if node.cluster is None:
        return not_in_a_cluster(API_KEY, body)
    return node.cluster.stop_replica(body)
