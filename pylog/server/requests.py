"""Frames in, responses out: decode, route to the API's handler, encode.

Versions outside what a handler declares are answered as Kafka answers them:
ApiVersions gets a v0 response with UNSUPPORTED_VERSION (and the list of what
is supported); any other API key and version the schemas know gets that API's
response at that version with UNSUPPORTED_VERSION in its error codes (see
:mod:`pylog.server.unsupported`).  Only a frame that does not decode (garbage,
an unknown api key, a version past the schemas) closes the connection, with a
log line giving the reason.

Handlers get the node's collaborators and a request context
(``handle(node, ctx, body)``, see :mod:`pylog.server.context`).  A handler
module that defines ``handle_frame(node, frame)`` instead decodes and encodes
its own frames, natively, at the versions it serves: Produce and Fetch, the
requests that carry the data.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from pylog.errors import ProtocolError
from pylog.net.connection import CloseConnection, Connection, Throttled
from pylog.protocol import (
    ApiKey,
    UnsupportedVersionError,
    decode_request,
    encode_response,
)
from pylog.server import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_client_quotas,
    alter_configs,
    alter_partition_reassignments,
    api_versions,
    controlled_shutdown,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_transactions,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    get_telemetry_subscriptions,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leader_and_isr,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    push_telemetry,
    stop_replica,
    sync_group,
    txn_offset_commit,
    unsupported,
    update_metadata,
    write_txn_markers,
)
from pylog.server.context import RequestContext

if TYPE_CHECKING:
    from pylog.server.context import NodeServices

log = logging.getLogger(__name__)

HANDLER_MODULES = (api_versions, metadata, produce, fetch, list_offsets,
                   offset_for_leader_epoch, create_topics,
                   delete_topics, init_producer_id, find_coordinator, describe_cluster,
                   describe_configs, create_partitions, alter_configs,
                   incremental_alter_configs, describe_log_dirs, delete_records,
                   get_telemetry_subscriptions, push_telemetry,
                   # producers and transactions (pylog.coordinator.transactions)
                   describe_producers, list_transactions, describe_transactions,
                   add_partitions_to_txn, add_offsets_to_txn, end_txn, txn_offset_commit,
                   write_txn_markers,
                   # cluster admin that one node answers
                   describe_acls, create_acls, delete_acls, elect_leaders,
                   list_partition_reassignments, alter_partition_reassignments,
                   # client quotas (pylog.server.client_quotas)
                   describe_client_quotas, alter_client_quotas,
                   # consumer groups and committed offsets
                   join_group, sync_group, heartbeat, leave_group, offset_commit,
                   offset_fetch, list_groups, describe_groups, delete_groups, offset_delete,
                   # a cluster's inter-broker requests (pylog.server.zk_node)
                   leader_and_isr, update_metadata, stop_replica, controlled_shutdown)

_PLAIN = (bytes, list)


def served_versions() -> dict[int, tuple[int, int]]:
    """The API versions this node serves (ApiVersions answers with them)."""
    return {int(m.API_KEY): m.VERSIONS for m in HANDLER_MODULES}


class RequestRouter:
    def __init__(self, node: NodeServices) -> None:
        self.node = node
        self.handlers = {int(m.API_KEY): m.handle for m in HANDLER_MODULES
                         if hasattr(m, "handle")}
        self.frame_handlers = {int(m.API_KEY): m.handle_frame for m in HANDLER_MODULES
                               if hasattr(m, "handle_frame")}
        self.versions = node.api_versions

    def __call__(self, conn: Connection, frame: bytearray) -> Any:
        if len(frame) >= 8:
            key = frame[0] << 8 | frame[1]
            native = self.frame_handlers.get(key)
            if native is not None:
                lo, hi = self.versions[key]
                if lo <= (frame[2] << 8 | frame[3]) <= hi:
                    try:
                        return native(self.node, frame)
                    except ProtocolError as exc:
                        raise _malformed(conn, exc) from None
        try:
            header, body = decode_request(frame, allow_trailing=True)
        except UnsupportedVersionError as exc:
            if exc.api_key == ApiKey.API_VERSIONS and exc.header is not None:
                return api_versions.unsupported(self.node, exc.header.correlation_id)
            # Past the schemas: the body cannot be read, so no error response
            # can name its parts.  Warning level: the default log shows it.
            log.warning("closing connection from %s: %s", conn.peer, exc)
            raise CloseConnection(str(exc)) from None
        except ProtocolError as exc:
            raise _malformed(conn, exc) from None
        key, version = header.api_key, header.api_version
        supported = self.versions.get(key)
        if supported is None or not supported[0] <= version <= supported[1]:
            if key == ApiKey.API_VERSIONS:
                return api_versions.unsupported(self.node, header.correlation_id)
            if key == ApiKey.PRODUCE and getattr(body, "acks", 1) == 0:
                # The client reads no response to acks=0: closing is the only signal.
                log.warning("closing connection from %s: produce v%s (acks=0) is not served",
                            conn.peer, version)
                raise CloseConnection(f"produce v{version} is not supported")
            log.info("api key %s v%s is not served: answering UNSUPPORTED_VERSION", key, version)
            return unsupported.respond(header, body)
        quotas = self.node.quotas
        started = time.perf_counter_ns() if quotas.request.enabled else 0
        result = self.handlers[key](self.node, RequestContext(header, conn.peer), body)
        if result is None or type(result) in _PLAIN:
            return _throttled(quotas, header.client_id, started, result, None) if started \
                else result
        if type(result) is not dict and inspect.isawaitable(result):  # dict: the common case
            return _Finish(header, result, quotas if started else None)
        if started:
            return _throttled(quotas, header.client_id, started, result, header)
        return encode_response(key, version, header.correlation_id, result)


def _throttled(quotas: Any, client_id: str | None, started: int, result: Any,
               header: Any) -> Any:
    """The response, encoded when ``header`` is given (a handler's dict),
    with the request quota's throttle (Kafka's sendResponseMaybeThrottle):
    in the response's throttle_time_ms and on the connection."""
    ms = quotas.record_request(client_id, started)
    if header is not None:
        if ms:
            result["throttle_time_ms"] = ms
        result = encode_response(header.api_key, header.api_version,
                                 header.correlation_id, result)
    return Throttled(result, ms) if ms else result


