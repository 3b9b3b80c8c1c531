"""ListOffsets: earliest (-2), latest (-1), max timestamp (-3) or the first offset at a time."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pylog.log.errors import CorruptRecordError
from pylog.log.log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)
from pylog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.LIST_OFFSETS
VERSIONS = (1, 7)
NO_EPOCH = -1  # current_leader_epoch: the client does not know it (and before v4)
CONSUMER_REPLICA_ID = -1  # a client's request; brokers send their id, -2 is a debug tool

_log = logging.getLogger(__name__)


def _refused(index: int, code: int) -> dict[str, Any]:
    return {"partition_index": index, "error_code": code,
            "old_style_offsets": [], "timestamp": -1, "offset": -1}


def epoch_error(current: int, leader: int) -> int:
    """Kafka's Partition.checkCurrentLeaderEpoch (ListOffsets, Fetch,
    OffsetForLeaderEpoch): a client behind the leader's epoch is fenced; one
    ahead of it knows of a leader this node is not yet."""
    if current == NO_EPOCH or current == leader:
        return 0
    return ErrorCode.FENCED_LEADER_EPOCH if current < leader else ErrorCode.UNKNOWN_LEADER_EPOCH


def log_corrupt_read(exc: CorruptRecordError, topic: str, partition: int) -> None:
    """The log line of a read (Fetch, ListOffsets) that met a corrupt batch:
    the partition, the segment file and the position, so an operator can
    find it (``pylog dump-log``) and restore the segment from a replica."""
    _log.error("Corrupt batch in %s-%d: segment %s, position %d: %s", topic, partition,
               exc.segment, exc.position, exc)


def _partition(node: NodeServices, topic: str, p: Any, version: int,
               committed: bool, replica_id: int = CONSUMER_REPLICA_ID) -> dict[str, Any]:
    index = p.partition_index
    log = node.replicas.leader_log(topic, index)
    if type(log) is int:
        return _refused(index, log)
    error = epoch_error(p.current_leader_epoch, log.leader_epoch)
    if error:
        return _refused(index, error)
    ts = p.timestamp
    # Kafka's lastFetchableOffset: read_committed sees up to the last stable
    # offset (before an open transaction), read_uncommitted the high watermark,
    # a broker (a follower finding the leader's log end) the log end.
    fetchable = (log.last_stable_offset if committed else log.high_watermark
                 if replica_id == CONSUMER_REPLICA_ID else log.log_end_offset)
    if ts == LATEST_TIMESTAMP:  # = LEO on one node, without open transactions
        found_ts, offset = -1, fetchable
    elif ts == MAX_TIMESTAMP and version < 7:
        return _refused(index, ErrorCode.UNSUPPORTED_VERSION)
    else:
        try:
            found = log.offset_for_timestamp(ts)
        except CorruptRecordError as exc:  # KafkaApis: Errors.forException
            log_corrupt_read(exc, topic, index)
            return _refused(index, ErrorCode.CORRUPT_MESSAGE)
        found_ts, offset = (found.timestamp, found.offset) if found else (-1, -1)
        if ts in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            found_ts = -1
        elif committed and offset >= fetchable:
            found_ts, offset = -1, -1
    return {"partition_index": index, "error_code": 0,
            "old_style_offsets": [offset] if offset >= 0 else [],
            "timestamp": found_ts, "offset": offset, "leader_epoch": 0}


def _duplicates(body: Any) -> set[tuple[str, int]]:
    seen: set[tuple[str, int]] = set()
    dups: set[tuple[str, int]] = set()
    for t in body.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            (dups if tp in seen else seen).add(tp)
    return dups


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    v = ctx.api_version
    # As Kafka: every row of a partition named more than once is INVALID_REQUEST.
    dups = _duplicates(body)
    if body.replica_id == CONSUMER_REPLICA_ID and body.isolation_level not in (0, 1):
        # IsolationLevel.forId throws IllegalArgumentException("Unknown isolation
        # level"); KafkaApis reads a consumer's level (v2+) for each partition
        # in turn, inside the try that makes any exception that partition's
        # error: UNKNOWN_SERVER_ERROR on every row that is not a duplicate.
        return {"throttle_time_ms": 0, "topics": [
            {"name": t.name, "partitions": [
                _refused(p.partition_index, ErrorCode.INVALID_REQUEST
                         if (t.name, p.partition_index) in dups
                         else ErrorCode.UNKNOWN_SERVER_ERROR)
                for p in t.partitions]}
            for t in body.topics]}
    committed = body.isolation_level == 1 and body.replica_id == CONSUMER_REPLICA_ID
    return {"throttle_time_ms": 0, "topics": [
        {"name": t.name, "partitions": [
            _refused(p.partition_index, ErrorCode.INVALID_REQUEST)
            if (t.name, p.partition_index) in dups
            else _partition(node, t.name, p, v, committed, body.replica_id)
            for p in t.partitions]}
        for t in body.topics]}
