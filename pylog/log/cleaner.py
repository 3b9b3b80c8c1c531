"""The log cleaner: compaction of ``cleanup.policy=compact`` logs (Kafka's ``LogCleaner``).

A compacted log keeps at least the last record of every key.  The cleaner
threads (``log.cleaner.threads``) each take the filthiest log in turn:

1. **Which log.**  A log's *dirty* part runs from its first dirty offset (the
   ``cleaner-offset-checkpoint`` file, as Kafka's; the log start when absent)
   to its first uncleanable offset: the active segment, and segments not yet
   below the recovery point (flushed) or younger than ``min.compaction.lag.ms``
   are never cleaned.  A log is cleaned when dirty bytes over all bytes
   reach ``min.cleanable.dirty.ratio``, or sooner when its oldest dirty data
   is older than ``max.compaction.lag.ms``; the highest ratio goes first.
2. **The offset map.**  The keys of the dirty segments and their latest
   offsets (``native/cleaner.pyx``), within the thread's share of
   ``log.cleaner.dedupe.buffer.size``; when it fills, this pass cleans up to
   where it got and the next pass goes on from there.
3. **Rewrite.**  Every segment below the mapped end, in groups that fit one
   segment (``segment.bytes``, the index sizes, 2^31 offsets), is copied
   into a new ``<base>.log.cleaned`` keeping each record whose key has no
   later offset.  Tombstones (null values) follow KIP-534: the first clean
   that keeps one stamps its batch with a delete horizon (that clean's time
   plus ``delete.retention.ms``, in the base timestamp, attribute bit 6), and
   the first clean after the horizon drops it; a consumer reading from the
   start within ``delete.retention.ms`` of the first clean still sees the
   delete (see ``native/cleaner.pyx``).  The new segment is flushed, given
   the last old segment's modification time, and swapped in by
   ``Log.replace_segments`` (``*.swap``, then the old ones become
   ``*.deleted``).
   Transactions: before the map, a scan of the batch headers of the whole
   log finds where each transaction ends.  An aborted one's batches go
   whole; a committed one's records count as plain ones, and its COMMIT
   marker goes as a tombstone does once none of its records is left; the
   map stops before a batch of one with no marker yet.  ABORT markers stay
   (see ``native/cleaner.pyx``).
4. **Checkpoint.**  The mapped end becomes the log's first dirty offset.

Offsets never change: a cleaned log has gaps, and consumers skip them.  Only
whole, flushed segments are rewritten, off the event loop; appends and fetches
go on meanwhile (a fetch holding a slice of a replaced segment still reads it
until ``file.delete.delay.ms``).  A clean that loses a race (retention, topic
deletion) is dropped and done again later.  An I/O error takes the dir
offline (Kafka's ``maybeHandleIOException``); any other failure marks the
partition uncleanable until restart, with its cause in the log.

Not done: keeping an empty batch for an idempotent producer's last write
(pylog keeps producer state in snapshots; a producer not known after a
restart may start at any sequence).
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import mmap
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pylog._native.cleaner import OffsetMap, RecordFilter, TxnRanges
from pylog.log.checkpoint import OffsetCheckpointFile
from pylog.log.config import INT_MAX, CleanerConfig
from pylog.log.dir_failure import LogDirFailureChannel
from pylog.log.errors import LogClosedError
from pylog.log.log import Log
from pylog.log.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    file_name,
)

log = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
TopicPartition = tuple[str, int]
_HEADER_MAX_TS = 35  # a batch's maxTimestamp (see producer_state)
_MAX_MS = 2**63 - 1
_PR_SET_NAME = 15  # prctl(2): the calling thread's name


class _Aborted(Exception):
    """The clean lost a race or the cleaner is stopping: drop its output."""


@dataclass(frozen=True)
class Cleanable:
    """A log's dirty part (Kafka's ``LogToClean``)."""

    log: Log
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    dirty_bytes: int
    overdue: bool  # max.compaction.lag.ms passed: clean whatever the ratio

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    @property
    def due(self) -> bool:
        return self.dirty_bytes > 0 and (
            self.overdue or self.ratio >= self.log.config.min_cleanable_dirty_ratio)


@dataclass
class CleanStats:
    """One clean of one log."""

    topic: str
    partition: int
    first_dirty: int
    end_offset: int = -1
    segments: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    horizons_set: int = 0  # batches given a delete horizon (KIP-534)
    scanned_from: int = 0  # where the transaction scan began (see _scan_transactions)
    transactions: int = 0  # ended by a marker in the log
    aborted_batches_removed: int = 0
    markers_removed: int = 0  # COMMIT markers whose transaction kept no record
    map_utilization: float = 0.0
    elapsed_s: float = 0.0
    swapped: list[int] = field(default_factory=list)  # base offsets of the new segments


def first_batch_timestamp(segment: LogSegment) -> int:
    """The first batch's max timestamp (-1 when none): Kafka's
    ``getFirstBatchTimestamp``, what ``max.compaction.lag.ms`` counts from."""
    if segment.size < 61 or segment.fd < 0:
        return -1
    raw = os.pread(segment.fd, 8, _HEADER_MAX_TS)
    return int.from_bytes(raw, "big", signed=True) if len(raw) == 8 else -1


def cleanable(lg: Log, checkpoint: int | None, now_ms: int) -> Cleanable:
    """The dirty part of ``lg`` (Kafka's ``LogCleanerManager.cleanableOffsets``)."""
    with lg._lock:
        segments = lg.segments
        start, end = lg.log_start_offset, lg.log_end_offset
        recovery_point = lg.recovery_point
    config = lg.config
    first_dirty = checkpoint if checkpoint is not None and start <= checkpoint <= end else start
    # Whole, flushed, inactive segments only: the active one takes appends,
    # and one above the recovery point would be rescanned after a crash.
    uncleanable = segments[-1].base_offset
    # Nor past the oldest open transaction (Kafka's firstUnstableOffset): its
    # records may yet be aborted, and must not replace a committed value.
    unstable = lg.first_unstable_offset
    for i, segment in enumerate(segments[:-1]):
        nxt = segments[i + 1].base_offset
        if nxt > recovery_point or (unstable is not None and nxt > unstable):
            uncleanable = min(uncleanable, segment.base_offset)
            break
    overdue = False
    lag_min, lag_max = config.min_compaction_lag_ms, config.max_compaction_lag_ms
    for i, segment in enumerate(segments[:-1]):
        nxt = segments[i + 1].base_offset
        if nxt <= first_dirty or segment.base_offset >= uncleanable:
            continue
        if lag_min > 0 and segment.largest_timestamp() > now_ms - lag_min:
            uncleanable = min(uncleanable, segment.base_offset)
            break
        if not overdue and lag_max < 2**63 - 1:
            first_ts = first_batch_timestamp(segment)
            overdue = 0 <= first_ts < now_ms - lag_max
    clean_bytes = dirty_bytes = 0
    for i, segment in enumerate(segments):
        nxt = segments[i + 1].base_offset if i + 1 < len(segments) else end + 1
        if segment.base_offset >= uncleanable:
            break
        if nxt <= first_dirty:
            clean_bytes += segment.size
        else:
            dirty_bytes += segment.size
    return Cleanable(lg, first_dirty, uncleanable, clean_bytes, dirty_bytes, overdue)


def group_segments(segments: list[LogSegment], max_size: int, max_index_size: int
                   ) -> list[list[LogSegment]]:
    """Runs of consecutive segments that fit one segment once cleaned
    (Kafka's ``groupSegmentsBySize``): their sizes within ``segment.bytes``,
    their index entries within ``segment.index.bytes``, their offsets within
    2^31 of the first base."""
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        size = segments[i].size
        oi = segments[i].offset_index.entries * 8
        ti = segments[i].time_index.entries * 12
        i += 1
        while i < len(segments):
            nxt = segments[i]
            last = (segments[i + 1].base_offset - 1 if i + 1 < len(segments)
                    else nxt.next_offset - 1)
            if (size + nxt.size > max_size or oi + nxt.offset_index.entries * 8 > max_index_size
                    or ti + nxt.time_index.entries * 12 > max_index_size
                    or last - group[0].base_offset > INT_MAX):
                break
            group.append(nxt)
            size += nxt.size
            oi += nxt.offset_index.entries * 8
            ti += nxt.time_index.entries * 12
            i += 1
        groups.append(group)
    return groups


def _name_os_thread(name: str) -> None:
    """Give the calling thread ``name`` where the OS shows it (``top -H``,
    ``/proc/<pid>/task/*/comm``; Linux keeps 15 bytes): Python's thread names
    stay inside the interpreter, and a busy cleaner should be told apart."""
    try:
        ctypes.CDLL(None).prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the name is only cosmetic
        pass


class Throttler:
    """``log.cleaner.io.max.bytes.per.second`` over every cleaner thread: a
    thread that got ahead of the rate sleeps (Kafka's ``Throttler``)."""

    def __init__(self, rate: float, stop: threading.Event) -> None:
        self.rate = rate
        self._stop = stop
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._bytes = 0

    def reset(self, rate: float) -> None:
        """A new rate, counted from now (Kafka's updateDesiredRatePerSec)."""
        with self._lock:
            self.rate = rate
            self._start, self._bytes = time.monotonic(), 0

    def add(self, n: int) -> None:
        if self.rate >= 1e300:
            return
        with self._lock:
            self._bytes += n
            now = time.monotonic()
            ahead = self._bytes / self.rate - (now - self._start)
            if now - self._start > 1.0:  # a fresh window every second
                self._start, self._bytes = now, 0
        if ahead > 0:
            self._stop.wait(ahead)


class LogCleaner:
    """The cleaner threads of one log dir.  ``logs`` gives the current logs."""

    def __init__(self, log_dir: Path, logs: Callable[[], dict[TopicPartition, Log]],
                 config: CleanerConfig | None = None, *,
                 time_ms: Callable[[], int] | None = None,
                 failures: LogDirFailureChannel | None = None) -> None:
        self.dir = Path(log_dir)
        self._logs = logs
        self.config = config or CleanerConfig()
        self.time_ms = time_ms or (lambda: time.time_ns() // 1_000_000)
        self.failures = failures or LogDirFailureChannel(str(self.dir))
        self._file = OffsetCheckpointFile(self.dir / CLEANER_CHECKPOINT)
        try:
            self._checkpoints = self._file.read()
        except (OSError, ValueError) as exc:
            log.warning("error reading %s, cleaning every log from its start: %s",
                        self._file.path, exc)
            self._checkpoints = {}
        self._lock = threading.RLock()  # checkpoints, in-progress set, the file
        self._in_progress: set[TopicPartition] = set()
        self.uncleanable: set[TopicPartition] = set()
        # (log, offset): the log has no transactional batch below offset (see
        # _scan_transactions); in memory only, dropped with the log.
        self._no_txn_below: dict[TopicPartition, tuple[Log, int]] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._throttler = Throttler(self.config.io_max_bytes_per_second, self._stop)
        self.last_stats: CleanStats | None = None
        self.last_run_ms = self.time_ms()
        self.cleans = 0

    # -- checkpoints ---------------------------------------------------------

    def checkpoint_of(self, tp: TopicPartition) -> int | None:
        with self._lock:
            return self._checkpoints.get(tp)

    def checkpoints(self) -> dict[TopicPartition, int]:
        with self._lock:
            return dict(self._checkpoints)

    def forget(self, tp: TopicPartition) -> None:
        """The log is gone (topic deletion): drop its checkpoint."""
        with self._lock:
            if self._checkpoints.pop(tp, None) is not None:
                self._write_checkpoints()
            self.uncleanable.discard(tp)
            self._no_txn_below.pop(tp, None)

    def _update_checkpoint(self, tp: TopicPartition, offset: int) -> None:
        with self._lock:
            self._checkpoints[tp] = offset
            self._write_checkpoints()

    def _write_checkpoints(self) -> None:
        live = self._logs()
        self._checkpoints = {tp: o for tp, o in self._checkpoints.items() if tp in live}
        self._file.write(self._checkpoints)

    # -- choosing ------------------------------------------------------------

    def dirtiest(self, now_ms: int | None = None) -> Cleanable | None:
        """The log to clean next (Kafka's ``grabFilthiestCompactedLog``)."""
        now = self.time_ms() if now_ms is None else now_ms
        best: Cleanable | None = None
        for tp, lg in self._logs().items():
            if not lg.config.compact or lg.closed or tp in self._in_progress \
                    or tp in self.uncleanable:
                continue
            try:
                found = cleanable(lg, self.checkpoint_of(tp), now)
            except (LogClosedError, OSError, ValueError):
                continue  # closed or deleted meanwhile
            if found.due and (best is None or found.ratio > best.ratio):
                best = found
        return best

    def gauges(self, now_ms: int | None = None) -> dict[str, float]:
        """Kafka's LogCleaner and LogCleanerManager gauges (JMX names without
        dashes): the last clean's figures, the dirtiest compacted log now."""
        now = self.time_ms() if now_ms is None else now_ms
        dirty = 0.0
        for tp, lg in self._logs().items():
            if lg.config.compact and not lg.closed:
                try:
                    dirty = max(dirty, cleanable(lg, self.checkpoint_of(tp), now).ratio)
                except (LogClosedError, OSError, ValueError):
                    continue
        last = self.last_stats
        return {
            "logcleaner_maxbufferutilizationpercent": 100 * last.map_utilization if last else 0,
            "logcleaner_cleanerrecopypercent":
                100 * last.bytes_written / last.bytes_read if last and last.bytes_read else 0,
            "logcleaner_maxcleantimesecs": round(last.elapsed_s) if last else 0,
            "logcleaner_deadthreadcount": sum(not t.is_alive() for t in self._threads),
            "logcleanermanager_maxdirtypercent": round(100 * dirty),
            "logcleanermanager_timesincelastrunms": max(now - self.last_run_ms, 0),
            "logcleanermanager_uncleanablepartitionscount": len(self.uncleanable),
        }

    # -- threads -------------------------------------------------------------

    def start(self) -> None:
        if not self.config.enable or self._threads:
            return
        self._stop.clear()
        for i in range(self.config.threads):
            thread = threading.Thread(target=self._run, args=(f"log-cleaner-{i}",),
                                      name=f"kafka-log-cleaner-thread-{i}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop the threads; a clean in progress is abandoned (its ``*.cleaned``
        files removed)."""
        self._stop.set()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout)
        self._threads = []

    def reconfigure(self, config: CleanerConfig) -> None:
        """New settings (dynamic ``log.cleaner.*``), as Kafka's
        ``LogCleaner.reconfigure``: the throttle takes the new rate, and the
        threads are stopped (a clean in progress is abandoned, as at
        shutdown, and done again) and started in the new number, so the next
        clean runs with the new buffers and a thread asleep for the old
        backoff wakes.  Threads not started yet stay so."""
        if config == self.config:
            return
        was_running = bool(self._threads)
        self.stop()
        self.config = config
        self._throttler.reset(config.io_max_bytes_per_second)
        log.info("log cleaner reconfigured: %d thread(s), backoff %d ms, io max %s bytes/s",
                 config.threads, config.backoff_ms, config.io_max_bytes_per_second)
        if was_running:
            self.start()

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def _run(self, os_name: str) -> None:
        _name_os_thread(os_name)
        while not self._stop.is_set():
            try:
                cleaned = self.clean_dirtiest()
            except Exception:  # never let the thread die silently
                log.exception("log cleaner pass failed")
                cleaned = None
            if cleaned is None:
                self._stop.wait(self.config.backoff_ms / 1000)

    def clean_dirtiest(self, now_ms: int | None = None) -> CleanStats | None:
        """Clean the filthiest log that is due, if any (one pass of a thread)."""
        with self._lock:
            target = self.dirtiest(now_ms)
            if target is None:
                self.last_run_ms = self.time_ms()
                return None
            tp = (target.log.topic, target.log.partition)
            self._in_progress.add(tp)
        try:
            return self._clean_guarded(target, now_ms)
        finally:
            with self._lock:
                self._in_progress.discard(tp)
                self.last_run_ms = self.time_ms()

    def clean(self, lg: Log, now_ms: int | None = None) -> CleanStats | None:
        """Clean ``lg`` now if it has a cleanable dirty part, whatever its
        ratio (tests and tools); None when there is nothing to clean."""
        tp = (lg.topic, lg.partition)
        now = self.time_ms() if now_ms is None else now_ms
        with self._lock:
            if tp in self._in_progress:
                return None
            target = cleanable(lg, self._checkpoints.get(tp), now)
            if target.dirty_bytes == 0:
                return None
            self._in_progress.add(tp)
        try:
            return self._clean_guarded(target, now_ms)
        finally:
            with self._lock:
                self._in_progress.discard(tp)

    def _clean_guarded(self, target: Cleanable, now_ms: int | None) -> CleanStats | None:
        lg = target.log
        tp = (lg.topic, lg.partition)
        try:
            stats = self._clean(target, self.time_ms() if now_ms is None else now_ms)
        except _Aborted:
            return None
        except OSError as exc:
            if lg.closed or self._stop.is_set():
                return None
            self.failures.fail(f"Error while cleaning log {lg.topic}-{lg.partition} "
                               f"in dir {self.dir}", exc)
            return None
        except Exception:
            if lg.closed:
                return None
            log.exception("Unexpected exception thrown when cleaning log %s-%d. Marking "
                          "its partition as uncleanable", lg.topic, lg.partition)
            with self._lock:
                self.uncleanable.add(tp)
            return None
        self.last_stats = stats
        self.cleans += 1
        log.info("Cleaned log %s-%d (dirty offsets %d to %d): %d segments, %.1f MB read, "
                 "%.1f MB written, %d of %d records kept, map %.0f%% full, %.3f s%s",
                 lg.topic, lg.partition, stats.first_dirty, stats.end_offset, stats.segments,
                 stats.bytes_read / 1e6, stats.bytes_written / 1e6, stats.records_kept,
                 stats.records_read, stats.map_utilization * 100, stats.elapsed_s,
                 f"; {stats.transactions} transactions: {stats.aborted_batches_removed} "
                 f"aborted batches and {stats.markers_removed} markers removed"
                 if stats.transactions or stats.markers_removed else "")
        return stats

    # -- cleaning ------------------------------------------------------------

    @contextmanager
    def _mapped(self, lg: Log, segment: LogSegment) -> Iterator[mmap.mmap | bytes]:
        """A read-only mapping of a segment that stays valid whatever retention
        or a swap does to the file meanwhile."""
        with lg._lock:
            if lg.closed or segment.fd < 0:
                raise _Aborted()
            size = segment.size
            mapping = mmap.mmap(segment.fd, size, access=mmap.ACCESS_READ) if size else b""
        try:
            yield mapping
        finally:
            if isinstance(mapping, mmap.mmap):
                mapping.close()

    @staticmethod
    def _position_of(lg: Log, segment: LogSegment, offset: int) -> int:
        """Where the first batch at or past ``offset`` is in ``segment`` (the
        map starts at the first dirty offset: clean batches would only take
        room in it)."""
        if segment.base_offset >= offset:
            return 0
        with lg._lock:
            found = segment.translate_offset(offset) if segment.fd >= 0 else None
        return found[0] if found is not None else segment.size

    def _check_stop(self) -> None:
        if self._stop.is_set():
            raise _Aborted()

    def _clean(self, target: Cleanable, now_ms: int) -> CleanStats:
        lg = target.log
        started = time.monotonic()
        stats = CleanStats(lg.topic, lg.partition, target.first_dirty)
        segments = lg.segments
        window = max(self.config.io_buffer_size, 64 * 1024)
        # 0. the transactions ended by a marker anywhere in the log (Kafka
        # reads its transaction index to the log end): one of the cleanable
        # part whose marker is in the active segment counts as ended
        txns = self._scan_transactions(lg, segments, window, stats)
        stats.transactions = len(txns)
        # 1. the offset map over the dirty segments
        offsets = OffsetMap(self.config.map_memory, self.config.io_buffer_load_factor)
        for i, segment in enumerate(segments[:-1]):
            if segments[i + 1].base_offset <= target.first_dirty:
                continue
            if segment.base_offset >= target.first_uncleanable:
                break
            full = False
            with self._mapped(lg, segment) as buf:
                pos, size = self._position_of(lg, segment, target.first_dirty), len(buf)
                while pos < size and not full:
                    self._check_stop()
                    start = pos
                    pos, full = offsets.add_batches(buf, pos, min(size, pos + window),
                                                    target.first_uncleanable, txns)
                    self._throttler.add(pos - start)
            if full:
                break
        if offsets.latest_offset < target.first_dirty and offsets.undecided:
            # The first dirty batch is of a transaction with no marker yet:
            # nothing to clean before it ends (first_unstable_offset normally
            # keeps such a log from being chosen).
            log.debug("%s-%d: not cleaned, a transaction is open at its first dirty offset",
                      lg.topic, lg.partition)
            raise _Aborted()
        if offsets.latest_offset < target.first_dirty:
            raise RuntimeError(f"the offset map ({self.config.map_memory} bytes) has no room "
                               f"for the first dirty batch at {target.first_dirty}; raise "
                               "log.cleaner.dedupe.buffer.size")
        end_offset = offsets.latest_offset + 1
        stats.end_offset = end_offset
        stats.map_utilization = offsets.utilization
        # 2. rewrite every segment below the mapped end, group by group; the
        # delete horizon given to tombstones kept now (saturating: the config
        # allows delete.retention.ms up to 2^63 - 1)
        horizon = min(now_ms + lg.config.delete_retention_ms, _MAX_MS)
        below = [s for s in segments[:-1] if s.base_offset < end_offset]
        config = lg.config
        for group in group_segments(below, config.segment_bytes, config.segment_index_bytes):
            self._clean_group(lg, group, offsets, txns, horizon, window, stats, now_ms)
        # 3. the checkpoint
        self._update_checkpoint((lg.topic, lg.partition), end_offset)
        stats.elapsed_s = time.monotonic() - started
        return stats

    def _scan_transactions(self, lg: Log, segments: list[LogSegment], window: int,
                           stats: CleanStats) -> TxnRanges:
        """Every transaction ended by a marker, from the batch headers of the
        whole log, the active segment as far as it is written now.  (Kafka
        reads its .txnindex files; pylog reads each header, a page of I/O per
        batch at worst.)  A log never written in transactions is read once:
        the next scan starts where the last one found none so far (cleaning
        and retention only ever remove batches)."""
        tp = (lg.topic, lg.partition)
        with self._lock:
            memo = self._no_txn_below.get(tp)
        start = memo[1] if memo is not None and memo[0] is lg else 0
        stats.scanned_from = start
        txns = TxnRanges()
        for i, segment in enumerate(segments):
            if i + 1 < len(segments) and segments[i + 1].base_offset <= start:
                continue
            with self._mapped(lg, segment) as buf:
                pos, size = self._position_of(lg, segment, start), len(buf)
                while pos < size:
                    self._check_stop()
                    pos = txns.scan(buf, pos, min(size, pos + window))
        txns.done()
        if txns.transactional == 0 and txns.next_offset > start:
            with self._lock:
                self._no_txn_below[tp] = (lg, txns.next_offset)
        return txns

    def _clean_group(self, lg: Log, group: list[LogSegment], offsets: OffsetMap,
                     txns: TxnRanges, horizon: int, window: int, stats: CleanStats,
                     now_ms: int) -> None:
        base = group[0].base_offset
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):  # a crashed pass's
            (lg.dir / (file_name(base, suffix) + CLEANED_SUFFIX)).unlink(missing_ok=True)
        # Its own offsets have gaps whatever the topic's policy became meanwhile.
        config = dataclasses.replace(lg.config, cleanup_policy=("compact",))
        cleaned = LogSegment(lg.dir, base, config, lg.backend, lg.time_ms,
                             file_suffix=CLEANED_SUFFIX)
        records = RecordFilter()
        try:
            for segment in group:
                with self._mapped(lg, segment) as buf:
                    pos, size = 0, len(buf)
                    while pos < size:
                        self._check_stop()
                        start = pos
                        pos = records.run(offsets, buf, pos, min(size, pos + window),
                                          now_ms, horizon, window, txns)
                        written = self._write(cleaned, records)
                        self._throttler.add(pos - start + written)
            cleaned.on_become_inactive()
            cleaned.flush()
            mtime = group[-1].last_modified_ms() * 1_000_000
            os.utime(cleaned.log_path, ns=(mtime, mtime))
            if not lg.replace_segments(group, cleaned, now_ms):
                raise _Aborted()
        except BaseException:
            cleaned.delete()
            raise
        stats.segments += len(group)
        stats.bytes_read += records.bytes_read
        stats.bytes_written += records.bytes_written
        stats.records_read += records.records_read
        stats.records_kept += records.records_kept
        stats.horizons_set += records.horizons_set
        stats.aborted_batches_removed += records.aborted_batches_removed
        stats.markers_removed += records.markers_removed
        stats.swapped.append(base)

    @staticmethod
    def _write(cleaned: LogSegment, records: RecordFilter) -> int:
        if not records.pending:
            return 0
        data = records.take()
        cleaned.append(memoryview(data), records.max_timestamp)
        return len(data)
