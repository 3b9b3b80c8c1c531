"""FindCoordinator: a key's coordinator is the leader of its internal topic's partition.

A group's coordinator leads partition ``abs(javaHash(group)) % partitions``
of ``__consumer_offsets``, a transactional id's that of
``__transaction_state``; the node's metadata cache says who leads it.  A
topic still missing is asked for here, as Kafka's AutoTopicCreationManager
does: a single node creates it at once (the logs off the loop, see
``pylog.server.internal_topics``) and answers; a cluster node answers
COORDINATOR_NOT_AVAILABLE until the controller has made it, as it does for a
partition without a leader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.coordinator.offsets_store import OFFSETS_TOPIC
from pylog.coordinator.txn_log import TXN_TOPIC
from pylog.protocol import ApiKey, ErrorCode
from pylog.protocol.errors import TopicError
from pylog.server.metadata_cache import NO_LEADER

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.FIND_COORDINATOR
VERSIONS = (0, 4)


GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
# Errors.COORDINATOR_NOT_AVAILABLE.message(), what Kafka answers with it.
_NOT_AVAILABLE_MESSAGE = "The coordinator is not available."
# Errors.INVALID_REQUEST.message(): what Kafka's getErrorResponse carries.
_INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library "
    "or the message was sent to an incompatible broker. See the broker logs for more details.")


def _unknown_key_type(ctx: RequestContext, body: Any) -> dict[str, Any]:
    """Kafka's answer to a key type other than group or transaction:
    CoordinatorType.forId throws InvalidRequestException, and
    FindCoordinatorRequest.getErrorResponse answers INVALID_REQUEST with no
    node (-1, "", -1), for every key from v4."""
    if ctx.api_version < 4:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST,
                "error_message": _INVALID_REQUEST_MESSAGE, "node_id": -1, "host": "",
                "port": -1}
    return {"throttle_time_ms": 0, "coordinators": [
        {"key": key, "node_id": -1, "host": "", "port": -1,
         "error_code": ErrorCode.INVALID_REQUEST, "error_message": _INVALID_REQUEST_MESSAGE}
        for key in body.coordinator_keys]}


def _not_available(key: str, message: str = _NOT_AVAILABLE_MESSAGE) -> dict[str, Any]:
    return {"key": key, "node_id": -1, "host": "", "port": -1,
            "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "error_message": message}


def _coordinator(node: NodeServices, key: str, key_type: int) -> dict[str, Any]:
    """The leader of ``key``'s partition, as KafkaApis.getCoordinator finds it."""
    coordinator = node.groups if key_type == GROUP_KEY_TYPE else node.txns
    topic = OFFSETS_TOPIC if key_type == GROUP_KEY_TYPE else TXN_TOPIC
    try:
        partition = coordinator.find_partition(key)
    except TopicError as exc:  # it could not be made (out of descriptors, ...)
        return _not_available(key, str(exc))
    if partition is None:  # being created by the controller
        return _not_available(key)
    found = node.metadata.partition(topic, partition)
    leader = node.metadata.broker(found.leader) \
        if found is not None and found.leader != NO_LEADER else None
    if leader is None:  # no leader now, or one that is not alive
        return _not_available(key)
    return {"key": key, "node_id": leader.node_id, "host": leader.host, "port": leader.port,
            "error_code": 0, "error_message": None}


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    if body.key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):  # v0: always 0
        return _unknown_key_type(ctx, body)
    if ctx.api_version < 4:
        found = _coordinator(node, body.key, body.key_type)
        del found["key"]
        return found
    return {"coordinators": [_coordinator(node, key, body.key_type)
                             for key in body.coordinator_keys]}
