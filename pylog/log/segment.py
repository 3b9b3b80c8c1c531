"""One log segment: a ``.log`` file of record batches and its two indexes.

After Kafka's ``LogSegment``.  Batches are appended exactly as they were
validated and stamped (the bytes are written from the caller's buffer, never
copied into Python objects); reads return file positions for ``sendfile``.
Batch headers are walked in native code over a read-only mapping of the file.
"""

from __future__ import annotations

import mmap
import os
import struct
from array import array
from collections.abc import Callable
from pathlib import Path

from pylog._native import index as _native
from pylog.errors import CorruptBatchError
from pylog.io import pagecache
from pylog.io.backend import IOBackend
from pylog.io.posix import PosixBackend
from pylog.log.config import INT_MAX, LogConfig
from pylog.log.errors import CorruptRecordError, InvalidOffsetError
from pylog.log.offset_index import OffsetIndex, OffsetPosition
from pylog.log.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

# Recovery validates the file in windows so the per-batch results of
# ``records.validate`` never pile up for a whole 1 GiB segment.
RECOVERY_WINDOW = 64 * 1024 * 1024
# Disk blocks reserved past the end of the active segment (see _reserve): a
# quarter of what it holds, within these bounds, never past segment.bytes.
RESERVE_MIN = 1024 * 1024
RESERVE_MAX = 16 * 1024 * 1024
RESERVE_SLACK = 64 * 1024
_BATCH_LENGTH = struct.Struct(">i")
_MAX_TS = struct.Struct(">q")
_ATTRIBUTES = struct.Struct(">h")
_index_append = _native.index_append
_index_write = _native.index_write
_ST_NEXT_OFFSET = _native.ST_NEXT_OFFSET
_ST_OFFSET_ENTRIES = _native.ST_OFFSET_ENTRIES
_MIN_BATCH = 61  # the smallest record batch: its header
_ST_TIME_ENTRIES = _native.ST_TIME_ENTRIES


def file_name(base_offset: int, suffix: str) -> str:
    """Kafka's 20-digit zero-padded name of a segment file."""
    return f"{base_offset:020d}{suffix}"


SWAP_END_SUFFIX = ".swap-end"


def swap_end_path(directory: Path, base_offset: int) -> Path:
    """pylog's marker beside a cleaner swap: the offset where the segments it
    replaces end (see ``Log.replace_segments`` and the loader)."""
    return Path(directory) / file_name(base_offset, SWAP_END_SUFFIX)


