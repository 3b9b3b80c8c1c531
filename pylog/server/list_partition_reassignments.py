"""ListPartitionReassignments: the partitions being moved, from the active
controller in a cluster (another node answers NOT_CONTROLLER); nothing is
ever being reassigned on one node.

As Kafka 3.6's controller (``ReplicationControlManager.listPartitionReassignments``,
``QuorumController.listPartitionReassignments``): only partitions with a
reassignment in progress are listed, and named topics or partitions that do
not exist are skipped without an error -- so the answer is always an empty
list, error code 0 and a null message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS
VERSIONS = (0, 0)


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    if node.cluster is None:
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": []}
    controller = node.cluster.controller
    if not controller.active:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER,
                "error_message": None, "topics": []}
    wanted = None if body.topics is None else {
        (t.name, p) for t in body.topics for p in t.partition_indexes}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), (replicas, adding, removing) in sorted(controller.reassignments().items()):
        if wanted is None or (topic, p) in wanted:
            by_topic.setdefault(topic, []).append({
                "partition_index": p, "replicas": replicas, "adding_replicas": adding,
                "removing_replicas": removing})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": [
        {"name": t, "partitions": rows} for t, rows in by_topic.items()]}
