"""Errors of the log layer, named after Kafka's (the broker maps them to error codes)."""

from __future__ import annotations

from pylog.errors import PylogError


class LogError(PylogError):
    """Base of the storage engine's errors."""


class OffsetOutOfRangeError(LogError):
    """A read or truncation at an offset outside [log start offset, log end offset]."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int,
                 what: str = "") -> None:
        super().__init__(f"offset {offset} is out of range [{log_start_offset}, "
                         f"{log_end_offset}]{' for ' + what if what else ''}")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordBatchTooLargeError(LogError):
    """A batch larger than max.message.bytes or than a whole segment."""


class RecordSetTooLargeError(RecordBatchTooLargeError):
    """An append larger than a whole segment (segment.bytes): Kafka's
    RecordBatchTooLargeException, RECORD_LIST_TOO_LARGE to a producer."""


class InvalidOffsetError(LogError):
    """An index entry or batch whose offset does not follow the previous one."""


class IndexFullError(LogError):
    """An append to an index that has no free slot (the segment should have rolled)."""


class LogClosedError(LogError):
    """An operation on a log that was closed or deleted."""


class CorruptRecordError(LogError):
    """A batch header in a segment that cannot be a batch (Kafka's
    CorruptRecordException): its size below the v2 header, its magic not 2,
    or its bytes past the segment's end.  Reads that meet it before the batch
    they look for fail with it (CORRUPT_MESSAGE to the fetcher) rather than
    skipping the rest of the segment.  ``segment`` and ``position`` say where."""

    def __init__(self, message: str, segment: str, position: int) -> None:
        super().__init__(message)
        self.segment = segment
        self.position = position
