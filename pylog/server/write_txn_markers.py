"""WriteTxnMarkers: transaction markers written into partitions on request.

In Kafka the transaction coordinator sends it to each partition's leader to
end a transaction there, and an operator's ``kafka-transactions.sh abort``
(KIP-664) sends it to end a *hanging* transaction, one that left a partition
unstable with no coordinator left to end it.  pylog's coordinator writes the
markers of the partitions its node leads directly
(:mod:`pylog.server.txn_markers`), the same ``ReplicaManager.write_marker``
this API calls, and sends this request for the others.

As Kafka 3.6's KafkaApis.handleWriteTxnMarkersRequest, per partition: one
this node does not host is UNKNOWN_TOPIC_OR_PARTITION, one it does not lead
NOT_LEADER_OR_FOLLOWER; an epoch older than the producer's is
INVALID_PRODUCER_EPOCH, a coordinator epoch older than the producer's last
marker's TRANSACTION_COORDINATOR_FENCED (ProducerStateManager's
appendEndTxnMarker); a marker in ``__consumer_offsets`` applies or drops the
transaction's offsets too, once written.  The marker is written as the
coordinator's, acks=-1 with Kafka's request.timeout.ms: NOT_ENOUGH_REPLICAS
while the partition has fewer in-sync replicas than its min.insync.replicas,
and the response waits until every marker is in its partition's in-sync
replicas (NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT or
NOT_LEADER_OR_FOLLOWER for one that did not make it, as a produce's), at
once on a single node.  pylog has no authorizer, so no ClusterAction check.

One departure, on the single node: a coordinator epoch above this node's
coordinator's (0: the epoch of a ``__transaction_state`` leader that never
moves) is refused with INVALID_REQUEST.  Kafka takes it, and its
coordinator's epoch grows past it in time; here it would fence every later
marker of the producer's transactions in the partition for good, holding its
stable offset (an operator's ``abort --coordinator-epoch 1``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from pylog.coordinator.internal_topic import REQUEST_TIMEOUT_MS
from pylog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

log = logging.getLogger(__name__)

# The coordinator epoch of a single node's transaction coordinator: the
# leader epoch its __transaction_state partitions are elected at, which
# never moves there.
COORDINATOR_EPOCH = 0

API_KEY = ApiKey.WRITE_TXN_MARKERS
VERSIONS = (0, 1)


def _write(node: NodeServices, topic: str, partition: int, marker: Any
           ) -> int | asyncio.Future[int]:
    if node.metadata.topic(topic) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if node.cluster is None and marker.coordinator_epoch > COORDINATOR_EPOCH:
        log.warning("WriteTxnMarkers for producer %d in %s-%d refused: coordinator epoch %d "
                    "is newer than this node's coordinator's (%d)", marker.producer_id, topic,
                    partition, marker.coordinator_epoch, COORDINATOR_EPOCH)
        return ErrorCode.INVALID_REQUEST
    return node.replicas.write_marker(topic, partition, marker.producer_id,
                                      marker.producer_epoch, marker.transaction_result,
                                      marker.coordinator_epoch, REQUEST_TIMEOUT_MS)


# Per marker, per topic, per partition: its error code, or the future of it.
Written = list[list[list["int | asyncio.Future[int]"]]]


def handle(node: NodeServices, ctx: RequestContext, body: Any
           ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    written: Written = [[[_write(node, t.name, p, m) for p in t.partition_indexes]
                         for t in m.topics] for m in body.markers]
    waiting = [w for m in written for t in m for w in t if isinstance(w, asyncio.Future)]
    if not waiting:
        return _response(body, written)
    return _replicated(body, written, waiting)


async def _replicated(body: Any, written: Written, waiting: list[asyncio.Future[int]]
                      ) -> dict[str, Any]:
    # asyncio.wait: a connection closed meanwhile leaves the writes' waits
    # (and a __consumer_offsets marker's offsets) to finish on their own.
    await asyncio.wait(waiting)
    return _response(body, written)


def _code(written: int | asyncio.Future[int]) -> int:
    if not isinstance(written, asyncio.Future):
        return written
    if written.cancelled() or written.exception() is not None:  # the node stops
        return ErrorCode.REQUEST_TIMED_OUT
    return written.result()


def _response(body: Any, written: Written) -> dict[str, Any]:
    return {"markers": [
        {"producer_id": m.producer_id, "topics": [
            {"name": t.name, "partitions": [
                {"partition_index": p, "error_code": _code(w)}
                for p, w in zip(t.partition_indexes, codes, strict=True)]}
            for t, codes in zip(m.topics, by_topic, strict=True)]}
        for m, by_topic in zip(body.markers, written, strict=True)]}
