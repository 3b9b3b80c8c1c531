"""ElectLeaders: every partition already has its preferred leader, this node.

As Kafka 3.6's controller (``ReplicationControlManager.electLeaders``, answered
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


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    requested = body.topic_partitions
    if body.election_type not in ELECTION_TYPES:
        message = f"Unknown election type {body.election_type}"
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST,
                "replica_election_results": [
                    {"topic": t.topic, "partition_result": [
                        _result(p, ErrorCode.INVALID_REQUEST, message) for p in t.partitions]}
                    for t in requested or ()]}
    if requested is None:
        results = [{"topic": name, "partition_result": []}
                   for name in node.metadata.topic_names()]
    else:
        results = [{"topic": t.topic, "partition_result": [
            _elect(node, t.topic, p) for p in t.partitions]} for t in requested]
    return {"throttle_time_ms": 0, "error_code": 0, "replica_election_results": results}
