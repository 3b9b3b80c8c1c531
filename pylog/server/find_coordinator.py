"""FindCoordinator: a single node coordinates every group and transactional id."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode
from pylog.server.topics import TopicError

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.FIND_COORDINATOR
VERSIONS = (0, 4)


GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
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


def _coordinator(node: NodeServices, key: str, key_type: int) -> dict[str, Any]:
    """A group's coordinator is the leader of its ``__consumer_offsets`` partition
    (``abs(javaHash(group)) % offsets.topic.num.partitions``), created here on
    first use as Kafka does (that partition's log at once, the others' off the
    loop: see ``OffsetsStore.ensure_group``); every partition's leader is this node."""
    if key_type == GROUP_KEY_TYPE:
        try:
            node.groups.store.ensure_group(key)
        except TopicError as exc:  # its partition could not be made (out of descriptors)
            return {"key": key, "node_id": -1, "host": "", "port": -1,
                    "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    "error_message": str(exc)}
    me = node.metadata.broker(node.node_id)
    return {"key": key, "node_id": node.node_id, "host": me.host, "port": me.port,
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
