"""The per-partition log: segments, offset/time indexes, recovery, retention.

Modelled on Kafka's storage classes: :class:`~pylog.log.segment.LogSegment`
(one ``.log`` file and its two indexes), :class:`~pylog.log.log.Log` (one
partition directory), :class:`~pylog.log.loader.LogLoader` (opening and
recovering a directory) and :class:`~pylog.log.manager.LogManager` (one log dir).
"""

from pylog.log.config import LogConfig
from pylog.log.errors import (
    LogError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordSetTooLargeError,
)
from pylog.log.log import AppendResult, FetchSlice, Log, TimestampOffset
from pylog.log.manager import LogManager

__all__ = [
    "AppendResult", "FetchSlice", "Log", "LogConfig", "LogError", "LogManager",
    "OffsetOutOfRangeError", "RecordBatchTooLargeError", "RecordSetTooLargeError",
    "TimestampOffset",
]
