"""The sparse time index of a segment (Kafka's ``TimeIndex``).

12-byte big-endian entries: the largest timestamp seen so far in the segment
(int64) and the offset, relative to the segment base (int32), of the batch
holding it.  Timestamps and offsets never decrease, so "largest entry with
timestamp <= target" bounds where the first record at or after the target
can be.  The last slot is kept free for the entry written when the segment
stops being active, so ``is_full`` is one entry early, as in Kafka.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from pylog._native import index as _native
from pylog.log.errors import IndexFullError, InvalidOffsetError
from pylog.log.index_file import CorruptIndexError, IndexFile

_ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(IndexFile):
    entry_size = 12

    def is_full(self) -> bool:
        return self.entries >= self.max_entries - 1

    def entry(self, slot: int) -> TimestampOffset:
        ts, rel = _native.time_entry(self.buffer, slot)
        return TimestampOffset(ts, self.base_offset + rel)

    @property
    def last_entry(self) -> TimestampOffset:
        if not self.entries:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(self.entries - 1)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The largest entry with timestamp <= target, or (NO_TIMESTAMP, base offset)."""
        slot = _native.time_lookup(self.buffer, self.entries, target_timestamp)
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(slot)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append when ``timestamp`` is larger than the last entry's (Kafka's rule)."""
        if not skip_full_check and self.is_full():
            raise IndexFullError(f"attempt to append to a full time index {self.path.name}")
        last = self.last_entry
        if self.entries and offset < last.offset:
            raise InvalidOffsetError(f"attempt to append offset {offset} to {self.path.name} "
                                     f"whose last offset is {last.offset}")
        if self.entries and timestamp < last.timestamp:
            raise InvalidOffsetError(f"attempt to append timestamp {timestamp} to "
                                     f"{self.path.name} whose last is {last.timestamp}")
        if timestamp > last.timestamp and self.entries < self.max_entries:
            self.reserve(self.entries + 1)
            _ENTRY.pack_into(self._mm, self.entries * 12, timestamp, offset - self.base_offset)
            self.entries += 1

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose offset is >= ``offset``."""
        n = self.entries
        while n and self.entry(n - 1).offset >= offset:
            n -= 1
        self.entries = n

    def sanity_check(self) -> None:
        if self._length % self.entry_size:
            raise CorruptIndexError(f"time index {self.path.name} has length {self._length}, "
                                    "not a multiple of 12")
        if not self.entries:
            return
        last = self.last_entry
        first = self.entry(0)
        if last.offset < self.base_offset or last.timestamp < first.timestamp:
            raise CorruptIndexError(f"time index {self.path.name} ends with {last}, "
                                    f"before its first entry {first} or the base offset")
        if self.entries > 1:
            prev = self.entry(self.entries - 2)
            if prev.timestamp >= last.timestamp or prev.offset > last.offset:
                raise CorruptIndexError(f"time index {self.path.name} is not increasing "
                                        f"at its end: {prev}, {last}")
