"""Which old segments retention deletes (Kafka's ``UnifiedLog.deleteOldSegments``).

Whole segments only, oldest first, and only while each one qualifies: a
segment is kept as soon as one before it is kept.  Three reasons, as in Kafka:

* log start offset: the next segment starts at or below it (DeleteRecords);
* retention.ms: the segment's largest timestamp is older than now - retention.ms;
* retention.bytes: the log is still larger than the limit without it.

Only segments wholly below the high watermark qualify.  The active segment can
qualify (all its data expired); ``Log.delete_segments`` then rolls first so
the log always keeps a segment to append to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pylog.log.config import LogConfig
    from pylog.log.segment import LogSegment

Predicate = Callable[["LogSegment", "LogSegment | None"], bool]


class Log(Protocol):
    """What retention reads and calls of a partition log (pylog.log.log.Log,
    not imported: that module calls this one)."""

    config: LogConfig
    log_start_offset: int

    @property
    def segments(self) -> list[LogSegment]: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def size(self) -> int: ...

    def delete_segments(self, doomed: list[LogSegment], now_ms: int) -> None: ...

    def delete_pending(self, now_ms: int) -> object: ...


def deletable_segments(log: Log, predicate: Predicate) -> list[LogSegment]:
    segments = log.segments
    out: list[LogSegment] = []
    for i, segment in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        upper = nxt.base_offset if nxt is not None else log.log_end_offset
        last_and_empty = nxt is None and segment.size == 0
        if last_and_empty or log.high_watermark < upper or not predicate(segment, nxt):
            break
        out.append(segment)
    return out


def delete_old_segments(log: Log, now_ms: int) -> int:
    deleted = _delete(log, now_ms, _start_offset_breached(log))
    if log.config.delete:
        deleted += _delete(log, now_ms, _size_breached(log))
        deleted += _delete(log, now_ms, _time_breached(log, now_ms))
    log.delete_pending(now_ms)
    return deleted


def _delete(log: Log, now_ms: int, predicate: Predicate | None) -> int:
    if predicate is None:
        return 0
    doomed = deletable_segments(log, predicate)
    log.delete_segments(doomed, now_ms)
    return len(doomed)


def _start_offset_breached(log: Log) -> Predicate:
    start = log.log_start_offset
    return lambda segment, nxt: nxt is not None and nxt.base_offset <= start


def _time_breached(log: Log, now_ms: int) -> Predicate | None:
    retention = log.config.retention_ms
    if retention < 0:
        return None
    return lambda segment, nxt: now_ms - segment.largest_timestamp() > retention


def _size_breached(log: Log) -> Predicate | None:
    limit = log.config.retention_bytes
    if limit < 0 or log.size < limit:
        return None
    excess = [log.size - limit]

    def predicate(segment: LogSegment, nxt: LogSegment | None) -> bool:
        if excess[0] - segment.size >= 0:
            excess[0] -= segment.size
            return True
        return False
    return predicate
