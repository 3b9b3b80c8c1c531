"""The sparse offset index of a segment (Kafka's ``OffsetIndex``).

8-byte big-endian entries: offset relative to the segment's base offset
(int32) and the file position (int32) of the batch starting at that offset.
Entries are strictly increasing in both fields; a lookup returns the largest
entry at or before the target, from which the log is scanned forward.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from pylog._native import index as _native
from pylog.log.errors import IndexFullError, InvalidOffsetError
from pylog.log.index_file import CorruptIndexError, IndexFile

_ENTRY = struct.Struct(">ii")


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(IndexFile):
    entry_size = 8

    def entry(self, slot: int) -> OffsetPosition:
        rel, pos = _native.offset_entry(self.buffer, slot)
        return OffsetPosition(self.base_offset + rel, pos)

    @property
    def last_offset(self) -> int:
        return self.entry(self.entries - 1).offset if self.entries else self.base_offset

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The largest entry with offset <= target, or (base offset, 0)."""
        slot = _native.offset_lookup(self.buffer, self.entries, target_offset - self.base_offset)
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        rel, pos = _native.offset_entry(self.buffer, slot)
        return OffsetPosition(self.base_offset + rel, pos)

    def append(self, offset: int, position: int) -> None:
        if self.is_full():
            raise IndexFullError(f"attempt to append to a full index {self.path.name}")
        if self.entries and offset <= self.last_offset:
            raise InvalidOffsetError(f"attempt to append offset {offset} to {self.path.name} "
                                     f"whose last offset is {self.last_offset}")
        self.reserve(self.entries + 1)
        _ENTRY.pack_into(self._mm, self.entries * 8, offset - self.base_offset, position)
        self.entries += 1

    def truncate_to(self, offset: int) -> None:
        """Remove entries at or after ``offset``."""
        slot = _native.offset_lookup(self.buffer, self.entries, offset - self.base_offset)
        if slot < 0:
            self.entries = 0
        elif self.entry(slot).offset == offset:
            self.entries = slot
        else:
            self.entries = slot + 1

    def sanity_check(self, log_size: int) -> None:
        """Kafka's checks plus two cheap ones that catch a zero-filled tail."""
        if self._length % self.entry_size:
            raise CorruptIndexError(f"index file {self.path.name} has length {self._length}, "
                                    "not a multiple of 8")
        if not self.entries:
            return
        last = self.entry(self.entries - 1)
        if last.offset < self.base_offset or last.position >= max(log_size, 1):
            raise CorruptIndexError(f"index file {self.path.name} ends with {last}, "
                                    f"outside the segment (size {log_size})")
        if self.entries > 1:
            prev = self.entry(self.entries - 2)
            if prev.offset >= last.offset or prev.position >= last.position:
                raise CorruptIndexError(f"index file {self.path.name} is not increasing "
                                        f"at its end: {prev}, {last}")
