"""One partition's log: an ordered list of segments in ``<topic>-<partition>/``.

After Kafka's ``UnifiedLog``/``LocalLog``.  Appends validate the batches,
stamp their offsets into the caller's buffer and write that buffer as is; reads
return a :class:`FetchSlice` (segment file, position, length) for ``sendfile``.
A lock serialises appends, rolls, truncation and retention; reads take it
only for the index lookup and header walk.
"""

from __future__ import annotations

import bisect
import logging
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from pylog.io import pagecache
from pylog.io.backend import IOBackend, get_backend
from pylog.log.config import LONG_MAX, LogConfig
from pylog.log.drop_behind import DropBehind
from pylog.log.durable import fsync_dir, write_atomically
from pylog.log.errors import (
    InvalidOffsetError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordSetTooLargeError,
)
from pylog.log.leader_epoch_cache import LeaderEpochCache
from pylog.log.segment import DELETED_SUFFIX, SWAP_SUFFIX, LogSegment, swap_end_path
from pylog.log.time_index import TimestampOffset
from pylog.records import stamp, validate, validate_summary
from pylog.records.recompress import needs_recompression, recompress, target_codec

_log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
# KIP-405's earliest offset kept locally: the log start, with no tiered storage.
EARLIEST_LOCAL_TIMESTAMP = -4
_NO_LIMIT = 2**63 - 1
# Batch header fields the follower append reads (big-endian, at their offsets).
_EPOCH = struct.Struct(">i")       # partitionLeaderEpoch @12
_LAST_DELTA = struct.Struct(">i")  # lastOffsetDelta @23
_MAX_TS = struct.Struct(">q")      # maxTimestamp @35


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class AppendResult(NamedTuple):
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 unless message.timestamp.type=LogAppendTime


# AppendResult(a, b, c) runs the namedtuple's Python-level __new__; the append
# path builds the tuple directly (half the cost, same type).
_new_tuple = tuple.__new__


@dataclass(frozen=True, slots=True)
class FetchSlice:
    """Whole batches of one segment file: send ``length`` bytes from ``position``.

    The segment reference keeps its file open: a segment deleted by retention
    is only closed after ``file.delete.delay.ms``, as in Kafka, so a slice in
    flight stays readable.
    """

    segment: LogSegment | None
    position: int
    length: int
    first_offset: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int

    @property
    def fd(self) -> int:
        return self.segment.fd if self.segment is not None else -1

    def fileno(self) -> int:
        return self.fd

    def is_cached(self) -> bool:
        """True when every page of the slice is in the page cache, so sending it
        cannot block on the disk; the broker reads a slice that is not off the
        event loop.  An empty slice reads nothing: True."""
        if self.length <= 0 or self.segment is None:
            return True
        return self.segment.range_is_cached(self.position, self.length)