def _malformed(conn: Connection, exc: ProtocolError) -> CloseConnection:
    """A frame that does not decode: logged (the default log shows warnings),
    then the connection is closed."""
    log.warning("closing connection from %s: malformed request: %s", conn.peer, exc)
    return CloseConnection(f"malformed request: {exc}")


class _Finish:
    """The response to a request whose handler returned an awaitable: that
    result, encoded once it arrives.

    An awaitable object rather than a coroutine: the connection closes one it
    will never await (it went away first), and closing this closes the
    handler's coroutine too -- closing a coroutine that never ran would leave
    the one it was given unawaited ("coroutine '_park' was never awaited").
    """

    __slots__ = ("header", "pending", "quotas")

    def __init__(self, header: Any, pending: Any, quotas: Any = None) -> None:
        self.header = header
        self.pending = pending
        self.quotas = quotas  # the request quota's, when it is on

    def __await__(self) -> Generator[Any, None, Any]:
        pending = self.pending
        # A generator-based coroutine (types.coroutine) has no __await__.
        result = yield from (pending.__await__() if hasattr(pending, "__await__") else pending)
        plain = result is None or type(result) in _PLAIN
        header = self.header
        if self.quotas is not None:
            # The time of the last step (what the handler did after its wait),
            # as Kafka counts a delayed operation's completion on its thread.
            return _throttled(self.quotas, header.client_id, time.perf_counter_ns(), result,
                              None if plain else header)
        if plain:
            return result
        return encode_response(header.api_key, header.api_version, header.correlation_id,
                               result)

    def close(self) -> None:
        close = getattr(self.pending, "close", None)
        if close is not None:
            close()

