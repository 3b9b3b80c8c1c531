"""DeleteRecords: raise partitions' log start offset (-1: the high watermark).

The records below it stop being readable at once; whole segments below it go
at the next retention run, as in Kafka.  The new start offsets are
checkpointed before answering so that a restart does not bring them back.

As in Kafka, internal topics and topics whose cleanup.policy lacks "delete"
are refused: a compacted log's records are the latest values of their keys
(committed offsets, for __consumer_offsets), not a prefix that may be dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.log import OffsetOutOfRangeError
from pylog.log.errors import LogClosedError
from pylog.protocol import ApiKey, ErrorCode
from pylog.server.produce import INTERNAL_TOPICS

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.DELETE_RECORDS
VERSIONS = (0, 2)
HIGH_WATERMARK = -1


def _refused(index: int, code: int) -> dict[str, Any]:
    return {"partition_index": index, "low_watermark": -1, "error_code": code}


def _partition(node: NodeServices, topic: str, p: Any) -> dict[str, Any]:
    index = p.partition_index
    log = node.replicas.leader_log(topic, index)  # DeleteRecords goes to each leader
    if type(log) is int:
        return _refused(index, log)
    if topic in INTERNAL_TOPICS:  # ReplicaManager.deleteRecordsOnLocalLog
        return _refused(index, ErrorCode.INVALID_TOPIC_EXCEPTION)
    if not log.config.delete:  # Partition.deleteRecordsOnLeader
        return _refused(index, ErrorCode.POLICY_VIOLATION)
    offset = log.high_watermark if p.offset == HIGH_WATERMARK else p.offset
    try:
        low = log.delete_records_before(offset)
    except OffsetOutOfRangeError:
        return _refused(index, ErrorCode.OFFSET_OUT_OF_RANGE)
    except LogClosedError:
        return _refused(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return {"partition_index": index, "low_watermark": low, "error_code": 0}


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    topics = [{"name": t.name, "partitions": [_partition(node, t.name, p)
                                              for p in t.partitions]} for t in body.topics]
    node.logs.checkpoint_log_start_offsets()
    return {"throttle_time_ms": 0, "topics": topics}
