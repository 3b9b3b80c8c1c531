"""WriteTxnMarkers: transaction markers written into partitions on request.

In Kafka the transaction coordinator sends it to each partition's leader to
end a transaction there, and an operator's ``kafka-transactions.sh abort``
(KIP-664) sends it to end a *hanging* transaction, one that left a partition
unstable with no coordinator left to end it.  On one pylog node the
coordinator writes its markers directly (``Broker.write_marker``); this API
is that same call for a request from outside.

As Kafka 3.6's KafkaApis.handleWriteTxnMarkersRequest, per partition: one
this node does not host is UNKNOWN_TOPIC_OR_PARTITION; an epoch older than
the producer's is INVALID_PRODUCER_EPOCH, a coordinator epoch older than the
producer's last marker's TRANSACTION_COORDINATOR_FENCED (ProducerStateManager's
appendEndTxnMarker); a marker in ``__consumer_offsets`` applies or drops the
transaction's offsets too.  The marker is written as the coordinator's
(acks=all, which one node meets at once).  pylog has no authorizer, so no
ClusterAction check.

In a cluster the coordinator of another node sends it for every partition
of a transaction led here (pylog.server.txn_markers).

One departure, on the single node: a coordinator epoch above this node's
coordinator's (0: the epoch of a ``__transaction_state`` leader that never
moves) is refused with INVALID_REQUEST.  Kafka takes it, and its
coordinator's epoch grows past it in time; here it would fence every later
marker of the producer's transactions in the partition for good, holding its
stable offset (an operator's ``abort --coordinator-epoch 1``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pylog.log.errors import LogClosedError
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


def _write(node: NodeServices, topic: str, partition: int, marker: Any) -> int:
    if node.metadata.topic(topic) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if node.cluster is None and marker.coordinator_epoch > COORDINATOR_EPOCH:
        log.warning("WriteTxnMarkers for producer %d in %s-%d refused: coordinator epoch %d "
                    "is newer than this node's coordinator's (%d)", marker.producer_id, topic,
                    partition, marker.coordinator_epoch, COORDINATOR_EPOCH)
        return ErrorCode.INVALID_REQUEST
    try:
        error = node.replicas.write_marker(topic, partition, marker.producer_id,
                                           marker.producer_epoch, marker.transaction_result,
                                           marker.coordinator_epoch)
    except (OSError, LogClosedError):  # the dir went offline, or the node is stopping
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.NONE if error is None else error


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    return {"markers": [
        {"producer_id": m.producer_id, "topics": [
            {"name": t.name, "partitions": [
                {"partition_index": p, "error_code": _write(node, t.name, p, m)}
                for p in t.partition_indexes]}
            for t in m.topics]}
        for m in body.markers]}
