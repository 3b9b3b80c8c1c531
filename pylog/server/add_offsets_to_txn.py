"""AddOffsetsToTxn: a group's offsets partition joins a producer's transaction.

As Kafka: the partition of ``__consumer_offsets`` that holds the group
(created if the topic is not there yet) is added to the transaction like
any other, so the offsets a TxnOffsetCommit writes there count only at the
transaction's COMMIT marker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.coordinator.acked import answer
from pylog.coordinator.offsets_store import OFFSETS_TOPIC
from pylog.protocol import ApiKey, ErrorCode
from pylog.protocol.errors import TopicError
from pylog.server.add_partitions_to_txn import old_fenced

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.ADD_OFFSETS_TO_TXN
VERSIONS = (0, 3)


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> Any:
    try:
        # The group's partition is in the transaction: __consumer_offsets is
        # created on first use here too, so its partition count is settled.
        node.groups.store.create_topic(body.group_id)
    except TopicError:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
    partition = node.groups.store.partition_for(body.group_id)
    return answer(node.txns.add_partitions(body.transactional_id, body.producer_id,
                                           body.producer_epoch, [(OFFSETS_TOPIC, partition)]),
                  lambda code: {"throttle_time_ms": 0,
                                "error_code": old_fenced(code, ctx.api_version)})
