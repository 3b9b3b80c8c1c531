"""ElectLeaders: preferred (the first replica, if live and in sync) or unclean
(any live replica, when none leads) leaders.

In a cluster the active controller elects (Kafka's ZooKeeper-mode
``onReplicaElection``, pylog.controller.controller.elect_leaders): per
partition ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION or NONE; a node
that is not the controller answers NOT_CONTROLLER, so the client asks it.

On the single node every partition already has its preferred leader, the
node itself, as Kafka 3.6's controller (``ReplicationControlManager.electLeaders``, answered
by ``ControllerApis.handleElectLeaders``):

* an election type other than 0 (PREFERRED) and 1 (UNCLEAN) throws
  InvalidRequestException("Unknown election type N") before anything else:
  ``ElectLeadersRequest.getErrorResponse`` gives INVALID_REQUEST at the top
  and on every requested partition (none when topic_partitions is null);
* each named partition is ELECTION_NOT_NEEDED (its only replica leads, which
  satisfies both types), or UNKNOWN_TOPIC_OR_PARTITION ("No such topic as T",
  "No such partition as T-P"), in request order, repeats included;
* topic_partitions null means every partition: each topic is listed, but the
  partitions whose election is not needed are left out -- here, all of them.

v0 has no election type (PREFERRED) and no top-level error code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.ELECT_LEADERS
VERSIONS = (0, 2)
ELECTION_TYPES = (0, 1)  # PREFERRED, UNCLEAN
UNCLEAN = 1
NOT_NEEDED = "Leader election not needed for topic partition."  # ApiError(ELECTION_NOT_NEEDED)


def _result(index: int, code: int, message: str | None) -> dict[str, Any]:
    return {"partition_id": index, "error_code": code, "error_message": message}


def _elect(node: NodeServices, name: str, index: int) -> dict[str, Any]:
    topic = node.metadata.topic(name)
    if topic is None:
        return _result(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {name}")
    if not 0 <= index < topic.count:
        return _result(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       f"No such partition as {name}-{index}")
    return _result(index, ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED)


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> Any:
    requested = body.topic_partitions
    if body.election_type not in ELECTION_TYPES:
        message = f"Unknown election type {body.election_type}"
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST,
                "replica_election_results": [
                    {"topic": t.topic, "partition_result": [
                        _result(p, ErrorCode.INVALID_REQUEST, message) for p in t.partitions]}
                    for t in requested or ()]}
    if node.cluster is not None:
        return _in_cluster(node, requested, body.election_type == UNCLEAN)
    if requested is None:
        results = [{"topic": name, "partition_result": []}
                   for name in node.metadata.topic_names()]
    else:
        results = [{"topic": t.topic, "partition_result": [
            _elect(node, t.topic, p) for p in t.partitions]} for t in requested]
    return {"throttle_time_ms": 0, "error_code": 0, "replica_election_results": results}


async def _in_cluster(node: NodeServices, requested: Any, unclean: bool) -> dict[str, Any]:
    """A cluster: the active controller elects (Kafka's ZooKeeper-mode
    KafkaApis sends the request there; others answer NOT_CONTROLLER)."""
    controller = node.cluster.controller  # type: ignore[union-attr]
    if not controller.active:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER,
                "replica_election_results": [
                    {"topic": t.topic, "partition_result": [
                        _result(p, ErrorCode.NOT_CONTROLLER, None) for p in t.partitions]}
                    for t in requested or ()]}
    wanted = None if requested is None else [(t.topic, p) for t in requested
                                             for p in t.partitions]
    error, found = await controller.elect_leaders(wanted, unclean)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for topic, partition, code, message in found:
        by_topic.setdefault(topic, []).append(_result(partition, code, message))
    return {"throttle_time_ms": 0, "error_code": error, "replica_election_results": [
        {"topic": t, "partition_result": rows} for t, rows in by_topic.items()]}