def parse_dir_name(name: str) -> tuple[str, int]:
    """``<topic>-<partition>`` -> (topic, partition)."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        raise ValueError(f"log directory name {name!r} is not <topic>-<partition>")
    return topic, int(part)


class Log:
    """A partition log.  Open one with :meth:`Log.open`."""

    def __init__(self, directory: Path, config: LogConfig, segments: Sequence[LogSegment], *,
                 log_start_offset: int, recovery_point: int, backend: IOBackend,
                 time_ms: Callable[[], int], leader_epoch: int = 0) -> None:
        self.dir = Path(directory)
        self.topic, self.partition = parse_dir_name(self.dir.name)
        self.config = config
        self.backend = backend
        self.time_ms = time_ms
        # Which leader epoch wrote which offsets (leader-epoch-checkpoint):
        # entries past the recovered log end go, as Kafka's loader drops them.
        self.epochs = LeaderEpochCache(self.dir)
        self._lock = threading.RLock()
        self._flush_lock = threading.RLock()  # see flush()
        self._segments: list[LogSegment] = list(segments)
        self._bases: list[int] = [s.base_offset for s in self._segments]
        self._next_offset = self._segments[-1].next_offset
        self.epochs.truncate_from_end(self._next_offset)
        # The epoch this node appends under as leader (set by LeaderAndIsr in
        # a cluster); on a single node the newest it wrote, else 0.
        self.leader_epoch = max(leader_epoch, self.epochs.latest_epoch)
        self.log_start_offset = max(log_start_offset, self._segments[0].base_offset)
        self.recovery_point = min(recovery_point, self._next_offset)
        self._high_watermark = self._next_offset
        self.hw_follows_leo = True  # single node: everything appended is committed
        # First offset of the oldest open transaction (set by the broker's
        # producer state; None: none open): read_committed fetches stop there
        # and the cleaner does not go past it.
        self.first_unstable_offset: int | None = None
        self._unflushed_messages = 0
        self._last_flush_ms = time_ms()
        self._rolled_up_to = -1
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._closed = False
        self._log_append_time = config.message_timestamp_type == "LogAppendTime"
        self._timestamp_window = config.timestamp_window_ms
        self._codec = target_codec(config.compression_type)
        self._keys = config.compact
        # Called as (log, new base offset) by every roll, under the log's lock
        # and on the rolling thread: the broker takes a producer-state snapshot
        # there, as Kafka's UnifiedLog.roll does (it must only queue work).
        self.roll_listener: Callable[[Log, int], None] | None = None
        # Keeps only the newest bytes in the page cache (the log manager sets
        # it from log.cache.drop.behind.bytes; None: Kafka's behaviour).
        self.drop_behind: DropBehind | None = None

    @classmethod
    def open(cls, directory: Path, config: LogConfig | None = None, *,
             time_ms: Callable[[], int] = wall_clock_ms, backend: IOBackend | None = None,
             recovery_point: int = 0, log_start_offset: int = 0,
             had_clean_shutdown: bool = False, cleaned_to: int = 0) -> Log:
        """Open (creating when missing) and, after an unclean stop, recover a log.

        ``cleaned_to``: the log cleaner's checkpoint; segments below it may
        have offset gaps whatever the topic's cleanup.policy is now."""
        from pylog.log.loader import LogLoader

        config = config or LogConfig()
        backend = backend or get_backend("posix")
        loaded = LogLoader(Path(directory), config, backend, time_ms,
                           recovery_point=recovery_point, log_start_offset=log_start_offset,
                           had_clean_shutdown=had_clean_shutdown,
                           cleaned_to=cleaned_to).load()
        try:
            return cls(directory, config, loaded.segments,
                       log_start_offset=loaded.log_start_offset,
                       recovery_point=loaded.recovery_point, backend=backend, time_ms=time_ms)
        except BaseException:
            for segment in loaded.segments:
                segment.close_handlers()
            raise

    # -- offsets -----------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        with self._lock:
            if not self.log_start_offset <= offset <= self._next_offset:
                raise OffsetOutOfRangeError(offset, self.log_start_offset, self._next_offset,
                                            "high watermark")
            self._high_watermark = offset

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: the high watermark, or the first offset of the oldest
        open transaction below it, never below the log start (records of an
        open transaction that DeleteRecords or retention removed; Kafka's
        updateFirstUnstableOffset)."""
        unstable = self.first_unstable_offset
        hw = self._high_watermark
        return hw if unstable is None or unstable >= hw else max(unstable, self.log_start_offset)

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def unflushed_messages(self) -> int:
        return self._unflushed_messages

    # -- append ------------------------------------------------------------

    def append(self, records: bytearray | memoryview | bytes,
               leader_epoch: int | None = None) -> AppendResult:
        """Validate, stamp offsets into ``records`` and append it unchanged otherwise.

        A buffer failing validation raises ``CorruptBatchError`` and nothing is
        written.  ``records`` should be writable (offsets are stamped in
        place); read-only bytes are copied once first.
        """
        if type(records) is bytearray:  # the usual case: already a writable byte buffer
            view = records
        else:
            view = memoryview(records)
            if view.readonly:
                view = memoryview(bytearray(view))
            elif view.ndim != 1 or view.itemsize != 1:
                view = view.cast("B")
        size = len(view)
        # One native pass: sizes, magic, CRC32C, counts; no per-batch objects.
        # A compressed batch is decompressed and its records walked (deep), as
        # Kafka's LogValidator does: a consumer cannot get past a bad one.
        # The topic's rules for each record: timestamps within
        # message.timestamp.before/after.max.ms, keys on a compacted topic.
        window = self._timestamp_window
        limits = None
        if window is not None:
            t = self.time_ms()
            limits = (max(t - window[0], -LONG_MAX - 1), min(t + window[1], LONG_MAX))
        # And, as Kafka, a CreateTime batch's maxTimestamp is its records' largest.
        batches, messages, _, max_ts = validate_summary(
            view, deep=True, timestamps=limits, keys=self._keys, fix_max_timestamp=True)
        if not batches:
            raise ValueError("append of an empty record set")
        config = self.config
        self._check_batch_sizes(view, batches, "")
        if self._codec is not None and needs_recompression(view, self._codec):
            # compression.type, as Kafka's LogValidator; the limit holds for
            # what is stored as well as for what was sent (UnifiedLog.append).
            view = recompress(view, self._codec)
            size = len(view)
            self._check_batch_sizes(view, batches, " once re-encoded")
        if size > config.segment_bytes:
            raise RecordSetTooLargeError(
                f"append of {size} bytes exceeds segment.bytes={config.segment_bytes}")
        with self._lock:
            if self._closed:
                self._check_open()
            base = self._next_offset
            epoch = self.leader_epoch if leader_epoch is None else leader_epoch
            segment = self._segments[-1]
            if self._log_append_time:
                now = append_time = max_ts = self.time_ms()
                next_offset = stamp(view, base, epoch, now)
            else:
                now = None  # read by the roll rule only when it needs the clock
                append_time = -1
                next_offset = stamp(view, base, epoch)
            jitter = segment.roll_jitter_ms  # drawn when the segment was created
            if not segment.try_append(view, max_ts, next_offset - 1, jitter, now, self.time_ms):
                self.roll().try_append(view, max_ts)
            if epoch > self.epochs.latest_epoch:  # the first append under a new epoch
                self.epochs.assign(epoch, base)
            drop_behind = self.drop_behind
            if drop_behind is not None:
                drop_behind.appended(self._segments[-1], size)
            self._next_offset = next_offset
            if self.hw_follows_leo:
                self._high_watermark = next_offset
            self._unflushed_messages += messages
            flush_now = self._unflushed_messages >= config.flush_messages
        if flush_now:  # flush.messages: fsync before the append is answered
            self.flush(next_offset)
        return _new_tuple(AppendResult, (base, next_offset - 1, append_time))

    def append_as_follower(self, records: bytearray | memoryview | bytes
                           ) -> tuple[int, list[int]]:
        """Append the leader's batches unchanged, offsets and epochs kept (Kafka's
        appendAsFollower): each batch checked (sizes, magic, CRC32C; no
        restamping, no per-record Python; the bytes are written as they came,
        read-only buffers too), the first one starting at this log's end.
        (the new log end offset, each batch's position in ``records``).  The
        high watermark is the replica manager's to move."""
        view = records if type(records) is bytearray else memoryview(records)
        infos = validate(view)  # one native pass; per-batch facts, never per record
        if not infos:
            return self._next_offset, []
        with self._lock:
            self._check_open()
            base = self._next_offset
            first = infos[0].base_offset
            # A compacted log may skip offsets (Kafka allows any first offset
            # at or past the end; the segments of other logs are contiguous).
            if first < base or (first != base and not self.config.compact):
                raise InvalidOffsetError(
                    f"{self.topic}-{self.partition}: the leader's batches start at offset "
                    f"{infos[0].base_offset}, this log ends at {base}")
            last = _LAST_DELTA.unpack_from(view, infos[-1].position + 23)[0] \
                + infos[-1].base_offset
            max_ts = max(_MAX_TS.unpack_from(view, i.position + 35)[0] for i in infos)
            segment = self._segments[-1]
            if not segment.try_append(view, max_ts, last, segment.roll_jitter_ms, None,
                                      self.time_ms):
                self.roll().try_append(view, max_ts)
            latest = self.epochs.latest_epoch
            for info in infos:  # a new epoch starts at its first batch
                epoch = _EPOCH.unpack_from(view, info.position + 12)[0]
                if epoch > latest:
                    self.epochs.assign(epoch, info.base_offset)
                    latest = epoch
            self._next_offset = last + 1
            self._unflushed_messages += sum(i.record_count for i in infos)
            flush_now = self._unflushed_messages >= self.config.flush_messages
        if flush_now:
            self.flush(last + 1)
        return last + 1, [i.position for i in infos]

    def _check_batch_sizes(self, view, batches: int, when: str) -> None:
        """max.message.bytes holds for each batch (one pass over the headers
        only when the whole append is over it)."""
        limit, size = self.config.max_message_bytes, len(view)
        if size > limit and (batches == 1 or any(i.size > limit for i in validate(view))):
            raise RecordBatchTooLargeError(
                f"batch larger than max.message.bytes={limit}{when} ({size} bytes)")

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset.

        The old one gets its final time index entry and trimmed indexes, and
        its dirty pages are handed to the kernel for write-back right away
        (sync_file_range, on a background thread: submitting a whole segment
        takes its caller hundreds of milliseconds) so the later fsync that
        advances the recovery point finds little left to write.
        """
        with self._lock:
            self._check_open()
            active = self._segments[-1]
            if active.size == 0 and active.base_offset == self._next_offset:
                return active  # an empty segment at this offset already exists
            active.on_become_inactive()
            active.last_read_ms = self.time_ms()  # the tail until now: not cold yet
            pagecache.writeback_in_background(active.fd, 0, active.size)
            segment = LogSegment(self.dir, self._next_offset, self.config, self.backend,
                                 self.time_ms)
            self._segments.append(segment)
            self._bases.append(segment.base_offset)
            self._rolled_up_to = segment.base_offset
            listener = self.roll_listener
            if listener is not None:
                try:
                    listener(self, segment.base_offset)
                except Exception:  # a snapshot is an optimisation: never fail the append
                    _log.exception("roll listener of %s failed", self.dir.name)
            return segment

    # -- read --------------------------------------------------------------

    def read_is_cached(self, start_offset: int, max_bytes: int) -> bool:
        """Whether :meth:`read` from ``start_offset`` would touch only cached
        pages (see :meth:`LogSegment.read_is_cached`); out-of-range offsets
        count as cached, :meth:`read` answers them without touching data."""
        with self._lock:
            if not self.log_start_offset <= start_offset < self._next_offset:
                return True
            i = max(bisect.bisect_right(self._bases, start_offset) - 1, 0)
            return self._segments[i].read_is_cached(start_offset, max_bytes)

    def read(self, start_offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_message: bool = True) -> FetchSlice:
        """Whole batches from ``start_offset``, at most ``max_bytes`` (but the
        first batch whole), none starting at or after ``max_offset`` (pass the
        high watermark for consumers)."""
        with self._lock:
            self._check_open()
            leo, lso = self._next_offset, self.log_start_offset
            if start_offset < lso or start_offset > leo:
                raise OffsetOutOfRangeError(start_offset, lso, leo, f"{self.topic}-"
                                            f"{self.partition}")
            limit = leo if max_offset is None else min(max_offset, leo)
            i = max(bisect.bisect_right(self._bases, start_offset) - 1, 0)
            while start_offset < limit and i < len(self._segments):
                segment = self._segments[i]
                found = segment.read(start_offset, max_bytes, limit, min_one_message)
                if found is not None:
                    segment.last_read_ms = self.time_ms()  # see drop_cold_cache
                    segment.cache_dropped_at = None
                    position, length, first = found
                    return FetchSlice(segment, position, length, first, lso, leo,
                                      self._high_watermark)
                i += 1  # offset in a gap (compaction, log start): the next segment
            active = self._segments[-1]
            return FetchSlice(active, active.size, 0, -1, lso, leo, self._high_watermark)

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """ListOffsets: -2 earliest (and -4, earliest local), -1 latest, -3 max
        timestamp, else the first offset whose record timestamp is >=
        ``timestamp`` (None when none is)."""
        with self._lock:
            if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                return TimestampOffset(-1, self.log_start_offset)
            if timestamp == LATEST_TIMESTAMP:
                return TimestampOffset(-1, self._next_offset)
            if timestamp == MAX_TIMESTAMP:
                best = max((s.max_timestamp_so_far for s in self._segments),
                           key=lambda t: t.timestamp)
                return best if best.timestamp >= 0 else TimestampOffset(-1, -1)
            for segment in self._segments:
                if segment.size and segment.largest_timestamp() >= timestamp:
                    found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
                    if found is not None:
                        return found
            return None

    # -- log start offset, truncation -------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: raise the log start offset to ``offset`` (<= high
        watermark).  Whole segments below it go at the next retention run."""
        with self._lock:
            if offset > self._high_watermark or offset < 0:
                raise OffsetOutOfRangeError(offset, self.log_start_offset,
                                            self._high_watermark, "delete records")
            if offset > self.log_start_offset:
                self.log_start_offset = offset
                self.epochs.truncate_from_start(offset)  # Kafka's maybeIncrementLogStartOffset
            return self.log_start_offset

    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding offset >= ``offset`` (follower truncation)."""
        with self._lock:
            if offset >= self._next_offset:
                # Nothing to cut, but an epoch this node began as leader at
                # the log end with nothing written in it must go (Kafka's
                # truncateTo does the same): left, it would make every fetch
                # from the new leader diverge again.
                self.epochs.truncate_from_end(self._next_offset)
                return
            if offset <= self._segments[0].base_offset:
                self.truncate_fully_and_start_at(offset)
                return
            while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                self._delete_segment_now(self._segments.pop())
                self._bases.pop()
            active = self._segments[-1]
            active.truncate_to(offset)
            active.resize_indexes(self.config.segment_index_bytes)
            self._next_offset = active.next_offset
            self.epochs.truncate_from_end(self._next_offset)
            self._high_watermark = min(self._high_watermark, self._next_offset)
            self.recovery_point = min(self.recovery_point, self._next_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        with self._lock:
            for segment in self._segments:
                self._delete_segment_now(segment)
            segment = LogSegment(self.dir, offset, self.config, self.backend, self.time_ms)
            self._segments = [segment]
            self._bases = [offset]
            self._next_offset = offset
            self.log_start_offset = offset
            self._high_watermark = offset
            self.recovery_point = offset
            self.epochs.truncate_from_end(offset)

    # -- retention ---------------------------------------------------------

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention.ms / retention.bytes / log start offset; returns the
        number of segments deleted."""
        from pylog.log.retention import delete_old_segments

        with self._lock:
            self._check_open()
            return delete_old_segments(self, self.time_ms() if now_ms is None else now_ms)

    def delete_segments(self, doomed: list[LogSegment], now_ms: int) -> None:
        """Remove the oldest ``doomed`` segments; never leaves the log without one.

        Files are renamed ``*.deleted`` now and removed after
        ``file.delete.delay.ms``: a fetch already holding a slice of them can
        still finish (Kafka's asynchronous delete).
        """
        if not doomed:
            return
        if len(doomed) == len(self._segments):
            self.roll()
        for segment in doomed:
            self._segments.remove(segment)
            segment.rename_suffix(DELETED_SUFFIX)
            self._pending_deletes.append((now_ms + self.config.file_delete_delay_ms, segment))
        self._bases = [s.base_offset for s in self._segments]
        self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
        self.epochs.truncate_from_start(self.log_start_offset)
        self.recovery_point = max(self.recovery_point, self.log_start_offset)
        self.delete_pending(now_ms)

    def replace_segments(self, old: list[LogSegment], cleaned: LogSegment,
                         now_ms: int) -> bool:
        """Put ``cleaned`` in place of ``old``, a run of inactive segments
        starting at the same base offset (the log cleaner's output, written as
        ``*.cleaned`` files and flushed).  As Kafka's ``replaceSegments``:

        1. ``<base>.swap-end`` records where the run ends, then ``cleaned``
           is renamed ``*.swap``; once its ``.log`` has that name the swap is
           committed (the loader finishes it after a crash);
        2. ``old`` are renamed ``*.deleted`` and removed after
           ``file.delete.delay.ms`` (a fetch holding a slice still reads them);
        3. the swap files take the segment names.

        False, with nothing changed, when ``old`` is no longer a run of this
        log's inactive segments (retention or a deletion came first).
        """
        with self._lock:
            if self._closed:
                return False
            segments = self._segments
            i = next((k for k, s in enumerate(segments) if s is old[0]), -1)
            run = segments[i:i + len(old)]
            if (i < 0 or i + len(old) >= len(segments) or len(run) != len(old)
                    or any(a is not b for a, b in zip(run, old, strict=True))):
                return False
            # Where the replaced run ends, for the loader: the cleaned segment's
            # own last offset may be lower (its last records were removed).
            write_atomically(swap_end_path(self.dir, cleaned.base_offset),
                             f"{segments[i + len(old)].base_offset}\n".encode())
            cleaned.rename_suffix(SWAP_SUFFIX)
            fsync_dir(self.dir)
            for segment in old:
                segment.rename_suffix(DELETED_SUFFIX)
                self._pending_deletes.append((now_ms + self.config.file_delete_delay_ms,
                                              segment))
            cleaned.rename_suffix("")
            fsync_dir(self.dir)
            swap_end_path(self.dir, cleaned.base_offset).unlink(missing_ok=True)
            segments[i:i + len(old)] = [cleaned]
            self._bases = [s.base_offset for s in segments]
            return True

    def delete_pending(self, now_ms: int) -> None:
        """Remove ``*.deleted`` segment files whose delay has passed."""
        keep = []
        for due, segment in self._pending_deletes:
            if due <= now_ms:
                segment.delete()
            else:
                keep.append((due, segment))
        self._pending_deletes = keep

    def _delete_segment_now(self, segment: LogSegment) -> None:
        segment.delete()

    # -- flushing ----------------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fdatasync the segments holding [recovery point, offset) and move the
        recovery point there (default: the log end offset).

        The fsyncs run outside the log's lock: one can take as long as the disk
        needs for a segment's dirty pages, and appends (on the event loop) must
        not wait behind it. ``_flush_lock`` keeps flushes in order; a segment
        closed meanwhile (retention, topic deletion) needs no flush. Callers
        must not hold ``_lock`` (lock order: ``_flush_lock``, then ``_lock``).
        """
        with self._flush_lock:
            with self._lock:
                self._check_open()
                target = self._next_offset if offset is None else min(offset,
                                                                      self._next_offset)
                start = self.recovery_point
                todo = []
                for i, segment in enumerate(self._segments):
                    end = self._bases[i + 1] if i + 1 < len(self._bases) else _NO_LIMIT
                    if segment.base_offset < target and end > start:
                        todo.append(segment)
            new_files = any(segment.base_offset >= start for segment in todo)
            for segment in todo:
                try:
                    segment.flush()
                except (OSError, ValueError):
                    if segment.fd >= 0:
                        raise
            if new_files and target > start:  # new segment files: make their names durable
                fsync_dir(self.dir)
            with self._lock:
                self.recovery_point = max(self.recovery_point, target)
                if target >= self._next_offset:
                    self._unflushed_messages = 0
                self._last_flush_ms = self.time_ms()

    def flush_rolled(self) -> bool:
        """Flush the segments rolled since the last flush (Kafka flushes a
        rolled segment asynchronously); True when something was flushed."""
        with self._lock:
            if self._closed or self._rolled_up_to <= self.recovery_point:
                return False
            rolled = self._rolled_up_to
        self.flush(rolled)
        return True

    def flush_due(self, now_ms: int) -> bool:
        """Periodic flushing: segments rolled since the last call (Kafka flushes
        a rolled segment asynchronously), and flush.ms when set."""
        with self._lock:
            if self._closed:
                return False
            rolled = self._rolled_up_to if self._rolled_up_to > self.recovery_point else None
            due = bool(self._unflushed_messages
                       and now_ms - self._last_flush_ms >= self.config.flush_ms)
        if due:
            self.flush()
        elif rolled is not None:
            self.flush(rolled)
        return due or rolled is not None

    def set_config(self, config: LogConfig) -> None:
        """New topic configs (AlterConfigs) from the next append, roll or
        retention run on. The active segment takes them too (segment.bytes,
        segment.ms and index.interval.bytes decide its roll); older segments
        keep theirs, as their indexes were sized with them."""
        with self._lock:
            self.config = config
            self._log_append_time = config.message_timestamp_type == "LogAppendTime"
            self._timestamp_window = config.timestamp_window_ms
            self._codec = target_codec(config.compression_type)
            self._keys = config.compact
            self._segments[-1].config = config

    # -- page cache --------------------------------------------------------

    def drop_cold_cache(self, now_ms: int, idle_ms: int) -> int:
        """Drop from the page cache the segments no reader needs: inactive,
        wholly below the recovery point (flushed, so the pages are clean and
        ``POSIX_FADV_DONTNEED`` can evict them) and not read for ``idle_ms``.

        The active segment is never dropped.  A segment is advised once per
        idle period: again only after a read.  Returns the bytes advised
        (file sizes; the kernel may keep pages still mapped or in use).
        ``idle_ms`` < 0 disables dropping.
        """
        if idle_ms < 0:
            return 0
        with self._lock:
            if self._closed:
                return 0
            segments = self._segments
            candidates = [
                s for i, s in enumerate(segments[:-1])
                if segments[i + 1].base_offset <= self.recovery_point
                and now_ms - s.last_read_ms >= idle_ms and s.size > 0
                and s.cache_dropped_at is None]
        dropped = 0
        for segment in candidates:
            # One segment per lock hold: appends wait for one fadvise at most,
            # and retention cannot close the file under the call.
            with self._lock:
                if self._closed or segment not in self._segments or segment.fd < 0:
                    continue
                segment.drop_cache()
                segment.cache_dropped_at = now_ms
                dropped += segment.size
        return dropped

    # -- life cycle --------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Closed, or deleted with its topic."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self.dir.name} is closed")

    def close(self) -> None:
        """Clean close: flush everything, trim indexes (so the next open needs no
        recovery), close files."""
        with self._flush_lock, self._lock:  # flush()'s lock order
            if self._closed:
                return
            self.flush()
            for segment in self._segments:
                segment.close()
            for _, segment in self._pending_deletes:
                segment.delete()
            self._pending_deletes = []
            self._closed = True

    def close_handlers(self) -> None:
        """Close files without flushing (the directory is being deleted)."""
        with self._lock:
            for segment in self._segments:
                segment.close_handlers()
            for _, segment in self._pending_deletes:
                segment.close_handlers()
            self._closed = True

    def __repr__(self) -> str:
        return (f"Log({self.dir.name}, start={self.log_start_offset}, "
                f"end={self._next_offset}, segments={len(self._segments)})")