class LogSegment:
    """A segment of a partition log starting at ``base_offset``."""

    def __init__(self, directory: Path, base_offset: int, config: LogConfig,
                 backend: IOBackend, time_ms: Callable[[], int], *,
                 file_suffix: str = "") -> None:
        self.dir = Path(directory)
        self.base_offset = base_offset
        self.config = config
        self.backend = backend
        self._time_ms = time_ms
        self.log_path = self.dir / (file_name(base_offset, LOG_SUFFIX) + file_suffix)
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self._open(config, time_ms, file_suffix)
        except BaseException:
            # Out of descriptors (EMFILE) at the second index, say: the ones
            # already open would otherwise leak with every failed attempt.
            for index in (getattr(self, "offset_index", None),
                          getattr(self, "time_index", None)):
                if index is not None:
                    index.close_handler()
            os.close(self._fd)
            self._fd = -1
            raise

    def _open(self, config: LogConfig, time_ms: Callable[[], int], file_suffix: str) -> None:
        base_offset = self.base_offset
        st = os.fstat(self._fd)
        self._size = st.st_size
        # Blocks allocated up to here (see _reserve).  A segment that was
        # active when the process died may still hold its reserve: counting
        # it lets the next roll or close give it back.  (Block rounding and
        # extent blocks are not a reserve: no truncate for those.)
        allocated = st.st_blocks * 512
        self._reserved = allocated if allocated > self._size + RESERVE_SLACK else self._size
        self._can_reserve = True
        self._rmap: mmap.mmap | None = None
        self.offset_index = OffsetIndex(
            self.dir / (file_name(base_offset, INDEX_SUFFIX) + file_suffix), base_offset,
            config.segment_index_bytes)
        self.time_index = TimeIndex(
            self.dir / (file_name(base_offset, TIME_INDEX_SUFFIX) + file_suffix), base_offset,
            config.segment_index_bytes)
        self.created_ms = time_ms()
        # Page-cache bookkeeping (Log.drop_cold_cache): when a fetch last read
        # this segment (its creation until then), and when its pages were
        # dropped (None: not since the last read).
        self.last_read_ms = self.created_ms
        self.cache_dropped_at: int | None = None
        self._rolling_ts: int | None = None
        # Kafka's rollJitterMs: this segment's own draw from segment.jitter.ms.
        self.roll_jitter_ms = config.random_segment_jitter()
        self._state = array("q", bytes(8 * _native.STATE_SIZE))
        self._spare = array("q", bytes(8 * _native.STATE_SIZE))  # see append()
        # Exactly the posix backend (not a subclass that may wrap its calls):
        # append() then writes from native code.
        self._native_write = type(self.backend) is PosixBackend
        self._contiguous = not config.compact  # offsets may have gaps only when compacted
        self._load_state()

    # -- state -------------------------------------------------------------

    def _load_state(self) -> None:
        """Running values for the indexer, as Kafka derives them on open: the
        max timestamp from the time index's last entry, the next offset by
        scanning from the last offset index entry."""
        self._reset_state(self.read_next_offset())

    def _reset_state(self, next_offset: int) -> None:
        """The indexer's running values from the indexes as they stand (on
        open, after a truncation), with ``next_offset`` the next to append."""
        st = self._state
        last = self.time_index.last_entry
        st[_native.ST_MAX_TS] = last.timestamp
        st[_native.ST_OFFSET_OF_MAX_TS] = last.offset
        st[_native.ST_TIME_LAST_TS] = last.timestamp
        st[_native.ST_TIME_LAST_OFFSET] = last.offset
        st[_native.ST_OFFSET_ENTRIES] = self.offset_index.entries
        st[_native.ST_TIME_ENTRIES] = self.time_index.entries
        st[_native.ST_BYTES_SINCE] = 0
        st[_native.ST_NEXT_OFFSET] = next_offset

    def read_next_offset(self) -> int:
        """The offset after the last batch (the segment base when empty)."""
        if self._size == 0:
            return self.base_offset
        start = self.offset_index.lookup(self.offset_index.last_offset).position
        scratch = array("q", bytes(8 * _native.STATE_SIZE))
        scratch[_native.ST_NEXT_OFFSET] = -1
        _native.index_batches(self._read_map(self._size), start, self._size, start,
                              self.base_offset, 1 << 62, None, 0, None, 0, scratch, False)
        nxt = scratch[_native.ST_NEXT_OFFSET]
        return self.base_offset if nxt < 0 else nxt

    @property
    def size(self) -> int:
        return self._size

    @property
    def fd(self) -> int:
        return self._fd

    def fileno(self) -> int:
        return self._fd

    @property
    def next_offset(self) -> int:
        return self._state[_native.ST_NEXT_OFFSET]

    @property
    def max_timestamp_so_far(self) -> TimestampOffset:
        return TimestampOffset(self._state[_native.ST_MAX_TS],
                               self._state[_native.ST_OFFSET_OF_MAX_TS])

    def largest_timestamp(self) -> int:
        """The largest batch timestamp, or the file's mtime when it has none
        (Kafka's rule, used by time retention)."""
        ts = self._state[_native.ST_MAX_TS]
        return ts if ts >= 0 else self.last_modified_ms()

    def last_modified_ms(self) -> int:
        return int(os.stat(self.log_path).st_mtime * 1000)

    # -- append ------------------------------------------------------------

    def append(self, buf: memoryview, largest_timestamp: int) -> None:
        """Write validated, stamped batches at the end of the file and index them.

        Indexing runs first, over the caller's buffer: it rejects batches whose
        offsets do not continue the segment before a byte reaches the file.
        The indexer leaves its running values in a scratch state vector that
        is adopted only once the write succeeded, so a failed write leaves the
        segment's state (and the indexes' entry counts) untouched: the index
        bytes it wrote lie past the committed entries.  With the plain posix
        backend, indexing, ``pwrite`` and the commit are one native call.
        """
        self.try_append(buf, largest_timestamp)

    def try_append(self, buf: memoryview, largest_timestamp: int, max_offset: int = -1,
                   jitter_ms: int = 0, now_ms: int | None = None,
                   clock: Callable[[], int] | None = None) -> bool:
        """The log's append path: :meth:`roll_due` and :meth:`append` in one call.

        With ``max_offset`` >= 0 (the last offset of ``buf``), returns False
        and writes nothing when the segment must roll first; otherwise appends
        as :meth:`append` and returns True.  The common case (room, indexes not
        full, batch timestamps recent) is decided inline; anything else asks
        :meth:`roll_due`, which holds the rule.
        """
        position = self._size
        n = len(buf)
        cfg = self.config
        oi, ti = self.offset_index, self.time_index
        if max_offset >= 0:
            rolling = self._rolling_ts
            if not (position <= cfg.segment_bytes - n
                    and max_offset - self.base_offset <= INT_MAX
                    and oi.entries < oi._length // 8 and ti.entries < ti._length // 12 - 1
                    and (position == 0 or (rolling is not None and rolling >= 0
                                           and largest_timestamp - rolling
                                           <= cfg.segment_ms - jitter_ms))):
                if self.roll_due(largest_timestamp, max_offset, n, jitter_ms, now_ms, clock):
                    return False
        if position + n > self._reserved and self._can_reserve:
            self._reserve(position + n)
        # At most one index entry per batch, and per index.interval.bytes:
        # their blocks are allocated before the indexer stores them.
        interval = cfg.index_interval_bytes
        most = n // (interval if interval > _MIN_BATCH else _MIN_BATCH) + 2
        if oi.entries + most > oi.room or ti.entries + most > ti.room:
            oi.reserve(oi.entries + most)
            ti.reserve(ti.entries + most)
        st = self._state
        if self._native_write:
            if _index_write(buf, self._fd, position, self.base_offset,
                            cfg.index_interval_bytes, oi._mm, ti._mm, st, self._spare,
                            self._contiguous):
                self._reject(buf)
        else:
            new = self._spare
            if _index_append(buf, position, self.base_offset, cfg.index_interval_bytes,
                             oi._mm, ti._mm, st, new, self._contiguous):
                self._reject(buf)
            try:
                written = self.backend.pwritev(self._fd, [buf], position)
                if written != n:  # short write: let the backend finish it
                    self.backend.write_all(self._fd, [buf[written:]], position + written)
            except BaseException:
                os.ftruncate(self._fd, position)
                raise
            self._spare = st
            self._state = st = new
        oi.entries = st[_ST_OFFSET_ENTRIES]
        ti.entries = st[_ST_TIME_ENTRIES]
        if position == 0:
            self._rolling_ts = largest_timestamp
        self._size = position + n
        return True

    def _reserve(self, end: int) -> None:
        """Allocate disk blocks ahead of the appends, keeping the file size.

        On ext4 an append into blocks that are not allocated yet pays for
        delayed allocation page by page (reservation, extent status tree,
        quota): about a third of the CPU of writing into the page cache.
        Blocks allocated a few MiB ahead in one call skip that.  The file
        size stays the data's size, so readers, recovery and retention see
        nothing different; the blocks past the end are given back when the
        segment rolls or closes (and by any truncation).
        """
        start = self._reserved
        ahead = min(RESERVE_MAX, max(RESERVE_MIN, self._size // 4))
        stop = max(end, min(end + ahead, self.config.segment_bytes))
        if pagecache.reserve(self._fd, start, stop - start):
            self._reserved = stop
        else:  # not on this filesystem (or the disk is full): stop asking
            self._can_reserve = False

    def _release_reserve(self) -> None:
        """Give back the blocks reserved past the end of the data."""
        if self._reserved > self._size and self._fd >= 0:
            os.ftruncate(self._fd, self._size)  # ext4 frees blocks past EOF
        self._reserved = self._size

    def _reject(self, buf: memoryview) -> None:
        """Raise the error for batches that do not continue this segment."""
        scratch = array("q", self._state)
        end, status = _native.index_batches(buf, 0, len(buf), self._size, self.base_offset,
                                            1 << 62, None, 0, None, 0, scratch,
                                            not self.config.compact)
        raise InvalidOffsetError(
            f"batches at offset {self._state[_ST_NEXT_OFFSET]} do not continue segment "
            f"{self.base_offset} (status {status}, {end} of {len(buf)} bytes)")

    def _sync_index_entries(self) -> None:
        self.offset_index.set_entries(self._state[_native.ST_OFFSET_ENTRIES])
        self.time_index.set_entries(self._state[_native.ST_TIME_ENTRIES])

    # -- read --------------------------------------------------------------

    def _read_map(self, end: int) -> mmap.mmap | bytes:
        """A read-only mapping covering ``[0, end)``; remapped when the file grew.

        An old mapping is just dropped: a native scan still holding it keeps it
        alive through its buffer export.
        """
        if end <= 0:
            return b""
        if self._rmap is None or len(self._rmap) < end:
            self._rmap = mmap.mmap(self._fd, self._size, access=mmap.ACCESS_READ)
        return self._rmap

    def translate_offset(self, offset: int, start_position: int = 0
                         ) -> tuple[int, int, int] | None:
        """(position, base offset, size) of the first batch whose last offset >= ``offset``."""
        start = max(start_position, self.offset_index.lookup(offset).position)
        pos, base, size, length = _native.scan_batches(self._read_map(self._size), start,
                                                       self._size, offset, 0)
        if pos == -2:
            self._corrupt(base, size, length)
        return None if pos < 0 else (pos, base, size)

    def _corrupt(self, position: int, size: int, magic: int) -> None:
        """Raise CorruptRecordError for the batch header a native walk
        stopped at (Kafka's FileLogInputStream messages where it has them)."""
        path = self.log_path
        if size == -1:
            what = (f"Found a torn batch header ({self._size - position} bytes) at the end "
                    f"of file {path}")
        elif size < 14:
            what = (f"Found record size {size} smaller than minimum record overhead (14) "
                    f"in file {path}.")
        elif size + 12 < 61:
            what = (f"Found record size {size} smaller than the v2 batch header (49) "
                    f"in file {path}.")
        elif magic != 2:
            what = f"Invalid magic {magic} of a batch in file {path}."
        else:
            what = (f"Found record size {size} past the end of file {path} "
                    f"({self._size} bytes).")
        raise CorruptRecordError(f"{what} (position {position})", str(path), position)

    def read(self, start_offset: int, max_bytes: int, max_offset: int,
             min_one_message: bool = True) -> tuple[int, int, int] | None:
        """Whole batches from the one holding ``start_offset``: (position, length,
        base offset of the first batch), or None when no batch here holds it.

        Stops before ``max_bytes`` would be exceeded and before batches starting
        at or past ``max_offset``; with ``min_one_message`` the first batch is
        returned whole even when larger than ``max_bytes`` so a consumer always
        makes progress (Kafka's KIP-74 rule).
        """
        if self._size == 0:
            return None
        start = self.offset_index.lookup(start_offset).position
        pos, base, first_size, length = _native.scan_batches(
            self._read_map(self._size), start, self._size, start_offset, max_bytes, max_offset)
        if pos < 0:
            if pos == -2:
                self._corrupt(base, first_size, length)
            return None
        if not min_one_message and first_size > max_bytes:
            length = 0
        return pos, length, base

    def read_is_cached(self, start_offset: int, max_bytes: int) -> bool:
        """Whether a :meth:`read` from ``start_offset`` finds every page it
        touches in the page cache.

        A read walks batch headers from the index entry below ``start_offset``
        to the batch holding it (at most ``index.interval.bytes`` plus one
        batch) and on over ``max_bytes``; that walk faults cold pages in from
        disk. The fetch path asks this first so a cold read goes to a thread
        and does not stall the event loop.
        """
        if self._size == 0:
            return True
        start = self.offset_index.lookup(start_offset).position
        return self.range_is_cached(start, self.config.index_interval_bytes + max(max_bytes, 0))

    def range_is_cached(self, position: int, length: int) -> bool:
        """Whether ``[position, position + length)`` of the log file is in the
        page cache, checked on the segment's read mapping by sampling a few
        pages (see ``pagecache.mapped_all_resident``): cheap enough for every
        partition of every fetch. A closed segment has nothing to read: True."""
        if self._fd < 0 or length <= 0 or self._size == 0:
            return True
        return pagecache.mapped_all_resident(self._read_map(self._size), position, length)

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int
                                 ) -> TimestampOffset | None:
        """The first record with timestamp >= ``timestamp`` at or after ``starting_offset``.

        As Kafka's ``FileRecords.searchForTimestamp``: records below
        ``starting_offset`` (the log start offset) are no candidates, so the
        answer is a live record and its own timestamp, or None.
        """
        if self._size == 0:
            return None
        entry = self.time_index.lookup(timestamp)
        start = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        buf = self._read_map(self._size)
        while True:
            pos, base, last, offset, ts = _native.find_timestamp(buf, start, self._size,
                                                                 timestamp)
            if pos < 0:
                if pos == -2:
                    self._corrupt(base, *_header_fields(buf, base, self._size))
                return None
            if last >= starting_offset:
                if offset >= starting_offset:
                    return TimestampOffset(ts, offset)
                if offset >= 0 and _ATTRIBUTES.unpack_from(buf, pos + 21)[0] & 0x08:
                    # LogAppendTime: every record of the batch has its time
                    return TimestampOffset(ts, starting_offset)
                # compressed, or the first match lies below the start: decode
                found = _first_record_at(buf, pos, timestamp, base, starting_offset)
                if found is not None:
                    return TimestampOffset(found[1], found[0])
            start = pos + _BATCH_LENGTH.unpack_from(buf, pos + 8)[0] + 12

    # -- roll / flush ------------------------------------------------------

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Kafka's rule: by message timestamps when the segment has one, else
        by wall-clock time since the segment was created."""
        if self._rolling_ts is None and self._size > 0:
            self._rolling_ts = _MAX_TS.unpack_from(self._read_map(self._size), 35)[0]
        if self._rolling_ts is not None and self._rolling_ts >= 0:
            return message_timestamp - self._rolling_ts
        return now_ms - self.created_ms

    def should_roll(self, now_ms: int, max_timestamp: int, max_offset: int,
                    messages_size: int, jitter_ms: int = 0) -> bool:
        """Kafka's ``LogSegment.shouldRoll``: full by size, old by time, an
        index full, or offsets past int32 of the base."""
        return self.roll_due(max_timestamp, max_offset, messages_size, jitter_ms, now_ms)

    def roll_due(self, max_timestamp: int, max_offset: int, messages_size: int,
                 jitter_ms: int, now_ms: int | None = None,
                 clock: Callable[[], int] | None = None) -> bool:
        """:meth:`should_roll` for the append path, run once per append: the
        ``is_full`` checks and ``time_waited_for_roll`` are inlined, and the
        wall clock (``now_ms``, else ``clock()``, else the segment's clock) is
        read only when the rule needs it (a segment without batch timestamps)."""
        cfg = self.config
        size = self._size
        if size > cfg.segment_bytes - messages_size or max_offset - self.base_offset > INT_MAX:
            return True
        oi, ti = self.offset_index, self.time_index
        # OffsetIndex.is_full() / TimeIndex.is_full() (the last time slot is reserved)
        if oi.entries >= oi._length // 8 or ti.entries >= ti._length // 12 - 1:
            return True
        if size == 0:
            return False
        rolling = self._rolling_ts
        if rolling is not None and rolling >= 0:
            return max_timestamp - rolling > cfg.segment_ms - jitter_ms
        if now_ms is None:
            now_ms = (clock or self._time_ms)()
        return self.time_waited_for_roll(now_ms, max_timestamp) > cfg.segment_ms - jitter_ms

    def on_become_inactive(self) -> None:
        """At roll: record the final max timestamp in the reserved slot and trim
        the preallocated indexes to their entries."""
        ts = self.max_timestamp_so_far
        self.time_index.maybe_append(ts.timestamp, ts.offset, skip_full_check=True)
        self._state[_native.ST_TIME_ENTRIES] = self.time_index.entries
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._release_reserve()

    def resize_indexes(self, size: int) -> None:
        """Make room again in the indexes of the segment that becomes active on load."""
        self.offset_index.resize(size)
        self.time_index.resize(size)
        self._state[_native.ST_OFFSET_ENTRIES] = self.offset_index.entries
        self._state[_native.ST_TIME_ENTRIES] = self.time_index.entries

    def drop_cache(self) -> None:
        """Ask the kernel to evict this segment's clean pages (``.log`` only).

        The read mapping goes first: the kernel does not evict pages that are
        mapped, and the header walks of earlier reads mapped them (it is
        mapped again by the next read).  Dirty pages stay: flush first.
        """
        self._rmap = None
        if self._fd >= 0:
            pagecache.drop_cache(self._fd)

    def flush(self) -> None:
        self.backend.fdatasync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()

    # -- recovery / truncation ---------------------------------------------

    def recover(self, gaps: bool = False) -> int:
        """Rebuild the indexes from the log and cut it at the first bad batch.

        Every batch is checked (size, magic, CRC32C, record count) by
        ``records.validate``; offsets must continue one another (with gaps only
        in compacted logs, or with ``gaps``: a segment the cleaner rewrote) --
        the CRC does not cover the base offset, so this catches a damaged
        offset field too.  Returns the bytes truncated.
        """
        self.offset_index.reset(self.config.segment_index_bytes)
        self.time_index.reset(self.config.segment_index_bytes)
        self._rmap = None
        valid = self._validated_prefix()
        st = self._state
        for i in range(_native.STATE_SIZE):
            st[i] = 0
        st[_native.ST_MAX_TS] = NO_TIMESTAMP
        st[_native.ST_TIME_LAST_TS] = NO_TIMESTAMP
        st[_native.ST_OFFSET_OF_MAX_TS] = self.base_offset
        st[_native.ST_TIME_LAST_OFFSET] = self.base_offset
        st[_native.ST_NEXT_OFFSET] = self.base_offset
        oi, ti = self.offset_index, self.time_index
        interval = self.config.index_interval_bytes
        most = valid // (interval if interval > _MIN_BATCH else _MIN_BATCH) + 2  # see try_append
        oi.reserve(most)
        ti.reserve(most + 1)  # and the entry maybe_append adds below
        end, _status = _native.index_batches(
            self._read_map(self._size), 0, valid, 0, self.base_offset,
            self.config.index_interval_bytes, oi._mm, oi.max_entries, ti._mm, ti.max_entries,
            st, not (self.config.compact or gaps))
        self._sync_index_entries()
        truncated = self._size - end
        if truncated > 0:
            self._truncate_file(end)
        ts = self.max_timestamp_so_far
        self.time_index.maybe_append(ts.timestamp, ts.offset, skip_full_check=True)
        st[_native.ST_TIME_ENTRIES] = self.time_index.entries
        st[_native.ST_TIME_LAST_TS] = self.time_index.last_entry.timestamp
        self._rolling_ts = None
        return truncated

    def _validated_prefix(self) -> int:
        """Bytes from the start of the file that hold whole batches passing
        ``records.validate``, checked window by window."""
        from pylog.records import validate_summary

        size = self._size
        if size == 0:
            return 0
        buf = memoryview(self._read_map(size))
        try:
            pos, window = 0, RECOVERY_WINDOW
            while pos < size:
                end = min(size, pos + window)
                try:
                    # Not strict: a batch the cleaner rewrote keeps its lastOffsetDelta
                    # over fewer records, and their offset deltas have gaps.
                    validate_summary(buf[pos:end], strict=False)
                except CorruptBatchError as exc:
                    bad = pos + max(exc.position, 0)
                    if end < size and self._cut_by_window(buf, bad, end):
                        if bad == pos:  # one batch larger than the window
                            window *= 2
                        pos = bad
                        continue
                    return bad
                pos = end
            return size
        finally:
            buf.release()

    @staticmethod
    def _cut_by_window(buf: memoryview, bad: int, end: int) -> bool:
        """True when the failure at ``bad`` is only the window ending mid-batch."""
        if bad + 12 > end:
            return True
        length = _BATCH_LENGTH.unpack_from(buf, bad + 8)[0]
        return length > 0 and bad + 12 + length > end

    def truncate_to(self, offset: int) -> int:
        """Remove the batches holding ``offset`` and after; returns bytes removed."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        if mapping is None:
            return 0
        position, base, _ = mapping
        removed = self._size - position
        self._truncate_file(position)
        self._reset_state(base)
        if self._size == 0:
            self.created_ms = self._time_ms()
            self._rolling_ts = None
        return removed

    def _truncate_file(self, size: int) -> None:
        # Drop the mapping first: pages past the new end would fault (SIGBUS).
        self._rmap = None
        os.ftruncate(self._fd, size)
        self._size = size
        self._reserved = size

    # -- life cycle --------------------------------------------------------

    def close(self) -> None:
        """Clean close: final time index entry, indexes trimmed, files closed."""
        if self._fd < 0:
            return
        ts = self.max_timestamp_so_far
        self.time_index.maybe_append(ts.timestamp, ts.offset, skip_full_check=True)
        self.offset_index.close()
        self.time_index.close()
        self._rmap = None
        self._release_reserve()
        os.close(self._fd)
        self._fd = -1

    def close_handlers(self) -> None:
        self.offset_index.close_handler()
        self.time_index.close_handler()
        self._rmap = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename_suffix(self, suffix: str) -> None:
        """Add ``suffix`` (e.g. ``.deleted``) to the three file names."""
        new_log = self.log_path.with_name(file_name(self.base_offset, LOG_SUFFIX) + suffix)
        os.replace(self.log_path, new_log)
        self.log_path = new_log
        self.offset_index.rename(self.offset_index.path.with_name(
            file_name(self.base_offset, INDEX_SUFFIX) + suffix))
        self.time_index.rename(self.time_index.path.with_name(
            file_name(self.base_offset, TIME_INDEX_SUFFIX) + suffix))

    def delete(self) -> None:
        self.close_handlers()
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            path.unlink(missing_ok=True)

    def lookup_offset(self, offset: int) -> OffsetPosition:
        return self.offset_index.lookup(offset)

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self._size}, path={self.log_path})"


def _first_record_at(buf: object, position: int, timestamp: int, base: int,
                     min_offset: int = -1) -> tuple[int, int] | None:
    """Offset and timestamp of the first record >= ``timestamp`` at or after
    ``min_offset`` in a batch, decoded (ListOffsets only: decoding is fine off
    the produce/fetch paths); None when no record qualifies."""
    from pylog import records

    size = _BATCH_LENGTH.unpack_from(buf, position + 8)[0] + 12
    view = memoryview(buf)[position:position + size]
    try:
        for batch in records.read_batches(view):
            for rec in batch.records():
                ts = getattr(rec, "timestamp", -1)
                offset = getattr(rec, "offset", base)
                if ts >= timestamp and offset >= min_offset:
                    return offset, ts
    finally:
        view.release()
    return None


def _header_fields(buf: mmap.mmap | bytes, position: int, end: int) -> tuple[int, int]:
    """(size field, magic) of the batch header at ``position``, -1 for what
    lies past ``end``."""
    size = _BATCH_LENGTH.unpack_from(buf, position + 8)[0] if position + 12 <= end else -1
    magic = buf[position + 16] if position + 17 <= end else -1
    return size, magic
