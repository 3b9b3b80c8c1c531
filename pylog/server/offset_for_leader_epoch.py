"""OffsetForLeaderEpoch: where a leader epoch ends in this partition's log (KIP-101, KIP-320).

A consumer that resumes from an offset it read under some leader epoch asks
where that epoch ends, to find out whether the log was truncated below its
position since (an unclean leader change); replicas ask the same before
fetching.  The answer is Kafka's ``LeaderEpochFileCache.endOffsetFor`` over
the log's leader epoch cache (pylog.log.leader_epoch_cache):

* the current epoch ends at the log end offset (it is still written to);
* an older one ends where the next newer one starts;
* an epoch below every known one (but -1) ends where the first known starts;
* -1 (undefined) or an epoch above the current one: epoch -1, offset -1.

A log written before the cache existed has no entry yet: it counts as one
epoch, the log's, from its start offset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey
from pylog.server.list_offsets import epoch_error

if TYPE_CHECKING:
    from pylog.log import Log
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH
VERSIONS = (0, 4)
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


def end_offset_for(log: Log, requested: int) -> tuple[int, int]:
    """(epoch, end offset) of the ``requested`` leader epoch in ``log``."""
    if log.epochs.latest_epoch != UNDEFINED_EPOCH:
        return log.epochs.end_offset_for(requested, log.log_end_offset)
    current = log.leader_epoch
    if requested == current:
        return current, log.log_end_offset
    if requested == UNDEFINED_EPOCH or requested > current:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    return requested, log.log_start_offset  # older than the one epoch known


def _partition(node: NodeServices, topic: str, p: Any) -> dict[str, Any]:
    out = {"partition": p.partition, "error_code": 0,
           "leader_epoch": UNDEFINED_EPOCH, "end_offset": UNDEFINED_OFFSET}
    log = node.replicas.leader_log(topic, p.partition)
    if type(log) is int:
        out["error_code"] = log
        return out
    error = epoch_error(p.current_leader_epoch, log.leader_epoch)  # -1 before v2
    if error:
        out["error_code"] = error
        return out
    out["leader_epoch"], out["end_offset"] = end_offset_for(log, p.leader_epoch)
    return out


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "topics": [
        {"topic": t.topic, "partitions": [_partition(node, t.topic, p) for p in t.partitions]}
        for t in body.topics]}
