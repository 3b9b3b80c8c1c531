"""DescribeProducers (KIP-664): the producers with state in each partition's log.

As Kafka 3.6's KafkaApis.handleDescribeProducersRequest, per requested topic:
an illegal name is INVALID_TOPIC_EXCEPTION (Topic.validate's message), an
unknown topic UNKNOWN_TOPIC_OR_PARTITION with ``new ApiError(error)``'s
message ("This server does not host this topic-partition."), for each of its
requested partitions.  Otherwise each partition goes to
ReplicaManager.activeProducerState: an unknown partition is
UNKNOWN_TOPIC_OR_PARTITION with a null message (getPartitionOrError), a known
one UnifiedLog.activeProducers: per producer its epoch, the last sequence of
its last batch and that batch's max timestamp (ProducerStateEntry.lastSeq,
lastTimestamp), the coordinator epoch of its last transaction marker (-1:
none) and the first offset of its open transaction (-1: none).  Partitions
are answered in the request's order, duplicates included; producers by id
(Java's HashMap order for ids below its capacity).

The state is pylog's per-partition producer state (snapshotted with the
log), which keeps each producer's last timestamp as Kafka's entry does: the
log append time of a LogAppendTime batch, the header's maxTimestamp of a
CreateTime one (both the batch's max timestamp once validated).  Nothing is
read from the log here.  A producer past ``producer.id.expiration.ms`` is no
longer listed once the periodic check has removed it, as in Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode
from pylog.server.topics import TopicError, validate_name

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.DESCRIBE_PRODUCERS
VERSIONS = (0, 0)
UNKNOWN_MESSAGE = "This server does not host this topic-partition."


def _partition(node: NodeServices, topic: str, index: int) -> dict[str, Any]:
    log = node.replicas.leader_log(topic, index) if index >= 0 else None
    if log is None or type(log) is int:
        return {"partition_index": index, "error_code": log if type(log) is int
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "error_message": None, "active_producers": []}
    state = node.replicas.producer_state(topic, index)
    producers = [
        {"producer_id": pid, "producer_epoch": epoch, "last_sequence": last_seq,
         "last_timestamp": last_timestamp,
         "coordinator_epoch": coordinator_epoch, "current_txn_start_offset": txn_first}
        for pid, epoch, last_seq, last_timestamp, coordinator_epoch, txn_first
        in (state.last_batches() if state is not None else ())]
    return {"partition_index": index, "error_code": 0, "error_message": None,
            "active_producers": producers}


def _refused(indexes: list[int], code: int, message: str | None) -> list[dict[str, Any]]:
    return [{"partition_index": i, "error_code": code, "error_message": message,
             "active_producers": []} for i in indexes]


def _topic(node: NodeServices, t: Any) -> dict[str, Any]:
    name = t.name
    try:
        validate_name(name)  # KafkaApis.checkValidTopic
    except TopicError as exc:
        return {"name": name, "partitions": _refused(t.partition_indexes, exc.code, str(exc))}
    if node.metadata.topic(name) is None:
        return {"name": name, "partitions": _refused(
            t.partition_indexes, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_MESSAGE)}
    return {"name": name, "partitions": [_partition(node, name, i)
                                         for i in t.partition_indexes]}


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "topics": [_topic(node, t) for t in body.topics]}
