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
lastTimestamp), coordinator epoch -1 and current txn start offset -1 (no
transaction is ever open here).  Partitions are answered in the request's
order, duplicates included; producers by id (Java's HashMap order for ids
below its capacity).

The state is pylog's per-partition producer state (snapshotted with the
log).  It keeps the log append time of LogAppendTime batches, which is the
batch's max timestamp once validated, as Kafka's; for CreateTime batches the
max timestamp is read from the batch's header in the log, so it survives
restarts without a new snapshot field.  A last batch no longer in the log
(deleted below the log start) reports -1, where Kafka still remembers it.
"""

from __future__ import annotations

import os
import struct
from typing import TYPE_CHECKING, Any

from pylog.log import OffsetOutOfRangeError
from pylog.log.errors import LogClosedError
from pylog.protocol import ApiKey, ErrorCode
from pylog.server.producer_state import HEADER_SIZE
from pylog.server.topics import TopicError, validate_name

if TYPE_CHECKING:
    from pylog.log import Log
    from pylog.server.broker import Broker

API_KEY = ApiKey.DESCRIBE_PRODUCERS
VERSIONS = (0, 0)
NO_COORDINATOR_EPOCH = -1  # ProducerStateEntry.empty: no transaction marker written
NO_TXN = -1  # currentTxnFirstOffset empty
UNKNOWN_MESSAGE = "This server does not host this topic-partition."
# Batch header: maxTimestamp at 35, producerId at 43 (see producer_state).
_INT64 = struct.Struct(">q")


def _max_timestamp(log: Log, base_offset: int, producer_id: int) -> int:
    """The max timestamp in the header of the batch at ``base_offset``; -1
    when that batch is no longer in the log."""
    try:
        found = log.read(base_offset, HEADER_SIZE)
        if found.first_offset != base_offset or found.length < HEADER_SIZE:
            return -1
        header = os.pread(found.fd, HEADER_SIZE, found.position)
    except (OffsetOutOfRangeError, LogClosedError, OSError):
        return -1
    if len(header) < HEADER_SIZE or _INT64.unpack_from(header, 43)[0] != producer_id:
        return -1
    return _INT64.unpack_from(header, 35)[0]


def _partition(broker: Broker, topic: str, index: int) -> dict[str, Any]:
    log = broker.logs.get_log(topic, index) if index >= 0 else None
    if log is None:
        return {"partition_index": index, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "error_message": None, "active_producers": []}
    producers = [
        {"producer_id": pid, "producer_epoch": epoch, "last_sequence": last_seq,
         "last_timestamp": append_time if append_time >= 0 or base < 0
         else _max_timestamp(log, base, pid),
         "coordinator_epoch": NO_COORDINATOR_EPOCH, "current_txn_start_offset": NO_TXN}
        for pid, epoch, last_seq, base, append_time
        in broker.producers_of(topic, index).last_batches()]
    return {"partition_index": index, "error_code": 0, "error_message": None,
            "active_producers": producers}


def _refused(indexes: list[int], code: int, message: str | None) -> list[dict[str, Any]]:
    return [{"partition_index": i, "error_code": code, "error_message": message,
             "active_producers": []} for i in indexes]


def _topic(broker: Broker, t: Any) -> dict[str, Any]:
    name = t.name
    try:
        validate_name(name)  # KafkaApis.checkValidTopic
    except TopicError as exc:
        return {"name": name, "partitions": _refused(t.partition_indexes, exc.code, str(exc))}
    if broker.topics.get(name) is None:
        return {"name": name, "partitions": _refused(
            t.partition_indexes, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_MESSAGE)}
    return {"name": name, "partitions": [_partition(broker, name, i)
                                         for i in t.partition_indexes]}


def handle(broker: Broker, header: Any, body: Any) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "topics": [_topic(broker, t) for t in body.topics]}
