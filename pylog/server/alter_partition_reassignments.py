"""AlterPartitionReassignments: move partitions to other replicas.

In a cluster the active controller carries it out (pylog.controller:
the new replicas catch up and join the ISR, then the old ones are removed);
another node answers NOT_CONTROLLER.  On the single node the only replica set
allowed is the node itself:

As Kafka 3.6's controller (``ReplicationControlManager.alterPartitionReassignment``
and ``validateManualPartitionAssignment``), per partition, in request order:

* a topic or partition that does not exist: UNKNOWN_TOPIC_OR_PARTITION;
* null replicas (cancel): NO_REASSIGNMENT_IN_PROGRESS, with a null message
  (``ApiError.fromThrowable`` drops a message equal to the code's own);
* an empty list, a broker that is not registered (any id but this node's,
  checked in ascending order) or a broker named twice:
  INVALID_REPLICA_ASSIGNMENT;
* [this node]: success, the partition already being there (no change record).

An empty topic list gets ``QuorumController``'s early answer, a fresh
response whose error message keeps the generated default "" (not null).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS
VERSIONS = (0, 0)
_INVALID = ErrorCode.INVALID_REPLICA_ASSIGNMENT


def _check(node: NodeServices, name: str, p: Any) -> tuple[int, str | None]:
    topic = node.metadata.topic(name)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}."
    if not 0 <= p.partition_index < topic.count:
        return (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"Unable to find partition {name}:{p.partition_index}.")
    if p.replicas is None:
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
    if not p.replicas:
        return _INVALID, "The manual partition assignment includes an empty replica list."
    previous = None
    for broker_id in sorted(p.replicas):
        if broker_id != node.node_id:
            return _INVALID, (f"The manual partition assignment includes broker {broker_id}, "
                              "but no such broker is registered.")
        if broker_id == previous:
            return _INVALID, (f"The manual partition assignment includes the broker "
                              f"{previous} more than once.")
        previous = broker_id
    return 0, None


def _partition(node: NodeServices, name: str, p: Any) -> dict[str, Any]:
    code, message = _check(node, name, p)
    return {"partition_index": p.partition_index, "error_code": code, "error_message": message}


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> Any:
    if node.cluster is not None and body.topics:
        return _in_cluster(node, body)
    if not body.topics:
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": "", "responses": []}
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": [
        {"name": t.name, "partitions": [_partition(node, t.name, p) for p in t.partitions]}
        for t in body.topics]}


async def _in_cluster(node: NodeServices, body: Any) -> dict[str, Any]:
    """A cluster: the active controller moves the replicas (Kafka's
    ZooKeeper-mode onPartitionReassignment); another node answers
    NOT_CONTROLLER, so the client asks it."""
    controller = node.cluster.controller  # type: ignore[union-attr]
    if not controller.active:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER,
                "error_message": None, "responses": []}
    targets = {(t.name, p.partition_index): None if p.replicas is None else list(p.replicas)
               for t in body.topics for p in t.partitions}
    _, results = await controller.reassign(targets)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": results[(t.name, p.partition_index)][0],
             "error_message": results[(t.name, p.partition_index)][1]}
            for p in t.partitions]}
        for t in body.topics]}
